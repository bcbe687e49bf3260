"""Shared pieces of the formal in-context-learning tasks: examples, shifts, random walks.

Every task draws its inputs from a probabilistic automaton (or a small randomised
construction) whose parameters depend on a distribution-shift value ``delta``. At
``delta = 0`` the parameters are the training (in-distribution) ones, ``P = Q(0)``;
larger ``delta`` moves them further away, as in "Is In-Context Learning Learning?"
(de Wynter, 2025), which evaluates ``delta`` in :data:`DELTAS`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

DELTAS: tuple[float, ...] = (0.0, 0.2, 0.45, 0.65, 0.85)
"""The distribution-shift values of the paper; 0 is the in-distribution test set."""

POSITIVE = "1"
NEGATIVE = "0"


@dataclass(frozen=True)
class IclExample:
    """One labelled input of a formal task.

    Attributes:
        task: task name (one of :data:`lc_evals.icl.ICL_TASKS`).
        input: the text shown to the model (a string, a graph plus a path, a maze ...).
        label: the expected output: ``"1"``/``"0"`` for the decision tasks, the final
            balance (a decimal string) for ``vending_machine_sum``.
        delta: the shift the example was drawn at (0 = in distribution).
        stats: generator facts used to measure the shift (length, symbol shares ...).
    """

    task: str
    input: str
    label: str
    delta: float
    stats: dict[str, float] = field(default_factory=dict)


def check_delta(delta: float) -> float:
    """Validate a shift value (``0 <= delta <= 0.9``) and return it as a float."""
    value = float(delta)
    if not 0.0 <= value <= 0.9:
        raise ValueError(f"delta must lie in [0, 0.9] (paper values {DELTAS}), got {delta!r}")
    return value


def check_label_request(label: str | None, task: str) -> None:
    """Raise ``ValueError`` unless ``label`` is ``None``, ``"1"`` or ``"0"``."""
    if label not in (None, POSITIVE, NEGATIVE):
        raise ValueError(f"{task}: label must be None, {POSITIVE!r} or {NEGATIVE!r}, got {label!r}")


def pick_label(rng: np.random.Generator, label: str | None) -> str:
    """``label`` if given, else a fair coin between ``"1"`` and ``"0"``."""
    if label is not None:
        return label
    return POSITIVE if rng.random() < 0.5 else NEGATIVE


def categorical(rng: np.random.Generator, weights: Sequence[float]) -> int:
    """Index drawn with probability proportional to ``weights`` (non-negative, sum > 0)."""
    w = np.asarray(weights, dtype=np.float64)
    total = w.sum()
    if total <= 0 or np.any(w < 0):
        raise ValueError(f"weights must be non-negative with a positive sum, got {weights!r}")
    return int(rng.choice(len(w), p=w / total))


def resample(
    rng: np.random.Generator,
    draw: Callable[[np.random.Generator], Any | None],
    *,
    what: str,
    max_tries: int = 10_000,
) -> Any:
    """Call ``draw(rng)`` until it returns something other than ``None``.

    Rejection sampling used by every generator (too-short walks, graphs without a
    Hamiltonian cycle ...). Raises ``RuntimeError`` after ``max_tries`` failures, which
    only a broken parameter setting can cause.
    """
    for _ in range(max_tries):
        out = draw(rng)
        if out is not None:
            return out
    raise RuntimeError(f"{what}: no acceptable sample in {max_tries} tries")
