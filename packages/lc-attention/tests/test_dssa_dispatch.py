"""DSSA's one sparse dispatcher: the path each case takes, and that it is the path run."""

from __future__ import annotations

import pytest
import torch

import lc_attention.dssa.attention as att
from lc_attention.dssa import DSSAConfig, dssa_attention
from lc_attention.dssa.attention import GATHER_MAX_QUERIES, SPARSE_PATHS, sparse_path

G = GATHER_MAX_QUERIES


@pytest.mark.parametrize(
    ("args", "want"),
    [
        ((1, 9000, 1, 32, False, False, False, False), "gathered"),  # CPU decode
        ((1, 9000, 1, 32, True, False, True, False), "triton"),  # GPU decode, padding
        ((1, 9000, 1, 32, True, True, False, False), "gathered"),  # GPU, attention_mask
        ((9000, 9000, 64, 32, True, False, False, False), "triton"),  # GPU prefill
        ((G + 1, 9000, 64, 32, True, False, False, False), "grouped"),  # GPU chunk, shared
        ((G + 1, 9000, 1, 32, True, False, False, False), "triton"),  # GPU chunk
        ((4096, 4096, 64, 32, False, False, False, True), "grouped"),  # CPU, shared
        ((4096, 4096, 64, 0, False, False, False, False), "block_major"),  # no local
        ((4096, 4096, 64, 32, False, False, True, False), "tiled"),  # padding: not shared
        ((4096, 4096, 1, 32, False, False, False, False), "block_major"),  # CPU prefill
        ((4096, 4096, 1, 32, False, False, False, True), "tiled"),  # gradients
        ((4096, 4096, 1, 32, False, True, False, False), "tiled"),  # attention_mask
    ],
)
def test_dispatch_table(args: tuple, want: str) -> None:
    assert want in SPARSE_PATHS
    assert sparse_path(*args) == want


@pytest.mark.parametrize(
    ("t", "grad", "want"), [(4, False, "gathered"), (64, False, "block_major"), (64, True, "tiled")]
)
def test_dssa_attention_runs_the_chosen_path(monkeypatch, t: int, grad: bool, want: str) -> None:
    names = {
        "gathered": "_gathered_attention",
        "block_major": "block_major_selected_attention",
        "tiled": "tiled_selected_attention",
    }
    ran: list[str] = []
    for path, name in names.items():
        fn = getattr(att, name)

        def spy(*a, _fn=fn, _path=path, **kw):
            ran.append(_path)
            return _fn(*a, **kw)

        monkeypatch.setattr(att, name, spy)
    cfg = DSSAConfig.small(dense_len=0, backend="torch")
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, t, 6, 16, generator=g, requires_grad=grad)
    k, v = torch.randn(1, 1200, 2, 16, generator=g), torch.randn(1, 1200, 2, 16, generator=g)
    dssa_attention(q, k, v, cfg)
    assert ran == [want]
