"""Training-free DSSA options: block scores ``"meanvar"`` and ``"bound"``, dense layers."""

from __future__ import annotations

import pytest
import torch

from lc_attention.dssa import (
    CompressedKeyCache,
    DSSAConfig,
    block_scores,
    compress_keys,
    dense_attention,
    dssa_attention,
    select_blocks,
)
from lc_attention.dssa.selection import (
    block_bounds,
    bound_logits,
    num_compressed_keys,
    select_group_blocks,
)

torch.set_num_threads(1)

BOUND = DSSAConfig(kernel_size=32, stride=16, init_blocks=1, block_size=64, window_size=64,
                   topk=3, dense_len=128, backend="torch", block_score="bound")  # fmt: skip
BOUND_ALL = DSSAConfig(**{**BOUND.__dict__, "topk": 64, "dense_len": 0})
MEANVAR = DSSAConfig(**{**BOUND.__dict__, "block_score": "meanvar"})


def _qkv(t: int = 300, hq: int = 6, hkv: int = 2, d: int = 16, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, t, hq, d, generator=g)
    k = torch.randn(1, t, hkv, d, generator=g)
    v = torch.randn(1, t, hkv, d, generator=g)
    return q, k, v


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"block_score": "max"}, "block_score"),
        ({"block_score": "Mean"}, "block_score"),
        ({"dense_layers": -1}, "dense_layers"),
        ({"dense_layers": True}, "dense_layers"),
        ({"dense_layers": 1.5}, "dense_layers"),
    ],
)
def test_bad_options_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        DSSAConfig(**kwargs)


def test_defaults_stay_the_papers() -> None:
    c = DSSAConfig()
    assert (c.block_score, c.dense_layers) == ("mean", 0)
    assert c.sparse_in_layer(0)
    assert c.sparse_in_layer(None)
    d = DSSAConfig(dense_layers=3)
    assert [d.sparse_in_layer(i) for i in range(5)] == [False, False, False, True, True]


def test_block_bounds_are_channel_max_and_min_of_complete_blocks() -> None:
    _, k, _ = _qkv(t=200)
    kb = block_bounds(k, 64)
    assert kb.shape == (1, 3, 2, 32)  # 200 // 64 complete blocks, [max, min]
    for j in range(3):
        blk = k[:, j * 64 : (j + 1) * 64]
        assert torch.equal(kb[:, j, :, :16], blk.amax(1))
        assert torch.equal(kb[:, j, :, 16:], blk.amin(1))
    assert torch.equal(compress_keys(k, BOUND), kb)
    assert num_compressed_keys(200, BOUND) == 3


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bound_is_at_least_every_logit_in_its_block_and_tight_for_one_key(seed: int) -> None:
    q, k, _ = _qkv(t=256, seed=seed)
    ub = bound_logits(q, block_bounds(k, 64), 0.25)  # [1, T, 6, 4]
    logits = torch.einsum("bthd,bshd->bths", q, k.repeat_interleave(3, 2)) * 0.25
    true_max = logits.view(1, 256, 6, 4, 64).amax(-1)
    assert (ub >= true_max - 1e-5).all()
    assert (ub > true_max + 1e-3).any()  # a bound, not the maximum itself
    # a block of one key: the bound is the logit
    one = bound_logits(q, block_bounds(k, 1), 0.25)
    torch.testing.assert_close(one, logits)


def _brute_bound_scores(q, k, pos, kv_len, block, scale):
    """Softmax over the blocks complete at each query, summed over the group's heads."""
    b, t, hq, _ = q.shape
    hkv = k.shape[2]
    g = hq // hkv
    nb = -(-kv_len // block)
    ub = bound_logits(q, block_bounds(k, block), scale)
    out = torch.zeros(b, t, hkv, nb)
    for ti in range(t):
        c = (int(pos[ti]) + 1) // block
        if c == 0:
            continue
        p = torch.softmax(ub[0, ti, :, :c], -1).view(hkv, g, c).sum(1)
        out[0, ti, :, :c] = p
    return out


def test_bound_block_scores_match_brute_force() -> None:
    q, k, _ = _qkv(t=300, seed=3)
    pos = torch.arange(300)
    got = block_scores(q, compress_keys(k, BOUND), pos, 300, BOUND, 0.25, chunk=48)
    torch.testing.assert_close(got, _brute_bound_scores(q, k, pos, 300, 64, 0.25))
    # decode-like: the last 7 queries only
    got = block_scores(q[:, -7:], compress_keys(k, BOUND), pos[-7:], 300, BOUND, 0.25)
    torch.testing.assert_close(got, _brute_bound_scores(q[:, -7:], k, pos[-7:], 300, 64, 0.25))


def test_grouped_bound_selection_sums_the_group_scores() -> None:
    q, k, _ = _qkv(t=320, seed=4)
    cfg = DSSAConfig(**{**BOUND.__dict__, "query_block": 32})
    start = 100
    idx = select_group_blocks(q[:, start:], compress_keys(k, cfg), start, 320, cfg, 0.25)
    per_q = _brute_bound_scores(q[:, start:], k, torch.arange(start, 320), 320, 64, 0.25)
    from lc_kernels.compressed_attention import topk_blocks_from_scores

    groups = [(max(start, a), a + 32) for a in range(96, 320, 32)]
    summed = torch.stack([per_q[:, a - start : e - start].sum(1) for a, e in groups], 1)
    last = torch.tensor([e - 1 for _, e in groups])
    ref = topk_blocks_from_scores(summed, 64, 3, 1, 1, last)
    assert torch.equal(idx.sort(-1).values, ref.sort(-1).values)


@pytest.mark.parametrize("query_block", [1, 64])
def test_bound_with_all_blocks_selected_equals_dense(query_block: int) -> None:
    q, k, v = _qkv()
    cfg = DSSAConfig(**{**BOUND_ALL.__dict__, "query_block": query_block})
    dense = dense_attention(q, k, v)
    torch.testing.assert_close(dssa_attention(q, k, v, cfg), dense)
    torch.testing.assert_close(dssa_attention(q[:, -1:], k, v, cfg), dense[:, -1:])


def test_bound_sparse_attends_exactly_its_selected_blocks() -> None:
    q, k, v = _qkv(t=320, seed=7)
    t = 319
    out = dssa_attention(q[:, t:], k, v, BOUND)
    idx = select_blocks(q[:, t:], compress_keys(k, BOUND), torch.tensor([t]), 320, BOUND, 0.25)
    assert (idx >= 0).all()
    for h in range(2):
        blocks = sorted(idx[0, 0, h].tolist())
        keys = torch.cat([torch.arange(b * 64, min(320, b * 64 + 64)) for b in blocks])
        for gi in range(3):
            hq = h * 3 + gi
            p = torch.softmax((k[0, keys, h] @ q[0, t, hq]) * 0.25, 0)
            torch.testing.assert_close(out[0, 0, hq], p @ v[0, keys, h], rtol=1e-5, atol=1e-5)
    sparse = dssa_attention(q, k, v, BOUND)
    assert (sparse - dense_attention(q, k, v))[:, 192:].abs().max() > 1e-3


def test_bound_cache_is_incremental_and_matches_uncached_decode() -> None:
    q, k, v = _qkv(t=400, seed=2)
    cache = CompressedKeyCache()
    cache.update(k[:, :200], BOUND)
    for s in range(201, 400, 5):
        torch.testing.assert_close(cache.update(k[:, :s], BOUND), compress_keys(k[:, :s], BOUND))
    assert cache.full_recomputes == 1
    cache = CompressedKeyCache()
    for s in range(300, 335):
        a = dssa_attention(q[:, s - 1 : s], k[:, :s], v[:, :s], BOUND, cache=cache)
        b = dssa_attention(q[:, s - 1 : s], k[:, :s], v[:, :s], BOUND)
        torch.testing.assert_close(a, b)
    assert cache.full_recomputes == 1
    # the same cache under the mean score: another summary, recomputed
    mean = DSSAConfig(**{**BOUND.__dict__, "block_score": "mean"})
    torch.testing.assert_close(cache.update(k[:, :335], mean), compress_keys(k[:, :335], mean))
    assert cache.full_recomputes == 2


def test_dense_layers_run_dense_and_later_layers_sparse() -> None:
    q, k, v = _qkv()
    cfg = DSSAConfig(**{**BOUND.__dict__, "block_score": "mean", "dense_layers": 2})
    dense = dense_attention(q, k, v)
    for layer in (0, 1):
        assert torch.equal(dssa_attention(q, k, v, cfg, layer_idx=layer), dense)
    sparse = dssa_attention(q, k, v, cfg, layer_idx=2)
    assert (sparse - dense).abs().max() > 1e-3
    assert torch.equal(dssa_attention(q, k, v, cfg), sparse)  # unknown layer: sparse


def test_meanvar_keys_are_span_mean_and_variance() -> None:
    _, k, _ = _qkv(t=100)
    kc = compress_keys(k, MEANVAR)
    spans = k.unfold(1, 32, 16)  # [1, C, H, D, 32]
    assert kc.shape == (1, 5, 2, 32)
    torch.testing.assert_close(kc[..., :16], spans.mean(-1))
    torch.testing.assert_close(kc[..., 16:], spans.var(-1, unbiased=False), atol=1e-5, rtol=1e-4)


def _brute_meanvar_scores(q, k, t, scale):
    """Gaussian log-moment logits of the spans visible at query ``t``, group-summed, pooled."""
    hkv, g = k.shape[2], q.shape[2] // k.shape[2]
    c = (t - 31) // 16 + 1
    spans = k[0].unfold(0, 32, 16)[:c]  # [c, H_kv, D, 32]
    mu, var = spans.mean(-1), spans.var(-1, unbiased=False)
    out = []
    for h in range(hkv):
        tot = torch.zeros(c)
        for gi in range(g):
            qh = q[0, t, h * g + gi]
            tot += torch.softmax(scale * mu[:, h] @ qh + 0.5 * scale**2 * var[:, h] @ qh**2, 0)
        nb = -(-k.shape[1] // 64)
        pooled = torch.nn.functional.pad(tot, (1, 4 * nb - c)).unfold(0, 5, 4).amax(-1)
        out.append(pooled[:nb])
    return torch.stack(out)


@pytest.mark.parametrize("t", [40, 200, 299])
def test_meanvar_scores_match_brute_force_and_reduce_to_mean_for_equal_keys(t: int) -> None:
    q, k, _ = _qkv(t=300, seed=5)
    got = block_scores(q, compress_keys(k, MEANVAR), torch.arange(300), 300, MEANVAR, 0.25)
    torch.testing.assert_close(got[0, t], _brute_meanvar_scores(q, k, t, 0.25))
    flat = k[:, :16].repeat(1, 19, 1, 1)[:, :300]  # every span: the same 16 keys twice
    mean = DSSAConfig(**{**MEANVAR.__dict__, "block_score": "mean"})
    a = block_scores(q, compress_keys(flat, MEANVAR), 0, 300, MEANVAR, 0.25)
    b = block_scores(q, compress_keys(flat, mean), 0, 300, mean, 0.25)
    torch.testing.assert_close(a, b)  # equal span statistics: equal scores either way


def test_meanvar_with_all_blocks_selected_equals_dense_and_cache_decodes() -> None:
    q, k, v = _qkv(t=330, seed=6)
    full = DSSAConfig(**{**MEANVAR.__dict__, "topk": 64, "dense_len": 0, "query_block": 64})
    torch.testing.assert_close(dssa_attention(q, k, v, full), dense_attention(q, k, v))
    cache = CompressedKeyCache()
    for s in range(300, 330):
        a = dssa_attention(q[:, s - 1 : s], k[:, :s], v[:, :s], MEANVAR, cache=cache)
        b = dssa_attention(q[:, s - 1 : s], k[:, :s], v[:, :s], MEANVAR)
        torch.testing.assert_close(a, b)
    assert cache.full_recomputes == 1


def test_training_free_preset_is_small_with_short_spans() -> None:
    cfg = DSSAConfig.training_free()
    small = DSSAConfig.small()
    assert (cfg.kernel_size, cfg.stride) == (4, 4)
    same = ("init_blocks", "block_size", "window_size", "topk", "dense_len", "block_score",
            "query_block")  # fmt: skip
    assert all(getattr(cfg, f) == getattr(small, f) for f in same)
    assert DSSAConfig.training_free(topk=32, stride=2).stride == 2
    with pytest.raises(ValueError, match="stride"):
        DSSAConfig.training_free(stride=8)  # longer than the 4-token span


def test_short_spans_find_a_single_relevant_key_that_long_spans_average_away() -> None:
    """One key aligned with the queries, among keys pointing the other way.

    A 32-token span holding the key averages it with 31 opposing keys (its mean points
    away from the queries); a 4-token span keeps it on top. So the preset selects the
    key's block and ``small()``, at the same budget, does not.
    """
    s, d = 2048, 16
    g = torch.Generator().manual_seed(0)
    u = torch.zeros(d)
    u[0] = 1.0
    q = (3.0 * u + 0.1 * torch.randn(1, 64, 2, d, generator=g)).contiguous()
    k = -0.5 * u + 0.3 * torch.randn(1, s, 1, d, generator=g)
    for j in range(2, 28, 2):  # decoys: blocks whose 32-token spans are mildly aligned
        k[0, j * 64 : j * 64 + 32, 0] += 0.6 * u
    needle = 5 * 64 + 40  # in block 5, in the second half of the block
    k[0, needle, 0] = 6.0 * u
    over = {"dense_len": 0, "window_size": 128, "topk": 6, "backend": "torch", "query_block": 64}
    fine, coarse = DSSAConfig.training_free(**over), DSSAConfig.small(**over)
    pos = s - 64
    picked = {}
    for name, cfg in (("fine", fine), ("coarse", coarse)):
        idx = select_group_blocks(q, compress_keys(k, cfg), pos, s, cfg, 0.25)
        picked[name] = set(idx.flatten().tolist())
    assert 5 in picked["fine"]
    assert 5 not in picked["coarse"]
