"""DSSA attention: config checks, the dense switch, block selection, exactness."""

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
from lc_kernels.compressed_attention.reference import block_overlap

torch.set_num_threads(1)

ALL = DSSAConfig(kernel_size=32, stride=16, init_blocks=1, block_size=64, window_size=64,
                 topk=64, dense_len=0, backend="torch")  # fmt: skip
SPARSE = DSSAConfig(kernel_size=32, stride=16, init_blocks=1, block_size=64, window_size=64,
                    topk=3, dense_len=128, backend="torch")  # fmt: skip
FINE = DSSAConfig(**{**SPARSE.__dict__, "kernel_size": 4, "stride": 4})  # training-free spans


def _qkv(t: int = 300, hq: int = 6, hkv: int = 2, d: int = 16, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, t, hq, d, generator=g)
    k = torch.randn(1, t, hkv, d, generator=g)
    v = torch.randn(1, t, hkv, d, generator=g)
    return q, k, v


def test_defaults_are_minicpm4() -> None:
    c = DSSAConfig()
    assert (c.kernel_size, c.stride, c.init_blocks, c.block_size) == (32, 16, 1, 64)
    assert (c.window_size, c.topk, c.dense_len, c.local_blocks) == (2048, 64, 8192, 32)
    s = DSSAConfig.small(topk=20)
    assert s.topk == 20
    assert s.dense_len == 1024


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"block_size": 60}, "block_size"),  # not a multiple of stride 16
        ({"window_size": 100}, "window_size"),  # not a multiple of block 64
        ({"topk": 8}, "topk"),  # fewer than the 33 forced blocks
        ({"stride": 64}, "stride"),  # larger than kernel_size
        ({"kernel_size": 0}, "kernel_size"),
        ({"dense_len": -1}, "dense_len"),
        ({"backend": "cuda"}, "backend"),
        ({"topk": 2.5}, "topk"),
    ],
)
def test_bad_config_names_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        DSSAConfig(**kwargs)


def test_bad_inputs() -> None:
    q, k, v = _qkv()
    with pytest.raises(TypeError, match="DSSAConfig"):
        dssa_attention(q, k, v, {"topk": 3})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="multiple"):
        dssa_attention(q[:, :, :5], k, v, SPARSE)
    with pytest.raises(ValueError, match="more queries"):
        dssa_attention(q, k[:, :10], v[:, :10], SPARSE)


def test_all_blocks_selected_equals_dense_prefill() -> None:
    q, k, v = _qkv()
    torch.testing.assert_close(dssa_attention(q, k, v, ALL), dense_attention(q, k, v))


@pytest.mark.parametrize("tq", [1, 5])
def test_all_blocks_selected_equals_dense_decode(tq: int) -> None:
    q, k, v = _qkv()
    ref = dense_attention(q, k, v)[:, -tq:]
    torch.testing.assert_close(dssa_attention(q[:, -tq:], k, v, ALL), ref)


def test_below_dense_len_is_dense_and_above_is_not() -> None:
    q, k, v = _qkv(t=300)
    dense = dense_attention(q, k, v)
    below = DSSAConfig(**{**SPARSE.__dict__, "dense_len": 301})
    assert torch.equal(dssa_attention(q, k, v, below), dense)
    sparse = dssa_attention(q, k, v, SPARSE)  # 300 >= 128: 3 of 5 blocks
    assert (sparse - dense)[:, 192:].abs().max() > 1e-3
    # the first 3 blocks are all a query can see up to position 191: still exact
    torch.testing.assert_close(sparse[:, :192], dense[:, :192])


def _brute_scores(q, k_cmp, pos, kv_len, cfg, scale):
    b, t, hq, _ = q.shape
    c, hkv = k_cmp.shape[1], k_cmp.shape[2]
    ends = torch.arange(c) * cfg.stride + cfg.kernel_size - 1
    nb = -(-kv_len // cfg.block_size)
    over = block_overlap(c, nb, cfg.kernel_size, cfg.stride, cfg.block_size, q.device).bool()
    out = torch.zeros(b, t, hkv, nb)
    for ti in range(t):
        vis = ends <= pos[ti]
        if not vis.any():
            continue
        for h in range(hkv):
            tot = torch.zeros(c)
            for gi in range(hq // hkv):
                s = (k_cmp[0, :, h] @ q[0, ti, h * (hq // hkv) + gi]) * scale
                p = torch.softmax(s.masked_fill(~vis, float("-inf")), 0)
                tot += p
            for j in range(nb):
                out[0, ti, h, j] = tot[over[:, j]].max() if over[:, j].any() else 0.0
    return out


@pytest.mark.parametrize(("kernel", "stride", "block"), [(32, 16, 64), (24, 8, 32)])
def test_block_scores_are_group_summed_max_pooled(kernel: int, stride: int, block: int) -> None:
    q, k, _ = _qkv(t=200)
    cfg = DSSAConfig(kernel_size=kernel, stride=stride, block_size=block, window_size=0,
                     topk=2, dense_len=0)  # fmt: skip
    kc = compress_keys(k, cfg)
    pos = torch.arange(200)
    got = block_scores(q, kc, pos, 200, cfg, 0.25)
    ref = _brute_scores(q, kc, pos, 200, cfg, 0.25)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)


def test_selection_forces_init_and_local_and_never_future() -> None:
    q, k, _ = _qkv(t=700, seed=3)
    cfg = DSSAConfig(block_size=64, window_size=128, init_blocks=1, topk=5, dense_len=0)
    pos = torch.arange(700)
    idx = select_blocks(q, compress_keys(k, cfg), pos, 700, cfg, 0.25)
    assert idx.shape == (1, 700, 2, 5)
    for t in range(0, 700, 7):
        own = t // 64
        for h in range(2):
            ids = [i for i in idx[0, t, h].tolist() if i >= 0]
            assert len(ids) == len(set(ids)) == min(5, own + 1)
            assert max(ids) <= own
            assert {0, own, max(own - 1, 0)} <= set(ids)


def test_kernel_path_matches_masked_path() -> None:
    """Full prefill (selected_attention) and suffix queries (masked SDPA) agree."""
    q, k, v = _qkv(t=333, seed=5)
    full = dssa_attention(q, k, v, SPARSE)
    tail = dssa_attention(q[:, -40:], k, v, SPARSE)
    torch.testing.assert_close(tail, full[:, -40:], rtol=1e-5, atol=1e-5)


def test_sparse_equals_dense_attention_on_selected_keys() -> None:
    q, k, v = _qkv(t=320, seed=7)
    t = 319
    out = dssa_attention(q[:, t:], k, v, SPARSE)
    idx = select_blocks(q[:, t:], compress_keys(k, SPARSE), torch.tensor([t]), 320, SPARSE, 0.25)
    for h in range(2):
        blocks = sorted(i for i in idx[0, 0, h].tolist() if i >= 0)
        keys = torch.cat([torch.arange(b * 64, min(320, b * 64 + 64)) for b in blocks])
        for gi in range(3):
            hq = h * 3 + gi
            p = torch.softmax((k[0, keys, h] @ q[0, t, hq]) * 0.25, 0)
            torch.testing.assert_close(out[0, 0, hq], p @ v[0, keys, h], rtol=1e-5, atol=1e-5)


def test_padding_mask_is_respected() -> None:
    q, k, v = _qkv(t=300)
    mask = torch.ones(1, 1, 300, 300, dtype=torch.bool).tril()
    mask[..., :10] = False  # left padding
    mask[..., torch.arange(10), torch.arange(10)] = True
    out = dssa_attention(q, k, v, ALL, attention_mask=mask)
    ref = dense_attention(q, k, v, attention_mask=mask)
    torch.testing.assert_close(out, ref)
    additive = torch.zeros(1, 1, 300, 300).masked_fill(~mask, float("-inf"))
    torch.testing.assert_close(dssa_attention(q, k, v, ALL, attention_mask=additive), ref)


@pytest.mark.parametrize("cfg", [SPARSE, FINE], ids=["32/16", "4/4"])
def test_compressed_key_cache_is_incremental_and_detects_new_sequences(cfg) -> None:
    _, k, _ = _qkv(t=400)
    cache = CompressedKeyCache()
    cache.update(k[:, :200], cfg)
    for s in range(201, 400, 3):
        got = cache.update(k[:, :s], cfg)
        torch.testing.assert_close(got, compress_keys(k[:, :s], cfg))
    assert cache.full_recomputes == 1
    _, other, _ = _qkv(t=400, seed=9)
    torch.testing.assert_close(cache.update(other, cfg), compress_keys(other, cfg))
    assert cache.full_recomputes == 2
    cache.update(other[:, :100], cfg)  # shorter: a new prompt
    assert cache.full_recomputes == 3


@pytest.mark.parametrize("cfg", [SPARSE, FINE], ids=["32/16", "4/4"])
def test_decode_with_cache_matches_decode_without(cfg) -> None:
    q, k, v = _qkv(t=330, seed=2)
    cache = CompressedKeyCache()
    for s in range(300, 330):
        a = dssa_attention(q[:, s - 1 : s], k[:, :s], v[:, :s], cfg, cache=cache)
        b = dssa_attention(q[:, s - 1 : s], k[:, :s], v[:, :s], cfg)
        torch.testing.assert_close(a, b)
    assert cache.full_recomputes == 1


def test_gather_path_matches_kernel_path_and_padding() -> None:
    """Few queries (decode) gather the selected blocks; same result as the full prefill."""
    q, k, v = _qkv(t=333, seed=5)
    full = dssa_attention(q, k, v, SPARSE)
    torch.testing.assert_close(dssa_attention(q[:, -3:], k, v, SPARSE), full[:, -3:])
    mask = torch.ones(1, 1, 333, 333, dtype=torch.bool).tril()
    mask[..., :10] = False
    mask[..., torch.arange(10), torch.arange(10)] = True
    ref = dense_attention(q, k, v, attention_mask=mask)[:, -2:]
    got = dssa_attention(q[:, -2:], k, v, ALL, attention_mask=mask[:, :, -2:])
    torch.testing.assert_close(got, ref)


def test_gather_path_reads_either_kv_layout() -> None:
    """Keys as a contiguous [B, S, H, D], as the transpose of transformers' [B, H, S, D]
    cache, or neither (a strided slice): the same decode output."""
    q, k, v = _qkv(t=333, seed=6)
    ref = dssa_attention(q[:, -2:], k, v, SPARSE)
    kt, vt = (
        k.transpose(1, 2).contiguous().transpose(1, 2),
        v.transpose(1, 2).contiguous().transpose(1, 2),
    )
    torch.testing.assert_close(dssa_attention(q[:, -2:], kt, vt, SPARSE), ref)
    kw = torch.stack([k, k], -1)[..., 0]  # the same keys, strided: neither layout
    assert not kw.is_contiguous()
    assert not kw.transpose(1, 2).is_contiguous()
    torch.testing.assert_close(dssa_attention(q[:, -2:], kw, v, SPARSE), ref)
