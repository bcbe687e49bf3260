"""DSSA's one sparse dispatcher: the path each case takes, and that it is the path run."""

from __future__ import annotations

import pytest
import torch

import lc_attention.dssa.attention as att
from lc_attention.dssa import DSSAConfig, dssa_attention
from lc_attention.dssa.attention import SPARSE_PATHS, sparse_path


@pytest.mark.parametrize(
    ("args", "want"),
    [
        ((False, False), "block_major"),  # CPU: decode, prefill, chunks, padding, gradients
        ((True, False), "triton"),  # GPU (or backend="triton"), kv_valid padding included
        ((True, True), "block_major"),  # an attention_mask
        ((False, True), "block_major"),
    ],
)
def test_dispatch_table(args: tuple, want: str) -> None:
    assert SPARSE_PATHS == ("triton", "block_major")
    assert sparse_path(*args) == want


@pytest.mark.parametrize(
    ("t", "grad", "qb", "masked"),
    [(1, False, 1, False), (4, False, 1, True), (64, False, 64, False), (64, True, 1, False)],
)
def test_dssa_attention_runs_the_chosen_path(
    monkeypatch, t: int, grad: bool, qb: int, masked: bool
) -> None:
    ran: list[str] = []
    fn = att.block_major_selected_attention

    def spy(*a, **kw):
        ran.append("block_major")
        return fn(*a, **kw)

    monkeypatch.setattr(att, "block_major_selected_attention", spy)
    cfg = DSSAConfig.small(dense_len=0, backend="torch", query_block=qb)
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, t, 6, 16, generator=g, requires_grad=grad)
    k, v = torch.randn(1, 1200, 2, 16, generator=g), torch.randn(1, 1200, 2, 16, generator=g)
    mask = torch.ones(1, 1, t, 1200, dtype=torch.bool).tril(1200 - t) if masked else None
    out = dssa_attention(q, k, v, cfg, attention_mask=mask)
    assert ran == ["block_major"]
    assert out.isfinite().all()
