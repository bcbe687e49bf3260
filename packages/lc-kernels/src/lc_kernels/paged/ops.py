"""Public paged gather/scatter: input checks, then the Triton kernel or the reference."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from lc_kernels._common import resolve_backend
from lc_kernels.backend import Backend
from lc_kernels.paged.reference import gather_reference, scatter_reference


def _table(storage: torch.Tensor, table: Sequence[int] | torch.Tensor, end: int) -> torch.Tensor:
    if storage.dim() != 5:
        raise ValueError(
            "storage must be [num_pages, batch, kv_heads, page_size, head_dim], "
            f"got {tuple(storage.shape)}"
        )
    needed = -(-end // storage.shape[3])
    idx = torch.as_tensor(table, dtype=torch.int64, device=storage.device).reshape(-1)
    if needed > idx.numel():
        raise ValueError(f"{end} tokens need {needed} pages but the table has {idx.numel()}")
    if needed and (int(idx[:needed].min()) < 0 or int(idx[:needed].max()) >= storage.shape[0]):
        raise IndexError(f"page table refers to pages outside 0..{storage.shape[0] - 1}")
    return idx


def paged_gather(
    storage: torch.Tensor,
    table: Sequence[int] | torch.Tensor,
    start: int,
    end: int,
    backend: Backend | str = "auto",
) -> torch.Tensor:
    """Tokens ``[start, end)`` of a paged sequence.

    Args:
        storage: ``[num_pages, batch, kv_heads, page_size, head_dim]`` page storage.
        table: physical page ids of the sequence in logical order.
        start: first token of the range (``0 <= start``).
        end: one past the last token (``start <= end``).
        backend: ``"auto"`` (Triton on CUDA), ``"triton"`` or ``"torch"``.

    Returns:
        ``[batch, kv_heads, end - start, head_dim]`` (a new tensor on the Triton path, a
        view or copy on the reference path).
    """
    if not 0 <= start <= end:
        raise ValueError(f"need 0 <= start <= end, got start={start}, end={end}")
    idx = _table(storage, table, end)
    if resolve_backend(backend, storage.device, storage.dtype) == "triton":
        from lc_kernels.paged.triton import gather_triton

        return gather_triton(storage, idx, start, end)
    return gather_reference(storage, idx, start, end)


def paged_scatter(
    storage: torch.Tensor,
    table: Sequence[int] | torch.Tensor,
    start: int,
    values: torch.Tensor,
    accumulate: bool = False,
    backend: Backend | str = "auto",
) -> None:
    """Write (or, with ``accumulate``, add) ``values [batch, kv_heads, L, head_dim]`` into
    tokens ``[start, start + L)`` of a paged sequence, in place."""
    if start < 0:
        raise ValueError(f"start must be >= 0, got {start}")
    if (
        values.dim() != 4
        or values.shape[0] != storage.shape[1]
        or values.shape[1] != storage.shape[2]
        or values.shape[3] != storage.shape[4]
    ):
        raise ValueError(
            f"values must be [batch={storage.shape[1]}, kv_heads={storage.shape[2]}, L, "
            f"head_dim={storage.shape[4]}], got {tuple(values.shape)}"
        )
    if values.device != storage.device:
        raise ValueError(f"values are on {values.device}, the pages on {storage.device}")
    idx = _table(storage, table, start + values.shape[2])
    if resolve_backend(backend, storage.device, storage.dtype) == "triton":
        from lc_kernels.paged.triton import scatter_triton

        scatter_triton(storage, idx, start, values, accumulate)
    else:
        scatter_reference(storage, idx, start, values, accumulate)
