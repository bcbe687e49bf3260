"""The lc-agents command line: clear messages and exit codes for every expected error."""

from __future__ import annotations

import pytest
from fake_openai import ScriptedServer, free_port
from typer.testing import CliRunner

from lc_agents.cli import app

runner = CliRunner()


@pytest.fixture
def doc(tmp_path):
    p = tmp_path / "doc.md"
    p.write_text("# Log\n\nThe river gauge read 5471234 on Monday.\n" * 20, encoding="utf-8")
    return p


def ask(*args: str):
    return runner.invoke(app, ["ask", *args])


def test_empty_file(tmp_path, tiny_model_dir) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    r = ask(str(empty), "-q", "What?", "--model", str(tiny_model_dir))
    assert r.exit_code == 1
    assert "empty" in r.output
    assert "Traceback" not in r.output


def test_unreadable_encoding(tmp_path) -> None:
    latin = tmp_path / "latin.txt"
    latin.write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    r = ask(str(latin), "-q", "What?")
    assert r.exit_code == 1
    assert "not UTF-8" in r.output


def test_missing_file_and_missing_question(doc, tmp_path) -> None:
    r = ask(str(doc))
    assert r.exit_code == 2
    assert "missing --question" in r.output
    r = ask(str(tmp_path / "nope.txt"), "-q", "x")
    assert r.exit_code == 1
    assert "no such file" in r.output
    r = ask()
    assert r.exit_code == 2


def test_unreachable_backend(doc, tiny_model_dir) -> None:
    port = free_port()
    r = ask(
        str(doc),
        "-q",
        "What?",
        "--endpoint",
        f"http://127.0.0.1:{port}/v1",
        "--model",
        "m",
        "--tokenizer",
        str(tiny_model_dir),
    )
    assert r.exit_code == 1
    assert "cannot reach" in r.output
    assert "Traceback" not in r.output


def test_empty_model_reply(doc, tiny_model_dir) -> None:
    with ScriptedServer([(200, "")]) as srv:
        r = ask(
            str(doc),
            "-q",
            "What?",
            "--endpoint",
            srv.url,
            "--model",
            "m",
            "--tokenizer",
            str(tiny_model_dir),
        )
    assert r.exit_code == 1
    assert "empty reply" in r.output


def _gauge_reply(body):
    prompt = body["messages"][-1]["content"]
    return "5471234" if "Answer with" in prompt else "The river gauge read 5471234."


def _ask_gauge(doc, tiny_model_dir, *extra: str):
    """``ask`` about the gauge document over a scripted server; (result, requests)."""
    with ScriptedServer([(200, _gauge_reply)]) as srv:
        r = ask(
            str(doc),
            "-q",
            "What did the gauge read?",
            "--endpoint",
            srv.url,
            "--model",
            "m",
            "--tokenizer",
            str(tiny_model_dir),
            "--chunk-tokens",
            "64",
            *extra,
        )
        return r, len(srv.requests)


def test_answer_and_memory_trace_over_http(doc, tiny_model_dir) -> None:
    r, n_requests = _ask_gauge(doc, tiny_model_dir, "--show-memory")
    assert r.exit_code == 0, r.output
    assert "Answer: 5471234" in r.output
    assert "Question: What did the gauge read?" in r.output
    chunks = r.output.count("chunk ")
    assert chunks >= 3
    assert r.output.count("[new]") + r.output.count("[kept]") == chunks  # printed as text
    assert n_requests == chunks + 1


def test_profile_reports_peak_memory_and_throughput(doc, tiny_model_dir) -> None:
    import os
    import re
    from pathlib import Path

    r, _ = _ask_gauge(doc, tiny_model_dir, "--profile")
    assert r.exit_code == 0, r.output
    found = re.search(r"peak RSS (\d+) MiB .* (\d+) document\s+tokens/s", r.output, re.S)
    assert found, r.output
    peak_mib, tokens_per_s = int(found.group(1)), int(found.group(2))
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    current_mib = pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    assert peak_mib >= current_mib - 1  # the peak is at least today's resident set
    assert tokens_per_s > 0
