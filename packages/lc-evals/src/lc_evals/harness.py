"""Run a system over a suite, append results as JSON Lines, resume interrupted runs.

A *system* is either a :class:`~lc_evals.types.ChatModel` (called with one user message
made by :func:`render_prompt`) or any callable ``(TaskItem) -> str``.

Results are appended to ``results_path`` one line per finished item, in completion
order, flushed at once. Rerunning with the same file skips the items already in it, so
an interrupted run resumes without redoing finished work and the file holds every item
exactly once.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lc_evals.executors import Executor, make_executor
from lc_evals.results import Result, load_results
from lc_evals.scorers import Scorer, default_scorer_name, get_scorer
from lc_evals.types import ChatModel, TaskItem

System = ChatModel | Callable[[TaskItem], str]

PROMPT_TEMPLATE = "{context}\n\n{question}"


def render_prompt(item: TaskItem, template: str = PROMPT_TEMPLATE) -> str:
    """The user message sent to a chat model: the context, a blank line, the question."""
    return template.format(context=item.context, question=item.question)


class _ChatPredictor:
    """Picklable adapter ``TaskItem -> str`` around a :class:`ChatModel`."""

    def __init__(self, model: ChatModel, template: str, options: dict[str, Any]) -> None:
        self.model = model
        self.template = template
        self.options = options

    def __call__(self, item: TaskItem) -> str:
        messages = [{"role": "user", "content": render_prompt(item, self.template)}]
        return self.model.chat(messages, **self.options)  # type: ignore[arg-type]


def as_predictor(
    system: System | Any, *, template: str = PROMPT_TEMPLATE, **chat_options: Any
) -> Callable[[TaskItem], str]:
    """Turn a system into ``(TaskItem) -> str``.

    Examples:
        >>> class Echo:
        ...     def chat(self, messages, **options):
        ...         return messages[-1]["content"].split()[-1]
        >>> from lc_evals import TaskItem
        >>> as_predictor(Echo())(TaskItem("t-0-0", "t", "ctx", "Q?", ("a",)))
        'Q?'
    """
    if isinstance(system, ChatModel):
        return _ChatPredictor(system, template, chat_options)
    if callable(system):
        return system
    raise TypeError(
        f"system must be a ChatModel (with .chat) or a callable (TaskItem) -> str, got {type(system).__name__}"
    )


class _Timed:
    def __init__(self, predict: Callable[[TaskItem], str]) -> None:
        self.predict = predict

    def __call__(self, item: TaskItem) -> tuple[str, float]:
        start = time.perf_counter()
        out = self.predict(item)
        if not isinstance(out, str):
            raise TypeError(
                f"system returned {type(out).__name__} for item {item.id!r}; expected str"
            )
        return out, time.perf_counter() - start


def _resolve_scorer(item: TaskItem, scorer: str | Scorer | None) -> tuple[str, Scorer]:
    if scorer is None:
        name = item.metadata.get("scorer") or default_scorer_name(item.task)
        return name, get_scorer(name)
    if isinstance(scorer, str):
        return scorer, get_scorer(scorer)
    return getattr(scorer, "__name__", "custom"), scorer


def run(
    system: System | Any,
    items: Sequence[TaskItem],
    results_path: str | Path | None = None,
    *,
    executor: str | Executor = "local",
    workers: int = 1,
    scorer: str | Scorer | None = None,
    progress: bool = False,
    template: str = PROMPT_TEMPLATE,
    **chat_options: Any,
) -> list[Result]:
    """Evaluate ``system`` on ``items``; return one :class:`Result` per item, in suite order.

    Args:
        system: a ChatModel or a callable ``(TaskItem) -> str``.
        items: the suite; ids must be unique.
        results_path: JSON Lines file to append to and resume from (``None``: keep in memory).
        executor: ``"local"`` (threads when ``workers > 1``), ``"serial"``, ``"ray"``, or an
            :class:`~lc_evals.executors.Executor`.
        workers: threads of the local executor.
        scorer: scorer name or function; default: each task's default scorer.
        progress: show a progress bar (rich).
        template: prompt template for chat models (``{context}``, ``{question}``).
        **chat_options: passed to ``ChatModel.chat`` (``max_tokens``, ``temperature`` ...).

    Raises:
        ValueError: duplicate item ids; :class:`~lc_evals.errors.ResultsFileError` for a
            corrupt results file. An exception raised by the system propagates after the
            results finished so far have been written.

    Examples:
        >>> import lc_evals
        >>> items = lc_evals.generate("niah_single", n=2, length=1000, seed=0)
        >>> oracle = lambda item: item.answers[0]
        >>> [r.score for r in run(oracle, items)]
        [1.0, 1.0]
    """
    ids = [item.id for item in items]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"item ids must be unique within a suite; duplicated: {dup[:5]}")
    predict = _Timed(as_predictor(system, template=template, **chat_options))
    done: dict[str, Result] = {}
    path = Path(results_path) if results_path is not None else None
    if path is not None and path.exists():
        done = {r.id: r for r in load_results(path)}
    todo = [item for item in items if item.id not in done]
    runner = make_executor(executor, workers)
    lock = threading.Lock()
    fh = None
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = path.open("a", encoding="utf-8")
    bar = None
    if progress and todo:
        from rich.progress import Progress

        bar = Progress(transient=False)
        bar.start()
        task_id = bar.add_task("evaluating", total=len(todo))
    try:
        for item, (prediction, latency) in runner.imap_unordered(predict, todo):
            name, fn = _resolve_scorer(item, scorer)
            result = Result(
                id=item.id,
                task=item.task,
                prediction=prediction,
                score=float(fn(prediction, item.answers)),
                scorer=name,
                answers=item.answers,
                latency_s=latency,
                metadata=item.metadata,
            )
            with lock:
                if fh is not None:
                    fh.write(json.dumps(result.to_dict(), ensure_ascii=False) + "\n")
                    fh.flush()
                done[item.id] = result
            if bar is not None:
                bar.advance(task_id)
    finally:
        if fh is not None:
            fh.close()
        if bar is not None:
            bar.stop()
    return [done[i] for i in ids]
