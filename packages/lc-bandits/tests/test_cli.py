"""The ``lc-bandits run`` command."""

from __future__ import annotations

import json
import pathlib

from lc_bandits.cli import main


def test_cli_runs_a_toml_config(tmp_path: pathlib.Path) -> None:
    cfg = tmp_path / "small.toml"
    cfg.write_text(
        'name = "tiny"\npolicies = ["cqb_opt", "random"]\nrecord_every = 5\n'
        "[problem]\nhorizon = 80\nnum_instances = 1\nruns_per_instance = 3\n",
        encoding="utf-8",
    )
    assert main(["run", str(cfg), "--output-dir", str(tmp_path / "out"), "--quiet"]) == 0
    data = json.loads((tmp_path / "out" / "tiny.json").read_text())
    assert set(data["policies"]) == {"oracle", "cqb_opt", "random"}
    assert data["rounds"][-1] == 80
    assert len(data["policies"]["random"]["queue_mean"]) == 16
    assert (tmp_path / "out" / "tiny.png").stat().st_size > 1000


def test_cli_reports_bad_configs(tmp_path: pathlib.Path, capsys) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"problem": {"horizon": -3}}), encoding="utf-8")
    assert main(["run", str(bad)]) == 2
    assert "horizon" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "missing.toml")]) == 2
    wrong = tmp_path / "cfg.yaml"
    wrong.write_text("x: 1", encoding="utf-8")
    assert main(["run", str(wrong)]) == 2
