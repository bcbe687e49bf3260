"""Split a document into balanced, possibly overlapping chunks (by tokens or characters)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

Unit = Literal["tokens", "chars"]


@runtime_checkable
class TextTokenizer(Protocol):
    """A tokenizer that can round-trip text: ``encode(text) -> ids`` and ``decode(ids) -> text``.

    Hugging Face tokenizers qualify. Splitting by characters needs no tokenizer.
    """

    def encode(self, text: str, /) -> list[int]: ...

    def decode(self, ids: Sequence[int], /) -> str: ...


@dataclass(frozen=True)
class Chunk:
    """One piece of a document.

    Attributes:
        index: position of the chunk in the document (0-based).
        start: first unit of the chunk (a token or character offset into the document).
        end: one past the last unit, so the chunk holds ``end - start`` units.
        unit: ``"tokens"`` or ``"chars"``; what ``start`` and ``end`` count.
        text: the chunk's text (for tokens, the decoded token slice).
    """

    index: int
    start: int
    end: int
    unit: Unit
    text: str

    @property
    def length(self) -> int:
        """Number of units (tokens or characters) in the chunk."""
        return self.end - self.start


def chunk_spans(
    n_units: int, *, chunk_size: int | None = None, n_chunks: int | None = None, overlap: int = 0
) -> list[tuple[int, int]]:
    """Balanced ``[start, end)`` spans that cover ``range(n_units)`` with a fixed overlap.

    Give exactly one of ``chunk_size`` (the most units one chunk may hold) or ``n_chunks``.
    With ``chunk_size`` the number of chunks is the smallest that fits,
    ``k = ceil((n - overlap) / (chunk_size - overlap))`` (1 if ``n <= chunk_size``); the
    units are then spread evenly so chunk lengths differ by at most one (no tiny last
    chunk). Consecutive spans share exactly ``overlap`` units:
    ``spans[i + 1][0] == spans[i][1] - overlap``; the first starts at 0, the last ends at
    ``n_units``.

    Args:
        n_units: length of the document in units, ``>= 1``.
        chunk_size: maximum units per chunk, ``> overlap``.
        n_chunks: number of chunks wanted, ``>= 1``; must leave every chunk longer than
            ``overlap``.
        overlap: units shared by consecutive chunks, ``>= 0``.

    Returns:
        ``k`` pairs ``(start, end)``.

    Examples:
        >>> chunk_spans(10, chunk_size=4)
        [(0, 4), (4, 7), (7, 10)]
        >>> chunk_spans(10, chunk_size=4, overlap=1)
        [(0, 4), (3, 7), (6, 10)]
    """
    if n_units < 1:
        raise ValueError(f"n_units must be >= 1, got {n_units}")
    if overlap < 0:
        raise ValueError(f"overlap must be >= 0, got {overlap}")
    if (chunk_size is None) == (n_chunks is None):
        raise ValueError("give exactly one of chunk_size or n_chunks")
    if chunk_size is not None:
        if chunk_size <= overlap:
            raise ValueError(f"chunk_size must be > overlap ({overlap}), got {chunk_size}")
        k = 1 if n_units <= chunk_size else math.ceil((n_units - overlap) / (chunk_size - overlap))
    else:
        assert n_chunks is not None
        if n_chunks < 1:
            raise ValueError(f"n_chunks must be >= 1, got {n_chunks}")
        k = n_chunks
    total = n_units + (k - 1) * overlap  # units summed over chunks, overlaps counted twice
    base, extra = divmod(total, k)
    if base <= overlap and k > 1:
        raise ValueError(
            f"n_chunks={k} with overlap={overlap} leaves chunks of {base} units for a document "
            f"of {n_units}; every chunk must be longer than the overlap"
        )
    spans: list[tuple[int, int]] = []
    start = 0
    for i in range(k):
        end = start + base + (1 if i < extra else 0)
        spans.append((start, end))
        start = end - overlap
    return spans


def _encode(tokenizer: Any, text: str) -> list[int]:
    try:  # Hugging Face tokenizers would otherwise add BOS/EOS to every chunk
        return list(tokenizer.encode(text, add_special_tokens=False))
    except TypeError:
        return list(tokenizer.encode(text))


def split_document(
    text: str,
    *,
    chunk_size: int | None = None,
    n_chunks: int | None = None,
    overlap: int = 0,
    tokenizer: TextTokenizer | None = None,
) -> list[Chunk]:
    """Split ``text`` into balanced chunks, by tokens when a tokenizer is given, else by characters.

    See :func:`chunk_spans` for how the spans are chosen. By tokens, each chunk's text is
    ``tokenizer.decode`` of its token slice (special tokens are not added when encoding).

    Args:
        text: the document; must not be empty.
        chunk_size: maximum tokens (or characters) per chunk.
        n_chunks: number of chunks instead of ``chunk_size``.
        overlap: tokens (or characters) shared by consecutive chunks.
        tokenizer: anything with ``encode``/``decode``; ``None`` splits characters.

    Returns:
        The chunks in document order.

    Examples:
        >>> [c.text for c in split_document("abcdefghij", chunk_size=4)]
        ['abcd', 'efg', 'hij']
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if not text:
        raise ValueError("the document is empty")
    if tokenizer is None:
        spans = chunk_spans(len(text), chunk_size=chunk_size, n_chunks=n_chunks, overlap=overlap)
        return [Chunk(i, s, e, "chars", text[s:e]) for i, (s, e) in enumerate(spans)]
    if not hasattr(tokenizer, "decode"):
        raise TypeError("splitting by tokens needs a tokenizer with decode(ids) -> str")
    ids = _encode(tokenizer, text)
    if not ids:
        raise ValueError("the document encodes to zero tokens")
    spans = chunk_spans(len(ids), chunk_size=chunk_size, n_chunks=n_chunks, overlap=overlap)
    return [Chunk(i, s, e, "tokens", tokenizer.decode(ids[s:e])) for i, (s, e) in enumerate(spans)]


def count_units(text: str, tokenizer: TextTokenizer | None = None) -> int:
    """Length of ``text`` in the unit :func:`split_document` would use (tokens or characters)."""
    return len(text) if tokenizer is None else len(_encode(tokenizer, text))
