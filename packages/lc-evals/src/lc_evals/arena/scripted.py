"""A deterministic chat model for tests and dry runs: it replays scripted replies."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lc_evals.types import Message


class ScriptedModel:
    """A :class:`~lc_evals.types.ChatModel` whose replies are fixed in advance.

    Args:
        replies: a list of replies returned in turn (cycling), or a function
            ``messages -> reply``.

    Attributes:
        calls: every conversation received, in order.

    Examples:
        >>> m = ScriptedModel(["first", "second"])
        >>> m.chat([{"role": "user", "content": "hi"}]), m.chat([])
        ('first', 'second')
    """

    def __init__(self, replies: Sequence[str] | Callable[[Sequence[Message]], str]) -> None:
        if not callable(replies) and not replies:
            raise ValueError("replies must be a non-empty list or a function")
        self._replies = replies
        self.calls: list[list[Message]] = []

    def chat(self, messages: Sequence[Message], **options: Any) -> str:
        self.calls.append(list(messages))
        if callable(self._replies):
            return self._replies(messages)
        return self._replies[(len(self.calls) - 1) % len(self._replies)]
