"""The items ContextNav works on: examples (text, optional image, label) and candidates."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

__all__ = ["Candidate", "ContextItem"]


@dataclass(frozen=True)
class ContextItem:
    """One in-context example or query; multimodal-ready.

    Attributes:
        id: unique id within a pool.
        text: the example's text (a message, a question, an image caption ...).
        label: the example's answer; ``None`` for a query.
        image_path: optional path of the example's image; embedded by the pool's image
            embedder when it has one (see :class:`~lc_agents.contextnav.ItemEncoder`).
        metadata: scalar facts stored beside the vector and usable in filters.

    Examples:
        >>> ContextItem("q1", "My box arrived damaged.").label is None
        True
    """

    id: str
    text: str
    label: str | None = None
    image_path: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError(f"ContextItem.id must be a non-empty string, got {self.id!r}")
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValueError(f"ContextItem {self.id!r}: text must be a non-empty string")


@dataclass(frozen=True)
class Candidate:
    """A retrieved example with its score and vector.

    Attributes:
        item: the example.
        score: cosine similarity to the query (higher is closer).
        vector: the example's unit-norm vector ``[dim]`` (float32).
        notes: per-tool annotations (e.g. ``{"consistency": 0.75}``).
    """

    item: ContextItem
    score: float
    vector: np.ndarray
    notes: dict[str, float] = field(default_factory=dict)

    def noted(self, key: str, value: float) -> Candidate:
        """A copy with ``notes[key] = value``."""
        return replace(self, notes={**self.notes, key: float(value)})
