"""Peak resident memory of a block of code, for the lc-train benchmarks on CPU.

Importing this module restarts the interpreter once with ``MALLOC_MMAP_THRESHOLD_`` set,
so that large allocations go through ``mmap``: freed tensors then leave the resident set
at once and peak RSS tracks live memory. The setting must be in place before the C
allocator starts, so import this module before torch. Only a benchmark run as a
script from this folder is restarted (not a test that imports one).
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
from pathlib import Path

import psutil

_RUN_AS_SCRIPT = Path(sys.argv[0]).resolve().parent == Path(__file__).resolve().parent
if _RUN_AS_SCRIPT and os.environ.get("MALLOC_MMAP_THRESHOLD_") is None:
    os.environ["MALLOC_MMAP_THRESHOLD_"] = "65536"
    os.execv(sys.executable, [sys.executable, *sys.argv])


class PeakRSS:
    """Samples the resident set size in a thread; :meth:`mib` is the peak above the
    resident size when the block was entered, in MiB."""

    def __init__(self, interval: float = 0.005) -> None:
        self.proc = psutil.Process()
        self.interval = interval
        self.peak = 0
        self.baseline = self.proc.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(self.interval)

    def __enter__(self) -> PeakRSS:
        gc.collect()
        self.baseline = self.proc.memory_info().rss
        self.peak = self.baseline
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def mib(self) -> float:
        return (self.peak - self.baseline) / 2**20
