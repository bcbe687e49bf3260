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


def _one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("lc-bandits: error: "), err
    assert "Traceback" not in err
    return lines[0]


def test_cli_reports_a_failure_inside_the_run_as_one_line(tmp_path: pathlib.Path, capsys) -> None:  # type: ignore[no-untyped-def]
    # kappa barely above 4 makes every service rate about 1/2, below lambda + slack = 0.8:
    # drawing the slack-satisfying contexts fails inside run_experiment
    cfg = tmp_path / "hopeless.json"
    cfg.write_text(
        json.dumps({"problem": {"horizon": 50, "num_instances": 1, "kappa": 4.01}}),
        encoding="utf-8",
    )
    assert main(["run", str(cfg), "--output-dir", str(tmp_path / "out"), "--quiet"]) == 1
    line = _one_error_line(capsys.readouterr().err)
    assert "slack" in line


def test_cli_checks_the_output_dir_before_simulating(
    tmp_path: pathlib.Path,
    capsys,  # type: ignore[no-untyped-def]
    monkeypatch,  # type: ignore[no-untyped-def]
) -> None:
    import lc_bandits.experiment as experiment

    calls = []

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args)
        raise AssertionError("the environment was drawn before the output dir was checked")

    monkeypatch.setattr(experiment, "make_environment", spy)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory", encoding="utf-8")
    cfg = tmp_path / "small.json"
    cfg.write_text(json.dumps({"problem": {"horizon": 50, "num_instances": 1}}), encoding="utf-8")
    for bad in (blocker, blocker / "sub"):
        assert main(["run", str(cfg), "--output-dir", str(bad), "--quiet"]) == 1
        line = _one_error_line(capsys.readouterr().err)
        assert "output_dir" in line
        assert str(blocker) in line
    assert calls == []


def test_cli_takes_a_single_policy_name_as_a_string(tmp_path: pathlib.Path) -> None:
    cfg = tmp_path / "one.json"
    cfg.write_text(
        json.dumps(
            {
                "name": "one",
                "policies": "cqb_eps",
                "problem": {"horizon": 40, "num_instances": 1, "runs_per_instance": 2},
            }
        ),
        encoding="utf-8",
    )
    assert main(["run", str(cfg), "--output-dir", str(tmp_path), "--quiet"]) == 0
    data = json.loads((tmp_path / "one.json").read_text())
    assert set(data["policies"]) == {"oracle", "cqb_eps"}
