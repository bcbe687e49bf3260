"""NSA decoding on shared ops; the former decode helper is gone and says what replaces it."""

from __future__ import annotations

import importlib

import pytest
import torch

from lc_attention._sdpa import masked_sdpa


def test_masked_sdpa_matches_a_loop() -> None:
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, 4, 8, generator=g, dtype=torch.float64)
    k, v = (torch.randn(2, 6, 2, 8, generator=g, dtype=torch.float64) for _ in range(2))
    mask = torch.rand(2, 3, 2, 6, generator=g) > 0.4  # [B, n, H_kv, L]
    mask[0, 1] = False  # a row that sees nothing gives 0
    got = masked_sdpa(q, k, v, mask.permute(0, 2, 1, 3), 0.5)
    want = torch.zeros_like(q)
    for b in range(2):
        for t in range(3):
            for h in range(4):
                m = mask[b, t, h // 2]
                if m.any():
                    s = (k[b, :, h // 2] @ q[b, t, h] * 0.5).masked_fill(~m, float("-inf"))
                    want[b, t, h] = torch.softmax(s, 0) @ v[b, :, h // 2]
    torch.testing.assert_close(got, want)


def test_the_removed_masked_attention_names_its_replacement() -> None:
    cache = importlib.import_module("lc_attention.nsa.cache")
    with pytest.raises(
        AttributeError,
        match=r"^lc_attention\.nsa\.cache\.masked_attention was removed in lc-attention 0\.16; "
        r"use torch\.nn\.functional\.scaled_dot_product_attention",
    ):
        cache.masked_attention  # noqa: B018
    assert not hasattr(cache, "masked_attention")
    with pytest.raises(ImportError, match="masked_attention"):
        exec("from lc_attention.nsa.cache import masked_attention", {})
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        cache.no_such_name  # noqa: B018
    assert cache.NSACache().length == 0
