"""Selected attention: Triton kernels (NSA and FSA loop orders) against the reference.

On a machine without a GPU the kernels run in Triton's interpreter on CPU tensors
(``conftest.py`` sets ``TRITON_INTERPRET=1``), so shapes are small and odd.
"""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from lck_helpers import random_selection, rel_rms

from lc_kernels import dense_causal_attention_reference, selected_attention
from lc_kernels.selected_attention.function import build_plan, dedup_indices

torch.set_num_threads(1)
TOL = {torch.float32: 1e-3, torch.float16: 5e-3, torch.bfloat16: 2e-2}


def _inputs(seed, b, t, hkv, g, d, dtype, device):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(b, t, hkv * g, d, generator=gen)
    k = torch.randn(b, t, hkv, d, generator=gen)
    v = torch.randn(b, t, hkv, d, generator=gen)
    do = torch.randn(b, t, hkv * g, d, generator=gen)
    return [x.to(device=device, dtype=dtype) for x in (q, k, v, do)], gen


def _fwd_bwd(q, k, v, do, idx, bs, **kw):
    q, k, v = (x.detach().clone().requires_grad_(True) for x in (q, k, v))
    o = selected_attention(q, k, v, idx, block_size=bs, **kw)
    o.backward(do)
    return o, q.grad, k.grad, v.grad


def _compare(orders, b, t, hkv, g, d, bs, s, dtype, device, cu=None, seed=0):
    (q, k, v, do), gen = _inputs(seed, b, t, hkv, g, d, dtype, device)
    idx = random_selection(gen, b, t, hkv, s, bs, cu).to(device)
    cu_t = None if cu is None else torch.tensor(cu, device=device)
    ref = _fwd_bwd(
        q.double(), k.double(), v.double(), do.double(), idx, bs, cu_seqlens=cu_t, backend="torch"
    )
    for order in orders:
        got = _fwd_bwd(q, k, v, do, idx, bs, cu_seqlens=cu_t, backend="triton", order=order)
        for name, a, r in zip(("o", "dq", "dk", "dv"), got, ref, strict=True):
            assert a.dtype == dtype
            err = rel_rms(a, r)
            assert err < TOL[dtype], f"{order} {name}: rel RMS {err:.2e}"


@pytest.mark.parametrize("g", [1, 2, 3, 4, 8, 16])
def test_both_orders_match_reference_over_group_sizes(g, device):
    _compare(("fsa", "nsa"), 1, 63, 1, g, 48, 16, 2, torch.float32, device, seed=g)


@pytest.mark.parametrize(
    ("orders", "t", "hkv", "g", "d", "bs", "s"),
    [(("fsa", "nsa"), 100, 1, 2, 64, 16, 2), (("fsa",), 200, 1, 3, 64, 32, 3)],
)
def test_longer_sequences_and_head_dim_64(orders, t, hkv, g, d, bs, s, device):
    _compare(orders, 1, t, hkv, g, d, bs, s, torch.float32, device)


def test_float16_within_5e_3(device):
    _compare(("fsa", "nsa"), 2, 37, 2, 3, 48, 16, 2, torch.float16, device)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="bf16 dot products need a GPU")
def test_bfloat16_on_gpu():
    _compare(("fsa", "nsa"), 2, 300, 2, 4, 64, 64, 4, torch.bfloat16, "cuda")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="host/device syncs exist only on a GPU")
def test_fsa_plan_and_kernels_never_wait_for_the_device():
    from lc_kernels.selected_attention import triton as kernels

    gen = torch.Generator().manual_seed(3)
    t, hkv, g, d, bs = 300, 2, 4, 64, 64
    idx = random_selection(gen, 1, t, hkv, 4, bs, [0, t]).view(t, hkv, 4).int().cuda()
    idx = dedup_indices(idx).contiguous()
    q = torch.randn(t, hkv * g, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(t, hkv, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    cu = torch.tensor([0, t], device="cuda")
    _, _, chunk = kernels.fsa_tiling(g)
    plan = build_plan(idx, cu, bs, chunk, num_blocks=-(-t // bs))
    kernels.fsa_forward(q, k, v, idx, plan, bs, d**-0.5)  # compile and autotune first
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        plan = build_plan(idx, cu, bs, chunk, num_blocks=-(-t // bs))
        kernels.fsa_forward(q, k, v, idx, plan, bs, d**-0.5)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_varlen_matches_reference_and_per_sequence_calls(device):
    cu = [0, 37, 40, 70]
    _compare(("fsa", "nsa"), 1, 70, 1, 2, 48, 16, 2, torch.float32, device, cu=cu, seed=3)
    (q, k, v, _), gen = _inputs(4, 1, 70, 1, 2, 16, torch.float32, device)
    idx = random_selection(gen, 1, 70, 1, 2, 16, cu).to(device)
    packed = selected_attention(
        q, k, v, idx, 16, cu_seqlens=torch.tensor(cu, device=device), backend="triton"
    )
    for a, b_ in itertools.pairwise(cu):
        sl = slice(a, b_)
        alone = selected_attention(
            q[:, sl], k[:, sl], v[:, sl], idx[:, sl].contiguous(), 16, backend="triton"
        )
        assert rel_rms(packed[:, sl], alone) < 1e-6


@settings(max_examples=5)
@given(
    t=st.integers(1, 70),
    hkv=st.integers(1, 2),
    g=st.sampled_from([1, 2, 3, 5]),
    s=st.integers(1, 5),
    p_unused=st.floats(0.0, 0.9),
    order=st.sampled_from(["fsa", "nsa"]),
    seed=st.integers(0, 2**16),
)
def test_property_random_shapes_and_patterns(t, hkv, g, s, p_unused, order, seed, device):
    """Any causal pattern (repeats, -1, tokens with nothing selected) matches the reference."""
    (q, k, v, _), gen = _inputs(seed, 1, t, hkv, g, 16, torch.float32, device)
    idx = random_selection(gen, 1, t, hkv, s, 16, p_unused=p_unused).to(device)
    got = selected_attention(q, k, v, idx, 16, backend="triton", order=order)
    ref = selected_attention(q.double(), k.double(), v.double(), idx, 16, backend="torch")
    assert torch.isfinite(got).all()
    assert rel_rms(got, ref) < 1e-4 or float(ref.abs().max()) == 0.0
    none = (idx < 0).all(-1)  # [1, T, H_kv]: tokens that selected nothing give 0
    assert (got.view(1, t, hkv, g, 16)[none] == 0).all()


@settings(max_examples=3)
@given(
    t=st.integers(2, 64),
    g=st.sampled_from([1, 2, 4]),
    extra=st.integers(0, 3),
    seed=st.integers(0, 999),
)
def test_property_all_blocks_selected_is_dense_causal(t, g, extra, seed, device):
    """Selecting every block (in any order, with repeats) gives dense causal attention."""
    bs = 16
    (q, k, v, _), gen = _inputs(seed, 1, t, 1, g, 16, torch.float32, device)
    nb = -(-t // bs)
    perm = torch.randperm(nb, generator=gen)
    ids = torch.cat([perm, perm[: min(extra, nb)]]).view(1, 1, 1, -1).repeat(1, t, 1, 1)
    own = (torch.arange(t) // bs).view(1, t, 1, 1)
    idx = torch.where(ids <= own, ids, torch.full_like(ids, -1)).to(device)
    dense = dense_causal_attention_reference(q, k, v, 0.25)
    ref = selected_attention(q, k, v, idx, bs, backend="torch")
    assert torch.equal(ref, dense)
    sdpa = F.scaled_dot_product_attention(
        q.transpose(1, 2),
        k.repeat_interleave(g, 2).transpose(1, 2),
        v.repeat_interleave(g, 2).transpose(1, 2),
        is_causal=True,
    ).transpose(1, 2)
    assert rel_rms(dense, sdpa) < 1e-5
    for order in ("fsa", "nsa"):
        assert (
            rel_rms(selected_attention(q, k, v, idx, bs, backend="triton", order=order), sdpa)
            < 1e-5
        )


def test_gradcheck_float64_reference():
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 9, 2, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 9, 1, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    v = torch.randn(1, 9, 1, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    idx = random_selection(gen, 1, 9, 1, 2, 4, p_unused=0.0)
    idx[:, :, :, 0] = (torch.arange(9) // 4).view(1, 9, 1)  # every token sees its own block

    def f(q, k, v):
        return selected_attention(q, k, v, idx, block_size=4, backend="torch")

    assert torch.autograd.gradcheck(f, (q, k, v))


def test_triton_gradients_match_finite_differences(device):
    """A directional finite difference of the Triton fp32 forward matches its backward."""
    (q, k, v, do), gen = _inputs(5, 1, 40, 1, 2, 16, torch.float32, device)
    idx = random_selection(gen, 1, 40, 1, 2, 16, p_unused=0.0).to(device)
    _, dq, dk, dv = _fwd_bwd(q, k, v, do, idx, 16, backend="triton", order="fsa")
    dirs = [torch.randn_like(x, generator=None) for x in (q, k, v)]
    eps = 1e-2

    def loss(scale):
        qq, kk, vv = (x + scale * d for x, d in zip((q, k, v), dirs, strict=True))
        o = selected_attention(qq, kk, vv, idx, 16, backend="triton", order="fsa")
        return float((o.double() * do.double()).sum())

    fd = (loss(eps) - loss(-eps)) / (2 * eps)
    an = sum(
        float((g.double() * d.double()).sum()) for g, d in zip((dq, dk, dv), dirs, strict=True)
    )
    assert abs(fd - an) < 2e-2 * max(1.0, abs(an))


def test_plan_lists_exactly_the_selecting_tokens_in_bounded_chunks():
    gen = torch.Generator().manual_seed(1)
    cu = torch.tensor([0, 30, 95])
    idx = dedup_indices(random_selection(gen, 1, 95, 2, 4, 16, cu.tolist()).view(95, 2, 4).int())
    plan = build_plan(idx, cu, 16, chunk=5)
    off, tok, slot = plan["off"].long(), plan["tok"].long(), plan["slot"].long()
    ngb = plan["blk_bos"].numel()
    assert ngb == 2 + 5
    assert int(off[-1]) == int((idx >= 0).sum())
    for key in range(2 * ngb):
        h, gb = divmod(key, ngb)
        rows = slice(int(off[key]), int(off[key + 1]))
        got = idx[tok[rows], h, slot[rows]]
        assert (got == plan["blk_j"][gb]).all()
        assert (tok[rows] >= plan["blk_bos"][gb]).all()
        assert (tok[rows].diff() >= 0).all()
        # the chunks of this key tile its entry range, at most 5 entries each
        chunks = range(int(plan["ck_off"][key]), int(plan["ck_off"][key + 1]))
        assert all(int(plan["ch_key"][c]) == key for c in chunks)
        bounds = [(int(plan["ch_start"][c]), int(plan["ch_end"][c])) for c in chunks]
        assert all(0 < e - a <= 5 for a, e in bounds)
        flat = [i for a, e in bounds for i in range(a, e)]
        assert flat == list(range(rows.start, rows.stop))
    # a fixed number of chunk slots (no host read sizes the launch); the spare ones are empty
    assert plan["ch_key"].numel() == -(-idx.numel() // 5) + 2 * ngb
    real = int(plan["ck_off"][-1])
    assert (plan["ch_start"][real:] == plan["ch_end"][real:]).all()
    # the host-given block count builds the same plan as the one read from cu_seqlens
    same = build_plan(idx, cu, 16, chunk=5, num_blocks=ngb)
    assert all(torch.equal(plan[name], same[name]) for name in plan)


def test_dedup_keeps_each_block_once():
    idx = torch.tensor([[[3, 1, 3, -1, 1, 0]]])
    out = dedup_indices(idx)
    kept = sorted(x for x in out.flatten().tolist() if x >= 0)
    assert kept == [0, 1, 3]
