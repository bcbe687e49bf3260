"""OpenAIChatModel against a real HTTP server on 127.0.0.1 (a stand-in for a model server)."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

import lc_evals
from lc_evals.endpoint import EndpointError, OpenAIChatModel

_spec = importlib.util.spec_from_file_location(
    "chat_server", pathlib.Path(__file__).with_name("chat_server.py")
)
chat_server = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(chat_server)


def test_endpoint_evaluation_end_to_end(tmp_path) -> None:
    items = lc_evals.generate("niah_single", n=3, length=1500, seed=0, haystack="essay")
    with chat_server.ChatServer() as server:
        model = OpenAIChatModel(server.url, model="stand-in", api_key="k", max_tokens=32)
        results = lc_evals.run(model, items, tmp_path / "r.jsonl", workers=3, temperature=0.0)
    assert [r.score for r in results] == [1.0, 1.0, 1.0]
    body = server.requests[0]["body"]
    assert body["model"] == "stand-in"
    assert body["max_tokens"] == 32
    assert body["temperature"] == 0.0
    assert body["messages"][0]["role"] == "user"
    assert server.requests[0]["auth"] == "Bearer k"
    assert server.requests[0]["path"] == "/v1/chat/completions"


def test_endpoint_retries_then_errors() -> None:
    messages = [{"role": "user", "content": "hi"}]
    with chat_server.ChatServer(fail_first=1) as server:
        assert (
            OpenAIChatModel(server.url, model="m", retries=1).chat(messages)
            == "I could not find it."
        )
    with chat_server.ChatServer(fail_first=5) as server:
        with pytest.raises(EndpointError, match="503"):
            OpenAIChatModel(server.url, model="m", retries=1).chat(messages)
        with pytest.raises(EndpointError, match="404"):
            OpenAIChatModel(server.url.removesuffix("/v1") + "/other", model="m").chat(messages)
    with pytest.raises(EndpointError, match="failed after 1 attempt"):
        OpenAIChatModel(server.url, model="m", retries=0, timeout=2).chat(
            messages
        )  # server is gone
    with pytest.raises(ValueError, match="http"):
        OpenAIChatModel("127.0.0.1:8000", model="m")
