"""lc-kernels' one spelling of the number of selected blocks, ``topk``: ``top_k`` warns
until 0.10 and behaves the same."""

from __future__ import annotations

import pytest
import torch

from lc_kernels import compressed_attention, mean_pool_compress, select_blocks
from lc_kernels.block_select import topk_blocks_from_scores


def _warns():
    return pytest.warns(DeprecationWarning, match=r"top_k= is deprecated.*lc-kernels 0.10.*topk=")


def test_top_k_warns_and_selects_the_same_blocks() -> None:
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 256, 4, 16, generator=g), torch.randn(1, 256, 2, 16, generator=g)
    kc = mean_pool_compress(k)
    with _warns():
        old = select_blocks(q, kc, block_size=64, top_k=3)
    assert torch.equal(old, select_blocks(q, kc, block_size=64, topk=3))
    with _warns():
        o_old, i_old = compressed_attention(q, kc, kc, top_k=3)
    o_new, i_new = compressed_attention(q, kc, kc, topk=3)
    assert torch.equal(o_old, o_new)
    assert torch.equal(i_old, i_new)
    s = torch.randn(1, 4, 1, 5, generator=g)
    with _warns():
        a = topk_blocks_from_scores(s, 4, top_k=3, init_blocks=1, local_blocks=1)
    assert torch.equal(a, topk_blocks_from_scores(s, 4, topk=3, init_blocks=1, local_blocks=1))
    with pytest.raises(TypeError, match="not both"):
        select_blocks(q, kc, topk=3, top_k=3)
    with _warns(), pytest.raises(ValueError, match="top_k"):
        select_blocks(q, kc, top_k=0)
