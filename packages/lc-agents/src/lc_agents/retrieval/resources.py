"""Resource-aware choice of embedding batch size and vector-index type.

:func:`plan_index` looks at the corpus size, the vector width and the memory available
now, and returns an :class:`IndexPlan`:

* **index type**: ``"flat"`` (exact brute-force cosine scan, no training, always the
  true top-k) while the corpus is small and its vectors fit comfortably in memory;
  ``"ivf_pq"`` (inverted file with product quantisation, approximate, trained on the
  data) once the corpus reaches ``flat_max_rows`` rows or its raw float32 vectors would
  take more than ``memory_fraction`` of the available memory. IVF-PQ needs enough rows
  to train 256-centroid codebooks, so fewer than 512 rows always stay flat.
* **IVF partitions**: about ``sqrt(n)``, but never fewer than 256 rows per partition.
* **PQ sub-vectors**: ``dim / 8`` (each sub-vector of 8 floats coded in one byte: 32x
  smaller than float32), falling back to the largest divisor of ``dim`` at most that.
* **embedding batch size**: the largest power of two (1..256) whose transformer
  activations (about ``24 * max_tokens * dim * 4`` bytes per text) stay within 10 % of
  the available memory, and no larger than the corpus.

Examples:
    >>> from lc_agents.retrieval import plan_index
    >>> plan_index(1_000, 384, available_bytes=8 * 2**30).index_type
    'flat'
    >>> p = plan_index(2_000_000, 384, available_bytes=8 * 2**30)
    >>> p.index_type, p.num_partitions, p.num_sub_vectors
    ('ivf_pq', 1414, 48)
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from lc_agents.retrieval.errors import EmptyIndexError

__all__ = ["IndexPlan", "available_memory_bytes", "plan_index"]

INDEX_TYPES = ("flat", "ivf_pq")


@dataclass(frozen=True)
class IndexPlan:
    """How to embed and index a corpus.

    Attributes:
        index_type: ``"flat"`` or ``"ivf_pq"``.
        batch_size: texts per embedder forward pass.
        num_partitions: IVF partitions (0 for flat).
        num_sub_vectors: PQ sub-vectors (0 for flat).
        vector_bytes: raw float32 size of all vectors, in bytes.
        reason: one line saying why this index type was chosen.
    """

    index_type: str
    batch_size: int
    num_partitions: int = 0
    num_sub_vectors: int = 0
    vector_bytes: int = 0
    reason: str = ""

    def __post_init__(self) -> None:
        if self.index_type not in INDEX_TYPES:
            raise ValueError(f"index_type must be one of {INDEX_TYPES}, got {self.index_type!r}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.index_type == "ivf_pq" and (self.num_partitions < 1 or self.num_sub_vectors < 1):
            raise ValueError(
                "ivf_pq needs num_partitions >= 1 and num_sub_vectors >= 1, got "
                f"{self.num_partitions} and {self.num_sub_vectors}"
            )


def available_memory_bytes() -> int:
    """Memory available to new allocations now, in bytes (psutil, else /proc, else sysconf)."""
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:
        pass
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))


def _sub_vectors(dim: int) -> int:
    target = max(1, dim // 8)
    for d in range(target, 0, -1):
        if dim % d == 0:
            return d
    return 1


def plan_index(
    n_rows: int,
    dim: int,
    *,
    available_bytes: int | None = None,
    flat_max_rows: int = 100_000,
    memory_fraction: float = 0.25,
    max_tokens: int = 256,
) -> IndexPlan:
    """Choose embedding batch size and index type for ``n_rows`` vectors of width ``dim``.

    Args:
        n_rows: number of texts/vectors in the corpus (>= 1).
        dim: vector width.
        available_bytes: memory to plan for (default: :func:`available_memory_bytes`).
        flat_max_rows: corpus size from which an approximate index is built.
        memory_fraction: share of ``available_bytes`` the raw vectors may take before an
            approximate (compressed) index is chosen.
        max_tokens: longest text the embedder reads, in tokens (sizes the batch).

    Returns:
        The :class:`IndexPlan`.

    Raises:
        EmptyIndexError: ``n_rows`` is 0.
        ValueError: a negative size or a fraction outside (0, 1].
    """
    if n_rows < 0 or dim < 1:
        raise ValueError(f"n_rows must be >= 0 and dim >= 1, got {n_rows} and {dim}")
    if n_rows == 0:
        raise EmptyIndexError("the corpus is empty: nothing to embed or index")
    if not 0.0 < memory_fraction <= 1.0:
        raise ValueError(f"memory_fraction must be in (0, 1], got {memory_fraction}")
    avail = available_memory_bytes() if available_bytes is None else int(available_bytes)
    vector_bytes = n_rows * dim * 4
    per_text = 24 * max_tokens * dim * 4
    fit = max(1, int(0.10 * avail) // per_text)
    batch = 1 << min(8, fit.bit_length() - 1)
    batch = max(1, min(batch, 1 << max(0, (n_rows - 1).bit_length())))
    big = n_rows >= flat_max_rows
    tight = vector_bytes > memory_fraction * avail
    if n_rows < 512:
        return IndexPlan("flat", batch, vector_bytes=vector_bytes, reason="fewer than 512 rows")
    if not (big or tight):
        return IndexPlan(
            "flat",
            batch,
            vector_bytes=vector_bytes,
            reason=f"{n_rows} rows < {flat_max_rows} and vectors fit in memory",
        )
    partitions = max(1, min(round(math.sqrt(n_rows)), n_rows // 256))
    why = f"{n_rows} rows >= {flat_max_rows}" if big else "vectors exceed the memory share"
    return IndexPlan(
        "ivf_pq",
        batch,
        num_partitions=partitions,
        num_sub_vectors=_sub_vectors(dim),
        vector_bytes=vector_bytes,
        reason=why,
    )
