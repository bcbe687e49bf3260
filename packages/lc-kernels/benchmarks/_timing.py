"""CPU timing shared by the kernel benchmarks (imported by the scripts next to it).

Run as a script it does nothing.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def one_call_ms(fn: Callable[[], Any]) -> float:
    """Wall-clock milliseconds of one call (smoke runs under Triton's interpreter)."""
    t0 = time.perf_counter()
    fn()
    return 1e3 * (time.perf_counter() - t0)


def time_cpu_ms(fn: Callable[[], Any], reps: int = 3) -> float:
    """Median wall-clock milliseconds of ``reps`` calls after one warm-up call."""
    fn()
    return statistics.median(one_call_ms(fn) for _ in range(reps))
