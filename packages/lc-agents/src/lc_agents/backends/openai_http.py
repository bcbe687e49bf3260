"""A chat backend for any OpenAI-compatible server (vLLM, SGLang, llama.cpp, hosted APIs).

Requests go to ``POST {base_url}/chat/completions`` with httpx. Rate limits (429),
server errors (5xx), timeouts and connection errors are retried with exponential backoff
(honouring ``Retry-After``); other 4xx errors fail at once with the server's message. A
semaphore caps the number of requests in flight, for the sync, async and batch paths.

Example:
    >>> from lc_agents.backends import OpenAICompatibleBackend
    >>> llm = OpenAICompatibleBackend("http://127.0.0.1:8000/v1", model="qwen")  # doctest: +SKIP
    >>> llm.chat([{"role": "user", "content": "Hello"}])  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from lc_agents.backends.base import Message, validate_messages
from lc_agents.errors import BackendHTTPError, BackendUnreachableError, EmptyReplyError

__all__ = ["OpenAICompatibleBackend", "check_base_url", "suggest_base_url"]

_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
_OPTION_NAMES = ("max_tokens", "temperature", "top_p", "seed", "stop")


def check_base_url(base_url: str) -> str:
    """Check an OpenAI-compatible server root and return it without a trailing ``/``.

    The URL needs an ``http://`` or ``https://`` scheme and a host. A URL missing its
    scheme (``localhost:8000``) is rejected with the likely intended URL in the message.

    >>> check_base_url("http://127.0.0.1:8000/v1/")
    'http://127.0.0.1:8000/v1'
    >>> check_base_url("localhost:8000")
    Traceback (most recent call last):
    ...
    ValueError: base_url needs a scheme: http://localhost:8000/v1 (got 'localhost:8000')

    Raises:
        ValueError: no scheme, a scheme other than http/https, or no host.
    """
    text = base_url.strip()
    if "://" not in text:
        raise ValueError(f"base_url needs a scheme: {suggest_base_url(text)} (got {base_url!r})")
    try:
        url = httpx.URL(text)
    except httpx.InvalidURL as exc:
        raise ValueError(f"base_url {base_url!r} is not a valid URL: {exc}") from None
    if url.scheme not in ("http", "https"):
        raise ValueError(
            f"base_url must start with http:// or https://, got {base_url!r} "
            f"(scheme {url.scheme!r})"
        )
    if not url.host:
        raise ValueError(f"base_url {base_url!r} has no host, e.g. http://127.0.0.1:8000/v1")
    return text.rstrip("/")


def suggest_base_url(text: str) -> str:
    """The URL a scheme-less server address most likely means (``http://``, ``/v1``).

    >>> suggest_base_url("localhost:8000")
    'http://localhost:8000/v1'
    >>> suggest_base_url("gpu-box:8000/openai/v1")
    'http://gpu-box:8000/openai/v1'
    """
    text = text.strip().lstrip("/") or "127.0.0.1:8000"
    return f"http://{text}" if "/" in text else f"http://{text}/v1"


class OpenAICompatibleBackend:
    """Chat through an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        base_url: server root including the API prefix, e.g. ``http://host:8000/v1``.
        model: model name sent with each request.
        api_key: bearer token (default: ``$OPENAI_API_KEY`` if set, else none).
        timeout: seconds per request (connect, read, write).
        max_retries: retries after the first attempt on 429/5xx/connection errors.
        backoff: first retry delay (s); doubles each retry, with up to 25% jitter.
        max_backoff: cap on one delay (s).
        max_concurrency: requests in flight at once (sync, async and batch together).
        seed: seed of the jitter generator.

    Attributes:
        supports_constraints: ``False``: the server decodes freely.

    Raises:
        ValueError: a bad setting, e.g. a ``base_url`` without ``http://`` (see
            :func:`check_base_url`).
    """

    supports_constraints = False

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        max_concurrency: int = 8,
        seed: int = 0,
    ) -> None:
        check_base_url(base_url)
        if not model:
            raise ValueError("model must be a non-empty model name")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        if backoff < 0 or max_backoff < 0:
            raise ValueError("backoff and max_backoff must be >= 0")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.base_url = base_url.strip().rstrip("/")
        self.model = model
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_concurrency = max_concurrency
        self._rng = random.Random(seed)
        self._sync_slots = threading.BoundedSemaphore(max_concurrency)
        self._async_slots: dict[int, asyncio.Semaphore] = {}
        self._client = httpx.Client(timeout=timeout, headers=self._headers())

    # ------------------------------------------------------------------ helpers
    @property
    def url(self) -> str:
        """The chat-completions URL."""
        return f"{self.base_url}/chat/completions"

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def _payload(self, messages: Sequence[Message], options: dict[str, Any]) -> dict[str, Any]:
        payload: dict[str, Any] = {"model": self.model, "messages": validate_messages(messages)}
        for name in _OPTION_NAMES:
            if options.get(name) is not None:
                payload[name] = options[name]
        return payload

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        if response is not None:
            retry_after = response.headers.get("retry-after")
            if retry_after:
                try:
                    return min(float(retry_after), self.max_backoff)
                except ValueError:
                    pass
        base = min(self.backoff * (2**attempt), self.max_backoff)
        return base * (1.0 + 0.25 * self._rng.random())

    def _parse(self, response: httpx.Response) -> str:
        if response.status_code >= 400:
            body = response.text[:500]
            raise BackendHTTPError(
                f"{self.url} answered HTTP {response.status_code}: {body or response.reason_phrase}",
                response.status_code,
                body,
            )
        try:
            data = response.json()
            content = data["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise BackendHTTPError(
                f"{self.url} returned a reply that is not a chat completion: {response.text[:200]}",
                response.status_code,
                response.text[:500],
            ) from exc
        if not content or not str(content).strip():
            raise EmptyReplyError(
                f"model {self.model!r} at {self.base_url} returned an empty reply"
            )
        return str(content)

    def _unreachable(self, exc: Exception) -> BackendUnreachableError:
        attempts = self.max_retries + 1
        if isinstance(exc, httpx.TimeoutException):
            return BackendUnreachableError(
                f"{self.url} did not answer within {self.timeout:g} s "
                f"({attempts} attempt(s), {type(exc).__name__})"
            )
        detail = str(exc) or "no detail"
        return BackendUnreachableError(
            f"cannot reach {self.url} after {attempts} attempt(s): {type(exc).__name__}: {detail}"
        )

    # ------------------------------------------------------------------ sync
    def chat(self, messages: Sequence[Message], **options: Any) -> str:
        """Reply to one conversation (options: max_tokens, temperature, top_p, seed, stop).

        Raises:
            BackendUnreachableError: no connection after all retries.
            BackendHTTPError: a non-retryable status, or retries exhausted.
            EmptyReplyError: the model returned no text.
        """
        payload = self._payload(messages, options)
        with self._sync_slots:
            for attempt in range(self.max_retries + 1):
                last = attempt == self.max_retries
                try:
                    response = self._client.post(self.url, json=payload)
                except httpx.TransportError as exc:
                    if last:
                        raise self._unreachable(exc) from exc
                    time.sleep(self._delay(attempt, None))
                    continue
                if response.status_code in _RETRY_STATUS and not last:
                    time.sleep(self._delay(attempt, response))
                    continue
                return self._parse(response)
        raise AssertionError("unreachable")  # pragma: no cover

    def chat_batch(self, conversations: Sequence[Sequence[Message]], **options: Any) -> list[str]:
        """Reply to many conversations concurrently (at most ``max_concurrency`` at once)."""
        if not conversations:
            return []
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(conversations))) as pool:
            return list(pool.map(lambda m: self.chat(m, **options), conversations))

    # ------------------------------------------------------------------ async
    def _async_semaphore(self) -> asyncio.Semaphore:
        loop_id = id(asyncio.get_running_loop())
        sem = self._async_slots.get(loop_id)
        if sem is None:
            sem = self._async_slots[loop_id] = asyncio.Semaphore(self.max_concurrency)
        return sem

    async def achat(self, messages: Sequence[Message], **options: Any) -> str:
        """Asynchronous :meth:`chat` with the same retries and errors."""
        payload = self._payload(messages, options)
        async with (
            self._async_semaphore(),
            httpx.AsyncClient(timeout=self.timeout, headers=self._headers()) as client,
        ):
            for attempt in range(self.max_retries + 1):
                last = attempt == self.max_retries
                try:
                    response = await client.post(self.url, json=payload)
                except httpx.TransportError as exc:
                    if last:
                        raise self._unreachable(exc) from exc
                    await asyncio.sleep(self._delay(attempt, None))
                    continue
                if response.status_code in _RETRY_STATUS and not last:
                    await asyncio.sleep(self._delay(attempt, response))
                    continue
                return self._parse(response)
        raise AssertionError("unreachable")  # pragma: no cover

    async def achat_batch(
        self, conversations: Sequence[Sequence[Message]], **options: Any
    ) -> list[str]:
        """Asynchronous :meth:`chat_batch`."""
        return list(await asyncio.gather(*(self.achat(m, **options) for m in conversations)))

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def __enter__(self) -> OpenAICompatibleBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
