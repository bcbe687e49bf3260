"""Plain-PyTorch paged gather and scatter: the CPU path and the test oracle.

A paged sequence is ``storage [num_pages, batch, kv_heads, page_size, head_dim]`` plus a
page table (physical page ids in logical order). Token ``t`` lives in page
``table[t // page_size]`` at offset ``t % page_size``.
"""

from __future__ import annotations

import torch


def gather_reference(
    storage: torch.Tensor, table: torch.Tensor, start: int, end: int
) -> torch.Tensor:
    """Tokens ``[start, end)`` as ``[batch, kv_heads, end - start, head_dim]``."""
    page_size = storage.shape[3]
    first = start // page_size
    pages = storage.index_select(0, table[first : -(-end // page_size)])  # [n, B, H, P, D]
    n, b, h, p, d = pages.shape
    flat = pages.permute(1, 2, 0, 3, 4).reshape(b, h, n * p, d)
    return flat[:, :, start - first * page_size : end - first * page_size]


def scatter_reference(
    storage: torch.Tensor, table: torch.Tensor, start: int, values: torch.Tensor, accumulate: bool
) -> None:
    """Write (or add) ``values [batch, kv_heads, L, head_dim]`` into tokens ``[start, start + L)``."""
    page_size = storage.shape[3]
    pos = torch.arange(start, start + values.shape[2], device=storage.device)
    pages, offsets = table[pos // page_size], pos % page_size
    view = storage.permute(0, 3, 1, 2, 4)  # [N, P, B, H, D], a view of storage
    view.index_put_(
        (pages, offsets), values.permute(2, 0, 1, 3).to(storage.dtype), accumulate=accumulate
    )
