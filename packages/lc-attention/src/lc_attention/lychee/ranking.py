"""Turning trained gates into hard roles: averaged scores, budget schedule, selection.

Under a Lagrangian budget most HardKuma gates end training pinned at a parameter bound,
so the last step's scores tie and an exact-budget selection would fall back on head
order. [ScoreAverage][lc_attention.lychee.ranking.ScoreAverage] keeps, per gate, the
mean of a score over all steps and over a late window (by default the second half); the
selection ranks by the late mean first and breaks its ties with the whole-run mean, so
a gate that closed later (resisted the budget longer) ranks higher even when both end
at the same bound. [annealed_target][lc_attention.lychee.ranking.annealed_target] moves
the budget from where the gates start to its target over a warm-up, so the multiplier
tracks a small gap instead of integrating a large one and overshooting.

Example:
    >>> import torch
    >>> avg = ScoreAverage(shape=(1, 3), steps=4, score_from=0.5)
    >>> for step, s in enumerate([[3.0, 1.0, 1.0], [2.0, 2.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]):
    ...     avg.update(step, torch.tensor([s]))
    >>> avg.late().tolist(), avg.overall().tolist()
    ([[0.0, 0.0, 1.0]], [[1.25, 0.75, 1.0]])
    >>> select_by_rank(avg.late(), avg.overall(), 2, torch.zeros(1, 3, dtype=torch.bool)).tolist()
    [[True, False, True]]
"""

from __future__ import annotations

import math

import torch


class ScoreAverage:
    """Running means of a per-gate score over all steps and over the late steps.

    Args:
        shape: shape of the score tensor (e.g. ``(L, H)``).
        steps: total number of training steps ``S``.
        score_from: the late window is steps ``>= floor(score_from * S)`` (0 = every step,
            0.5 = the second half); at least the last step is always in it.

    Raises:
        ValueError: ``steps < 1`` or ``score_from`` outside ``[0, 1]``.
    """

    def __init__(self, shape: tuple[int, ...], steps: int, score_from: float = 0.5) -> None:
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        if not 0.0 <= score_from <= 1.0:
            raise ValueError(f"score_from must be in [0, 1], got {score_from}")
        self.start = min(steps - 1, math.floor(score_from * steps))
        self._all = torch.zeros(shape, dtype=torch.float64)
        self._late = torch.zeros(shape, dtype=torch.float64)
        self._n_all = 0
        self._n_late = 0

    def update(self, step: int, score: torch.Tensor) -> None:
        """Add one step's score (any device; finite values)."""
        s = score.detach().to("cpu", torch.float64)
        self._all += s
        self._n_all += 1
        if step >= self.start:
            self._late += s
            self._n_late += 1

    def overall(self) -> torch.Tensor:
        """Mean over every step seen (float64, CPU)."""
        return self._all / max(self._n_all, 1)

    def late(self) -> torch.Tensor:
        """Mean over the late window (float64, CPU); the overall mean if it is empty."""
        if self._n_late == 0:
            return self.overall()
        return self._late / self._n_late


def select_by_rank(
    primary: torch.Tensor, secondary: torch.Tensor, budget: int, fixed: torch.Tensor
) -> torch.Tensor:
    """Keep ``budget`` units: all ``fixed`` ones, then the best by ``(primary, secondary)``.

    Ranking is lexicographic, larger first: ``primary`` decides, ``secondary`` breaks its
    ties, and remaining ties go to the lower flat index.

    Args:
        primary: ``[...]`` scores.
        secondary: ``[...]`` tie-breaking scores, same shape.
        budget: units to keep, ``fixed.sum() <= budget <= fixed.numel()``.
        fixed: ``[...]`` bool, units always kept.

    Returns:
        Bool mask of ``primary``'s shape with exactly ``budget`` True entries.

    Raises:
        ValueError: mismatched shapes or a budget outside the allowed range.
    """
    if primary.shape != secondary.shape or primary.shape != fixed.shape:
        raise ValueError(
            f"primary, secondary and fixed must share one shape, got {tuple(primary.shape)}, "
            f"{tuple(secondary.shape)}, {tuple(fixed.shape)}"
        )
    n_fixed, total = int(fixed.sum()), fixed.numel()
    if not n_fixed <= budget <= total:
        raise ValueError(
            f"budget must be in [{n_fixed}, {total}] (fixed units count), got {budget}"
        )
    p = primary.detach().flatten().cpu().double()
    s = secondary.detach().flatten().cpu().double()
    f = fixed.flatten().cpu()
    order = torch.argsort(s, descending=True, stable=True)
    order = order[torch.argsort(p[order], descending=True, stable=True)]
    order = torch.cat([order[f[order]], order[~f[order]]])  # fixed units first
    keep = torch.zeros(total, dtype=torch.bool)
    keep[order[:budget]] = True
    return keep.view(fixed.shape).to(fixed.device)


def annealed_target(step: int, start: float, target: float, warmup: int) -> float:
    """Budget at ``step``: linear from ``start`` (step 0) to ``target`` (step ``warmup``),
    then ``target``; ``warmup = 0`` means ``target`` from the first step.

    Example:
        >>> annealed_target(5, 1.0, 0.5, 10)
        0.75
    """
    if warmup <= 0 or step >= warmup:
        return target
    return start + (target - start) * step / warmup
