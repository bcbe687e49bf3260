"""DSSA's stage 1 through lc_kernels' fused group block scores (the CUDA path).

On a GPU ``select_group_blocks`` scores blocks with ``lc_kernels.compressed_attention.
group_block_scores`` (Triton). Here the same call runs with its PyTorch reference
(``backend="torch"``; the Triton kernel equals it under Triton's interpreter in
lc-kernels' tests), so these tests check that the fused route feeds DSSA the scores and
selections of the chunked CPU path.
"""

from __future__ import annotations

import pytest
import torch

from lc_attention.dssa import DSSAConfig, compress_keys, dssa_attention, select_group_blocks
from lc_attention.dssa import selection as sel

torch.set_num_threads(1)


def _qkv(t: int, s: int, seed: int, hq: int = 6, hkv: int = 2, d: int = 16):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, t, hq, d, generator=g)
    k, v = (torch.randn(1, s, hkv, d, generator=g) for _ in range(2))
    return q, k, v


CALLS = []


def _fused(monkeypatch: pytest.MonkeyPatch, on: bool) -> None:
    """Route stage 1 through ``group_block_scores`` (counting its calls) or not."""
    real = sel.group_block_scores

    def counted(*args, **kwargs):
        CALLS.append(kwargs["backend"])
        return real(*args, **kwargs)

    CALLS.clear()
    monkeypatch.setattr(sel, "group_block_scores", counted)
    monkeypatch.setattr(sel, "fused_backend", lambda q, c: "torch" if on else None)


def _scores(q, kc, start, s, cfg, qb):
    chunks = sel._chunks(q, kc, start, s, cfg, q.shape[-1] ** -0.5, 128, qb)
    return torch.cat([sc for _, _, sc in chunks], 1)


@pytest.mark.parametrize(
    ("t", "start", "qb"), [(700, 0, 64), (300, 400, 64), (333, 17, 16), (90, 910, 1), (1, 999, 1)]
)
def test_fused_scores_and_selection_match_chunked(monkeypatch, t, start, qb):
    s = start + t
    cfg = DSSAConfig.small(dense_len=64, window_size=128, topk=5, query_block=qb)
    q, k, _ = _qkv(t, s, seed=t + start)
    kc = compress_keys(k, cfg)
    _fused(monkeypatch, False)
    want = _scores(q, kc, start, s, cfg, qb)
    want_idx = select_group_blocks(q, kc, start, s, cfg, q.shape[-1] ** -0.5)
    _fused(monkeypatch, True)
    got = _scores(q, kc, start, s, cfg, qb)
    got_idx = select_group_blocks(q, kc, start, s, cfg, q.shape[-1] ** -0.5)
    assert CALLS
    assert set(CALLS) == {"torch"}
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert torch.equal(got_idx, want_idx)


@pytest.mark.parametrize("qb", [1, 64])
def test_dssa_attention_with_fused_stage1(monkeypatch, qb):
    cfg = DSSAConfig.small(dense_len=128, window_size=128, topk=4, query_block=qb)
    q, k, v = _qkv(640, 640, seed=qb)
    _fused(monkeypatch, False)
    want = dssa_attention(q, k, v, cfg)
    _fused(monkeypatch, True)
    got = dssa_attention(q, k, v, cfg)
    assert CALLS
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_fused_backend_only_for_mean_scores_on_cuda():
    q = torch.zeros(1, 1, 2, 4)
    assert sel.fused_backend(q, DSSAConfig.small()) is None  # CPU: chunked path
    meta = q.to("meta")
    assert sel.fused_backend(meta, DSSAConfig.small()) is None
    if torch.cuda.is_available():
        assert sel.fused_backend(q.cuda(), DSSAConfig.small()) == "triton"
        assert sel.fused_backend(q.cuda(), DSSAConfig.small(block_score="bound")) is None


def test_decode_with_cache_through_fused_stage1(monkeypatch):
    """Decode steps with the incremental compressed-key cache: same outputs either way."""
    from lc_attention.dssa import CompressedKeyCache

    cfg = DSSAConfig.small(dense_len=128, window_size=128, topk=4)
    q, k, v = _qkv(6, 520, seed=5)
    outs = {}
    for on in (False, True):
        _fused(monkeypatch, on)
        cache = CompressedKeyCache()
        outs[on] = [
            dssa_attention(q[:, i : i + 1], k[:, : 515 + i], v[:, : 515 + i], cfg, cache=cache)
            for i in range(6)
        ]
    assert CALLS
    for a, b in zip(outs[False], outs[True], strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)
