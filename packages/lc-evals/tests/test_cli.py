"""The lc-evals command line (typer's CliRunner), including an HTTP endpoint run."""

from __future__ import annotations

import importlib.util
import json
import pathlib

from typer.testing import CliRunner

from lc_evals.cli import app

runner = CliRunner()

_spec = importlib.util.spec_from_file_location(
    "chat_server", pathlib.Path(__file__).with_name("chat_server.py")
)
chat_server = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(chat_server)

SYSTEM = """
def oracle(item):
    return "The answer is " + item.answers[0]

def deep_miss(item):  # a system that misses needles in the second half
    return item.answers[0] if item.metadata["depth"] < 0.5 else "?"

class Echo:
    def chat(self, messages, **options):
        return messages[-1]["content"][:20]
"""


def _suite(tmp_path) -> pathlib.Path:
    out = tmp_path / "suite.jsonl"
    res = runner.invoke(
        app,
        [
            "generate",
            "niah_single",
            "-l",
            "600",
            "-l",
            "1200",
            "--depth",
            "0",
            "--depth",
            "1",
            "-n",
            "2",
            "--seed",
            "3",
            "-o",
            "haystack=repeat",
            "-o",
            "value_kind=uuid",
            "--out",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "wrote 8 items" in res.output
    return out


def _run_args(
    suite: pathlib.Path, tmp_path: pathlib.Path, system: str, results: pathlib.Path
) -> list[str]:
    """``lc-evals run`` of ``suite`` with ``system`` of ``mysys.py`` into ``results``."""
    return [
        "run",
        str(suite),
        "--system",
        f"{tmp_path / 'mysys.py'}:{system}",
        "--out",
        str(results),
    ]


def test_generate_run_report(tmp_path) -> None:
    suite = _suite(tmp_path)
    rows = [json.loads(x) for x in suite.read_text().splitlines()]
    assert {r["metadata"]["value_kind"] for r in rows} == {"uuid"}
    assert {r["metadata"]["target_length"] for r in rows} == {600, 1200}
    (tmp_path / "mysys.py").write_text(SYSTEM)
    results = tmp_path / "results.jsonl"
    res = runner.invoke(app, _run_args(suite, tmp_path, "deep_miss", results))
    assert res.exit_code == 0, res.output
    assert "| niah_single | 600 | 4 | 50.0 |" in res.output
    res = runner.invoke(
        app, ["report", str(results), "--by", "task,depth", "--out-dir", str(tmp_path / "rep")]
    )
    assert res.exit_code == 0, res.output
    assert "| niah_single | 0.0 | 4 | 100.0 |" in res.output
    assert "| niah_single | 1.0 | 4 | 0.0 |" in res.output
    for name in ["summary.json", "summary.md", "accuracy_vs_length.png", "heatmap_niah_single.png"]:
        assert (tmp_path / "rep" / name).exists()
    # rerun of the same system: nothing redone, still 8 lines
    res = runner.invoke(app, _run_args(suite, tmp_path, "deep_miss", results))
    assert res.exit_code == 0
    assert "| niah_single | 600 | 4 | 50.0 |" in res.output
    assert len(results.read_text().splitlines()) == 8
    # another system into the same file: refused, not scored with deep_miss's results
    oracle = _run_args(suite, tmp_path, "oracle", results)
    res = runner.invoke(app, oracle)
    assert res.exit_code == 2
    assert "8 result(s) were produced by another system" in res.output
    assert "Traceback" not in res.output
    res = runner.invoke(app, [*oracle, "--rerun-stale"])
    assert res.exit_code == 0, res.output
    assert "| niah_single | 600 | 4 | 100.0 |" in res.output
    assert len(results.read_text().splitlines()) == 8
    manifest = json.loads((tmp_path / "results.manifest.json").read_text())
    # the refused run evaluated nothing and is not in the manifest
    assert [r["system"] for r in manifest["runs"]] == ["mysys:deep_miss"] * 2 + ["mysys:oracle"]
    assert [(r["reused"], r["evaluated"]) for r in manifest["runs"]] == [(0, 8), (8, 0), (0, 8)]
    assert {r["status"] for r in manifest["runs"]} == {"completed"}
    assert manifest["runs"][0]["suite"]["items"] == 8


def test_run_against_an_endpoint(tmp_path) -> None:
    suite = _suite(tmp_path)
    with chat_server.ChatServer() as server:
        res = runner.invoke(
            app,
            [
                "run",
                str(suite),
                "--endpoint",
                server.url,
                "--model",
                "stand-in",
                "--workers",
                "4",
                "--max-tokens",
                "20",
                "--out",
                str(tmp_path / "r.jsonl"),
            ],
        )
    assert res.exit_code == 0, res.output
    assert "| niah_single | 1200 | 4 | 100.0 |" in res.output
    assert all(r["body"]["max_tokens"] == 20 for r in server.requests)


def test_expected_errors_exit_nonzero_without_traceback(tmp_path) -> None:
    suite = _suite(tmp_path)
    (tmp_path / "mysys.py").write_text(SYSTEM)
    bad_results = tmp_path / "bad.jsonl"
    bad_results.write_text('{"id": "a", "task": "t", "prediction": "x", "score": 1}\n{oops\n')
    cases = [
        (["generate", "nope", "-l", "100", "--out", str(tmp_path / "x")], "unknown task 'nope'"),
        (
            ["generate", "niah_single", "-l", "10", "--out", str(tmp_path / "x")],
            "impossible length",
        ),
        (
            ["generate", "niah_single", "-l", "900", "-o", "depth", "--out", str(tmp_path / "x")],
            "key=value",
        ),
        (
            [
                "generate",
                "niah_single",
                "-l",
                "900",
                "--tokenizer",
                "missing.json",
                "--out",
                str(tmp_path / "x"),
            ],
            "tokenizer",
        ),
        (
            ["run", str(suite), "--out", str(tmp_path / "r")],
            "exactly one of --system or --endpoint",
        ),
        (
            [
                "run",
                str(suite),
                "--endpoint",
                "http://127.0.0.1:9/v1",
                "--out",
                str(tmp_path / "r"),
            ],
            "--endpoint needs --model",
        ),
        (
            ["run", str(suite), "--system", "no_such_module_xyz:f", "--out", str(tmp_path / "r")],
            "cannot import module",
        ),
        (
            [
                "run",
                str(suite),
                "--system",
                f"{tmp_path / 'mysys.py'}:nothing",
                "--out",
                str(tmp_path / "r"),
            ],
            "no attribute 'nothing'",
        ),
        (
            [
                "run",
                str(tmp_path / "missing.jsonl"),
                "--system",
                "x:y",
                "--out",
                str(tmp_path / "r"),
            ],
            "no such file",
        ),
        (
            [
                "run",
                str(suite),
                "--system",
                f"{tmp_path / 'mysys.py'}:oracle",
                "--out",
                str(bad_results),
            ],
            "line 2",
        ),
        (["report", str(bad_results)], "bad.jsonl, line 2: not valid JSON"),
    ]
    for args, message in cases:
        res = runner.invoke(app, args)
        assert res.exit_code == 2, (args, res.output)
        assert message in res.output, (args, res.output)
        assert "Traceback" not in res.output


def test_tasks_lists_the_registry() -> None:
    res = runner.invoke(app, ["tasks"])
    assert res.exit_code == 0
    assert "niah_single" in res.output
    assert "contains_all" in res.output


def test_chat_model_system_and_tokenizer_path(tmp_path, tokenizer) -> None:
    tok_path = tmp_path / "tokenizer.json"
    tokenizer.inner.save(str(tok_path))
    out = tmp_path / "s.jsonl"
    res = runner.invoke(
        app,
        [
            "generate",
            "variable_tracking",
            "-l",
            "700",
            "--tokenizer",
            str(tok_path),
            "--out",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    row = json.loads(out.read_text())
    assert row["metadata"]["length_unit"] == "tokens"
    assert 693 <= len(tokenizer.inner.encode(row["context"]).ids) <= 700
    (tmp_path / "mysys.py").write_text(SYSTEM)
    res = runner.invoke(
        app,
        [
            "run",
            str(out),
            "--system",
            f"{tmp_path / 'mysys.py'}:Echo",
            "--max-tokens",
            "5",
            "--out",
            str(tmp_path / "r.jsonl"),
        ],
    )
    assert res.exit_code == 0, res.output
