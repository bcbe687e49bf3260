"""The lc-agents command line: clear messages and exit codes for every expected error.

Every mistake ends in exactly one ``error: ...`` line on stderr and a non-zero exit code,
never a traceback; document text, questions, answers and paths are printed literally.
``--endpoint`` runs talk to :class:`fake_openai.ScriptedServer` (a real loopback HTTP
server with scripted replies); local runs use the tiny random-init Llama (conftest).
"""

from __future__ import annotations

import os
import re

import pytest
from fake_openai import ScriptedServer, free_port
from typer.testing import CliRunner

from lc_agents.cli import app, build_config
from lc_agents.memagent import MEMAGENT_PRESETS, MemAgentConfig
from lc_agents.models import EMBEDDED_MODELS

runner = CliRunner()


@pytest.fixture
def doc(tmp_path):
    p = tmp_path / "doc.md"
    p.write_text("# Log\n\nThe river gauge read 5471234 on Monday.\n" * 20, encoding="utf-8")
    return p


def ask(*args: str):
    return runner.invoke(app, ["ask", *args])


def ask_endpoint(doc, tiny_model_dir, url: str, *extra: str, question: str = "What?"):
    """``ask`` about ``doc`` through the server at ``url`` (model ``m``, the tiny tokenizer)."""
    return ask(
        str(doc),
        "-q",
        question,
        "--endpoint",
        url,
        "--model",
        "m",
        "--tokenizer",
        str(tiny_model_dir),
        *extra,
    )


def one_error(r, code: int | None = None) -> str:
    """The single ``error:`` line of a failed run (and no traceback anywhere)."""
    assert r.exit_code != 0, r.output
    if code is not None:
        assert r.exit_code == code, r.output
    assert "Traceback" not in r.output
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, r.stderr
    assert not any("error" in ln.lower() for ln in r.stdout.splitlines()), r.stdout
    return errors[0]


def test_empty_file(tmp_path, tiny_model_dir) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    r = ask(str(empty), "-q", "What?", "--model", str(tiny_model_dir))
    assert "empty" in one_error(r, 1)


def test_unreadable_encoding_and_binary_files(tmp_path) -> None:
    latin = tmp_path / "latin.txt"
    latin.write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    assert "not UTF-8" in one_error(ask(str(latin), "-q", "What?"), 1)
    png = tmp_path / "image.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    assert "image.png" in one_error(ask(str(png), "-q", "What?"), 1)
    nul = tmp_path / "data.bin"
    nul.write_bytes(b"text\x00with\x00nuls")
    assert "binary" in one_error(ask(str(nul), "-q", "What?"), 1)


def test_missing_file_directory_and_missing_question(doc, tmp_path) -> None:
    assert "missing --question" in one_error(ask(str(doc)), 2)
    assert "no such file" in one_error(ask(str(tmp_path / "nope.txt"), "-q", "x"), 1)
    line = one_error(ask(str(tmp_path), "-q", "x"), 1)
    assert "is a directory" in line
    assert str(tmp_path) in line
    assert "give a FILE" in one_error(ask(), 2)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_a_file_without_read_permission(doc) -> None:
    doc.chmod(0)
    try:
        assert "cannot read" in one_error(ask(str(doc), "-q", "x"), 1)
    finally:
        doc.chmod(0o644)


def test_paths_with_brackets_are_printed_literally(tmp_path) -> None:
    line = one_error(ask(str(tmp_path / "[bold]notes[/bold].md"), "-q", "x"), 1)
    assert "[bold]notes[/bold].md" in line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--endpoint", "localhost:8000", "--model", "m"], "--endpoint needs a scheme: "),
        (["--endpoint", "ftp://host/v1", "--model", "m"], "http:// or https://"),
        (["--endpoint", "http://127.0.0.1:1/v1"], "--endpoint needs --model"),
        (["--endpoint", "http://127.0.0.1:1/v1", "--model", "m", "--adapter", "x"], "--adapter"),
        (["--model", "no-such-model"], "unknown --model 'no-such-model'"),
        (["--chunk-tokens", "3"], "--chunk-tokens"),
        (["--preset", "bogus"], "'bogus' is not a preset; use one of notes, paper, sentences"),
        (["--preset", "notes", "--plain"], "give --plain or --preset, not both"),
        (["--timeout", "5"], "--timeout limits requests to --endpoint"),
        (["--endpoint", "http://127.0.0.1:1/v1", "--model", "m", "--timeout", "0"], "> 0"),
        (["--no-such-option"], "No such option"),
    ],
)
def test_bad_options_end_in_one_error_line(doc, args, message) -> None:
    line = one_error(ask(str(doc), "-q", "What?", *args), 2)
    assert message in line


def test_endpoint_without_scheme_suggests_the_url(doc) -> None:
    line = one_error(ask(str(doc), "-q", "x", "--endpoint", "localhost:8000", "--model", "m"))
    assert line == "error: --endpoint needs a scheme: http://localhost:8000/v1"


def test_unreachable_backend(doc, tiny_model_dir) -> None:
    port = free_port()
    r = ask_endpoint(doc, tiny_model_dir, f"http://127.0.0.1:{port}/v1")
    line = one_error(r, 1)
    assert "cannot reach" in line
    assert "ConnectError" in line


def test_a_slow_server_times_out(doc, tiny_model_dir) -> None:
    with ScriptedServer([(200, "late")], delay=1.5) as srv:
        r = ask_endpoint(doc, tiny_model_dir, srv.url, "--timeout", "0.2")
    assert "did not answer within 0.2 s" in one_error(r, 1)


def test_empty_model_reply(doc, tiny_model_dir) -> None:
    with ScriptedServer([(200, "")]) as srv:
        r = ask_endpoint(doc, tiny_model_dir, srv.url)
    assert "empty reply" in one_error(r, 1)


def _reply(answer: str, memory: str = "The river gauge read 5471234."):
    """A scripted model: ``memory`` for every update prompt, ``answer`` for the answer."""

    def reply(body):
        prompt = body["messages"][-1]["content"]
        return memory if "<section>" in prompt else answer

    return reply


def _ask_over_http(doc, tiny_model_dir, reply, *extra: str, question="What did the gauge read?"):
    """``ask`` about ``doc`` over a scripted server; (result, number of requests)."""
    with ScriptedServer([(200, reply)]) as srv:
        r = ask_endpoint(
            doc, tiny_model_dir, srv.url, "--chunk-tokens", "64", *extra, question=question
        )
        return r, len(srv.requests)


def test_answer_memory_trace_and_sources_over_http(doc, tiny_model_dir) -> None:
    r, n_requests = _ask_over_http(doc, tiny_model_dir, _reply("5471234"), "--show-memory")
    assert r.exit_code == 0, r.output
    assert "Answer: 5471234" in r.output
    assert "Question: What did the gauge read?" in r.output
    chunks = r.output.count("  chunk ")
    assert chunks >= 3
    assert r.output.count("[new]") + r.output.count("[kept]") == chunks  # printed as text
    assert n_requests == chunks + 1
    found = re.search(r"Sources: chunk (\d+(?:, \d+)*) of (\d+)", r.output)
    assert found, r.output
    assert int(found.group(2)) == chunks
    assert all(1 <= int(i) <= chunks for i in found.group(1).split(", "))  # 1-based
    assert "not found" not in r.output


def test_an_answer_not_in_the_document_is_said_so(doc, tiny_model_dir) -> None:
    from lc_agents.memagent import ABSTAIN_ANSWER

    r, _ = _ask_over_http(doc, tiny_model_dir, _reply(ABSTAIN_ANSWER, memory="none"))
    assert r.exit_code == 0, r.output
    assert "The answer was not found in the document." in r.output
    assert "Sources:" not in r.output


def test_markup_in_question_and_answer_is_printed_literally(doc, tiny_model_dir) -> None:
    answer = "It is in [/opt/archive] and [bold]vault[/bold] [red]"
    question = "Where is [/opt/archive] or [bold]it[/bold]?"
    r, _ = _ask_over_http(
        doc, tiny_model_dir, _reply(answer, memory=answer), "--show-memory", question=question
    )
    assert r.exit_code == 0, r.output
    assert f"Question: {question}" in r.output
    assert f"Answer: {answer}" in r.output
    assert "Traceback" not in r.output


def test_profile_reports_peak_memory_and_throughput(doc, tiny_model_dir) -> None:
    from pathlib import Path

    r, _ = _ask_over_http(doc, tiny_model_dir, _reply("5471234"), "--profile")
    assert r.exit_code == 0, r.output
    found = re.search(r"peak RSS (\d+) MiB .* (\d+) document\s+tokens/s", r.output, re.S)
    assert found, r.output
    peak_mib, tokens_per_s = int(found.group(1)), int(found.group(2))
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    current_mib = pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    assert peak_mib >= current_mib - 1  # the peak is at least today's resident set
    assert tokens_per_s > 0


def test_demo_counts_with_the_backends_tokenizer(tiny_model_dir, tiny_tokenizer) -> None:
    r = ask(
        "--demo",
        "--demo-length",
        "512",
        "--model",
        str(tiny_model_dir),
        "--plain",
        "--chunk-tokens",
        "256",
        "--memory-tokens",
        "16",
    )
    assert r.exit_code == 0, r.output
    assert "Expected: " in r.output
    tokens = int(re.search(r"(\d+) tokens in (\d+) chunks", r.output).group(1))
    assert 400 <= tokens <= 600  # 512 tokens of the tiny tokenizer, not another one's


def test_build_config_presets_plain_adapter_and_sizes() -> None:
    from lc_agents.adapters import adapter_memagent_config
    from lc_agents.memagent import default_preset

    for name in MEMAGENT_PRESETS:
        assert build_config(None, None, False, preset=name) == MemAgentConfig.preset(name)
    small = "smollm2-135m-instruct"
    assert build_config(None, None, False, model=small) == MemAgentConfig.preset(
        default_preset(small)
    )
    assert build_config(None, None, False) == MemAgentConfig.preset(default_preset(None))
    sized = build_config(128, 32, False, preset="paper")
    assert (sized.chunk_tokens, sized.memory_tokens) == (128, 32)
    assert sized.prompts == MemAgentConfig.preset("paper").prompts
    assert build_config(64, 16, True) == MemAgentConfig.plain(chunk_tokens=64, memory_tokens=16)
    adapter = adapter_memagent_config("memagent-smollm2")
    assert build_config(None, None, False, "memagent-smollm2", preset="paper") == adapter
    with pytest.raises(ValueError, match="not both"):
        build_config(None, None, True, preset="notes")


def test_help_lists_embedded_models_and_presets() -> None:
    for command in ("ask", "serve"):
        r = runner.invoke(app, [command, "--help"], env={"COLUMNS": "240"})
        assert r.exit_code == 0
        flat = re.sub(r"[\s│]+", "", r.output)
        for name in [*EMBEDDED_MODELS, *MEMAGENT_PRESETS]:
            assert name in flat, (command, name)


def test_arena_label_is_the_model_in_use(tmp_path) -> None:
    from lc_agents.cli import _model_label
    from lc_agents.models import DEFAULT_CHAT_MODEL

    assert _model_label(None, None) == DEFAULT_CHAT_MODEL
    assert _model_label(None, "smollm2-135m-instruct") == "smollm2-135m-instruct"
    assert _model_label("http://127.0.0.1:8000/v1", "qwen3-8b") == "qwen3-8b"
    assert _model_label(None, str(tmp_path / "my-model")) == "my-model"
