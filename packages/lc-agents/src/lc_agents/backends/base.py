"""The chat-backend protocol shared by every backend and agent.

A backend is anything with a synchronous ``chat`` (which makes it an
``lc_evals.ChatModel``), an asynchronous ``achat`` and a ``chat_batch`` that answers
many conversations (concurrently where the backend can).

Example:
    >>> from lc_agents.backends import ChatBackend
    >>> class Echo:
    ...     def chat(self, messages, **options):
    ...         return messages[-1].get("content", "")
    ...     async def achat(self, messages, **options):
    ...         return self.chat(messages, **options)
    ...     def chat_batch(self, conversations, **options):
    ...         return [self.chat(m, **options) for m in conversations]
    >>> isinstance(Echo(), ChatBackend)
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from lc_evals import Message

__all__ = ["ChatBackend", "Message", "validate_messages"]


@runtime_checkable
class ChatBackend(Protocol):
    """A chat model: sync, async and batch calls returning the assistant's text."""

    def chat(self, messages: Sequence[Message], **options: Any) -> str:
        """Reply to one conversation. Options: ``max_tokens``, ``temperature``, ``seed``."""
        ...

    async def achat(self, messages: Sequence[Message], **options: Any) -> str:
        """Asynchronous :meth:`chat`."""
        ...

    def chat_batch(self, conversations: Sequence[Sequence[Message]], **options: Any) -> list[str]:
        """Reply to several conversations; the result keeps their order."""
        ...


_ROLES = {"system", "user", "assistant"}


def validate_messages(messages: Sequence[Message]) -> list[dict[str, str]]:
    """Check a conversation at the boundary and return it as plain dicts.

    Raises:
        ValueError: no messages, an unknown role, or non-string content.
    """
    if not messages:
        raise ValueError("messages must hold at least one message")
    out: list[dict[str, str]] = []
    for i, m in enumerate(messages):
        role, content = m.get("role"), m.get("content")
        if role not in _ROLES:
            raise ValueError(f"messages[{i}].role is {role!r}; allowed: {sorted(_ROLES)}")
        if not isinstance(content, str):
            raise ValueError(
                f"messages[{i}].content must be a string, got {type(content).__name__}"
            )
        out.append({"role": str(role), "content": content})
    return out
