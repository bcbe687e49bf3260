"""Overlapping requests to the MemAgent server are independent: no errors, same answers.

MemAgent's default ``memory_mode="score"`` keeps a per-run cache of sentence scores; a
server sharing one agent between requests let one request clear another's cache mid-run
(HTTP 500). Each request now gets its own agent; these tests run many at once on the
tiny random-init Llama, in score mode, through the real ``openai`` client.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai
import pytest
from fake_openai import running

from lc_agents.memagent import MemAgentConfig
from lc_agents.server import create_app

# score mode (the default), with candidates: the needle sentence names both question words
SCORE = MemAgentConfig(chunk_tokens=64, memory_tokens=24, answer_tokens=8)
QUESTION = "What is the river number?"


class _SlowModel:
    """The tiny model with a sleep before every forward pass (so scoring runs overlap)."""

    def __init__(self, model: Any, delay: float) -> None:
        self._model = model
        self._delay = delay

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        time.sleep(self._delay)
        return self._model(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


class SlowLocalBackend:
    """The tiny local backend with every model call slowed down by ``delay`` seconds.

    A wrapper, not a fake: generation and scoring run the real tiny model (constraints
    included); the sleeps only make requests overlap in time.
    """

    supports_constraints = True

    def __init__(self, inner: Any, delay: float) -> None:
        self._inner = inner
        self._delay = delay
        self.tokenizer = inner.tokenizer
        self.end_ids = inner.end_ids
        self.model = _SlowModel(inner.model, delay)

    def prompt_ids(self, messages: Any) -> list[int]:
        return self._inner.prompt_ids(messages)

    def generate_ids(self, prompt: Any, **options: Any) -> list[int]:
        time.sleep(self._delay)
        return self._inner.generate_ids(prompt, **options)

    def chat(self, messages: Any, **options: Any) -> str:
        time.sleep(self._delay)
        return self._inner.chat(messages, **options)

    async def achat(self, messages: Any, **options: Any) -> str:
        return self.chat(messages, **options)

    def chat_batch(self, conversations: Any, **options: Any) -> list[str]:
        return [self.chat(m, **options) for m in conversations]


def _documents(document: str, n: int) -> list[str]:
    """``n`` different documents of several chunks, each chunk with a river-number line.

    Every chunk then has a sentence worth scoring, so the memory keeps scored lines from
    chunk to chunk (what a shared score cache broke).
    """
    sentences = document.splitlines()
    out = []
    for i in range(n):
        lines = []
        for j in range(4):
            lines += sentences[(i + 2 * j) % 20 : (i + 2 * j) % 20 + 2]
            lines.append(f"The river number {j} is {5_000_000 + 10 * i + j}.")
        out.append("\n".join(lines))
    return out


def _ask(client: openai.OpenAI, doc: str) -> str:
    reply = client.chat.completions.create(
        model="memagent", messages=[{"role": "user", "content": f"{doc}\n\n{QUESTION}"}]
    )
    return str(reply.choices[0].message.content)


@pytest.mark.parametrize("stream", [False, True])
def test_32_concurrent_requests_all_succeed_with_their_own_answers(
    tiny_backend, document, stream
) -> None:
    docs = _documents(document, 32)
    with running(create_app(tiny_backend, SCORE)) as url:
        client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=120)
        alone = [_ask(client, d) for d in docs[:4]]

        def one(doc: str) -> str:
            if not stream:
                return _ask(client, doc)
            chunks = client.chat.completions.create(
                model="memagent",
                messages=[{"role": "user", "content": f"{doc}\n\n{QUESTION}"}],
                stream=True,
            )
            return "".join(c.choices[0].delta.content or "" for c in chunks)

        with ThreadPoolExecutor(32) as pool:
            answers = list(pool.map(one, docs))  # raises on the first failed request
    assert len(answers) == 32
    assert all(answers)
    assert answers[:4] == alone  # the same answer as when asked alone


def test_overlapping_requests_on_a_slow_backend_all_succeed(tiny_backend, document) -> None:
    """Requests that start while others are mid-document (a shared agent failed here)."""
    slow = SlowLocalBackend(tiny_backend, delay=0.02)
    docs = _documents(document, 8)
    with running(create_app(slow, SCORE)) as url:
        client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=120)
        alone = [_ask(client, d) for d in docs]

        def staggered(i: int) -> str:
            time.sleep(0.03 * i)  # start while the earlier ones are between chunks
            return _ask(client, docs[i])

        with ThreadPoolExecutor(len(docs)) as pool:
            together = list(pool.map(staggered, range(len(docs))))
    assert together == alone


def test_the_event_loop_stays_free_while_agents_read(tiny_backend, document) -> None:
    """A health check answers at once while six slow runs are in flight."""
    import httpx

    slow = SlowLocalBackend(tiny_backend, delay=0.25)
    docs = _documents(document, 6)
    with running(create_app(slow, SCORE)) as url, ThreadPoolExecutor(6) as pool:
        client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=120)
        futures = [pool.submit(_ask, client, d) for d in docs]
        time.sleep(0.3)
        t0 = time.perf_counter()
        health = httpx.get(url.removesuffix("/v1") + "/health", timeout=10)
        latency = time.perf_counter() - t0
        assert not all(f.done() for f in futures)
        assert all(f.result() for f in futures)
    assert health.json() == {"status": "ok"}
    assert latency < 1.0  # six runs in flight do not hold up the event loop
