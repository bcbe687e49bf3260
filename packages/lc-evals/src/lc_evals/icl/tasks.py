"""Registry of the nine formal tasks and deterministic example sets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lc_evals.icl.base import IclExample, check_delta, check_label_request
from lc_evals.icl.graphs import sample_hamiltonian
from lc_evals.icl.mazes import sample_maze_complete, sample_maze_solve
from lc_evals.icl.strings import (
    sample_parity,
    sample_pattern_matching,
    sample_reversal,
    sample_stack,
)
from lc_evals.icl.vending import sample_vending_machine, sample_vending_machine_sum

Sampler = Callable[[np.random.Generator, float, "str | None"], IclExample]


@dataclass(frozen=True)
class IclTask:
    """A task: its name, its sampler, the statistic of its inputs that ``delta`` shifts
    (a key of :attr:`IclExample.stats`) and whether its labels are classes or numbers."""

    name: str
    sample: Sampler
    shifted: str
    binary: bool = True


_TASK_LIST = (
    IclTask("parity", sample_parity, "zero_fraction"),
    IclTask("pattern_matching", sample_pattern_matching, "length"),
    IclTask("reversal", sample_reversal, "repeat_fraction"),
    IclTask("stack", sample_stack, "push_fraction"),
    IclTask("hamiltonian", sample_hamiltonian, "density"),
    IclTask("maze_complete", sample_maze_complete, "anisotropy"),
    IclTask("maze_solve", sample_maze_solve, "anisotropy"),
    IclTask("vending_machine", sample_vending_machine, "coin5_fraction"),
    IclTask("vending_machine_sum", sample_vending_machine_sum, "coin5_fraction", binary=False),
)

TASKS: dict[str, IclTask] = {t.name: t for t in _TASK_LIST}
ICL_TASKS: tuple[str, ...] = tuple(TASKS)
"""The nine task names, in the paper's order."""
SHIFTED_STATS: dict[str, str] = {t.name: t.shifted for t in _TASK_LIST}
"""The statistic of each task's inputs that its distribution shift acts on."""


def get_task(name: str) -> IclTask:
    """Look a task up by name; unknown names raise ``ValueError`` listing the known ones."""
    try:
        return TASKS[name]
    except KeyError:
        raise ValueError(f"unknown ICL task {name!r}; known: {list(ICL_TASKS)}") from None


def task_rng(seed: int, task: str, *path: int) -> np.random.Generator:
    """A generator keyed by ``(seed, task, *path)``: independent streams per item and shot."""
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    return np.random.default_rng([seed, ICL_TASKS.index(task), *path])


def generate_examples(
    task: str,
    n: int,
    *,
    delta: float = 0.0,
    seed: int = 0,
    label: str | None = None,
) -> list[IclExample]:
    """``n`` examples of ``task`` at shift ``delta``, deterministic in ``seed``.

    Args:
        task: one of :data:`ICL_TASKS`.
        n: number of examples (>= 0).
        delta: distribution shift; 0 is the training distribution.
        seed: non-negative seed; example ``i`` depends only on ``(seed, task, i)``.
        label: force every label (``"1"``/``"0"``); ``None`` draws them fairly.

    Example:
        >>> ex = generate_examples("parity", 2, delta=0.45, seed=3)
        >>> all(e.label in ("0", "1") for e in ex), len(ex)
        (True, 2)
    """
    spec = get_task(task)
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    delta = check_delta(delta)
    if spec.binary:
        check_label_request(label, task)
    return [spec.sample(task_rng(seed, task, 0, i), delta, label) for i in range(n)]
