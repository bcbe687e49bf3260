"""Chat backends: a local transformers model and any OpenAI-compatible HTTP server."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lc_agents.backends.base import ChatBackend, validate_messages

if TYPE_CHECKING:
    from lc_agents.backends.local import LocalBackend
    from lc_agents.backends.openai_http import OpenAICompatibleBackend

__all__ = ["ChatBackend", "LocalBackend", "OpenAICompatibleBackend", "validate_messages"]


def __getattr__(name: str) -> Any:
    if name == "LocalBackend":
        from lc_agents.backends.local import LocalBackend

        return LocalBackend
    if name == "OpenAICompatibleBackend":
        from lc_agents.backends.openai_http import OpenAICompatibleBackend

        return OpenAICompatibleBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
