"""lm-evaluation-harness-style export, and paired comparison from the command line."""

from __future__ import annotations

import json

from typer.testing import CliRunner

import lc_evals
from lc_evals.cli import app
from lc_evals.export import export_lm_eval


def _run(tmp_path, name, system):
    suite = lc_evals.make_suite(
        ["niah_single"], [300, 500], n=2, seed=0, depths=[0.0, 1.0], haystack="repeat"
    ) + lc_evals.make_suite(["minmax"], [300, 500], n=2, seed=0)
    return lc_evals.run(system, suite, tmp_path / f"{name}.jsonl", system_id=name)


def half(item):
    return item.answers[0] if item.metadata.get("depth", 1.0) < 0.5 else "?"


def test_export_matches_lm_eval_ruler_layout(tmp_path) -> None:
    results = _run(tmp_path, "half", half)
    files = export_lm_eval(results, tmp_path / "out", model="half")
    doc = json.loads(files[0].read_text())
    ruler = doc["results"]["niah_single_1"]  # repeated filler, number values
    assert ruler["300,none"] == 0.5
    assert ruler["500,none"] == 0.5
    assert ruler["300_stderr,none"] > 0
    assert doc["group_subtasks"] == {"ruler": ["niah_single_1"]}
    assert doc["results"]["ruler"]["300,none"] == 0.5
    assert doc["results"]["minmax"]["300,none"] == 0.0  # "?" is never a number
    assert doc["n-samples"]["niah_single_1"] == {"original": 8, "effective": 8}
    assert doc["config"]["model"] == "half"
    (samples,) = [p for p in files if p.name.startswith("samples_niah_single_1_")]
    rows = [json.loads(x) for x in samples.read_text().splitlines()]
    assert len(rows) == 8
    first = rows[0]
    assert first["doc"]["max_length"] == 300
    assert first["metrics"] == ["300"]
    assert first["resps"] == [[first["filtered_resps"][0]]]
    assert first["300"] == 1.0
    assert first["doc"]["outputs"] == [first["target"]]


def test_cli_export_and_compare(tmp_path) -> None:
    _run(tmp_path, "half", half)
    _run(tmp_path, "oracle", lambda item: item.answers[0])
    runner = CliRunner()
    res = runner.invoke(
        app, ["export", str(tmp_path / "half.jsonl"), "--out-dir", str(tmp_path / "x")]
    )
    assert res.exit_code == 0, res.output
    (doc,) = (tmp_path / "x").glob("results_*.json")
    data = json.loads(doc.read_text())
    assert data["config"]["model"] == "half"
    assert data["lc_evals"]["manifest"]["runs"][0]["suite"]["items"] == 12
    res = runner.invoke(
        app, ["compare", str(tmp_path / "oracle.jsonl"), str(tmp_path / "half.jsonl")]
    )
    assert res.exit_code == 0, res.output
    assert "| niah_single | 8 | 100.0 | 50.0 | +50.0 |" in res.output
    assert "mcnemar_exact" in res.output
    # 8 discordant items, all one way: p = 2 / 2**8
    assert "all 12 paired items: A-B = +66.7 points" in res.output
    assert "p = 0.00781" in res.output
