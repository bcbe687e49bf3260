"""Bands: the actions of LDAR, contiguous ranges of the similarity ranking.

A :class:`Band` ``[start, end)`` selects the passages ranked ``start`` to ``end - 1``
(0 = most similar). Top-k is the band ``[0, k)``; full context is ``[0, n)``. Skipping
the first ranks lets the retriever step over a near-miss passage that out-scores the
gold one, which top-k cannot do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Band", "default_bands"]


@dataclass(frozen=True, order=True)
class Band:
    """Passages ranked ``start <= r < end`` (0 = most similar)."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if not 0 <= self.start < self.end:
            raise ValueError(f"a band needs 0 <= start < end, got [{self.start}, {self.end})")

    def ranks(self, n: int) -> list[int]:
        """The ranks selected in a list of ``n`` passages (clipped at ``n``)."""
        return list(range(self.start, min(self.end, n)))

    def fits(self, n: int) -> bool:
        """Whether the band lies within ``n`` passages."""
        return self.end <= n

    def __str__(self) -> str:
        return f"[{self.start},{self.end})"


def default_bands(n: int, *, max_skip: int = 1, max_width: int = 3) -> list[Band]:
    """Every top-k band ``[0, k)`` for ``k = 1..n`` plus the bands that skip up to
    ``max_skip`` leading ranks with width up to ``max_width``.

    Examples:
        >>> [str(b) for b in default_bands(4)]
        ['[0,1)', '[0,2)', '[0,3)', '[0,4)', '[1,2)', '[1,3)', '[1,4)']
    """
    if n < 1 or max_skip < 0 or max_width < 1:
        raise ValueError(
            f"need n >= 1, max_skip >= 0, max_width >= 1; got {n}, {max_skip}, {max_width}"
        )
    bands = [Band(0, k) for k in range(1, n + 1)]
    for s in range(1, min(max_skip, n - 1) + 1):
        bands += [Band(s, s + w) for w in range(1, max_width + 1) if s + w <= n]
    return sorted(set(bands))


def band_index(bands: Sequence[Band], band: Band) -> int:
    """Position of ``band`` in ``bands`` (``ValueError`` if absent)."""
    try:
        return list(bands).index(band)
    except ValueError:
        raise ValueError(f"band {band} is not among {[str(b) for b in bands]}") from None
