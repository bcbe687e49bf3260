"""The one block-selection module: forced-block rule, top-k of block scores, exact top-k."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lc_kernels.block_select import (
    block_max_topk,
    block_topk,
    forced_block_ids,
    forced_block_mask,
    topk_blocks_from_scores,
)


def _forced_by_hand(own: int, nb: int, init: int, local: int) -> set[int]:
    return {j for j in range(nb) if j <= own and (j < init or j > own - local)}


@settings(max_examples=40, deadline=None)
@given(
    own=st.integers(0, 20),
    init=st.integers(0, 4),
    local=st.integers(1, 6),
)
def test_mask_and_id_lists_are_the_same_rule(own: int, init: int, local: int) -> None:
    nb = own + 3
    mask = forced_block_mask(torch.tensor([own]), nb, init, local)[0]
    want = _forced_by_hand(own, nb, init, local)
    assert set(torch.nonzero(mask).flatten().tolist()) == want
    ids, ok = forced_block_ids(torch.tensor([own]), init, local)
    listed = ids[0][ok[0]].tolist()
    assert sorted(listed) == sorted(want)  # each forced block exactly once
    assert len(listed) == len(set(listed))


def test_local_zero_still_lists_the_own_block() -> None:
    ids, ok = forced_block_ids(torch.tensor([5]), 1, 0)
    assert ids[0][ok[0]].tolist() == [0, 5]
    assert forced_block_mask(torch.tensor([5]), 8, 1, 0)[0].nonzero().flatten().tolist() == [0]


@settings(max_examples=25, deadline=None)
@given(t=st.integers(1, 40), top_k=st.integers(1, 8), seed=st.integers(0, 99))
def test_topk_of_scores_matches_a_loop(t: int, top_k: int, seed: int) -> None:
    bs, init, local = 4, 1, 2
    nb = -(-t // bs)
    g = torch.Generator().manual_seed(seed)
    scores = torch.rand(2, t, 3, nb, generator=g)
    got = topk_blocks_from_scores(scores, bs, top_k, init, local)
    assert got.shape == (2, t, 3, top_k)
    assert got.dtype == torch.int32
    for b in range(2):
        for i in range(t):
            for h in range(3):
                own = i // bs
                forced = sorted(_forced_by_hand(own, nb, init, local))
                rest = sorted(
                    (j for j in range(own + 1) if j not in forced),
                    key=lambda j: -float(scores[b, i, h, j]),
                )
                row = got[b, i, h].tolist()
                if len(forced) >= top_k:  # forced blocks tie (+inf): any of them
                    assert set(row) <= set(forced)
                    assert len(set(row)) == top_k
                    continue
                want = (forced + rest)[:top_k]
                assert set(row[: len(want)]) == set(want)
                assert row[len(want) :] == [-1] * (top_k - len(want))


@settings(max_examples=30, deadline=None)
@given(
    t=st.integers(1, 70),
    k=st.integers(1, 12),
    block=st.sampled_from([1, 2, 4, 16]),
    seed=st.integers(0, 999),
)
def test_block_max_topk_is_exact(t: int, k: int, block: int, seed: int) -> None:
    k = min(k, t)
    s = torch.randn(3, 2, t, generator=torch.Generator().manual_seed(seed))
    got = block_max_topk(s, k, block).sort(-1).values
    want = torch.topk(s, k, dim=-1).indices.sort(-1).values
    assert torch.equal(got, want)


@pytest.mark.parametrize("block", [16, 32])
def test_both_exact_topk_paths_agree(block: int) -> None:
    s = torch.randn(2, 3, 100, generator=torch.Generator().manual_seed(7))
    _, kernel_path = block_topk(s, 9, block_size=block, backend="torch")
    assert torch.equal(block_max_topk(s, 9, block).sort(-1).values, kernel_path.sort(-1).values)


@pytest.mark.parametrize("n", [1, 5, 37])
def test_block_scores_of_later_queries_are_the_prefill_rows(n: int) -> None:
    """NSA's decode scores (``start`` > 0) equal the prefill's rows at those positions."""
    from lc_kernels import mean_pool_compress
    from lc_kernels.compressed_attention import block_scores_reference

    g = torch.Generator().manual_seed(n)
    q, k = torch.randn(2, 150, 4, 8, generator=g), torch.randn(2, 150, 2, 8, generator=g)
    kc = mean_pool_compress(k, 16, 8)
    full = block_scores_reference(q, kc, 16, 8, 32, 0.3)
    tail = block_scores_reference(q[:, -n:], kc, 16, 8, 32, 0.3, start=150 - n, kv_len=150)
    torch.testing.assert_close(tail, full[:, -n:])
    assert not torch.allclose(
        block_scores_reference(q[:, -n:], kc, 16, 8, 32, 0.3, kv_len=150), full[:, -n:]
    )
