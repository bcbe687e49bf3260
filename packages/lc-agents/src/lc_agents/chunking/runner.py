"""Chunk-and-aggregate: split a document, ask workers concurrently, merge their answers."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from lc_agents.chunking.aggregate import (
    DEFAULT_ABSTENTIONS,
    AggregatorFn,
    MajorityVote,
    ManagerAggregator,
)
from lc_agents.chunking.prompts import MANAGER_TEMPLATE, WORKER_TEMPLATE, fill
from lc_agents.chunking.split import Chunk, TextTokenizer, split_document

_AGGREGATIONS = ("manager", "vote")


def _default_worker_options() -> dict[str, Any]:
    return {"max_tokens": 64, "temperature": 0.0}


def _default_manager_options() -> dict[str, Any]:
    return {"max_tokens": 64, "temperature": 0.0}


@dataclass(frozen=True)
class ChunkingConfig:
    """Settings of :class:`ChunkAndAggregate`.

    Give exactly one of ``chunk_size`` and ``n_workers``. Defaults follow the paper's
    setup where it has one (workers and manager at temperature 0, a manager prompt that
    aggregates); the chunk size has no universal default: use the planner
    (:func:`~lc_agents.chunking.recommend_chunking`) or the model's window.

    Attributes:
        chunk_size: most tokens (characters without a tokenizer) one worker reads.
        n_workers: split into this many balanced chunks instead.
        overlap: tokens (characters) shared by consecutive chunks, so that a fact cut at
            a boundary is whole in one chunk.
        max_concurrency: most worker requests in flight at once (``>= 1``).
        aggregation: ``"manager"`` (a model merges the replies) or ``"vote"`` (majority
            vote over non-abstaining replies); a custom function given to
            :class:`ChunkAndAggregate` overrides it.
        worker_template: worker prompt with ``{document}`` and ``{question}``.
        manager_template: manager prompt with ``{question}`` and ``{responses}``.
        worker_options: generation options for every worker call.
        manager_options: generation options for the manager call.
        abstentions: replies that mean "nothing in this chunk" (majority vote ignores them).
        batch_size: send workers in groups of this many through the model's
            ``chat_batch`` (one padded forward pass on a local model); ``None`` sends one
            request per worker.
        show_progress: draw a progress bar over workers (rich).
    """

    chunk_size: int | None = None
    n_workers: int | None = None
    overlap: int = 0
    max_concurrency: int = 8
    aggregation: Literal["manager", "vote"] = "manager"
    worker_template: str = WORKER_TEMPLATE
    manager_template: str = MANAGER_TEMPLATE
    worker_options: Mapping[str, Any] = field(default_factory=_default_worker_options)
    manager_options: Mapping[str, Any] = field(default_factory=_default_manager_options)
    abstentions: tuple[str, ...] = DEFAULT_ABSTENTIONS
    batch_size: int | None = None
    show_progress: bool = False

    def __post_init__(self) -> None:
        if (self.chunk_size is None) == (self.n_workers is None):
            raise ValueError(
                f"give exactly one of chunk_size and n_workers, got chunk_size={self.chunk_size}, "
                f"n_workers={self.n_workers}"
            )
        if self.chunk_size is not None and self.chunk_size <= self.overlap:
            raise ValueError(
                f"chunk_size={self.chunk_size} is invalid: must be an integer > overlap ({self.overlap})"
            )
        if self.n_workers is not None and self.n_workers < 1:
            raise ValueError(f"n_workers={self.n_workers} is invalid: must be >= 1")
        if self.overlap < 0:
            raise ValueError(f"overlap={self.overlap} is invalid: must be >= 0")
        if self.max_concurrency < 1:
            raise ValueError(f"max_concurrency={self.max_concurrency} is invalid: must be >= 1")
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError(f"batch_size={self.batch_size} is invalid: must be >= 1 or None")
        if self.aggregation not in _AGGREGATIONS:
            raise ValueError(
                f"aggregation={self.aggregation!r} is invalid: allowed {_AGGREGATIONS}"
            )
        if "{document}" not in self.worker_template:
            raise ValueError("worker_template must contain the {document} placeholder")
        if "{responses}" not in self.manager_template:
            raise ValueError("manager_template must contain the {responses} placeholder")


@dataclass(frozen=True)
class WorkerResult:
    """What one worker saw and said.

    Attributes:
        chunk: the chunk it read.
        prompt: the full prompt sent.
        answer: its reply, stripped.
        seconds: wall time of its call.
    """

    chunk: Chunk
    prompt: str
    answer: str
    seconds: float


@dataclass(frozen=True)
class ChunkingResult:
    """Outcome of one :meth:`ChunkAndAggregate.run`.

    Attributes:
        answer: the aggregated answer.
        workers: per-worker results, in document order.
        seconds: wall time of the whole run (workers plus aggregation).
        worker_seconds: wall time of the concurrent worker phase.
    """

    answer: str
    workers: tuple[WorkerResult, ...]
    seconds: float
    worker_seconds: float

    @property
    def n_workers(self) -> int:
        """Number of chunks (one worker each)."""
        return len(self.workers)


class ChunkAndAggregate:
    """Multi-agent chunking: workers read chunks in parallel; an aggregator merges them.

    Workers call ``worker_model.achat`` when the model has an async ``achat`` method,
    otherwise ``worker_model.chat`` in a thread pool; at most
    ``config.max_concurrency`` calls are in flight, so a server backend is hit in parallel.
    With ``config.batch_size`` set, groups of workers go through ``worker_model.chat_batch``
    instead (at most ``max_concurrency`` groups in flight).

    Args:
        worker_model: chat model of the workers (``chat(messages, **options) -> str``).
        config: chunking settings.
        tokenizer: split by tokens with this tokenizer (``encode``/``decode``); ``None``
            splits by characters.
        manager_model: chat model of the manager (default: ``worker_model``); only used
            when ``config.aggregation == "manager"`` and no ``aggregator`` is given.
        aggregator: custom ``(question, answers) -> answer`` function; overrides
            ``config.aggregation``.

    Examples:
        >>> class Finder:
        ...     def chat(self, messages, **options):
        ...         return "7" if "key=7" in messages[0]["content"] else "none"
        >>> config = ChunkingConfig(chunk_size=8, aggregation="vote")
        >>> ChunkAndAggregate(Finder(), config).run("aaaaaaaaaaaaaaaakey=7 bbbbbbbb", "key?").answer
        '7'
    """

    def __init__(
        self,
        worker_model: Any,
        config: ChunkingConfig,
        *,
        tokenizer: TextTokenizer | None = None,
        manager_model: Any | None = None,
        aggregator: AggregatorFn | None = None,
    ) -> None:
        if not callable(getattr(worker_model, "chat", None)) and not callable(
            getattr(worker_model, "achat", None)
        ):
            raise TypeError(f"worker model must have chat() or achat(), got {worker_model!r}")
        if not isinstance(config, ChunkingConfig):
            raise TypeError(f"config must be a ChunkingConfig, got {type(config).__name__}")
        self.worker_model = worker_model
        self.config = config
        self.tokenizer = tokenizer
        self.aggregator: AggregatorFn
        if aggregator is not None:
            if not callable(aggregator):
                raise TypeError("aggregator must be callable as aggregator(question, answers)")
            self.aggregator = aggregator
        elif config.aggregation == "vote":
            self.aggregator = MajorityVote(abstentions=config.abstentions)
        else:
            self.aggregator = ManagerAggregator(
                manager_model if manager_model is not None else worker_model,
                config.manager_template,
                dict(config.manager_options),
            )

    def split(self, document: str) -> list[Chunk]:
        """The chunks the workers will read."""
        return split_document(
            document,
            chunk_size=self.config.chunk_size,
            n_chunks=self.config.n_workers,
            overlap=self.config.overlap,
            tokenizer=self.tokenizer,
        )

    def worker_prompt(self, chunk: Chunk, question: str) -> str:
        """The prompt one worker receives."""
        return fill(self.config.worker_template, document=chunk.text, question=question)

    def run(
        self,
        document: str,
        question: str,
        *,
        on_worker_done: Callable[[WorkerResult], None] | None = None,
    ) -> ChunkingResult:
        """Answer ``question`` over ``document`` (blocking; use :meth:`arun` inside an event loop).

        Args:
            document: the long input.
            question: what to answer.
            on_worker_done: called with each :class:`WorkerResult` as it finishes.

        Returns:
            The aggregated answer with every worker's result.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun(document, question, on_worker_done=on_worker_done))
        raise RuntimeError("run() was called inside a running event loop; await arun() instead")

    async def arun(
        self,
        document: str,
        question: str,
        *,
        on_worker_done: Callable[[WorkerResult], None] | None = None,
    ) -> ChunkingResult:
        """Async :meth:`run`: workers run concurrently, bounded by ``max_concurrency``."""
        if not isinstance(question, str) or not question.strip():
            raise ValueError("question must be a non-empty string")
        t0 = time.perf_counter()
        chunks = self.split(document)
        semaphore = asyncio.Semaphore(self.config.max_concurrency)
        batch = self.config.batch_size
        if batch is not None and not callable(getattr(self.worker_model, "chat_batch", None)):
            raise TypeError("batch_size is set but the worker model has no chat_batch() method")
        use_async = batch is None and callable(getattr(self.worker_model, "achat", None))
        groups = [chunks[i : i + (batch or 1)] for i in range(0, len(chunks), batch or 1)]
        pool = (
            None
            if use_async
            else ThreadPoolExecutor(
                max_workers=min(self.config.max_concurrency, len(groups)),
                thread_name_prefix="lc-chunk-worker",
            )
        )
        options = dict(self.config.worker_options)
        loop = asyncio.get_running_loop()
        progress, task_id = _progress(self.config.show_progress, len(chunks))

        def call_batch(conversations: list[list[dict[str, str]]]) -> list[str]:
            replies = list(self.worker_model.chat_batch(conversations, **options))
            if len(replies) != len(conversations):
                raise RuntimeError(
                    f"chat_batch returned {len(replies)} replies for {len(conversations)} prompts"
                )
            return [str(r) for r in replies]

        async def one(group: list[Chunk]) -> list[WorkerResult]:
            prompts = [self.worker_prompt(chunk, question) for chunk in group]
            conversations = [[{"role": "user", "content": p}] for p in prompts]
            async with semaphore:
                start = time.perf_counter()
                if use_async:
                    replies = [await self.worker_model.achat(conversations[0], **options)]
                elif batch is not None:
                    replies = await loop.run_in_executor(pool, call_batch, conversations)
                else:
                    replies = [
                        await loop.run_in_executor(
                            pool, lambda: self.worker_model.chat(conversations[0], **options)
                        )
                    ]
                seconds = time.perf_counter() - start
            results = [
                WorkerResult(chunk, prompt, str(reply).strip(), seconds)
                for chunk, prompt, reply in zip(group, prompts, replies)
            ]
            for result in results:
                if progress is not None:
                    progress.advance(task_id)
                if on_worker_done is not None:
                    on_worker_done(result)
            return results

        try:
            done = await asyncio.gather(*(one(g) for g in groups))
        finally:
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
            if progress is not None:
                progress.stop()
        workers = [w for group_results in done for w in group_results]
        worker_seconds = time.perf_counter() - t0
        answers = [w.answer for w in workers]
        if len(workers) == 1 and isinstance(self.aggregator, ManagerAggregator):
            answer = answers[0]  # one reader: nothing to merge, no manager call
        else:
            answer = await loop.run_in_executor(None, self.aggregator, question, answers)
        return ChunkingResult(
            str(answer).strip(), tuple(workers), time.perf_counter() - t0, worker_seconds
        )


def _progress(show: bool, total: int) -> tuple[Any, Any]:
    if not show:
        return None, None
    from rich.progress import Progress

    progress = Progress(transient=True)
    task_id = progress.add_task("workers", total=total)
    progress.start()
    return progress, task_id


def chunk_and_aggregate(
    worker_model: Any,
    document: str,
    question: str,
    *,
    chunk_size: int | None = None,
    n_workers: int | None = None,
    tokenizer: TextTokenizer | None = None,
    **config: Any,
) -> ChunkingResult:
    """One-call form of :class:`ChunkAndAggregate` (extra keywords go to :class:`ChunkingConfig`).

    Examples:
        >>> class Finder:
        ...     def chat(self, messages, **options):
        ...         return "7" if "key=7" in messages[0]["content"] else "none"
        >>> chunk_and_aggregate(Finder(), "x" * 40 + "key=7", "key?", chunk_size=16,
        ...                     overlap=5, aggregation="vote").answer
        '7'
    """
    cfg = ChunkingConfig(chunk_size=chunk_size, n_workers=n_workers, **config)
    return ChunkAndAggregate(worker_model, cfg, tokenizer=tokenizer).run(document, question)
