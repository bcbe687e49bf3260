"""A :class:`~lc_evals.types.ChatModel` that talks to an OpenAI-compatible server.

Any server speaking the chat-completions API works (vLLM, SGLang, llama.cpp server,
hosted APIs): ``POST {base_url}/chat/completions`` with ``{"model", "messages", ...}``,
reading ``choices[0].message.content``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import httpx

from lc_evals.types import Message


class EndpointError(RuntimeError):
    """The endpoint answered with an error or with a body of the wrong shape."""


class OpenAIChatModel:
    """Chat completions over HTTP.

    Args:
        base_url: e.g. ``"http://127.0.0.1:8000/v1"``; a URL already ending in
            ``/chat/completions`` is used as is.
        model: the model name the server expects.
        api_key: sent as a bearer token; defaults to ``$OPENAI_API_KEY`` if set.
        timeout: seconds per request.
        retries: extra attempts after a connection error or a 429/5xx answer.
        **defaults: generation options sent with every request (``max_tokens``,
            ``temperature`` ...); per-call options override them.

    Examples:
        >>> model = OpenAIChatModel("http://127.0.0.1:8000/v1", model="my-model", max_tokens=32)
        >>> model.url
        'http://127.0.0.1:8000/v1/chat/completions'
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 600.0,
        retries: int = 2,
        **defaults: Any,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        if not model:
            raise ValueError("model must be a non-empty model name")
        url = base_url.rstrip("/")
        self.url = url if url.endswith("/chat/completions") else url + "/chat/completions"
        self.model = model
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.timeout = timeout
        self.retries = retries
        self.defaults = defaults

    def identity(self) -> dict[str, Any]:
        """What produced a reply: the endpoint, the model name and the default options."""
        return {"endpoint": self.url, "model": self.model, "defaults": dict(self.defaults)}

    def chat(self, messages: Sequence[Message], **options: Any) -> str:
        """Send ``messages`` and return the assistant's reply text."""
        payload = {"model": self.model, "messages": list(messages), **self.defaults, **options}
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            try:
                response = httpx.post(self.url, json=payload, headers=headers, timeout=self.timeout)
            except httpx.TransportError as exc:
                last = exc
            else:
                if response.status_code == 429 or response.status_code >= 500:
                    last = EndpointError(
                        f"{self.url} answered {response.status_code}: {response.text[:200]}"
                    )
                elif response.status_code >= 400:
                    raise EndpointError(
                        f"{self.url} answered {response.status_code}: {response.text[:200]}"
                    )
                else:
                    return _content(response, self.url)
            if attempt < self.retries:
                time.sleep(min(2.0**attempt, 10.0))
        raise EndpointError(
            f"{self.url} failed after {self.retries + 1} attempt(s): {last}"
        ) from last


def _content(response: httpx.Response, url: str) -> str:
    try:
        content = response.json()["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise EndpointError(
            f"{url} returned a body that is not a chat completion: {response.text[:200]}"
        ) from exc
    return "" if content is None else str(content)
