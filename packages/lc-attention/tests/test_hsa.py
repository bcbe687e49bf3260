"""Hierarchical chunk sparse attention: retrieval, sparse vs dense, bypass, kernels, model."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lc_attention.bam import PreNormBlock
from lc_attention.hsa import (
    ChunkEncoder,
    HSABlock,
    HSATransformer,
    HSATransformerConfig,
    chunk_scores,
    hsa_attention,
    hsa_attention_reference,
    select_chunks,
)

torch.set_num_threads(1)


def _cfg(**kw) -> HSATransformerConfig:
    base = dict(vocab_size=20, dim=32, num_heads=4, retrieval_heads=2, chunk_size=4, window=6)
    base.update(kw)
    return HSATransformerConfig(**base)


def _inputs(b, t, h, g, d, s, dr, seed):
    gen = torch.Generator().manual_seed(seed)
    c = t // s
    q = torch.randn(b, t, h, d, generator=gen, dtype=torch.float64)
    ck = torch.randn(b, c, s, g, d, generator=gen, dtype=torch.float64)
    cv = torch.randn(b, c, s, g, d, generator=gen, dtype=torch.float64)
    rq = torch.randn(b, t, g, dr, generator=gen, dtype=torch.float64) * 2
    lm = torch.randn(b, c, g, dr, generator=gen, dtype=torch.float64) * 2
    return q, ck, cv, rq, lm


# --------------------------------------------------------------------------- retrieval


def test_only_complete_past_chunks_are_visible() -> None:
    rq, lm = torch.randn(1, 12, 1, 4), torch.randn(1, 3, 1, 4)
    s = chunk_scores(rq, lm, chunk_size=4)
    vis = torch.isfinite(s)[0, :, 0]  # [T, C]
    for t in range(12):
        for c in range(3):
            assert bool(vis[t, c]) == ((c + 1) * 4 <= t), (t, c)


def test_select_keeps_exactly_k_best_and_softmaxes_their_scores() -> None:
    gen = torch.Generator().manual_seed(0)
    rq, lm = torch.randn(2, 40, 2, 8, generator=gen), torch.randn(2, 10, 2, 8, generator=gen)
    scores = chunk_scores(rq, lm, chunk_size=4)
    idx, w = select_chunks(scores, top_k=3)
    n_vis = torch.isfinite(scores).sum(-1)  # [B, T, G]
    used = (idx >= 0).sum(-1)
    assert torch.equal(used, n_vis.clamp(max=3))  # exactly k once k chunks are visible
    for b, t, g in [(0, 39, 1), (1, 20, 0), (0, 13, 0)]:
        row = scores[b, t, g]
        best = row.topk(3).indices
        valid = torch.isfinite(row[best])
        assert set(idx[b, t, g][idx[b, t, g] >= 0].tolist()) == set(best[valid].tolist())
        expect = torch.softmax(row[best][valid], 0)
        got = w[b, t, g][idx[b, t, g] >= 0]
        torch.testing.assert_close(got.sort().values, expect.sort().values)
    assert torch.all(w[idx < 0] == 0)
    torch.testing.assert_close(w.sum(-1), (n_vis > 0).float())


def test_noise_changes_the_choice_but_not_the_weight_formula() -> None:
    s = torch.tensor([[[[3.0, 2.0, 1.0]]]])
    idx, w = select_chunks(s, 1, noise=torch.tensor([[[[0.0, 0.0, 5.0]]]]))
    assert idx.item() == 2
    assert w.item() == 1.0


def test_select_rejects_bad_k() -> None:
    with pytest.raises(ValueError, match="top_k"):
        select_chunks(torch.zeros(1, 2, 1, 3), top_k=4)
    with pytest.raises(ValueError, match="top_k"):
        select_chunks(torch.zeros(1, 2, 1, 3), top_k=0)


# --------------------------------------------------------------------------- attention


@settings(max_examples=12)
@given(
    b=st.integers(1, 2),
    chunks=st.integers(1, 5),
    s=st.sampled_from([1, 3, 4]),
    g=st.sampled_from([1, 2]),
    r=st.sampled_from([1, 3]),
    d=st.sampled_from([2, 6]),
    qb=st.sampled_from([1, 5, 64]),
    seed=st.integers(0, 10_000),
)
def test_sparse_with_k_all_chunks_equals_dense_reference(b, chunks, s, g, r, d, qb, seed) -> None:
    t = chunks * s + s - 1  # a partial tail (for s > 1): its tokens are never retrievable
    q, ck, cv, rq, lm = _inputs(b, t, g * r, g, d, s, 5, seed)
    scores = chunk_scores(rq, lm, s)
    idx, w = select_chunks(scores, top_k=chunks)
    sparse = hsa_attention(q, ck, cv, idx, w, backend="torch", query_block=qb)
    dense = hsa_attention_reference(q, ck, cv, rq, lm)
    torch.testing.assert_close(sparse, dense, rtol=1e-10, atol=1e-10)
    # the first chunk completes at position s: earlier queries read nothing
    assert torch.all(sparse[:, :s] == 0)


def test_sparse_uses_only_the_selected_chunks() -> None:
    q, ck, cv, rq, lm = _inputs(1, 24, 2, 1, 4, 4, 4, seed=3)
    idx, w = select_chunks(chunk_scores(rq, lm, 4), top_k=2)
    out = hsa_attention(q, ck, cv, idx, w, backend="torch")
    # perturb every chunk that query 23 did not select: its output must not move
    keep = set(idx[0, 23, 0].tolist())
    ck2, cv2 = ck.clone(), cv.clone()
    for c in range(6):
        if c not in keep:
            ck2[:, c] += 5.0
            cv2[:, c] -= 3.0
    out2 = hsa_attention(q, ck2, cv2, idx, w, backend="torch")
    torch.testing.assert_close(out[0, 23], out2[0, 23])
    assert not torch.allclose(out, out2)


def test_gradients_reach_queries_keys_values_and_retrieval_scores() -> None:
    q, ck, cv, rq, lm = (x.requires_grad_(True) for x in _inputs(1, 20, 2, 1, 4, 4, 3, seed=7))
    idx, w = select_chunks(chunk_scores(rq, lm, 4), top_k=2)
    out = hsa_attention(q, ck, cv, idx, w, backend="torch")
    out.square().sum().backward()
    for x in (q, ck, cv, rq, lm):
        assert x.grad is not None
        assert torch.isfinite(x.grad).all()
        assert x.grad.abs().sum() > 0

    # k = all chunks: the sparse gradients equal the dense reference's
    def run(fn):
        xs = [x.detach().clone().requires_grad_(True) for x in (q, ck, cv, rq, lm)]
        fn(*xs).square().sum().backward()
        return [x.grad for x in xs]

    def sparse(q, ck, cv, rq, lm):
        i, ww = select_chunks(chunk_scores(rq, lm, 4), top_k=5)
        return hsa_attention(q, ck, cv, i, ww, backend="torch")

    for gs, gd in zip(run(sparse), run(hsa_attention_reference), strict=True):
        torch.testing.assert_close(gs, gd, rtol=1e-9, atol=1e-10)


def test_gradcheck_of_the_gather_path() -> None:
    q, ck, cv, rq, lm = _inputs(1, 9, 2, 1, 2, 3, 2, seed=11)
    idx, w = select_chunks(chunk_scores(rq, lm, 3), top_k=1)
    w = w.double().requires_grad_(True)
    args = (q.requires_grad_(True), ck.requires_grad_(True), cv.requires_grad_(True))
    assert torch.autograd.gradcheck(
        lambda a, b, c, ww: hsa_attention(a, b, c, idx, ww, backend="torch"), (*args, w)
    )


def test_attention_rejects_bad_shapes() -> None:
    q, ck, cv, _rq, _lm = _inputs(1, 8, 3, 2, 4, 4, 2, seed=0)
    idx, w = torch.zeros(1, 8, 2, 1, dtype=torch.long), torch.ones(1, 8, 2, 1)
    with pytest.raises(ValueError, match="multiple"):
        hsa_attention(q, ck, cv, idx, w)
    q = torch.randn(1, 8, 4, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match="backend"):
        hsa_attention(q, ck, cv, idx, w, backend="cuda")
    with pytest.raises(ValueError, match=r"\[B, T, G, k\]"):
        hsa_attention(q, ck, cv, idx[:, :4], w[:, :4])


# --------------------------------------------------------------------------- model


def test_zeroed_retrieval_branch_gives_the_sliding_window_block() -> None:
    cfg = _cfg()
    blk = HSABlock(cfg)
    x = torch.randn(2, 16, 32)
    mem = ChunkEncoder(cfg)(x)
    swa_only = PreNormBlock.forward(blk, x)  # the same weights as a plain SWA block
    y_drop, sel = blk(x, None)
    assert sel is None
    torch.testing.assert_close(y_drop, swa_only)
    y_full, _ = blk(x, mem)
    assert not torch.allclose(y_full, swa_only)
    torch.nn.init.zeros_(blk.hsa.out.weight)  # zero the retrieval branch's output
    y_zero, sel = blk(x, mem)
    torch.testing.assert_close(y_zero, swa_only)
    assert sel is not None


def test_bypass_keeps_retrieval_out_of_the_residual_stream() -> None:
    x = torch.randn(1, 16, 32)
    byp = HSABlock(_cfg(bypass_residual=True))
    plain = HSABlock(_cfg(bypass_residual=False))
    plain.load_state_dict(byp.state_dict())
    mem = ChunkEncoder(_cfg())(x)
    torch.nn.init.zeros_(byp.mlp[2].weight)
    torch.nn.init.zeros_(byp.mlp[2].bias)
    plain.load_state_dict(byp.state_dict())
    # with a silent MLP the bypass block outputs exactly x1 = x + SWA(x), the ablation x1 + r
    x1 = x + byp.attn(byp.norm1(x))
    r, _ = byp.hsa(byp.norm_r(x1), mem)
    torch.testing.assert_close(byp(x, mem)[0], x1)
    torch.testing.assert_close(plain(x, mem)[0], x1 + r)


def test_model_selection_is_exactly_k_and_causal() -> None:
    cfg = _cfg(top_k=2, upper_layers=2)
    model = HSATransformer(cfg, seed=1)
    tokens = torch.randint(0, 20, (2, 32), generator=torch.Generator().manual_seed(0))
    logits, sels = model(tokens, return_selection=True)
    assert logits.shape == (2, 32, 20)
    assert len(sels) == 2
    t = torch.arange(32)[None, :, None, None]
    for sel in sels:
        valid = sel.indices >= 0
        assert torch.all(((sel.indices + 1) * 4 <= t.expand_as(sel.indices)) | ~valid)
        n_vis = (t // 4).clamp(max=2).expand(2, 32, 2, 1)[..., 0]
        assert torch.equal(valid.sum(-1), n_vis)
        # distinct chunks per query
        for row in sel.indices[0, -1]:
            assert len(set(row.tolist())) == 2


def test_model_is_causal_and_gradients_flow_everywhere() -> None:
    cfg = _cfg()
    model = HSATransformer(cfg, seed=0)
    gen = torch.Generator().manual_seed(1)
    tokens = torch.randint(0, 20, (1, 24), generator=gen)
    a = model(tokens)
    t2 = tokens.clone()
    t2[0, 20:] = (t2[0, 20:] + 1) % 20
    b = model(t2)
    torch.testing.assert_close(a[:, :20], b[:, :20])
    a.square().mean().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert p.grad.abs().sum() > 0, name


def test_long_input_in_query_blocks_matches_one_block() -> None:
    tokens = torch.randint(0, 20, (1, 48), generator=torch.Generator().manual_seed(2))
    a = HSATransformer(_cfg(query_block=1024), seed=4)
    b = HSATransformer(_cfg(query_block=7), seed=4)
    torch.testing.assert_close(a(tokens), b(tokens), rtol=1e-5, atol=1e-5)


def test_gumbel_noise_only_in_training_and_seeded() -> None:
    cfg = _cfg(gumbel_noise=True, top_k=1)
    model = HSATransformer(cfg, seed=0)
    tokens = torch.randint(0, 20, (2, 40), generator=torch.Generator().manual_seed(3))
    model.eval()
    ref = model(tokens, return_selection=True)[1][0].indices
    model.train()
    s1 = model(tokens, return_selection=True, generator=torch.Generator().manual_seed(9))[1][0]
    s2 = model(tokens, return_selection=True, generator=torch.Generator().manual_seed(9))[1][0]
    assert torch.equal(s1.indices, s2.indices)
    assert not torch.equal(s1.indices, ref)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (dict(max_seq_len=30), "multiple of chunk_size"),
        (dict(top_k=9, max_seq_len=32), "top_k"),
        (dict(top_k=0), "top_k"),
        (dict(window=3), "window"),
        (dict(retrieval_heads=3), "retrieval_heads"),
        (dict(backend="cuda"), "backend"),
        (dict(encoder_layers=0), "encoder_layers"),
        (dict(dim=30), "dim"),
    ],
)
def test_config_errors(kw, match) -> None:
    with pytest.raises(ValueError, match=match):
        _cfg(**kw)


def test_input_errors() -> None:
    model = HSATransformer(_cfg(max_seq_len=64, top_k=3), seed=0)
    with pytest.raises(ValueError, match="multiple of chunk_size"):
        model(torch.zeros(1, 18, dtype=torch.long))
    with pytest.raises(ValueError, match="exceeds max_seq_len"):
        model(torch.zeros(1, 68, dtype=torch.long))
    with pytest.raises(ValueError, match="top_k=3 exceeds"):
        model(torch.zeros(1, 8, dtype=torch.long))
    with pytest.raises(ValueError, match="token ids"):
        model(torch.full((1, 16), 20, dtype=torch.long))
    with pytest.raises(ValueError, match="int64"):
        model(torch.zeros(1, 16))


def test_config_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        _cfg().top_k = 3  # type: ignore[misc]
