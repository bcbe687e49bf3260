"""A disk cache of chat replies, so that benchmark and training reruns skip the model.

:class:`CachedChat` wraps any chat model (``chat(messages, **options) -> str``). Replies
are keyed by the SHA-256 of the model key, the messages and the options, and appended
to a JSON-lines file; reopening the file restores them. Only deterministic settings
(greedy decoding) should be cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Sequence
from typing import Any

from lc_evals import ChatModel, Message

__all__ = ["CachedChat"]


class CachedChat:
    """A caching wrapper around a chat model.

    Args:
        model: the wrapped model; ``None`` makes a cache-only model that raises
            ``KeyError`` on a miss (useful to replay a finished run without loading it).
        path: JSON-lines cache file (created with its directory on first write).
        model_key: names the model in the key, so two models never share replies.

    Attributes:
        hits, misses: counts since construction.

    Examples:
        >>> class Echo:
        ...     def chat(self, messages, **options):
        ...         return messages[-1]["content"].upper()
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "c.jsonl")
        >>> m = CachedChat(Echo(), path, model_key="echo")
        >>> m.chat([{"role": "user", "content": "hi"}]), m.misses
        ('HI', 1)
        >>> CachedChat(None, path, model_key="echo").chat([{"role": "user", "content": "hi"}])
        'HI'
    """

    def __init__(
        self, model: ChatModel | None, path: str | os.PathLike[str], *, model_key: str
    ) -> None:
        if not model_key:
            raise ValueError("model_key must be a non-empty string")
        self.model = model
        self.path = os.fspath(path)
        self.model_key = model_key
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._replies: dict[str, str] = {}
        if os.path.exists(self.path):
            with open(self.path, encoding="utf-8") as f:
                for line in f:
                    line = line.strip()
                    if line:
                        row = json.loads(line)
                        self._replies[row["key"]] = row["reply"]

    def key(self, messages: Sequence[Message], options: dict[str, Any]) -> str:
        """The cache key of one call."""
        blob = json.dumps(
            [self.model_key, [dict(m) for m in messages], options], sort_keys=True, default=str
        )
        return hashlib.sha256(blob.encode()).hexdigest()

    def __len__(self) -> int:
        return len(self._replies)

    def chat(self, messages: Sequence[Message], **options: Any) -> str:
        """The cached reply, or the wrapped model's (then stored)."""
        k = self.key(messages, options)
        with self._lock:
            if k in self._replies:
                self.hits += 1
                return self._replies[k]
        if self.model is None:
            raise KeyError(f"no cached reply for this conversation in {self.path}")
        reply = self.model.chat(messages, **options)
        with self._lock:
            self.misses += 1
            self._replies[k] = reply
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps({"key": k, "reply": reply}) + "\n")
        return reply
