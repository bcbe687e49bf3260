"""The nine formal tasks of "Is In-Context Learning Learning?" as k-shot probes.

Tasks (:data:`ICL_TASKS`): PARITY, pattern matching, reversal, stack, Hamiltonian
cycle, maze complete, maze solve, vending machine and vending machine (sum). Inputs
come from random walks on each task's automaton (or a randomised construction for
graphs and mazes) whose parameters shift with ``delta`` (:data:`DELTAS`; 0 is the
training distribution). :func:`make_icl_items` turns them into k-shot
:class:`~lc_evals.TaskItem` prompts in several styles (:data:`PROMPT_STYLES`);
:func:`check_label` re-derives any label from the input text alone.

Example:
    >>> from lc_evals.icl import make_icl_items, check_label
    >>> item = make_icl_items("stack", n=1, shots=4, delta=0.45, seed=7)[0]
    >>> check_label("stack", item.metadata["query"]) == item.answers[0]
    True
"""

from __future__ import annotations

from lc_evals.icl.base import DELTAS, IclExample
from lc_evals.icl.checkers import check_label
from lc_evals.icl.pool import (
    POOL_LABELS,
    IclPool,
    PoolExample,
    format_shots,
    make_icl_pool,
    make_pool_queries,
)
from lc_evals.icl.prompts import (
    MAX_SHOTS,
    PROMPT_STYLES,
    build_prompt,
    fit_shots,
    item_prompt,
    make_icl_items,
    preamble,
)
from lc_evals.icl.tasks import ICL_TASKS, SHIFTED_STATS, generate_examples

__all__ = [
    "DELTAS",
    "ICL_TASKS",
    "MAX_SHOTS",
    "POOL_LABELS",
    "PROMPT_STYLES",
    "SHIFTED_STATS",
    "IclExample",
    "IclPool",
    "PoolExample",
    "build_prompt",
    "check_label",
    "fit_shots",
    "format_shots",
    "generate_examples",
    "item_prompt",
    "make_icl_items",
    "make_icl_pool",
    "make_pool_queries",
    "preamble",
]
