"""Reward-model quality: stage accuracy, progress correlation and good-vs-failed ranking.

Example:
    >>> import numpy as np
    >>> spearman(np.array([0.1, 0.2, 0.3]), np.array([1.0, 5.0, 9.0]))
    1.0
    >>> ranking_auc(np.array([0.9, 0.8]), np.array([0.1, 0.85]))
    0.75
"""

from __future__ import annotations

import numpy as np


def stage_accuracy(predicted: np.ndarray, target: np.ndarray) -> float:
    """Fraction of frames whose predicted stage equals the annotated one."""
    predicted, target = np.asarray(predicted), np.asarray(target)
    if predicted.shape != target.shape or predicted.size == 0:
        raise ValueError(f"shapes {predicted.shape} and {target.shape} must match, non-empty")
    return float((predicted == target).mean())


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson correlation of two equal-length 1-D arrays (0 if either is constant)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or x.size < 2:
        raise ValueError(f"need two 1-D arrays of equal length >= 2; got {x.shape}, {y.shape}")
    xs, ys = x - x.mean(), y - y.mean()
    den = np.sqrt((xs**2).sum() * (ys**2).sum())
    return float((xs * ys).sum() / den) if den > 0 else 0.0


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(x.size)
    ranks[order] = np.arange(x.size)
    # average the ranks of ties
    _, inv, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inv, weights=ranks)
    return sums[inv] / counts[inv]


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman rank correlation (Pearson of the tie-averaged ranks)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    return pearson(_ranks(x), _ranks(y))


def ranking_auc(good: np.ndarray, bad: np.ndarray) -> float:
    """P(score of a good episode > score of a bad one), ties counting one half."""
    good, bad = np.asarray(good, dtype=float), np.asarray(bad, dtype=float)
    if good.size == 0 or bad.size == 0:
        raise ValueError("need at least one good and one bad score")
    diff = good[:, None] - bad[None, :]
    return float((diff > 0).mean() + 0.5 * (diff == 0).mean())
