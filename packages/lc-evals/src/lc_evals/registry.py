"""The task registry and the single entry point :func:`generate`.

Every task is a generator function ``fn(n, length, seed, tokenizer, **options) ->
list[TaskItem]`` registered under a name together with its default scorer. Other
modules (and users) add tasks with :func:`register_task`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lc_evals.fingerprint import tokenizer_identity
from lc_evals.types import TaskItem, Tokenizer

Generator = Callable[..., list[TaskItem]]


@dataclass(frozen=True)
class TaskSpec:
    """A registered task: its name, generator, default scorer name and a one-line summary."""

    name: str
    generator: Generator
    scorer: str
    description: str = ""


_REGISTRY: dict[str, TaskSpec] = {}
_BUILTINS_LOADED = False


def register_task(
    name: str,
    generator: Generator,
    *,
    scorer: str = "contains_all",
    description: str = "",
    replace: bool = False,
) -> TaskSpec:
    """Register ``generator`` under ``name``.

    Args:
        name: task name used by :func:`generate` and stored in ``TaskItem.task``.
        generator: ``fn(n, length, seed, tokenizer, **options) -> list[TaskItem]``.
        scorer: name of the default scorer (see :data:`lc_evals.scorers.SCORERS`).
        description: one line shown by ``lc-evals tasks``.
        replace: allow replacing an existing registration.

    Examples:
        >>> from lc_evals import TaskItem, register_task
        >>> def echo(n, length, seed, tokenizer=None):
        ...     return [TaskItem(f"echo-{seed}-{i}", "echo", "x" * length, "?", ("x",)) for i in range(n)]
        >>> _ = register_task("echo_demo", echo, scorer="exact_match", replace=True)
    """
    if not name or not isinstance(name, str):
        raise ValueError(f"task name must be a non-empty string, got {name!r}")
    if not callable(generator):
        raise TypeError(f"generator for task {name!r} must be callable")
    if name in _REGISTRY and not replace:
        raise ValueError(f"task {name!r} is already registered (pass replace=True to override)")
    spec = TaskSpec(name=name, generator=generator, scorer=scorer, description=description)
    _REGISTRY[name] = spec
    return spec


def _load_builtins() -> None:
    global _BUILTINS_LOADED
    if not _BUILTINS_LOADED:
        _BUILTINS_LOADED = True
        from lc_evals.tasks import register_builtin_tasks

        register_builtin_tasks()


def available_tasks() -> list[str]:
    """Sorted names of every registered task."""
    _load_builtins()
    return sorted(_REGISTRY)


def task_spec(name: str) -> TaskSpec:
    """The :class:`TaskSpec` of ``name``; ``ValueError`` listing valid names if unknown."""
    _load_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"unknown task {name!r}; valid tasks: {', '.join(sorted(_REGISTRY))}"
        ) from None


def generate(
    task: str,
    n: int,
    length: int,
    seed: int,
    tokenizer: Tokenizer | Any | None = None,
    **options: Any,
) -> list[TaskItem]:
    """Generate ``n`` items of ``task`` whose contexts are ``length`` long.

    Args:
        task: a registered task name (see :func:`available_tasks`).
        n: number of items (>= 1).
        length: target context length in tokens of ``tokenizer`` (characters if ``None``).
            The context never exceeds it and, for a few hundred tokens or more, lands
            within 1% of it.
        seed: explicit seed (>= 0); the same arguments always give the same items, and item
            ``i`` does not depend on ``n``.
        tokenizer: anything with ``encode(text) -> list[int]``.
        **options: task options, e.g. ``haystack``, ``value_kind``, ``depth`` for NIAH.

    Returns:
        ``n`` :class:`~lc_evals.types.TaskItem` with ids ``"<task>-<seed>-<index>"``;
        with a tokenizer, ``metadata["tokenizer"]`` names it
        (:func:`~lc_evals.fingerprint.tokenizer_identity`).

    Raises:
        ValueError: unknown task (the message lists valid names), bad option values,
            or an impossible length (e.g. the needle is longer than the context).

    Examples:
        >>> items = generate("niah_single", n=1, length=2000, seed=0, haystack="essay")
        >>> items[0].answers[0] in items[0].context
        True
    """
    spec = task_spec(task)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if not isinstance(length, int) or isinstance(length, bool) or length < 1:
        raise ValueError(f"length must be a positive integer, got {length!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0 (as for every task), got {seed!r}")
    params = inspect.signature(spec.generator).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        allowed = [k for k in params if k not in ("n", "length", "seed", "tokenizer")]
        unknown = sorted(set(options) - set(allowed))
        if unknown:
            raise ValueError(f"task {task!r} got unknown option(s) {unknown}; allowed: {allowed}")
    items = spec.generator(n=n, length=length, seed=seed, tokenizer=tokenizer, **options)
    if tokenizer is not None:
        ident = tokenizer_identity(tokenizer)
        for item in items:  # part of the item's fingerprint: lengths depend on it
            item.metadata.setdefault("tokenizer", ident)
    return items
