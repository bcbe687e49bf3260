"""OpenAICompatibleBackend against a real loopback HTTP server."""

from __future__ import annotations

import asyncio
import time

import pytest
from fake_openai import ScriptedServer, free_port

from lc_agents.backends.openai_http import OpenAICompatibleBackend, check_base_url
from lc_agents.errors import BackendHTTPError, BackendUnreachableError, EmptyReplyError
from lc_evals import ChatModel

MSG = [{"role": "user", "content": "hi"}]


def backend(url: str, **kw) -> OpenAICompatibleBackend:
    kw.setdefault("backoff", 0.05)
    return OpenAICompatibleBackend(url, "m", timeout=5, **kw)


def test_is_a_chat_model() -> None:
    assert isinstance(backend("http://127.0.0.1:1/v1"), ChatModel)


def test_retries_429_then_succeeds_with_growing_delays() -> None:
    with ScriptedServer([(429, "slow down"), (503, "busy"), (200, "hello")]) as srv:
        t0 = time.perf_counter()
        reply = backend(srv.url, backoff=0.1).chat(MSG, max_tokens=7, temperature=0)
        elapsed = time.perf_counter() - t0
    assert reply == "hello"
    assert len(srv.requests) == 3
    assert srv.requests[0] == {"model": "m", "messages": MSG, "max_tokens": 7, "temperature": 0}
    assert elapsed >= 0.1 + 0.2  # exponential: 0.1 s then 0.2 s (plus jitter)


def test_retry_after_header_is_honoured() -> None:
    with ScriptedServer([(429, "later"), (200, "ok")], headers={"Retry-After": "0.3"}) as srv:
        t0 = time.perf_counter()
        assert backend(srv.url, backoff=0.0).chat(MSG) == "ok"
        assert time.perf_counter() - t0 >= 0.3


def test_client_errors_fail_at_once_with_the_server_message() -> None:
    with (
        ScriptedServer([(400, "unknown model 'm'")]) as srv,
        pytest.raises(BackendHTTPError, match=r"HTTP 400.*unknown model") as info,
    ):
        backend(srv.url).chat(MSG)
    assert info.value.status_code == 400
    assert len(srv.requests) == 1  # no retry on 4xx


def test_retries_are_bounded() -> None:
    with (
        ScriptedServer([(500, "boom")]) as srv,
        pytest.raises(BackendHTTPError, match="HTTP 500"),
    ):
        backend(srv.url, max_retries=2).chat(MSG)
    assert len(srv.requests) == 3


def test_unreachable_server_is_reported_after_retries() -> None:
    port = free_port()  # nothing listens there
    with pytest.raises(BackendUnreachableError, match=rf"127.0.0.1:{port}.*3 attempt"):
        backend(f"http://127.0.0.1:{port}/v1", max_retries=2).chat(MSG)


def test_empty_reply_is_an_error() -> None:
    with ScriptedServer([(200, "  ")]) as srv, pytest.raises(EmptyReplyError):
        backend(srv.url).chat(MSG)


def test_batch_keeps_order_and_respects_the_concurrency_limit() -> None:
    echo = lambda body: body["messages"][0]["content"].upper()  # noqa: E731
    with ScriptedServer([(200, echo)], delay=0.1) as srv:
        convs = [[{"role": "user", "content": f"q{i}"}] for i in range(8)]
        replies = backend(srv.url, max_concurrency=3).chat_batch(convs)
    assert replies == [f"Q{i}" for i in range(8)]
    assert 2 <= srv.max_in_flight <= 3


def test_async_calls_retry_and_respect_the_limit() -> None:
    echo = lambda body: body["messages"][0]["content"]  # noqa: E731
    with ScriptedServer([(429, "x"), (200, echo)], delay=0.05) as srv:
        b = backend(srv.url, max_concurrency=2)
        convs = [[{"role": "user", "content": f"a{i}"}] for i in range(5)]
        replies = asyncio.run(b.achat_batch(convs))
    assert sorted(replies) == [f"a{i}" for i in range(5)]
    assert srv.max_in_flight <= 2


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"base_url": "127.0.0.1:8000"}, "http://"),
        ({"base_url": "localhost:8000"}, r"needs a scheme: http://localhost:8000/v1"),
        ({"base_url": "ftp://host/v1"}, "http:// or https://"),
        ({"base_url": "http://"}, "no host"),
        ({"base_url": "http://[::1/v1"}, "not a valid URL"),
        ({"model": ""}, "model"),
        ({"timeout": 0}, "timeout"),
        ({"max_concurrency": 0}, "max_concurrency"),
    ],
)
def test_bad_settings_are_rejected(kwargs, match) -> None:
    args = {"base_url": "http://127.0.0.1:1/v1", "model": "m", **kwargs}
    with pytest.raises(ValueError, match=match):
        OpenAICompatibleBackend(**args)


def test_bad_messages_are_rejected_before_any_request() -> None:
    with pytest.raises(ValueError, match="role"):
        backend("http://127.0.0.1:1/v1").chat([{"role": "robot", "content": "x"}])


def test_base_url_is_checked_and_normalized() -> None:
    assert check_base_url(" http://127.0.0.1:8000/v1/ ") == "http://127.0.0.1:8000/v1"
    assert OpenAICompatibleBackend("https://api.example.com/v1/", "m").url == (
        "https://api.example.com/v1/chat/completions"
    )
    with pytest.raises(ValueError, match=r"http://gpu-box:8000/openai/v1"):
        check_base_url("gpu-box:8000/openai/v1")


def test_a_server_too_slow_to_answer_is_a_timeout() -> None:
    with (
        ScriptedServer([(200, "late")], delay=1.0) as srv,
        pytest.raises(BackendUnreachableError, match=r"did not answer within 0.2 s \(2 attempt"),
    ):
        OpenAICompatibleBackend(srv.url, "m", timeout=0.2, max_retries=1, backoff=0.01).chat(MSG)
