"""``lc-agents arena``: a battle on a tiny repository with scripted replies, resuming,
the local-backend path, and clear errors."""

from __future__ import annotations

import difflib
import json
import pathlib
import sys

import pytest
from typer.testing import CliRunner

from lc_agents.cli import app

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox")
runner = CliRunner()

BUGGY = "def is_even(n):\n    return n % 2 == 1\n"
FIXED = "def is_even(n):\n    return n % 2 == 0\n"
TESTS = "from parity import is_even\n\n\ndef test_zero():\n    assert is_even(0)\n"
LIMITS = ["--cpu-seconds", "20", "--wall-seconds", "60", "--memory-mb", "1024"]


def _diff(path: str, old: str | None, new: str) -> str:
    lines = difflib.unified_diff(
        (old or "").splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile="/dev/null" if old is None else f"a/{path}",
        tofile=f"b/{path}",
    )
    return "".join(lines)


@pytest.fixture
def task(tmp_path: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path]:
    repo = tmp_path / "parity"
    repo.mkdir()
    (repo / "parity.py").write_text(BUGGY)
    (repo / "tests").mkdir()
    (repo / "tests" / "test_smoke.py").write_text(
        "from parity import is_even\n\n\ndef test_callable():\n    assert callable(is_even)\n"
    )
    (tmp_path / "gold.diff").write_text(_diff("parity.py", BUGGY, FIXED))
    issue = {
        "id": "parity-1",
        "repo": "parity",
        "description": "is_even(2) returns False.",
        "gold_patch_file": "gold.diff",
        "env": {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    }
    path = tmp_path / "issue.json"
    path.write_text(json.dumps(issue))
    return repo, path


def test_scripted_battle_records_json_and_resumes(task, tmp_path: pathlib.Path) -> None:
    repo, issue = task
    sub = tmp_path / "sub.txt"
    sub.write_text("```diff\n" + _diff("parity.py", BUGGY, FIXED) + "```\n")
    rev = tmp_path / "rev.txt"
    rev.write_text("```diff\n" + _diff("tests/test_issue.py", None, TESTS) + "```\n")
    out = tmp_path / "results"
    args = ["arena", "--repo", str(repo), "--issue", str(issue), "--out", str(out)]
    args += ["--scripted-submitter", str(sub), "--scripted-reviewer", str(rev), *LIMITS]
    args += ["--retriever", "racg", "--rerank", "bm25"]  # the real RACG pipeline, no embedder
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "RACG code retriever (bm25 rerank" in r.output
    assert "parity-1|scripted|scripted|0 (played): winner submitter" in r.output
    records = [json.loads(x) for x in (out / "battles.jsonl").read_text().splitlines()]
    assert len(records) == 1
    v = records[0]["verdict"]
    assert (v["patch_valid"], v["tests_valid"], v["tests_discriminative"]) == (True, True, True)
    board = json.loads((out / "leaderboard.json").read_text())
    assert board[0]["model"] == "scripted"
    assert board[0]["submitter_win_rate"] == 1.0
    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    assert "(resumed)" in again.output
    assert len((out / "battles.jsonl").read_text().splitlines()) == 1


def test_local_backend_battle_runs_end_to_end(task, tmp_path: pathlib.Path, tiny_model_dir) -> None:
    repo, issue = task
    out = tmp_path / "results"
    args = ["arena", "--repo", str(repo), "--issue", str(issue), "--out", str(out)]
    args += ["--model", str(tiny_model_dir), "--name", "tiny", "--max-tokens", "8", *LIMITS]
    args += ["--retriever", "files"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    rec = json.loads((out / "battles.jsonl").read_text())
    assert rec["submitter"] == rec["reviewer"] == "tiny"
    assert rec["verdict"]["patch_valid"] is False  # a random model writes no usable diff
    assert rec["verdict"]["winner"] == "draw"
    assert "whole small files (no ranking)" in r.output


def test_bad_issue_file_is_a_clear_error(task, tmp_path: pathlib.Path) -> None:
    repo, _ = task
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"id": "x", "description": "d"}))
    r = runner.invoke(app, ["arena", "--repo", str(repo), "--issue", str(bad)])
    assert r.exit_code == 1
    assert "gold_patch" in r.output
    assert "Traceback" not in r.output


def test_without_bubblewrap_the_arena_refuses_unless_told_it_is_unsafe(
    task, tmp_path: pathlib.Path, monkeypatch
) -> None:
    from lc_evals.arena import sandbox

    monkeypatch.setattr(sandbox, "_probe", lambda: (None, "bubblewrap (bwrap) is not installed"))
    repo, issue = task
    sub = tmp_path / "sub.txt"
    sub.write_text("```diff\n" + _diff("parity.py", BUGGY, FIXED) + "```\n")
    rev = tmp_path / "rev.txt"
    rev.write_text("```diff\n" + _diff("tests/test_issue.py", None, TESTS) + "```\n")
    args = ["arena", "--repo", str(repo), "--issue", str(issue), "--out", str(tmp_path / "o")]
    args += ["--scripted-submitter", str(sub), "--scripted-reviewer", str(rev), *LIMITS]
    args += ["--retriever", "files"]
    r = runner.invoke(app, args)
    assert r.exit_code == 1, r.output
    assert "error:" in r.output
    assert "bubblewrap" in r.output
    assert "Traceback" not in r.output
    unsafe = runner.invoke(app, [*args, "--unsafe-no-isolation"])
    assert unsafe.exit_code == 0, unsafe.output
    assert "UNSAFE" in unsafe.output
    assert "isolation unsafe-no-isolation" in unsafe.output
