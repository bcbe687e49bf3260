"""The OpenAI-compatible MemAgent server, queried by the real ``openai`` client on loopback."""

from __future__ import annotations

import threading
import time

import openai
import pytest
from fake_openai import free_port

from lc_agents.errors import InputError
from lc_agents.memagent import MemAgentConfig
from lc_agents.server import create_app, split_request


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
    with pytest.raises(InputError, match="last paragraph"):
        split_request([{"role": "user", "content": "no paragraph break"}])
    with pytest.raises(InputError, match="no user message"):
        split_request([{"role": "system", "content": "x"}])


@pytest.fixture(scope="module")
def server_url(tiny_backend):
    import uvicorn

    app = create_app(tiny_backend, MemAgentConfig.plain(chunk_tokens=64, memory_tokens=8))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 60
    while not server.started and time.time() < deadline:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/v1"
    server.should_exit = True
    thread.join(timeout=10)


def test_openai_client_gets_a_chat_completion(server_url, tiny_backend, document) -> None:
    client = openai.OpenAI(base_url=server_url, api_key="unused", max_retries=0)
    assert [m.id for m in client.models.list().data] == ["memagent"]
    reply = client.chat.completions.create(
        model="memagent",
        messages=[{"role": "user", "content": f"{document}\n\nWhat is the river number?"}],
    )
    assert reply.object == "chat.completion"
    assert reply.choices[0].message.role == "assistant"
    assert reply.choices[0].message.content
    n_doc = len(tiny_backend.tokenizer.encode(document, add_special_tokens=False))
    assert reply.usage.prompt_tokens == n_doc
    extra = reply.model_extra["memagent"]
    assert extra["chunks"] == -(-n_doc // 64)


def test_question_field_and_errors(server_url, document) -> None:
    client = openai.OpenAI(base_url=server_url, api_key="unused", max_retries=0)
    reply = client.chat.completions.create(
        model="memagent",
        messages=[{"role": "user", "content": document}],
        extra_body={"question": "What is the river number?"},
    )
    assert reply.choices[0].message.content
    with pytest.raises(openai.BadRequestError, match="last paragraph"):
        client.chat.completions.create(
            model="memagent", messages=[{"role": "user", "content": "one paragraph only"}]
        )
    with pytest.raises(openai.BadRequestError, match="streaming"):
        client.chat.completions.create(
            model="memagent", messages=[{"role": "user", "content": "a\n\nb?"}], stream=True
        )
