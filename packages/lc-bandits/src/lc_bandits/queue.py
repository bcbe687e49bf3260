"""A batch of ``B`` job queues, one per run, stored as padded arrays.

Run ``b`` holds ``lengths[b]`` jobs in slots ``0 .. lengths[b] - 1`` of ``contexts[b]``;
a departing job's slot is filled with the last job (order is not kept; ``arrival`` keeps
each job's arrival round, so first-in-first-out is ``argmin`` of it). Capacity doubles
when a queue outgrows it.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["QueueBatch"]


class QueueBatch:
    """Queues of ``runs`` independent runs.

    Args:
        runs: number of runs ``B``.
        dim: context dimension ``d``.
        capacity: initial slots per queue (grows by doubling).

    Attributes:
        contexts: job contexts, shape ``[B, C, d]``; slots at and beyond
            ``lengths[b]`` are padding.
        arrival: arrival round of each job, shape ``[B, C]`` (``-1`` for padding).
        lengths: number of jobs per run, shape ``[B]``.

    Example:
        >>> q = QueueBatch(runs=2, dim=3)
        >>> q.push(np.array([True, False]), np.ones((2, 3)) / 2, round_index=0)
        >>> q.lengths.tolist()
        [1, 0]
    """

    def __init__(self, runs: int, dim: int, capacity: int = 16) -> None:
        if runs < 1 or dim < 1 or capacity < 1:
            raise ValueError(f"runs={runs}, dim={dim}, capacity={capacity} must all be >= 1")
        self.contexts: NDArray[np.float64] = np.zeros((runs, capacity, dim))
        self.arrival: NDArray[np.int64] = np.full((runs, capacity), -1, dtype=np.int64)
        self.lengths: NDArray[np.int64] = np.zeros(runs, dtype=np.int64)
        self._rows = np.arange(runs)

    @property
    def capacity(self) -> int:
        """Slots per queue ``C``."""
        return int(self.contexts.shape[1])

    @property
    def mask(self) -> NDArray[np.bool_]:
        """Valid slots, shape ``[B, C]``."""
        out: NDArray[np.bool_] = np.arange(self.capacity)[None, :] < self.lengths[:, None]
        return out

    def _grow(self, needed: int) -> None:
        cap = self.capacity
        while cap < needed:
            cap *= 2
        extra = cap - self.capacity
        b, _, d = self.contexts.shape
        self.contexts = np.concatenate([self.contexts, np.zeros((b, extra, d))], axis=1)
        self.arrival = np.concatenate(
            [self.arrival, np.full((b, extra), -1, dtype=np.int64)], axis=1
        )

    def push(
        self, arrived: NDArray[np.bool_], contexts: NDArray[np.float64], round_index: int
    ) -> None:
        """Append one job to every run with ``arrived[b]``.

        Args:
            arrived: shape ``[B]`` (bool).
            contexts: the arriving contexts, shape ``[B, d]`` (rows where nothing arrives
                are ignored).
            round_index: stored as the jobs' arrival round.
        """
        rows = self._rows[arrived]
        if rows.size == 0:
            return
        slots = self.lengths[rows]
        if int(slots.max()) + 1 > self.capacity:
            self._grow(int(slots.max()) + 1)
        cap, d = self.capacity, self.contexts.shape[2]
        self.contexts.reshape(-1, d)[rows * cap + slots] = contexts[rows]
        self.arrival[rows, slots] = round_index
        self.lengths[rows] += 1

    def remove(self, departed: NDArray[np.bool_], slots: NDArray[np.int64]) -> None:
        """Remove job ``slots[b]`` from every run with ``departed[b]``.

        Raises:
            IndexError: if a departing slot is not a valid job of its run.
        """
        rows = self._rows[departed]
        if rows.size == 0:
            return
        gone = slots[rows]
        last = self.lengths[rows] - 1
        if np.any(gone < 0) or np.any(gone > last):
            raise IndexError("a departing job index is outside its queue")
        cap, d = self.capacity, self.contexts.shape[2]
        flat = self.contexts.reshape(-1, d)
        flat[rows * cap + gone] = flat[rows * cap + last]
        self.arrival[rows, gone] = self.arrival[rows, last]
        self.arrival[rows, last] = -1
        self.lengths[rows] = last
