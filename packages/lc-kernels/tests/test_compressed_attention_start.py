"""Compressed attention of queries that start later in the sequence (NSA's decoding)."""

from __future__ import annotations

import pytest
import torch

from lc_kernels import mean_pool_compress
from lc_kernels.compressed_attention.reference import compressed_attention_reference


@pytest.mark.parametrize("n", [1, 7, 40])
def test_later_queries_get_the_prefill_rows(n: int) -> None:
    g = torch.Generator().manual_seed(n)
    q = torch.randn(2, 120, 4, 8, generator=g, dtype=torch.float64)
    k, v = (torch.randn(2, 120, 2, 8, generator=g, dtype=torch.float64) for _ in range(2))
    kc, vc = mean_pool_compress(k, 16, 8), mean_pool_compress(v, 16, 8)
    full, has = compressed_attention_reference(q, kc, vc, 16, 8, 0.3)
    tail, has_tail = compressed_attention_reference(q[:, -n:], kc, vc, 16, 8, 0.3, start=120 - n)
    torch.testing.assert_close(tail, full[:, -n:])
    assert torch.equal(has_tail, has[-n:])
    early, _ = compressed_attention_reference(q[:, -n:], kc, vc, 16, 8, 0.3)  # start 0
    assert not torch.allclose(early, full[:, -n:])
