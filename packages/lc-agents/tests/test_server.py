"""The OpenAI-compatible MemAgent server, queried by the real ``openai`` client on loopback.

The server runs under a real uvicorn with the tiny random-init Llama as its backend
(conftest); its answers are nonsense but deterministic (greedy decoding), which is all
the protocol tests need.
"""

from __future__ import annotations

import httpx
import openai
import pytest
from fake_openai import running

from lc_agents.errors import InputError
from lc_agents.memagent import MemAgentConfig
from lc_agents.server import RequestError, create_app, message_text, split_request

QUESTION = "What is the river number?"
CONFIG = MemAgentConfig.plain(chunk_tokens=64, memory_tokens=8)


def test_split_request_takes_the_last_paragraph_as_the_question() -> None:
    msgs = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "part one"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "part two\n\nmore text\n\nWhat is X?"},
    ]
    doc, q = split_request(msgs)
    assert q == "What is X?"
    assert doc == "part one\n\nok\n\npart two\n\nmore text"
    doc, q = split_request(msgs, question="Why?")
    assert q == "Why?"
    assert doc.endswith("What is X?")
    assert "be brief" not in doc
    with pytest.raises(InputError, match="last paragraph"):
        split_request([{"role": "user", "content": "no paragraph break"}])
    with pytest.raises(InputError, match="no user message"):
        split_request([{"role": "system", "content": "x"}])
    with pytest.raises(RequestError, match="no document text"):
        split_request([{"role": "user", "content": " "}], question="Why?")


def test_message_text_joins_text_parts_and_names_a_bad_part() -> None:
    parts = [{"type": "text", "text": "doc line"}, {"type": "text", "text": "Why?"}]
    assert message_text(parts) == "doc line\n\nWhy?"
    assert message_text(None) == ""
    assert split_request([{"role": "user", "content": parts}]) == ("doc line", "Why?")
    image = {"type": "image_url", "image_url": {"url": "data:,"}}
    with pytest.raises(RequestError, match=r"messages\[0\].content\[1\] has type 'image_url'") as e:
        split_request([{"role": "user", "content": [parts[0], image]}])
    assert e.value.param == "messages[0].content[1]"
    with pytest.raises(RequestError, match="text must be a string"):
        message_text([{"type": "text", "text": 3}])
    with pytest.raises(RequestError, match="got int"):
        message_text(7)


@pytest.fixture(scope="module")
def server_url(tiny_backend):
    with running(create_app(tiny_backend, CONFIG)) as url:
        yield url


@pytest.fixture
def client(server_url) -> openai.OpenAI:
    return openai.OpenAI(base_url=server_url, api_key="unused", max_retries=0)


def _ask(client: openai.OpenAI, document: str, **kw):
    return client.chat.completions.create(
        model="memagent",
        messages=[{"role": "user", "content": f"{document}\n\n{QUESTION}"}],
        **kw,
    )


def test_openai_client_gets_a_chat_completion(client, tiny_backend, document) -> None:
    assert [m.id for m in client.models.list().data] == ["memagent"]
    assert client.models.retrieve("memagent").id == "memagent"
    reply = _ask(client, document)
    assert reply.object == "chat.completion"
    assert reply.model == "memagent"
    assert reply.choices[0].message.role == "assistant"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.choices[0].message.content
    n_doc = len(tiny_backend.tokenizer.encode(document, add_special_tokens=False))
    assert reply.usage.prompt_tokens == n_doc
    n_answer = len(
        tiny_backend.tokenizer.encode(reply.choices[0].message.content, add_special_tokens=False)
    )
    assert reply.usage.completion_tokens == n_answer
    assert reply.usage.total_tokens == n_doc + n_answer
    extra = reply.model_extra["memagent"]
    assert extra["chunks"] == -(-n_doc // 64)


def test_stream_yields_role_content_stop_and_the_same_answer(client, document) -> None:
    expected = _ask(client, document).choices[0].message.content
    chunks = list(_ask(client, document, stream=True))
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    assert not chunks[0].choices[0].delta.content
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert not chunks[-1].choices[0].delta.content
    assert [c.choices[0].finish_reason for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    content = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert content == expected


def test_stream_on_the_wire_has_progress_comments_and_done(server_url, document, tiny_backend):
    n_doc = len(tiny_backend.tokenizer.encode(document, add_special_tokens=False))
    n_chunks = -(-n_doc // 64)
    body = {
        "model": "memagent",
        "messages": [{"role": "user", "content": f"{document}\n\n{QUESTION}"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.stream("POST", f"{server_url}/chat/completions", json=body, timeout=60) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = [ln for ln in r.iter_lines() if ln]
    comments = [ln for ln in lines if ln.startswith(":")]
    assert f": reading chunk 1/{n_chunks}" in comments
    assert f": reading chunk {n_chunks}/{n_chunks}" in comments
    data = [ln.removeprefix("data: ") for ln in lines if ln.startswith("data: ")]
    assert data[-1] == "[DONE]"
    import json

    events = [json.loads(d) for d in data[:-1]]
    assert events[-1]["choices"] == []  # include_usage: a last chunk with the usage
    assert events[-1]["usage"]["prompt_tokens"] == n_doc
    assert all(e["usage"] is None for e in events[:-1])
    # comments come between the role chunk and the answer
    first_comment = lines.index(comments[0])
    assert lines[0].startswith("data: ")
    assert first_comment > 0


def test_list_of_text_parts_is_the_same_as_a_string(client, document) -> None:
    as_string = _ask(client, document).choices[0].message.content
    parts = client.chat.completions.create(
        model="memagent",
        messages=[
            {
                "role": "user",
                "content": [{"type": "text", "text": document}, {"type": "text", "text": QUESTION}],
            }
        ],
    )
    assert parts.choices[0].message.content == as_string


def test_question_field(client, document) -> None:
    reply = client.chat.completions.create(
        model="memagent",
        messages=[{"role": "user", "content": document}],
        extra_body={"question": QUESTION},
    )
    assert reply.choices[0].message.content


def test_a_model_name_of_ones_choosing(tiny_backend, document) -> None:
    with running(create_app(tiny_backend, CONFIG, model_name="long-reader")) as url:
        client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0)
        assert [m.id for m in client.models.list().data] == ["long-reader"]
        reply = client.chat.completions.create(
            model="long-reader",
            messages=[{"role": "user", "content": f"{document}\n\n{QUESTION}"}],
        )
        assert reply.model == "long-reader"
        with pytest.raises(openai.NotFoundError, match="long-reader"):
            _ask(client, document)  # asks for "memagent"
