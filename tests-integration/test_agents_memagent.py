"""lc-agents end to end with the embedded SmolLM2-135M-Instruct (marker ``model``).

The real model answers lc-evals needle-in-a-haystack documents through the ``ask``
command and through the OpenAI-compatible server (queried with the real ``openai``
client on loopback).
"""

from __future__ import annotations

import threading
import time

import pytest

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def backend():
    import torch

    from lc_agents.backends.local import LocalBackend

    torch.set_num_threads(2)
    return LocalBackend("smollm2-135m-instruct")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_embedded_model_is_cached_after_conversion(backend) -> None:
    from lc_agents.models import converted_embedded_dir, load_model

    assert (converted_embedded_dir() / "model.safetensors").exists()
    t0 = time.perf_counter()
    model, _ = load_model("smollm2-135m-instruct")
    assert time.perf_counter() - t0 < 60  # no dequantization on the second load
    assert model.config.num_hidden_layers == 30


def test_ask_demo_answers_its_needle(monkeypatch) -> None:
    from typer.testing import CliRunner

    from lc_agents.cli import app

    result = CliRunner().invoke(app, ["ask", "--demo", "--demo-length", "4096", "--show-memory"])
    assert result.exit_code == 0, result.output
    assert "Question: What is the special magic number" in result.output
    assert "Expected:" in result.output
    assert "correct" in result.output
    assert "incorrect" not in result.output


def test_shipped_memory_adapter_writes_the_needle_into_memory() -> None:
    """The trained memory writer (LoRA shipped in lc-agents) on the embedded model."""
    from typer.testing import CliRunner

    from lc_agents.adapters import adapter_memagent_config, available_adapters
    from lc_agents.cli import app

    assert "memagent-smollm2" in available_adapters()
    cfg = adapter_memagent_config("memagent-smollm2")
    assert (cfg.chunk_tokens, cfg.memory_tokens, cfg.copy_memory) == (256, 96, False)
    args = ["ask", "--demo", "--demo-length", "1024", "--show-memory"]
    result = CliRunner().invoke(app, [*args, "--adapter", "memagent-smollm2"])
    assert result.exit_code == 0, result.output
    assert "in 4 chunks" in result.output  # the adapter's 256-token chunks
    assert "[new] 'One of the special magic numbers" in result.output  # free-text memory
    assert "correct" in result.output
    assert "incorrect" not in result.output


def test_serve_answers_an_openai_client(backend) -> None:
    import uvicorn
    from openai import OpenAI

    import lc_evals
    from lc_agents.server import create_app

    item = lc_evals.generate(
        "niah_single",
        n=1,
        length=3072,
        seed=1,
        tokenizer=backend.tokenizer,
        haystack="essay",
        value_kind="number",
    )[0]
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(backend), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.05)
        client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", timeout=600)
        reply = client.chat.completions.create(
            model="memagent",
            messages=[{"role": "user", "content": f"{item.context}\n\n{item.question}"}],
        )
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    answer = reply.choices[0].message.content
    assert item.answers[0] in answer
    assert reply.usage.prompt_tokens > 2000
