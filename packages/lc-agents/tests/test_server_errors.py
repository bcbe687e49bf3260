"""Errors of the MemAgent server, all in OpenAI's shape, seen through the ``openai`` client.

``{"error": {"message", "type", "param", "code"}}`` with 400 (bad body), 401 (API key),
404 (model, route), 405, 413 (body size), 502 (backend), 504 (timeout) and 500 (bugs).
The backends here are fakes without a model (named so below) wherever the model is
beside the point; the server, uvicorn and the HTTP traffic are real.
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

import httpx
import openai
import pytest
from fake_openai import running

from lc_agents.errors import BackendHTTPError, BackendUnreachableError, EmptyReplyError
from lc_agents.memagent import MemAgentConfig
from lc_agents.server import create_app

CONFIG = MemAgentConfig.plain(chunk_tokens=64, memory_tokens=8)
DOC = "\n".join(f"Line {i}: the river gauge read {5_000_000 + i}." for i in range(12))
ASK = [{"role": "user", "content": f"{DOC}\n\nWhat did the gauge read?"}]


class FakeBackend:
    """A fake chat backend (no model): replies ``reply`` after ``delay`` seconds, or raises
    ``error``; counts its calls. For tests where what the model says does not matter."""

    def __init__(self, reply: str = "5000003", delay: float = 0.0, error: Exception | None = None):
        self.reply = reply
        self.delay = delay
        self.error = error
        self.calls = 0
        self._lock = threading.Lock()

    def chat(self, messages: Any, **options: Any) -> str:
        with self._lock:
            self.calls += 1
        time.sleep(self.delay)
        if self.error is not None:
            raise self.error
        return self.reply

    async def achat(self, messages: Any, **options: Any) -> str:
        return self.chat(messages, **options)

    def chat_batch(self, conversations: Any, **options: Any) -> list[str]:
        return [self.chat(m, **options) for m in conversations]


def _app(tokenizer: Any, backend: Any = None, **kw: Any) -> Any:
    return create_app(backend or FakeBackend(), CONFIG, tokenizer=tokenizer, **kw)


def _client(url: str, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=30)


def _ask(client: openai.OpenAI, **kw: Any) -> Any:
    kw.setdefault("messages", ASK)
    return client.chat.completions.create(model="memagent", **kw)


def _is_openai_error(body: Any, status_kind: str = "invalid_request_error") -> dict[str, Any]:
    assert set(body) == {"error"}, body
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    assert isinstance(err["message"], str)
    assert err["message"]
    assert err["type"] == status_kind
    return err


@pytest.fixture(scope="module")
def url(tiny_tokenizer):
    with running(_app(tiny_tokenizer)) as u:
        yield u


def test_a_fake_backend_round_trip_works(url) -> None:
    assert _ask(_client(url)).choices[0].message.content == "5000003"


def test_unknown_model_is_404_model_not_found(url) -> None:
    with pytest.raises(openai.NotFoundError, match="'gpt-4o' does not exist") as info:
        _client(url).chat.completions.create(model="gpt-4o", messages=ASK)
    err = _is_openai_error(info.value.response.json())
    assert (err["param"], err["code"]) == ("model", "model_not_found")
    with pytest.raises(openai.NotFoundError):
        _client(url).models.retrieve("gpt-4o")


def test_bad_bodies_are_400_with_the_field_named(url) -> None:
    client = _client(url)
    cases = [
        ({"messages": [{"role": "robot", "content": "a\n\nb?"}]}, "messages[0].role"),
        ({"messages": []}, "messages"),
        ({"messages": ASK, "n": 2}, "n"),
        ({"messages": [{"role": "user", "content": "no question here"}]}, "messages[0].content"),
        ({"messages": [{"role": "system", "content": "x\n\ny?"}]}, "messages"),
    ]
    for body, param in cases:
        with pytest.raises(openai.BadRequestError) as info:
            client.chat.completions.create(model="memagent", **body)
        err = _is_openai_error(info.value.response.json())
        assert err["param"] == param, (body, err)
    # a body FastAPI itself would answer with 422 {"detail": ...}
    for raw in (b"{not json", b'{"messages": "hi"}', b"[]", b'{"model": "memagent"}'):
        r = httpx.post(
            f"{url}/chat/completions", content=raw, headers={"Content-Type": "application/json"}
        )
        assert r.status_code == 400, (raw, r.text)
        _is_openai_error(r.json())
    r = httpx.post(f"{url}/chat/completions", content=b"{not json")
    assert "not valid JSON" in r.json()["error"]["message"]
    # JSON is JSON whatever the Content-Type says (curl -d sends a form type)
    r = httpx.post(
        f"{url}/chat/completions",
        content=json.dumps({"messages": ASK}).encode(),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 200, r.text


def test_non_text_content_parts_are_a_clear_400(url) -> None:
    parts = [
        {"type": "text", "text": DOC},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    ]
    with pytest.raises(openai.BadRequestError, match=r"type 'image_url'.*text only") as info:
        _ask(_client(url), messages=[{"role": "user", "content": parts}])
    assert info.value.body["param"] == "messages[0].content[1]"


def test_unknown_routes_and_methods_are_openai_errors(url) -> None:
    root = url.removesuffix("/v1")
    for method, path, status in [
        ("POST", "/v1/completions", 404),
        ("GET", "/nope", 404),
        ("GET", "/v1/chat/completions", 405),
    ]:
        r = httpx.request(method, root + path)
        assert r.status_code == status
        err = _is_openai_error(r.json())
        assert path in err["message"]
    with pytest.raises(openai.NotFoundError):
        _client(url).completions.create(model="memagent", prompt="hi")


def test_api_key_is_required_on_v1_routes(tiny_tokenizer) -> None:
    with running(_app(tiny_tokenizer, api_key="sk-right")) as url:
        assert _ask(_client(url, "sk-right")).choices[0].message.content == "5000003"
        with pytest.raises(openai.AuthenticationError, match="invalid API key") as info:
            _ask(_client(url, "sk-wrong"))
        _is_openai_error(info.value.response.json())
        with pytest.raises(openai.AuthenticationError):
            _client(url, "sk-wrong").models.list()
        r = httpx.post(f"{url}/chat/completions", json={"messages": ASK})
        assert r.status_code == 401
        assert r.headers["www-authenticate"] == "Bearer"
        assert "missing API key" in _is_openai_error(r.json())["message"]
        r = httpx.get(url.removesuffix("/v1") + "/health")
        assert r.status_code == 200  # health checks need no key


def test_bodies_over_the_limit_are_413(tiny_tokenizer) -> None:
    with running(_app(tiny_tokenizer, max_body_bytes=4096)) as url:
        big = [{"role": "user", "content": "word " * 2000 + "\n\nWhy?"}]
        with pytest.raises(openai.APIStatusError) as info:
            _ask(_client(url), messages=big)
        assert info.value.status_code == 413
        err = _is_openai_error(info.value.response.json())
        assert err["code"] == "request_too_large"
        assert "4096 bytes" in err["message"]

        def chunked(n: int):  # no Content-Length: the size is counted as it arrives
            head = b'{"messages": [{"role": "user", "content": "'
            yield head
            for _ in range(n):
                yield b"x" * 1024
            yield b'\\n\\nWhy?"}]}'

        r = httpx.post(
            f"{url}/chat/completions",
            content=chunked(64),
            headers={"Content-Type": "application/json"},
        )
        assert r.status_code == 413
        assert _is_openai_error(r.json())["code"] == "request_too_large"
        # a large upload is read to the end, so the client sees the 413, not a reset
        r = httpx.post(
            f"{url}/chat/completions",
            content=b"x" * (4 * 2**20),
            headers={"Content-Type": "application/json"},
        )
        assert r.status_code == 413
        # under the limit still works, on the same server
        assert _ask(_client(url)).choices[0].message.content == "5000003"


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (BackendUnreachableError("cannot reach http://gpu:8000/v1"), "backend_unreachable"),
        (BackendHTTPError("http://gpu:8000/v1 answered HTTP 400: bad", 400), "backend_http_error"),
        (EmptyReplyError("model 'm' returned an empty reply"), "empty_reply"),
    ],
)
def test_backend_failures_are_502(tiny_tokenizer, error, code) -> None:
    with running(_app(tiny_tokenizer, FakeBackend(error=error))) as url:
        with pytest.raises(openai.InternalServerError) as info:
            _ask(_client(url))
        assert info.value.status_code == 502
        err = _is_openai_error(info.value.response.json(), "server_error")
        assert err["code"] == code
        assert str(error) in err["message"]
        # in a stream the error arrives as an event after the role chunk
        with pytest.raises(openai.APIError, match=re.escape(str(error)[:20])):
            list(_ask(_client(url), stream=True))


def test_a_bug_is_500_in_the_same_shape(tiny_tokenizer) -> None:
    with running(_app(tiny_tokenizer, FakeBackend(error=ZeroDivisionError("oops")))) as url:
        with pytest.raises(openai.InternalServerError) as info:
            _ask(_client(url))
        assert info.value.status_code == 500
        err = _is_openai_error(info.value.response.json(), "server_error")
        assert "ZeroDivisionError: oops" in err["message"]


def test_a_request_past_the_timeout_is_504_and_its_run_stops(tiny_tokenizer) -> None:
    slow = FakeBackend(delay=0.2)  # 12 lines in 64-token chunks: several chunks, 0.2 s each
    with running(_app(tiny_tokenizer, slow, request_timeout_s=0.5)) as url:
        t0 = time.perf_counter()
        with pytest.raises(openai.InternalServerError) as info:
            _ask(_client(url))
        elapsed = time.perf_counter() - t0
        assert info.value.status_code == 504
        err = _is_openai_error(info.value.response.json(), "server_error")
        assert err["code"] == "timeout"
        assert "0.5 s" in err["message"]
        assert elapsed < 2.0
        time.sleep(0.5)  # the run stops after the chunk it was reading
        calls = slow.calls
        time.sleep(0.6)
        assert slow.calls == calls
        with pytest.raises(openai.APIError, match="longer than the server's limit"):
            list(_ask(_client(url), stream=True))


def test_a_slow_stream_sends_keep_alive_comments(tiny_tokenizer) -> None:
    slow = FakeBackend(delay=0.5)
    body = {"model": "memagent", "messages": ASK, "stream": True}
    with (
        running(_app(tiny_tokenizer, slow, keepalive_s=0.1)) as url,
        httpx.stream("POST", f"{url}/chat/completions", json=body, timeout=30) as r,
    ):
        lines = [ln for ln in r.iter_lines() if ln]
    comments = [ln for ln in lines if ln.startswith(":")]
    n_chunks = int(comments[0].rsplit("/", 1)[1])
    assert n_chunks >= 2
    assert len(comments) > 2 * n_chunks  # beats between the chunks, not only after each
    assert lines[-1] == "data: [DONE]"
    answer = json.loads(lines[-3].removeprefix("data: "))
    assert answer["choices"][0]["delta"] == {"content": "5000003"}


def test_a_client_that_goes_away_stops_its_run(tiny_tokenizer) -> None:
    slow = FakeBackend(delay=0.2)
    body = {"model": "memagent", "messages": ASK, "stream": True}
    with running(_app(tiny_tokenizer, slow, keepalive_s=0.05)) as url:
        with httpx.stream("POST", f"{url}/chat/completions", json=body, timeout=30) as r:
            for line in r.iter_lines():
                if line.startswith(": reading chunk 2"):
                    break
        time.sleep(0.6)
        calls = slow.calls
        time.sleep(0.6)
        assert slow.calls == calls
        assert calls < 8  # it did not read the whole document


def test_bad_settings_are_rejected(tiny_tokenizer) -> None:
    for kw, match in [
        ({"model_name": " "}, "model_name"),
        ({"max_body_bytes": 0}, "max_body_bytes"),
        ({"request_timeout_s": 0}, "request_timeout_s"),
        ({"api_key": ""}, "api_key"),
        ({"keepalive_s": -1}, "keepalive_s"),
        ({"max_concurrency": 0}, "max_concurrency"),
    ]:
        with pytest.raises(ValueError, match=match):
            _app(tiny_tokenizer, **kw)
