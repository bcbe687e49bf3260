"""The similarity profile LDAR reads: per-passage features of a ranked similarity list.

LDAR does not read passage text: it looks at how the query's similarities to the
retrieved passages are distributed, which says whether the top passages stand out (a
clear answer) or form a plateau of near-misses (likely distractors). For similarities
sorted best first ``s_0 >= s_1 >= ... >= s_{n-1}`` each passage ``i`` gets
:data:`FEATURE_NAMES`: its similarity, its distance to the best, its z-score, the gaps to
its neighbours in the ranking, its rank (as a fraction and as ``1/(i+1)``), and four
list-level values repeated on every row (best, mean, spread, top-1 minus top-2 gap).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["FEATURE_NAMES", "N_FEATURES", "similarity_features", "sort_similarities"]

FEATURE_NAMES: tuple[str, ...] = (
    "similarity",
    "minus_best",
    "z_score",
    "gap_previous",
    "gap_next",
    "rank_fraction",
    "inverse_rank",
    "list_best",
    "list_mean",
    "list_std",
    "list_top_gap",
)
N_FEATURES = len(FEATURE_NAMES)


def sort_similarities(similarities: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(sorted_similarities, order)``: best first; ``order[r]`` is the passage at rank ``r``.

    Ties keep the passages' original order.
    """
    s = np.asarray(similarities, dtype=np.float64).reshape(-1)
    if s.size == 0:
        raise ValueError("similarities must not be empty")
    if not np.all(np.isfinite(s)):
        raise ValueError("similarities must be finite")
    order = np.argsort(-s, kind="stable")
    return s[order], order


def similarity_features(sorted_similarities: Sequence[float] | np.ndarray) -> np.ndarray:
    """Features ``[n, N_FEATURES]`` (float32) of a similarity list sorted best first.

    Examples:
        >>> f = similarity_features([0.9, 0.5, 0.4])
        >>> f.shape, float(f[0, 1]), round(float(f[1, 3]), 2)
        ((3, 11), 0.0, 0.4)
    """
    s = np.asarray(sorted_similarities, dtype=np.float64).reshape(-1)
    n = s.size
    if n == 0:
        raise ValueError("similarities must not be empty")
    if np.any(np.diff(s) > 1e-9):
        raise ValueError("similarities must be sorted best first (use sort_similarities)")
    mean, std = float(s.mean()), float(s.std())
    prev_gap = np.concatenate([[0.0], s[:-1] - s[1:]])
    next_gap = np.concatenate([s[:-1] - s[1:], [0.0]])
    ranks = np.arange(n, dtype=np.float64)
    top_gap = float(s[0] - s[1]) if n > 1 else 0.0
    cols = [
        s,
        s - s[0],
        (s - mean) / (std + 1e-6),
        prev_gap,
        next_gap,
        ranks / max(n - 1, 1),
        1.0 / (ranks + 1.0),
        np.full(n, s[0]),
        np.full(n, mean),
        np.full(n, std),
        np.full(n, top_gap),
    ]
    return np.stack(cols, axis=1).astype(np.float32)
