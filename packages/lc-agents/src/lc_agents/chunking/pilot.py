"""Pilot runs: measure chunk-and-aggregate accuracy at a few chunk sizes on labelled items."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from lc_agents.chunking.aggregate import AggregatorFn, normalise_answer
from lc_agents.chunking.planner import PilotResult
from lc_agents.chunking.runner import ChunkAndAggregate, ChunkingConfig, ChunkingResult
from lc_agents.chunking.split import TextTokenizer, count_units


def contains_answer(prediction: str, answers: Sequence[str]) -> bool:
    """True if any normalised gold answer occurs in the normalised prediction.

    Examples:
        >>> contains_answer("The value is 4417.", ["4417"])
        True
    """
    pred = normalise_answer(prediction)
    return any(normalise_answer(a) and normalise_answer(a) in pred for a in answers)


@dataclass(frozen=True)
class PilotRecord:
    """One item answered at one chunk size.

    Attributes:
        item_id: the item's identifier.
        chunk_size: units per worker.
        doc_length: the item's document length in units.
        correct: whether the answer was scored correct.
        result: the full run (answer and per-worker results).
    """

    item_id: str
    chunk_size: int
    doc_length: int
    correct: bool
    result: ChunkingResult


def run_pilot(
    worker_model: Any,
    items: Iterable[Any],
    chunk_sizes: Sequence[int],
    *,
    config: ChunkingConfig | None = None,
    tokenizer: TextTokenizer | None = None,
    manager_model: Any | None = None,
    aggregator: AggregatorFn | None = None,
    is_correct: Callable[[str, Sequence[str]], bool] = contains_answer,
    progress: bool = False,
) -> tuple[list[PilotResult], list[PilotRecord]]:
    """Run chunk-and-aggregate on labelled items at several chunk sizes.

    Items are anything with ``id``, ``context``, ``question`` and ``answers`` (such as
    ``lc_evals.TaskItem``). The summaries feed :func:`~lc_agents.chunking.fit_noise_model`.

    Args:
        worker_model: chat model of the workers (and of the manager by default).
        items: labelled items.
        chunk_sizes: chunk sizes to try (a size >= the document length is a single pass).
        config: base settings; its ``chunk_size`` is replaced at each size.
        tokenizer: count and split by tokens; ``None`` uses characters.
        manager_model: chat model of the manager, if different.
        aggregator: custom aggregator, as for :class:`ChunkAndAggregate`.
        is_correct: ``(prediction, answers) -> bool``.
        progress: print a rich progress bar over (chunk size, item) runs.

    Returns:
        One :class:`PilotResult` per chunk size (mean document length, worker count of
        the first item) and every :class:`PilotRecord`.
    """
    items = list(items)
    if not items:
        raise ValueError("run_pilot needs at least one labelled item")
    if not chunk_sizes:
        raise ValueError("run_pilot needs at least one chunk size")
    base = config if config is not None else ChunkingConfig(chunk_size=max(chunk_sizes))
    lengths = [count_units(item.context, tokenizer) for item in items]
    bar = None
    if progress:
        from rich.progress import Progress

        bar = Progress()
        task_id = bar.add_task("pilot", total=len(items) * len(chunk_sizes))
        bar.start()
    summaries: list[PilotResult] = []
    records: list[PilotRecord] = []
    try:
        for size in chunk_sizes:
            cfg = replace(base, chunk_size=int(size), n_workers=None)
            system = ChunkAndAggregate(
                worker_model,
                cfg,
                tokenizer=tokenizer,
                manager_model=manager_model,
                aggregator=aggregator,
            )
            correct = 0
            workers = None
            for item, n in zip(items, lengths):
                result = system.run(item.context, item.question)
                ok = bool(is_correct(result.answer, tuple(item.answers)))
                correct += ok
                workers = workers or result.n_workers
                records.append(PilotRecord(str(item.id), int(size), n, ok, result))
                if bar is not None:
                    bar.advance(task_id)
            summaries.append(
                PilotResult(
                    int(size), sum(lengths) / len(lengths), correct, len(items), n_workers=workers
                )
            )
    finally:
        if bar is not None:
            bar.stop()
    return summaries, records
