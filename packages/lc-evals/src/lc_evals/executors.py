"""Executors: run a function over items and yield ``(item, output)`` as each finishes.

- :class:`SerialExecutor`: one at a time, in order (the default for ``workers=1``).
- :class:`ThreadExecutor`: a local thread pool; right for systems that wait on I/O
  (HTTP endpoints) or release the GIL (PyTorch).
- :class:`RayExecutor`: Ray tasks on a local or remote Ray cluster (``pip install
  lc-evals[ray]``); the function and items are shipped to the workers with pickle.

If the function raises, the thread executor stops handing out work, still yields every
output that finished successfully (so a resumed run redoes nothing that completed), then
re-raises the first error; the Ray executor re-raises at once and cancels what is
pending.
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

from lc_evals.types import TaskItem

T = TypeVar("T")


class Executor(Protocol):
    """Anything that maps a function over items, yielding results in completion order."""

    def imap_unordered(
        self, fn: Callable[[TaskItem], T], items: Sequence[TaskItem]
    ) -> Iterator[tuple[TaskItem, T]]: ...


class SerialExecutor:
    """Runs items one after another in the calling thread."""

    def imap_unordered(
        self, fn: Callable[[TaskItem], T], items: Sequence[TaskItem]
    ) -> Iterator[tuple[TaskItem, T]]:
        for item in items:
            yield item, fn(item)


class ThreadExecutor:
    """A local pool of ``workers`` threads.

    Examples:
        >>> from lc_evals import TaskItem
        >>> items = [TaskItem(f"t-0-{i}", "t", "c", "q", ("a",)) for i in range(3)]
        >>> sorted(out for _, out in ThreadExecutor(2).imap_unordered(lambda it: it.id, items))
        ['t-0-0', 't-0-1', 't-0-2']
    """

    def __init__(self, workers: int = 4) -> None:
        if not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
        self.workers = workers

    def imap_unordered(
        self, fn: Callable[[TaskItem], T], items: Sequence[TaskItem]
    ) -> Iterator[tuple[TaskItem, T]]:
        pool = cf.ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="lc-evals")
        error: BaseException | None = None
        try:
            futures = {pool.submit(fn, item): item for item in items}
            for fut in cf.as_completed(futures):
                if fut.cancelled():
                    continue
                exc = fut.exception()
                if exc is None:
                    yield futures[fut], fut.result()
                elif error is None:  # stop handing out work; keep draining finished ones
                    error = exc
                    for other in futures:
                        other.cancel()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        if error is not None:
            raise error


class RayExecutor:
    """Ray tasks, at most ``max_in_flight`` at a time.

    Args:
        address: Ray cluster address; ``None`` starts (or joins) a local instance.
        num_cpus: CPUs of a newly started local instance.
        max_in_flight: submitted but unfinished tasks kept at once (defaults to twice the
            cluster's CPUs).
        num_cpus_per_task: CPUs each task reserves.

    A driver started under ``uv run`` makes Ray start every worker with ``uv run`` in an
    uploaded copy of the working directory, which builds its own environment there; set
    ``RAY_ENABLE_UV_RUN_RUNTIME_ENV=0`` before Ray is imported to have the workers of a
    local instance use the driver's interpreter (the tests do).
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        num_cpus: int | None = None,
        max_in_flight: int | None = None,
        num_cpus_per_task: float = 1.0,
    ) -> None:
        self.address = address
        self.num_cpus = num_cpus
        self.max_in_flight = max_in_flight
        self.num_cpus_per_task = num_cpus_per_task

    def _ray(self) -> Any:
        try:
            import ray
        except ImportError as exc:
            raise ImportError("the Ray executor needs Ray: pip install 'lc-evals[ray]'") from exc
        if not ray.is_initialized():
            ray.init(
                address=self.address,
                num_cpus=self.num_cpus,
                include_dashboard=False,
                log_to_driver=False,
                ignore_reinit_error=True,
            )
        return ray

    def imap_unordered(
        self, fn: Callable[[TaskItem], T], items: Sequence[TaskItem]
    ) -> Iterator[tuple[TaskItem, T]]:
        ray = self._ray()
        remote = ray.remote(num_cpus=self.num_cpus_per_task)(_call)
        fn_ref = ray.put(fn)
        limit = self.max_in_flight or max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
        pending: dict[Any, TaskItem] = {}
        queue = list(items)
        try:
            while queue or pending:
                while queue and len(pending) < limit:
                    item = queue.pop(0)
                    pending[remote.remote(fn_ref, item)] = item
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    item = pending.pop(ref)
                    yield item, ray.get(ref)
        finally:
            for ref in pending:
                ray.cancel(ref)


def _call(fn: Callable[[TaskItem], T], item: TaskItem) -> T:
    return fn(item)


def make_executor(name: str | Executor, workers: int = 1, **options: Any) -> Executor:
    """``"local"`` (threads, or serial for one worker), ``"serial"``, ``"ray"`` or an executor."""
    if not isinstance(name, str):
        return name
    if name == "serial" or (name == "local" and workers == 1):
        return SerialExecutor()
    if name in ("local", "thread", "threads"):
        return ThreadExecutor(workers)
    if name == "ray":
        return RayExecutor(**options)
    raise ValueError(
        f"executor must be one of ['local', 'serial', 'ray'] or an Executor, got {name!r}"
    )
