"""Run a system over a suite, append results as JSON Lines, resume interrupted runs.

A *system* is either a :class:`~lc_evals.types.ChatModel` (called with one user message
made by :func:`render_prompt`) or any callable ``(TaskItem) -> str``.

Results are appended to ``results_path`` one line per finished item, in completion
order, flushed at once. Rerunning with the same file skips the items already in it, so
an interrupted run resumes without redoing finished work and the file holds every item
exactly once. A line is reused only if its fingerprints say it was produced from the
same item by the same system and settings; a run manifest beside the file records who
ran what, where and when.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from lc_evals.errors import StaleResultsError
from lc_evals.executors import Executor, make_executor
from lc_evals.fingerprint import declared_identity, item_fingerprint, run_fingerprint
from lc_evals.manifest import RunManifest
from lc_evals.prompts import PROMPT_TEMPLATE, render_prompt
from lc_evals.results import Result, load_results, repair_torn_tail
from lc_evals.scorers import Scorer, default_scorer_name, get_scorer
from lc_evals.types import ChatModel, TaskItem

System = ChatModel | Callable[[TaskItem], str]


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


OnMismatch = Literal["error", "rerun"]


def _stale_reason(result: Result, item_hash: str, run_hash: str) -> str | None:
    if not result.item_hash or not result.run_hash:
        return "no fingerprint"
    if result.item_hash != item_hash:
        return "item"
    if result.run_hash != run_hash:
        return "system"
    return None


def _set_aside(path: Path, keep: list[Result], stale: list[Result]) -> Path:
    """Rewrite ``path`` with ``keep`` only; append ``stale`` to ``<stem>.stale.jsonl``."""
    aside = path.with_name(path.stem + ".stale.jsonl")
    with aside.open("a", encoding="utf-8") as fh:
        for r in stale:
            fh.write(json.dumps(r.to_dict(), ensure_ascii=False) + "\n")
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for r in keep:
            fh.write(json.dumps(r.to_dict(), ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return aside


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
    system_id: Any = None,
    on_mismatch: OnMismatch = "error",
    manifest: bool = True,
    **chat_options: Any,
) -> list[Result]:
    """Evaluate ``system`` on ``items``; return one :class:`Result` per item, in suite order.

    Every result records two fingerprints: one of its item (task, context, question,
    answers and metadata, which hold the seed, options and tokenizer) and one of the run
    (the system's identity, the template for chat models, ``chat_options`` and the
    scorer). Resuming from ``results_path`` reuses a line only when both match the
    current item and run. A truncated last line (a writer killed mid-line) is dropped
    with a :class:`~lc_evals.errors.ResultsFileWarning`; everything before it is kept.

    Args:
        system: a ChatModel or a callable ``(TaskItem) -> str``.
        items: the suite; ids must be unique.
        results_path: JSON Lines file to append to and resume from (``None``: keep in memory).
        executor: ``"local"`` (threads when ``workers > 1``), ``"serial"``, ``"ray"``, or an
            :class:`~lc_evals.executors.Executor`.
        workers: threads of the local executor.
        scorer: scorer name or function; default: each task's default scorer.
        progress: show a progress bar (rich).
        template: prompt template for chat models (``{context}``, ``{question}``); the
            default renders an item that carries its own prompt (RULER's wording) with
            it (see :func:`~lc_evals.prompts.render_prompt`).
        system_id: the system's identity for the fingerprint (anything JSON-serializable);
            default: its ``identity`` attribute or method, else its import path.
        on_mismatch: what to do with results in the file that another item or run
            produced: ``"error"`` raises :class:`~lc_evals.errors.StaleResultsError`;
            ``"rerun"`` moves them to ``<stem>.stale.jsonl`` and evaluates those items
            again.
        manifest: write ``<stem>.manifest.json`` beside ``results_path`` (see
            :mod:`lc_evals.manifest`).
        **chat_options: passed to ``ChatModel.chat`` (``max_tokens``, ``temperature`` ...).

    Raises:
        ValueError: duplicate item ids; :class:`~lc_evals.errors.ResultsFileError` for a
            corrupt results file; :class:`~lc_evals.errors.StaleResultsError` for results
            of other items or systems. An exception raised by the system propagates after
            the results finished so far have been written.

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
    if on_mismatch not in ("error", "rerun"):
        raise ValueError(f"on_mismatch must be 'error' or 'rerun', got {on_mismatch!r}")
    is_chat = isinstance(system, ChatModel)
    predict = _Timed(as_predictor(system, template=template, **chat_options))
    identity = system_id if system_id is not None else declared_identity(system)
    scorer_id = (
        None if scorer is None else scorer if isinstance(scorer, str) else declared_identity(scorer)
    )
    run_hash = run_fingerprint(
        identity,
        template=template if is_chat else None,
        chat_options=dict(chat_options),
        scorer=scorer_id,
    )
    item_hashes = {item.id: item_fingerprint(item) for item in items}
    done: dict[str, Result] = {}
    path = Path(results_path) if results_path is not None else None
    if path is not None and path.exists():
        repair_torn_tail(path)
        previous = load_results(path)
        stale: list[tuple[Result, str]] = []
        for r in previous:
            if r.id not in item_hashes:
                continue  # another suite's result: left alone
            reason = _stale_reason(r, item_hashes[r.id], run_hash)
            if reason is None:
                done[r.id] = r
            else:
                stale.append((r, reason))
        if stale:
            if on_mismatch == "error":
                raise StaleResultsError(str(path), [r.id for r, _ in stale], stale[0][1])
            stale_ids = {r.id for r, _ in stale}
            _set_aside(path, [r for r in previous if r.id not in stale_ids], [r for r, _ in stale])
    todo = [item for item in items if item.id not in done]
    runner = make_executor(executor, workers)
    lock = threading.Lock()
    fh = None
    record: RunManifest | None = None
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if manifest:
            record = RunManifest.start(
                path,
                system=identity,
                run_hash=run_hash,
                settings={
                    "template": template if is_chat else None,
                    "chat_options": dict(chat_options),
                    "scorer": scorer_id,
                    "executor": executor if isinstance(executor, str) else type(executor).__name__,
                    "workers": workers,
                },
                items=items,
                reused=len(done),
            )
        fh = path.open("a", encoding="utf-8")
    bar = None
    if progress and todo:
        from rich.progress import Progress

        bar = Progress(transient=False)
        bar.start()
        task_id = bar.add_task("evaluating", total=len(todo))
    status = "failed"
    evaluated = 0
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
                item_hash=item_hashes[item.id],
                run_hash=run_hash,
            )
            with lock:
                if fh is not None:
                    fh.write(json.dumps(result.to_dict(), ensure_ascii=False) + "\n")
                    fh.flush()
                done[item.id] = result
                evaluated += 1
            if bar is not None:
                bar.advance(task_id)
        status = "completed"
    except BaseException as exc:
        status = f"failed: {type(exc).__name__}: {str(exc)[:200]}"
        raise
    finally:
        if fh is not None:
            fh.close()
        if bar is not None:
            bar.stop()
        if record is not None:
            record.finish(status=status, evaluated=evaluated)
    return [done[i] for i in ids]
