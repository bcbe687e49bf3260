"""Exception types of the retrieval layer (all derive from :class:`~lc_agents.errors.AgentError`)."""

from __future__ import annotations

from lc_agents.errors import AgentError

__all__ = ["EmbedderMismatchError", "EmptyIndexError", "RetrievalError"]


class RetrievalError(AgentError):
    """Base class of retrieval errors."""


class EmbedderMismatchError(RetrievalError):
    """An existing index was built with another embedder (name or vector width differ)."""


class EmptyIndexError(RetrievalError):
    """A search or index build was asked of an index (or corpus) that holds nothing."""
