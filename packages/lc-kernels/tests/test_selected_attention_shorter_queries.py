"""Selected attention with fewer queries than keys (decode, chunked prefill) and a key
padding mask, on the reference and the Triton kernels (both loop orders), forward and
backward; and the ``check=False`` path that makes no data-dependent host read.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from lck_helpers import random_selection, rel_rms

from lc_kernels import selected_attention
from lc_kernels.selected_attention import selection_mask

torch.set_num_threads(1)


def _loop_reference(q, k, v, idx, bs, scale, kv_valid=None):
    """Selected attention one (batch, query, head) at a time, in float64."""
    b, tq, hq, d = q.shape
    tk, hkv = k.shape[1], k.shape[2]
    g = hq // hkv
    out = torch.zeros(b, tq, hq, d, dtype=torch.float64)
    for bi in range(b):
        for t in range(tq):
            pos = tk - tq + t
            for h in range(hq):
                blocks = {int(x) for x in idx[bi, t, h // g] if int(x) >= 0}
                keys = [
                    s
                    for s in range(pos + 1)
                    if s // bs in blocks and (kv_valid is None or bool(kv_valid[bi, s]))
                ]
                if not keys:
                    continue
                kk, vv = k[bi, keys, h // g].double(), v[bi, keys, h // g].double()
                p = torch.softmax(kk @ q[bi, t, h].double() * scale, 0)
                out[bi, t, h] = p @ vv
    return out


def _causal_selection(gen, b, tq, tk, h, s, bs, p_unused=0.2):
    own = ((torch.arange(tq) + tk - tq) // bs).view(1, tq, 1, 1)
    idx = (torch.rand(b, tq, h, s, generator=gen) * (own + 1)).long()
    unused = torch.rand(b, tq, h, s, generator=gen) < p_unused
    return torch.where(unused, torch.full_like(idx, -1), idx)


def _case(seed, b, tq, tk, hkv, g, d, bs, s, pad=False):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(b, tq, hkv * g, d, generator=gen)
    k = torch.randn(b, tk, hkv, d, generator=gen)
    v = torch.randn(b, tk, hkv, d, generator=gen)
    do = torch.randn(b, tq, hkv * g, d, generator=gen)
    idx = _causal_selection(gen, b, tq, tk, hkv, s, bs)
    valid = None
    if pad:  # left padding of a different length per row, plus one hole in the middle
        lead = torch.randint(0, tk // 2, (b,), generator=gen)
        valid = torch.arange(tk).view(1, tk) >= lead.view(b, 1)
        valid[:, tk // 2] = False
    return q, k, v, do, idx, valid


def _fwd_bwd(q, k, v, do, idx, bs, **kw):
    q, k, v = (x.detach().clone().requires_grad_(True) for x in (q, k, v))
    o = selected_attention(q, k, v, idx, block_size=bs, **kw)
    o.backward(do)
    return o, q.grad, k.grad, v.grad


@pytest.mark.parametrize(
    ("b", "tq", "tk", "pad"), [(1, 1, 37, False), (2, 5, 21, False), (2, 6, 33, True)]
)
def test_reference_matches_loop_oracle(b, tq, tk, pad):
    q, k, v, _, idx, valid = _case(tq + tk, b, tq, tk, 2, 2, 4, 8, 3, pad)
    got = selected_attention(
        q.double(), k.double(), v.double(), idx, 8, 0.5, backend="torch", kv_valid=valid
    )
    want = _loop_reference(q, k, v, idx, 8, 0.5, valid)
    assert torch.allclose(got, want, atol=1e-12)


def test_fewer_queries_equal_the_tail_of_the_full_call():
    """Tq queries at the end of Tk keys equal the last Tq rows of a Tq == Tk call."""
    q, k, v, _, idx, _ = _case(1, 1, 40, 40, 1, 2, 4, 8, 3)
    q, k, v = (x.double() for x in (q, k, v))
    full = selected_attention(q, k, v, idx, 8, backend="torch")
    tail = selected_attention(q[:, -9:], k, v, idx[:, -9:].contiguous(), 8, backend="torch")
    assert torch.equal(tail, full[:, -9:])


def test_selection_mask_aligns_queries_to_the_end_and_drops_padded_keys():
    idx = torch.tensor([[[[0, 1]], [[1, -1]]]])  # [1, Tq=2, 1, 2]
    valid = torch.ones(1, 12, dtype=torch.bool)
    valid[0, 2] = False
    m = selection_mask(idx, 12, 4, valid)[0, 0]  # [2, 12]; queries at positions 10, 11
    assert m[0].tolist() == [s != 2 and s < 8 for s in range(12)]
    assert m[1].tolist() == [4 <= s < 8 for s in range(12)]


@pytest.mark.parametrize(
    ("b", "tq", "tk", "g", "pad"),
    [(1, 1, 45, 2, False), (2, 7, 40, 3, False), (2, 9, 50, 2, True), (1, 33, 33, 1, True)],
)
def test_triton_both_orders_match_reference(b, tq, tk, g, pad, device):
    q, k, v, do, idx, valid = _case(b * tq + tk, b, tq, tk, 2, g, 16, 16, 2, pad)
    q, k, v, do = (x.to(device) for x in (q, k, v, do))
    idx = idx.to(device)
    valid = None if valid is None else valid.to(device)
    ref = _fwd_bwd(
        q.double(), k.double(), v.double(), do.double(), idx, 16, backend="torch", kv_valid=valid
    )
    for order in ("fsa", "nsa"):
        got = _fwd_bwd(q, k, v, do, idx, 16, backend="triton", order=order, kv_valid=valid)
        for name, a, r in zip(("o", "dq", "dk", "dv"), got, ref, strict=True):
            assert torch.isfinite(a).all(), f"{order} {name} not finite"
            err = rel_rms(a, r)
            assert err < 1e-3, f"{order} {name}: rel RMS {err:.2e}"


def test_keys_with_padding_get_no_gradient_and_fully_padded_rows_give_zero(device):
    q, k, v, do, idx, _ = _case(7, 1, 4, 32, 1, 2, 16, 16, 2)
    valid = torch.ones(1, 32, dtype=torch.bool)
    valid[0, :16] = False  # the whole first block is padding
    idx[:] = 0  # every query selected only block 0
    idx[0, -1, 0, 1] = 1  # ... except the last, which also sees block 1
    q, k, v, do, idx, valid = (x.to(device) for x in (q, k, v, do, idx, valid))
    for backend, order in (("torch", "auto"), ("triton", "fsa"), ("triton", "nsa")):
        o, _, dk, dv = _fwd_bwd(q, k, v, do, idx, 16, backend=backend, order=order, kv_valid=valid)
        assert (o[0, :-1] == 0).all(), backend + order
        assert (o[0, -1] != 0).any(), backend + order
        assert (dk[0, :16] == 0).all(), backend + order
        assert (dv[0, :16] == 0).all(), backend + order


def test_bad_shorter_query_inputs_raise():
    q, k, v, _, idx, _ = _case(0, 1, 4, 20, 1, 2, 4, 16, 2)
    kq = q[:, :, :1].contiguous()  # 4 keys against 20 queries
    with pytest.raises(ValueError, match="no more queries than keys"):
        selected_attention(k.repeat(1, 1, 2, 1), kq, kq, idx, 16)
    with pytest.raises(ValueError, match="equally long"):
        selected_attention(q, k, v, idx, 16, cu_seqlens=torch.tensor([0, 20]))
    with pytest.raises(ValueError, match="future block"):
        selected_attention(q, k, v, idx + 1, 16)  # query 0 sits at key 16: block 1 is ok, 2 not
    with pytest.raises(TypeError, match="kv_valid must be a bool"):
        selected_attention(q, k, v, idx, 16, kv_valid=torch.ones(1, 20))
    with pytest.raises(ValueError, match=r"kv_valid must have shape \[batch=1, keys=20\]"):
        selected_attention(q, k, v, idx, 16, kv_valid=torch.ones(1, 4, dtype=torch.bool))


@settings(max_examples=3, deadline=None)
@given(
    tk=st.integers(1, 40),
    frac=st.floats(0.0, 1.0),
    g=st.sampled_from([1, 3]),
    pad=st.booleans(),
    order=st.sampled_from(["fsa", "nsa"]),
    seed=st.integers(0, 2**16),
)
def test_property_shorter_queries_and_padding(tk, frac, g, pad, order, seed, device):
    """Any Tq <= Tk, with or without padding: Triton forward and backward match the reference."""
    tq = max(1, round(frac * tk))
    q, k, v, do, idx, valid = _case(seed, 1, tq, tk, 1, g, 16, 16, 2, pad and tk > 1)
    q, k, v, do, idx = (x.to(device) for x in (q, k, v, do, idx))
    valid = None if valid is None else valid.to(device)
    ref = _fwd_bwd(
        q.double(), k.double(), v.double(), do.double(), idx, 16, backend="torch", kv_valid=valid
    )
    got = _fwd_bwd(q, k, v, do, idx, 16, backend="triton", order=order, kv_valid=valid)
    for name, a, r in zip(("o", "dq", "dk", "dv"), got, ref, strict=True):
        assert torch.isfinite(a).all(), name
        assert rel_rms(a, r) < 1e-4 or float(r.abs().max()) == 0.0, name


# ----------------------------------------------------------------------------- check=False


def _meta(*xs):
    return [x.to("meta") for x in xs]


@pytest.mark.parametrize("packed", [False, True])
def test_unchecked_call_reads_nothing_back_from_the_device(packed):
    """On the meta device any ``.item()``/``.tolist()``/``bool(tensor)`` raises, so a call
    that completes there made no data-dependent host read."""
    q, k, v, _, idx, valid = _case(3, 1, 20, 20, 2, 2, 8, 16, 2, pad=True)
    cu = torch.tensor([0, 7, 20]) if packed else None
    mq, mk, mv, midx, mvalid = _meta(q, k, v, idx, valid)
    mcu = None if cu is None else cu.to("meta")
    kw = {"cu_seqlens": mcu, "kv_valid": mvalid, "backend": "torch"}
    out = selected_attention(mq, mk, mv, midx, 16, check=False, **kw)
    assert out.shape == q.shape
    assert out.device.type == "meta"
    with pytest.raises((RuntimeError, NotImplementedError)):  # the checked call reads
        selected_attention(mq, mk, mv, midx, 16, check=True, **kw)


def test_unchecked_fsa_plan_reads_nothing_back_from_the_device():
    from lc_kernels.selected_attention.function import (
        build_plan,
        dedup_indices,
        max_global_blocks,
        num_global_blocks,
    )

    gen = torch.Generator().manual_seed(2)
    cu = torch.tensor([0, 30, 30, 95])
    idx = torch.randint(-1, 2, (95, 2, 3), generator=gen).int()
    idx = dedup_indices(idx)
    bound = max_global_blocks(95, 3, 16)
    assert bound >= num_global_blocks(cu, 16)
    plan = build_plan(*_meta(idx, cu), 16, chunk=5, num_blocks=bound)
    assert plan["blk_bos"].numel() == bound
    # the bound only adds empty blocks: the entries are those of the exact plan
    exact, padded = build_plan(idx, cu, 16, chunk=5), build_plan(idx, cu, 16, 5, bound)
    for name in ("tok", "slot", "qpos"):
        n = int(exact["off"][-1])
        assert torch.equal(exact[name][:n], padded[name][:n]), name


def test_torch_compile_fullgraph_on_the_reference_backend():
    """``check=False`` traces as one graph (forward and backward through AOT autograd).

    The ``aot_eager`` compiler keeps the test fast on CPU; what can break a full graph
    (host reads, data-dependent control flow) is found by the tracer, not the compiler.
    """
    q, k, v, do, idx, valid = _case(4, 2, 5, 24, 1, 2, 8, 8, 2, pad=True)

    def selected_attention_wrapper(q, k, v, idx, valid):
        return selected_attention(q, k, v, idx, 8, kv_valid=valid, backend="torch", check=False)

    torch._dynamo.reset()
    compiled = torch.compile(selected_attention_wrapper, fullgraph=True, backend="aot_eager")
    got = _fwd_bwd(q, k, v, do, idx, 8, kv_valid=valid, backend="torch")
    qq, kk, vv = (x.detach().clone().requires_grad_(True) for x in (q, k, v))
    out = compiled(qq, kk, vv, idx, valid)
    out.backward(do)
    for a, r in zip((out, qq.grad, kk.grad, vv.grad), got, strict=True):
        assert torch.allclose(a, r, atol=1e-6)


@pytest.mark.slow
def test_torch_compile_fullgraph_with_inductor():
    """The same with the default compiler (inductor builds C++ on CPU: tens of seconds)."""
    q, k, v, _, idx, _ = _case(5, 1, 3, 20, 1, 2, 8, 8, 2)

    def selected_attention_wrapper(q, k, v, idx):
        return selected_attention(q, k, v, idx, 8, backend="torch", check=False)

    torch._dynamo.reset()
    compiled = torch.compile(selected_attention_wrapper, fullgraph=True)
    want = selected_attention_wrapper(q, k, v, idx)
    assert torch.allclose(compiled(q, k, v, idx), want, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="host/device syncs exist only on a GPU")
@pytest.mark.parametrize("order", ["fsa", "nsa"])
def test_unchecked_triton_call_never_waits_for_the_device(order):
    q, k, v, do, idx, valid = _case(6, 2, 64, 300, 2, 4, 64, 64, 4, pad=True)
    q, k, v, do, idx, valid = (x.cuda() for x in (q, k, v, do, idx, valid))
    q, k, v = (x.half().requires_grad_(True) for x in (q, k, v))
    kw = {"kv_valid": valid, "backend": "triton", "order": order, "check": False}
    selected_attention(q, k, v, idx, 64, **kw).backward(do.half())  # compile first
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        selected_attention(q, k, v, idx, 64, **kw).backward(do.half())
    finally:
        torch.cuda.set_sync_debug_mode("default")


@pytest.mark.parametrize(
    ("backend", "order"), [("torch", "auto"), ("triton", "fsa"), ("triton", "nsa")]
)
def test_unchecked_ids_past_the_causal_limit_count_as_unused(backend, order, device):
    """With ``check=False`` a future id, an id past the last block (which in the packed
    layout of the FSA plan would name a block of the next batch row) or one below -1
    selects nothing, as ``-1`` does."""
    q, k, v, _, idx, _ = _case(9, 2, 6, 40, 1, 2, 16, 16, 3)
    q, k, v, idx = (x.to(device) for x in (q, k, v, idx))
    bad = idx.clone()
    ids = torch.tensor([[5, 3, -7, 2, 9, 4], [3, -2, 2, 7, 1, 0]], device=idx.device)
    bad[:, :, 0, 2] = ids
    clean = torch.where((bad > 2) | (bad < -1), -1, bad)  # queries at keys 34..39: own block 2
    kw = {"backend": backend, "order": order}
    got = selected_attention(q, k, v, bad, 16, check=False, **kw)
    want = selected_attention(q, k, v, clean, 16, **kw)
    assert torch.equal(got, want)


def test_packed_sequences_with_padding_match_reference(device):
    cu = [0, 21, 21, 50]
    gen = torch.Generator().manual_seed(11)
    q, k, v, do = (torch.randn(1, 50, h, 16, generator=gen) for h in (2, 1, 1, 2))
    idx = random_selection(gen, 1, 50, 1, 2, 16, cu)
    valid = torch.rand(1, 50, generator=gen) > 0.3
    q, k, v, do, idx, valid = (x.to(device) for x in (q, k, v, do, idx, valid))
    kw = {"cu_seqlens": torch.tensor(cu, device=device), "kv_valid": valid}
    ref = _fwd_bwd(q.double(), k.double(), v.double(), do.double(), idx, 16, backend="torch", **kw)
    for order in ("fsa", "nsa"):
        got = _fwd_bwd(q, k, v, do, idx, 16, backend="triton", order=order, **kw)
        for name, a, r in zip(("o", "dq", "dk", "dv"), got, ref, strict=True):
            assert rel_rms(a, r) < 1e-4, f"{order} {name}"
    # the reference itself: each sequence alone, with its slice of the mask
    for a, e in ((0, 21), (21, 50)):
        alone = selected_attention(
            q[:, a:e].double(), k[:, a:e].double(), v[:, a:e].double(),
            idx[:, a:e].contiguous(), 16, backend="torch", kv_valid=valid[:, a:e].contiguous(),
        )  # fmt: skip
        assert torch.allclose(ref[0][:, a:e], alone, atol=1e-12)
