"""Noise-robust selection among retrieved candidates.

* :func:`label_consistency`: each candidate's agreement with the labels of its nearest
  neighbours among the candidates (similarity-weighted vote). A mislabelled example sits
  among correctly labelled near-duplicates, so its agreement is low.
* :func:`filter_consistent`: drop candidates whose agreement is below a threshold.
* :func:`deduplicate`: drop near-duplicates (cosine >= threshold) of better candidates.
* :func:`select_top` / :func:`select_balanced`: the final ``shots`` examples.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from lc_agents.contextnav.items import Candidate

__all__ = [
    "deduplicate",
    "filter_consistent",
    "label_consistency",
    "select_balanced",
    "select_top",
]


def _matrix(candidates: Sequence[Candidate]) -> np.ndarray:
    return np.stack([np.asarray(c.vector, dtype=np.float64) for c in candidates])


def label_consistency(candidates: Sequence[Candidate], neighbours: int = 5) -> np.ndarray:
    """Agreement of each candidate's label with its ``neighbours`` nearest candidates.

    ``agreement[i] = sum_{j in N(i), y_j = y_i} w_ij / sum_{j in N(i)} w_ij`` with
    ``w_ij = max(cos(v_i, v_j), 0) + 1e-6`` and ``N(i)`` the ``neighbours`` most similar
    other candidates.

    Args:
        candidates: labelled candidates with unit-norm vectors ``[dim]``.
        neighbours: neighbourhood size (>= 1; capped at ``len(candidates) - 1``).

    Returns:
        float64 ``[len(candidates)]`` in ``[0, 1]``; 1.0 for a lone candidate.

    Examples:
        >>> from lc_agents.contextnav.items import ContextItem
        >>> v = [np.array([1.0, 0.0]), np.array([0.99, 0.14]), np.array([0.98, 0.2])]
        >>> c = [Candidate(ContextItem(str(i), "t", lab), 1.0, x)
        ...      for i, (lab, x) in enumerate(zip("aab", v))]
        >>> label_consistency(c, neighbours=2).round(2).tolist()
        [0.5, 0.5, 0.0]
    """
    if neighbours < 1:
        raise ValueError(f"neighbours must be >= 1, got {neighbours}")
    n = len(candidates)
    if n <= 1:
        return np.ones(n)
    m = _matrix(candidates)
    sims = m @ m.T
    np.fill_diagonal(sims, -np.inf)
    k = min(neighbours, n - 1)
    labels = [c.item.label for c in candidates]
    out = np.empty(n)
    for i in range(n):
        nn = np.argsort(-sims[i], kind="stable")[:k]
        w = np.maximum(sims[i, nn], 0.0) + 1e-6
        agree = np.array([labels[j] == labels[i] for j in nn], dtype=np.float64)
        out[i] = float((w * agree).sum() / w.sum())
    return out


def filter_consistent(
    candidates: Sequence[Candidate], *, neighbours: int = 5, threshold: float = 0.5
) -> list[Candidate]:
    """Candidates whose :func:`label_consistency` is at least ``threshold``, each noted
    with its ``"consistency"``. If none passes, the single most consistent one is kept."""
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must lie in [0, 1], got {threshold}")
    if not candidates:
        return []
    scores = label_consistency(candidates, neighbours)
    noted = [c.noted("consistency", s) for c, s in zip(candidates, scores, strict=True)]
    kept = [c for c, s in zip(noted, scores, strict=True) if s >= threshold]
    return kept or [noted[int(np.argmax(scores))]]


def deduplicate(candidates: Sequence[Candidate], *, threshold: float = 0.95) -> list[Candidate]:
    """Greedy in score order: drop a candidate whose cosine to a kept one is >= ``threshold``."""
    if not -1.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must lie in [-1, 1], got {threshold}")
    kept: list[Candidate] = []
    for c in sorted(candidates, key=lambda c: -c.score):
        v = np.asarray(c.vector, dtype=np.float64)
        if all(float(v @ np.asarray(k.vector, dtype=np.float64)) < threshold for k in kept):
            kept.append(c)
    return kept


def _prompt_order(chosen: list[Candidate]) -> list[Candidate]:
    """Least similar first, so the closest example sits next to the query."""
    return sorted(chosen, key=lambda c: c.score)


def select_top(candidates: Sequence[Candidate], shots: int) -> list[Candidate]:
    """The ``shots`` highest-scoring candidates, in prompt order (closest last)."""
    if shots < 0:
        raise ValueError(f"shots must be >= 0, got {shots}")
    return _prompt_order(sorted(candidates, key=lambda c: -c.score)[:shots])


def select_balanced(candidates: Sequence[Candidate], shots: int) -> list[Candidate]:
    """Round-robin over labels (each label's candidates in score order, labels ordered by
    their best score): at most ``shots`` examples covering as many labels as possible."""
    if shots < 0:
        raise ValueError(f"shots must be >= 0, got {shots}")
    by_label: dict[str | None, list[Candidate]] = defaultdict(list)
    for c in sorted(candidates, key=lambda c: -c.score):
        by_label[c.item.label].append(c)
    queues = list(by_label.values())
    chosen: list[Candidate] = []
    while len(chosen) < shots and any(queues):
        for q in queues:
            if q and len(chosen) < shots:
                chosen.append(q.pop(0))
    return _prompt_order(chosen)
