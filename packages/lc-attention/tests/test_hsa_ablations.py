"""The switches that remove one of HSA's three principles each change the computation."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from lc_attention.hsa import (
    ChunkEncoder,
    ChunkSparseAttention,
    HSATransformer,
    HSATransformerConfig,
    hsa_attention_reference,
)

torch.set_num_threads(1)

_CFG = HSATransformerConfig(
    vocab_size=16,
    dim=32,
    num_heads=4,
    retrieval_heads=2,
    chunk_size=4,
    top_k=2,
    window=8,
    upper_layers=2,
)


def _tokens() -> torch.Tensor:
    return torch.randint(0, 16, (2, 32), generator=torch.Generator().manual_seed(0))


def test_full_model_keeps_its_previous_outputs_and_gradients() -> None:
    # Recorded with the model as it was before the ablation switches existed.
    model = HSATransformer(_CFG, seed=3)
    model.train()
    out = model(_tokens())
    assert isinstance(out, torch.Tensor)
    assert out.double().sum().item() == pytest.approx(0.9739012180070858, abs=1e-4)
    assert out.pow(2).sum().item() == pytest.approx(367.1629638671875, rel=1e-5)
    ref = [1.1679441928863525, -1.3943196535110474, -1.1856083869934082, 0.5817638039588928]
    torch.testing.assert_close(out[0, -1, :4], torch.tensor(ref), rtol=1e-4, atol=1e-5)
    out.sum().backward()
    gsq = sum(p.grad.double().pow(2).sum().item() for p in model.parameters() if p.grad is not None)
    assert gsq == pytest.approx(736456.3258749177, rel=1e-4)


@pytest.mark.parametrize(
    "switch", [{"chunk_encoder": False}, {"bypass_residual": False}, {"sparse_training": False}]
)
def test_each_ablation_changes_the_training_forward(switch) -> None:
    full = HSATransformer(_CFG, seed=3).train()
    ablated = HSATransformer(dataclasses.replace(_CFG, **switch), seed=3).train()
    a, b = full(_tokens()), ablated(_tokens())
    assert isinstance(a, torch.Tensor)
    assert isinstance(b, torch.Tensor)
    assert (a - b).abs().max() > 1e-3


def test_without_encoder_landmarks_are_projected_chunk_means() -> None:
    cfg = dataclasses.replace(_CFG, chunk_encoder=False)
    enc = ChunkEncoder(cfg)
    assert enc.cls is None
    assert enc.pos is None
    assert len(enc.blocks) == 0
    h = torch.randn(2, 12, 32, generator=torch.Generator().manual_seed(1))
    mem = enc(h)
    x = enc.norm(h.view(2, 3, 4, 32))
    torch.testing.assert_close(mem.landmarks, enc.landmark(x.mean(2)).view(2, 3, 2, 16))
    torch.testing.assert_close(mem.keys, enc.k_proj(x).view(2, 3, 4, 2, 8))
    torch.testing.assert_close(mem.values, enc.v_proj(x).view(2, 3, 4, 2, 8))
    # a mean has no order: permuting tokens inside a chunk leaves the landmark unchanged ...
    perm = h.view(2, 3, 4, 32)[:, :, [2, 0, 3, 1]].reshape(2, 12, 32)
    torch.testing.assert_close(enc(perm).landmarks, mem.landmarks)
    # ... while the CLS encoder (with its slot positions) sees the order
    full = ChunkEncoder(_CFG)
    assert (full(perm).landmarks - full(h).landmarks).abs().max() > 1e-4
    n_full = sum(p.numel() for p in full.parameters())
    n_abl = sum(p.numel() for p in enc.parameters())
    assert n_abl < n_full


def test_dense_training_reads_every_visible_chunk_and_eval_stays_sparse() -> None:
    cfg = dataclasses.replace(_CFG, sparse_training=False)
    gen = torch.Generator().manual_seed(2)
    h = torch.randn(1, 24, 32, generator=gen)
    enc = ChunkEncoder(cfg)
    att = ChunkSparseAttention(cfg)
    mem = enc(h)
    att.train()
    out, sel = att(h, mem)
    # query t sees floor(t / S) complete chunks, and reads all of them
    valid = (sel.indices >= 0).sum(-1)[0, :, 0]
    assert valid.tolist() == [t // 4 for t in range(24)]
    b, t = 1, 24
    q = att.q_proj(h).view(b, t, 4, 8)
    rq = att.retrieval_q(h).view(b, t, 2, 16)
    dense = att.out(
        hsa_attention_reference(q, mem.keys, mem.values, rq, mem.landmarks).view(b, t, 32)
    )
    torch.testing.assert_close(out, dense, rtol=1e-5, atol=1e-6)
    att.eval()
    _, sel_eval = att(h, mem)
    assert int((sel_eval.indices >= 0).sum(-1).max()) == cfg.top_k
    # the default enforces the top-k choice in training as well
    sparse = ChunkSparseAttention(_CFG).train()
    _, sel_sparse = sparse(h, ChunkEncoder(_CFG)(h))
    assert int((sel_sparse.indices >= 0).sum(-1).max()) == _CFG.top_k


def test_no_bypass_is_the_only_difference_between_the_merges() -> None:
    # Same seed, same parameters: the two merges differ by exactly the retrieved vector r.
    byp = HSATransformer(_CFG, seed=5).eval()
    plain = HSATransformer(dataclasses.replace(_CFG, bypass_residual=False), seed=5).eval()
    for a, b in zip(byp.parameters(), plain.parameters(), strict=True):
        assert torch.equal(a, b)
    blk_b, blk_p = byp.upper[0], plain.upper[0]
    x = torch.randn(1, 16, 32, generator=torch.Generator().manual_seed(3))
    mem = byp.encoder(x)
    yb, _ = blk_b(x, mem)
    yp, _ = blk_p(x, mem)
    x1 = x + blk_b.attn(blk_b.norm1(x))
    r, _ = blk_b.hsa(blk_b.norm_r(x1), mem)
    torch.testing.assert_close(yp - yb, r, rtol=1e-4, atol=1e-5)
    assert r.abs().max() > 1e-3
