"""Plain-PyTorch paged KV operations: the CPU path and the test oracle.

A paged sequence is ``storage [num_pages, batch, kv_heads, page_size, head_dim]`` plus a
page table (physical page ids in logical order). Token ``t`` lives in page
``table[t // page_size]`` at offset ``t % page_size``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def _check_table(storage: torch.Tensor, table: Sequence[int], length: int) -> torch.Tensor:
    if storage.dim() != 5:
        raise ValueError(
            f"storage must be [num_pages, batch, kv_heads, page_size, head_dim], got {tuple(storage.shape)}"
        )
    page_size = storage.shape[3]
    needed = -(-length // page_size)
    if length < 0 or needed > len(table):
        raise ValueError(f"{length} tokens need {needed} pages but the table has {len(table)}")
    idx = torch.as_tensor(list(table[:needed]), dtype=torch.long, device=storage.device)
    if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= storage.shape[0]):
        raise IndexError(f"page table refers to pages outside 0..{storage.shape[0] - 1}")
    return idx


def paged_gather(storage: torch.Tensor, table: Sequence[int], start: int, end: int) -> torch.Tensor:
    """Tokens ``[start, end)`` of a paged sequence as ``[batch, kv_heads, end - start, head_dim]``."""
    if not 0 <= start <= end:
        raise ValueError(f"need 0 <= start <= end, got start={start}, end={end}")
    page_size = storage.shape[3]
    idx = _check_table(storage, table, end)
    first = start // page_size
    pages = storage.index_select(0, idx[first:])  # [n, B, H, P, D]
    n, b, h, p, d = pages.shape
    flat = pages.permute(1, 2, 0, 3, 4).reshape(b, h, n * p, d)
    return flat[:, :, start - first * page_size : end - first * page_size]


def paged_scatter(
    storage: torch.Tensor,
    table: Sequence[int],
    start: int,
    values: torch.Tensor,
    accumulate: bool = False,
) -> None:
    """Write (or add, with ``accumulate``) ``values [batch, kv_heads, L, head_dim]`` into
    tokens ``[start, start + L)`` of a paged sequence, in place."""
    if (
        values.dim() != 4
        or values.shape[0] != storage.shape[1]
        or values.shape[1] != storage.shape[2]
    ):
        raise ValueError(
            f"values must be [batch={storage.shape[1]}, kv_heads={storage.shape[2]}, L, "
            f"head_dim={storage.shape[4]}], got {tuple(values.shape)}"
        )
    length = values.shape[2]
    page_size = storage.shape[3]
    idx = _check_table(storage, table, start + length)
    pos = torch.arange(start, start + length, device=storage.device)
    pages, offsets = idx[pos // page_size], pos % page_size
    view = storage.permute(0, 3, 1, 2, 4)  # [N, P, B, H, D], a view of storage
    view.index_put_(
        (pages, offsets), values.permute(2, 0, 1, 3).to(storage.dtype), accumulate=accumulate
    )
