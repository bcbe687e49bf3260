"""Evaluation metrics: macro AUC-PRC (the paper's metric) and accuracy."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["accuracy", "auc_prc"]


def _check(y_true: ArrayLike, proba: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(y_true)
    p = np.asarray(proba, dtype=np.float64)
    if p.ndim != 2 or y.ndim != 1 or p.shape[0] != y.shape[0]:
        raise ValueError(f"need y_true [n] and proba [n, classes], got {y.shape} and {p.shape}")
    if y.size and (y.min() < 0 or y.max() >= p.shape[1]):
        raise ValueError(f"class ids must lie in [0, {p.shape[1] - 1}]")
    return y.astype(np.int64), p


def auc_prc(y_true: ArrayLike, proba: ArrayLike) -> float:
    """Area under the precision-recall curve, one-vs-rest, averaged over classes.

    For each class the precision-recall curve of its probability column is integrated
    with the trapezoid rule (``sklearn.metrics.auc(recall, precision)``), as in the
    paper's evaluation code; classes absent from ``y_true`` are skipped. Binary tasks
    average both classes.

    Args:
        y_true: ``[n]`` class ids.
        proba: ``[n, classes]`` predicted probabilities.

    Returns:
        AUC-PRC in ``[0, 1]``.

    Example:
        >>> auc_prc([0, 1, 1], [[0.9, 0.1], [0.2, 0.8], [0.3, 0.7]])
        1.0
    """
    from sklearn.metrics import auc, precision_recall_curve

    y, p = _check(y_true, proba)
    scores = []
    for c in range(p.shape[1]):
        positive = y == c
        if not positive.any():
            continue
        precision, recall, _ = precision_recall_curve(positive.astype(int), p[:, c])
        scores.append(auc(recall, precision))
    if not scores:
        raise ValueError("y_true is empty")
    return float(np.mean(scores))


def accuracy(y_true: ArrayLike, proba: ArrayLike) -> float:
    """Share of rows whose arg-max class equals ``y_true``.

    Example:
        >>> accuracy([0, 1], [[0.6, 0.4], [0.7, 0.3]])
        0.5
    """
    y, p = _check(y_true, proba)
    return float(np.mean(p.argmax(axis=1) == y))
