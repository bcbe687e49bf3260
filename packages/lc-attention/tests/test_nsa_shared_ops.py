"""NSA decoding on shared ops; the former decode helper still works for one release."""

from __future__ import annotations

import pytest
import torch

from lc_attention.nsa.cache import masked_attention


def test_deprecated_masked_attention_warns_and_matches_a_loop() -> None:
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, 4, 8, generator=g, dtype=torch.float64)
    k, v = (torch.randn(2, 6, 2, 8, generator=g, dtype=torch.float64) for _ in range(2))
    mask = torch.rand(2, 3, 2, 6, generator=g) > 0.4
    mask[0, 1] = False  # a row that sees nothing gives 0
    with pytest.warns(DeprecationWarning, match="masked_attention is deprecated"):
        got = masked_attention(q, k, v, mask, 0.5)
    want = torch.zeros_like(q)
    for b in range(2):
        for t in range(3):
            for h in range(4):
                m = mask[b, t, h // 2]
                if m.any():
                    s = (k[b, :, h // 2] @ q[b, t, h] * 0.5).masked_fill(~m, float("-inf"))
                    want[b, t, h] = torch.softmax(s, 0) @ v[b, :, h // 2]
    torch.testing.assert_close(got, want)
