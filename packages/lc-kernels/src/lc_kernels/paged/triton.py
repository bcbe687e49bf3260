"""Triton kernels for paged gather and scatter (one program per token and head)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _gather_kernel(
    storage,
    table,
    out,
    start,
    s_page,
    s_batch,
    s_head,
    s_slot,
    o_batch,
    o_head,
    o_tok,
    HEADS: tl.constexpr,
    PAGE: tl.constexpr,
    DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
):
    tok = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // HEADS
    h = bh % HEADS
    pos = start + tok
    page = tl.load(table + pos // PAGE).to(tl.int64)
    d = tl.arange(0, BLOCK_D)
    mask = d < DIM
    src = storage + page * s_page + b * s_batch + h * s_head + (pos % PAGE) * s_slot + d
    x = tl.load(src, mask=mask)
    tl.store(out + b * o_batch + h * o_head + tok * o_tok + d, x, mask=mask)


@triton.jit
def _scatter_kernel(
    storage,
    table,
    values,
    start,
    s_page,
    s_batch,
    s_head,
    s_slot,
    v_batch,
    v_head,
    v_tok,
    HEADS: tl.constexpr,
    PAGE: tl.constexpr,
    DIM: tl.constexpr,
    BLOCK_D: tl.constexpr,
    ACCUMULATE: tl.constexpr,
):
    tok = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // HEADS
    h = bh % HEADS
    pos = start + tok
    page = tl.load(table + pos // PAGE).to(tl.int64)
    d = tl.arange(0, BLOCK_D)
    mask = d < DIM
    dst = storage + page * s_page + b * s_batch + h * s_head + (pos % PAGE) * s_slot + d
    x = tl.load(values + b * v_batch + h * v_head + tok * v_tok + d, mask=mask)
    if ACCUMULATE:
        x = x + tl.load(dst, mask=mask)
    tl.store(dst, x.to(dst.dtype.element_ty), mask=mask)


def gather_triton(storage: torch.Tensor, table: torch.Tensor, start: int, end: int) -> torch.Tensor:
    """Triton version of :func:`lc_kernels.paged.reference.gather_reference`."""
    _, b, h, page, d = storage.shape
    out = torch.empty(b, h, end - start, d, dtype=storage.dtype, device=storage.device)
    if end > start:
        _gather_kernel[(end - start, b * h)](
            storage, table, out, start, *storage.stride()[:4], *out.stride()[:3],
            HEADS=h, PAGE=page, DIM=d, BLOCK_D=triton.next_power_of_2(d),
        )  # fmt: skip
    return out


def scatter_triton(
    storage: torch.Tensor, table: torch.Tensor, start: int, values: torch.Tensor, accumulate: bool
) -> None:
    """Triton version of :func:`lc_kernels.paged.reference.scatter_reference`."""
    _, b, h, page, d = storage.shape
    values = values.contiguous()
    if values.shape[2]:
        _scatter_kernel[(values.shape[2], b * h)](
            storage, table, values, start, *storage.stride()[:4], *values.stride()[:3],
            HEADS=h, PAGE=page, DIM=d, BLOCK_D=triton.next_power_of_2(d), ACCUMULATE=accumulate,
        )  # fmt: skip
