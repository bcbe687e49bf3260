"""Suites: the cross product of tasks, lengths and depths, with unique item ids."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Sequence
from typing import Any

from lc_evals.registry import generate, task_spec
from lc_evals.types import TaskItem, Tokenizer


def _depth_label(depth: float, depths: Sequence[float]) -> str:
    """``0.5`` -> ``"0.5"``; the shortest form that tells ``depth`` from every other depth."""
    short = f"{depth:g}"
    if sum(f"{d:g}" == short for d in depths) > 1:
        return repr(float(depth))
    return short


def make_suite(
    tasks: Sequence[str],
    lengths: Sequence[int],
    *,
    n: int,
    seed: int,
    depths: Sequence[float] | None = None,
    tokenizer: Tokenizer | Any | None = None,
    **options: Any,
) -> list[TaskItem]:
    """Items for every (task, length[, depth]) cell, ``n`` per cell.

    Ids are ``"<task>/L<length>[/d<depth>]/<index>"``, unique in the suite (repeated
    tasks, lengths or depths are refused); with ``depths`` the ``depth`` option
    is set per cell for tasks that take one (NIAH, ``kv_retrieval``); other tasks get one
    cell per length. The same
    ``seed`` is used in every cell, so a cell differs from another only in its length or
    depth.

    Examples:
        >>> suite = make_suite(["niah_single"], [500, 1000], n=1, seed=0, depths=[0.0, 1.0])
        >>> [item.id for item in suite]
        ['niah_single/L500/d0/0', 'niah_single/L500/d1/0', 'niah_single/L1000/d0/0', 'niah_single/L1000/d1/0']
    """
    if not tasks or not lengths:
        raise ValueError("a suite needs at least one task and one length")
    for name, values in (("tasks", tasks), ("lengths", lengths), ("depths", depths or [])):
        repeated = sorted({v for v in values if list(values).count(v) > 1}, key=str)
        if repeated:
            raise ValueError(
                f"make_suite {name} must not repeat (ids would clash), repeated: {repeated}"
            )
    items: list[TaskItem] = []
    for task in tasks:
        params = inspect.signature(task_spec(task).generator).parameters
        takes_depth = "depth" in params or any(
            p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()
        )
        cell_depths: Sequence[float | None] = (
            depths if depths is not None and takes_depth else [None]
        )
        for length in lengths:
            for depth in cell_depths:
                opts = dict(options)
                cell = f"{task}/L{length}"
                if depth is not None:
                    opts["depth"] = depth
                    cell += f"/d{_depth_label(depth, depths or [])}"
                for item in generate(
                    task, n=n, length=length, seed=seed, tokenizer=tokenizer, **opts
                ):
                    items.append(
                        dataclasses.replace(item, id=f"{cell}/{item.metadata.get('index', 0)}")
                    )
    return items
