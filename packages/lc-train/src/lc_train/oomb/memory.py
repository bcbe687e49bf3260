"""Resident memory of this process on Linux, for measuring one training step on CPU.

The kernel keeps a high-water mark of the resident set (``VmHWM``) that
:func:`reset_peak_rss` sets back to the current size, so the peak of a step is measured
without what came before it (loading the model, say)::

    base = rss_mb()
    reset_peak_rss()
    chunk_recurrent_backward(model, ids, config=config)
    step_mb = rss_mb("VmHWM") - base

Allocator caching blurs the numbers: the benchmarks fix glibc's mmap threshold
(``MALLOC_MMAP_THRESHOLD_``) so that large tensors are returned to the kernel when freed.
"""

from __future__ import annotations

from pathlib import Path

_FIELDS = ("VmRSS", "VmHWM")


def rss_mb(field: str = "VmRSS") -> float:
    """``VmRSS`` (resident now) or ``VmHWM`` (peak resident since the last
    :func:`reset_peak_rss`) of this process, in MiB, from ``/proc/self/status``.

    Raises:
        ValueError: another field name.
        RuntimeError: no ``/proc/self/status`` with that field (not Linux).
    """
    if field not in _FIELDS:
        raise ValueError(f"field must be one of {_FIELDS}, got {field!r}")
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status (resident memory is read on Linux)")


def reset_peak_rss() -> None:
    """Set this process's peak resident size (``VmHWM``) back to its current size.

    Raises:
        RuntimeError: ``/proc/self/clear_refs`` cannot be written (not Linux).
    """
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError as exc:
        raise RuntimeError(f"cannot reset the peak resident size: {exc}") from exc


__all__ = ["reset_peak_rss", "rss_mb"]
