"""GLA, linear attention and mLSTM: forms agree, gradients match naive references, bad input."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lc_attention.linear import (
    GatedLinearAttention,
    GLAConfig,
    MLSTMConfig,
    MLSTMLayer,
    gated_linear_attention,
    gla_chunk,
    gla_recurrent,
    linear_attention,
    mlstm,
    mlstm_parallel,
    mlstm_recurrent,
)
from lc_attention.linear.backend import available

F64 = torch.float64


def _naive_gla(q, k, v, g, scale):
    """Closed form: o_t = s * sum_{j<=t} (q_t * prod_{r=j+1..t} exp(g_r) * k_j) v_j."""
    t = q.shape[1]
    cum = g.cumsum(1)  # [B, T, H, K]
    out = torch.zeros(*q.shape[:3], v.shape[-1], dtype=q.dtype)
    for i in range(t):
        for j in range(i + 1):
            w = (q[:, i] * scale * (cum[:, i] - cum[:, j]).exp() * k[:, j]).sum(-1)
            out[:, i] += w[..., None] * v[:, j]
    return out


def _naive_mlstm(q, k, v, i, f):
    """Unstabilised mLSTM from its definition (fp64, small gates only)."""
    b, t, h, dk = q.shape
    c = torch.zeros(b, h, dk, v.shape[-1], dtype=q.dtype)
    n = torch.zeros(b, h, dk, dtype=q.dtype)
    outs = []
    for s in range(t):
        fg, ig = torch.sigmoid(f[:, s]), i[:, s].exp()
        ks = k[:, s] / dk**0.5
        c = fg[..., None, None] * c + ig[..., None, None] * ks[..., :, None] * v[:, s, :, None, :]
        n = fg[..., None] * n + ig[..., None] * ks
        num = torch.einsum("bhk,bhkv->bhv", q[:, s], c)
        den = torch.einsum("bhk,bhk->bh", q[:, s], n).abs().clamp_min(1.0)
        outs.append(num / den[..., None])
    return torch.stack(outs, 1)


def _inputs(b, t, h, dk, dv, seed, dtype=F64, decay_scale=2.0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(b, t, h, dk, generator=gen, dtype=dtype)
    k = torch.randn(b, t, h, dk, generator=gen, dtype=dtype)
    v = torch.randn(b, t, h, dv, generator=gen, dtype=dtype)
    g = -torch.rand(b, t, h, dk, generator=gen, dtype=dtype) * decay_scale
    return q, k, v, g


@settings(max_examples=10)
@given(
    b=st.integers(1, 2),
    t=st.integers(1, 33),
    h=st.integers(1, 3),
    dk=st.integers(1, 9),
    dv=st.integers(1, 7),
    chunk=st.integers(2, 16),
    seed=st.integers(0, 2**16),
)
def test_gla_chunk_equals_recurrent_over_shapes(b, t, h, dk, dv, chunk, seed):
    q, k, v, g = _inputs(b, t, h, dk, dv, seed)
    s0 = torch.randn(b, h, dk, dv, dtype=F64, generator=torch.Generator().manual_seed(seed + 1))
    o_r, s_r = gla_recurrent(q, k, v, g, initial_state=s0)
    o_c, s_c = gla_chunk(q, k, v, g, initial_state=s0, chunk_size=chunk)
    torch.testing.assert_close(o_c, o_r, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(s_c, s_r, rtol=1e-10, atol=1e-10)


def test_gla_matches_closed_form_and_gradients():
    q, k, v, g = _inputs(2, 11, 2, 4, 3, seed=0)
    leaves = [x.clone().requires_grad_() for x in (q, k, v, g)]
    ref = _naive_gla(*leaves, scale=0.5)
    out, _ = gla_chunk(*leaves, scale=0.5, chunk_size=4)
    torch.testing.assert_close(out, ref, rtol=1e-11, atol=1e-11)
    w = torch.randn_like(ref)
    g_ref = torch.autograd.grad((ref * w).sum(), leaves)
    g_out = torch.autograd.grad((gla_chunk(*leaves, scale=0.5, chunk_size=4)[0] * w).sum(), leaves)
    for a, e in zip(g_out, g_ref, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-9, atol=1e-9)
    assert torch.autograd.gradcheck(
        lambda *xs: gla_chunk(*xs, chunk_size=3)[0],
        [x[:1, :5, :1, :2].detach().clone().requires_grad_() for x in (q, k, v, g)],
    )


def test_strong_decay_is_stable_in_fp32():
    # log-decays of -30 per step underflow any "divide by the cumulative decay" trick.
    q, k, v, g = _inputs(1, 64, 2, 8, 8, seed=3, dtype=torch.float32, decay_scale=30.0)
    o_c, _ = gla_chunk(q, k, v, g, chunk_size=32)
    o_r, _ = gla_recurrent(q, k, v, g)
    assert torch.isfinite(o_c).all()
    torch.testing.assert_close(o_c, o_r, rtol=1e-4, atol=1e-4)


def test_linear_attention_is_causal_sum():
    q, k, v, _ = _inputs(2, 9, 2, 3, 4, seed=5)
    o, state = linear_attention(q, k, v, scale=1.0, backend="torch")
    scores = torch.einsum("bthk,bshk->bhts", q, k).tril()
    torch.testing.assert_close(o, torch.einsum("bhts,bshv->bthv", scores, v))
    torch.testing.assert_close(state, torch.einsum("bshk,bshv->bhkv", k, v))


def test_gla_with_zero_gate_is_linear_attention_and_decay_forgets():
    q, k, v, g = _inputs(1, 12, 1, 4, 4, seed=7)
    torch.testing.assert_close(
        gated_linear_attention(q, k, v, torch.zeros_like(g), backend="torch")[0],
        linear_attention(q, k, v, backend="torch")[0],
    )
    # a huge decay keeps only the current token: o_t = s (q_t . k_t) v_t
    o, _ = gated_linear_attention(q, k, v, torch.full_like(g, -200.0), scale=1.0, backend="torch")
    torch.testing.assert_close(o, (q * k).sum(-1, keepdim=True) * v)


@settings(max_examples=15)
@given(
    b=st.integers(1, 2),
    t=st.integers(1, 30),
    h=st.integers(1, 3),
    dk=st.integers(1, 8),
    dv=st.integers(1, 6),
    gate=st.sampled_from(["sigmoid", "exp"]),
    seed=st.integers(0, 2**16),
)
def test_mlstm_parallel_equals_recurrent_over_shapes(b, t, h, dk, dv, gate, seed):
    q, k, v, _ = _inputs(b, t, h, dk, dv, seed)
    gen = torch.Generator().manual_seed(seed + 2)
    i = torch.randn(b, t, h, dtype=F64, generator=gen) * 5  # large: exercises the stabilizer
    f = torch.randn(b, t, h, dtype=F64, generator=gen) * 3
    if gate == "exp":
        f = -f.abs()
    h_p, s_p = mlstm_parallel(q, k, v, i, f, forget_gate=gate, return_state=True)
    h_r, s_r = mlstm_recurrent(q, k, v, i, f, forget_gate=gate)
    torch.testing.assert_close(h_p, h_r, rtol=1e-9, atol=1e-9)
    assert s_p is not None
    for a, e in zip(s_p, s_r, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-9, atol=1e-9)


def test_mlstm_matches_unstabilised_definition_and_gradients():
    q, k, v, _ = _inputs(2, 9, 2, 4, 3, seed=11)
    gen = torch.Generator().manual_seed(12)
    i = torch.randn(2, 9, 2, dtype=F64, generator=gen)
    f = torch.randn(2, 9, 2, dtype=F64, generator=gen) + 2
    leaves = [x.clone().requires_grad_() for x in (q, k, v, i, f)]
    ref = _naive_mlstm(*leaves)
    out = mlstm_parallel(*leaves, eps=0.0)[0]
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
    w = torch.randn_like(ref)
    g_ref = torch.autograd.grad((ref * w).sum(), leaves)
    for form in (mlstm_parallel, mlstm_recurrent):
        g_out = torch.autograd.grad((form(*leaves, eps=0.0)[0] * w).sum(), leaves)
        for a, e in zip(g_out, g_ref, strict=True):
            torch.testing.assert_close(a, e, rtol=1e-8, atol=1e-8)


def test_mlstm_prefill_then_decode_matches_full_sequence():
    q, k, v, _ = _inputs(1, 20, 2, 4, 4, seed=13)
    i, f = torch.randn(1, 20, 2, dtype=F64) * 4, torch.randn(1, 20, 2, dtype=F64) * 2
    full = mlstm(q, k, v, i, f, backend="torch")
    _, state = mlstm_parallel(
        q[:, :12], k[:, :12], v[:, :12], i[:, :12], f[:, :12], return_state=True
    )
    tail, _ = mlstm_recurrent(
        q[:, 12:], k[:, 12:], v[:, 12:], i[:, 12:], f[:, 12:], initial_state=state
    )
    torch.testing.assert_close(tail, full[:, 12:], rtol=1e-10, atol=1e-10)


def test_layers_decode_step_by_step_like_the_parallel_form():
    torch.manual_seed(0)
    x = torch.randn(2, 13, 32, dtype=F64)
    gla = GatedLinearAttention(
        GLAConfig(d_model=32, n_heads=2, chunk_size=4, backend="torch")
    ).double()
    y, _ = gla(x)
    state, steps = None, []
    for s in range(13):
        out, state = gla(x[:, s : s + 1], state=state)
        steps.append(out)
    torch.testing.assert_close(torch.cat(steps, 1), y)
    assert (gla.log_decay(x) < 0).all()

    lstm = MLSTMLayer(MLSTMConfig(d_model=32, n_heads=4, backend="torch")).double()
    y, _ = lstm(x)
    mstate, steps = None, []
    for s in range(13):
        out, mstate = lstm(x[:, s : s + 1], state=mstate, mode="recurrent")
        steps.append(out)
    torch.testing.assert_close(torch.cat(steps, 1), y)


def test_linear_attention_layer_has_no_gate_and_trains():
    layer = GatedLinearAttention(GLAConfig(d_model=16, n_heads=2, gate="none", backend="torch"))
    assert layer.gate_proj is None
    assert layer.log_decay(torch.randn(1, 3, 16)) is None
    x = torch.randn(2, 7, 16)
    layer(x)[0].sum().backward()
    assert all(p.grad is not None for p in layer.parameters())


def test_bad_inputs_raise_clear_errors():
    q, k, v, g = _inputs(1, 5, 2, 4, 3, seed=0)
    with pytest.raises(ValueError, match="same shape"):
        gla_chunk(q, k[..., :3], v, None)
    with pytest.raises(ValueError, match="<= 0"):
        gla_chunk(q, k, v, -g)
    with pytest.raises(ValueError, match="finite"):
        gla_recurrent(q, k, v, torch.full_like(g, float("nan")))
    with pytest.raises(ValueError, match="shape of k"):
        gla_chunk(q, k, v, g[..., :2])
    with pytest.raises(ValueError, match="4 dims"):
        gla_chunk(q[0], k[0], v[0])
    with pytest.raises(ValueError, match="initial_state"):
        gla_chunk(q, k, v, g, initial_state=torch.zeros(1, 2, 3, 3, dtype=F64))
    with pytest.raises(ValueError, match="chunk_size"):
        gla_chunk(q, k, v, g, chunk_size=0)
    with pytest.raises(ValueError, match="backend must be one of"):
        gated_linear_attention(q, k, v, g, backend="triton")
    with pytest.raises(ValueError, match="mode"):
        gated_linear_attention(q, k, v, g, mode="parallel")
    i = torch.zeros(1, 5, 2, dtype=F64)
    with pytest.raises(ValueError, match="gate i"):
        mlstm_parallel(q, k, v, i[..., :1], i)
    with pytest.raises(ValueError, match="forget_gate"):
        mlstm_parallel(q, k, v, i, i, forget_gate="tanh")
    with pytest.raises(ValueError, match="<= 0"):
        mlstm_recurrent(q, k, v, i, i + 1.0, forget_gate="exp")
    with pytest.raises(ValueError, match="backend must be one of"):
        mlstm(q, k, v, i, i, backend="fla")
    with pytest.raises(ValueError, match="n_heads"):
        GLAConfig(d_model=30, n_heads=4)
    with pytest.raises(ValueError, match="gate must be one of"):
        GLAConfig(gate="mamba")
    with pytest.raises(ValueError, match="d_model"):
        MLSTMConfig(d_model=30, n_heads=4)
    layer = GatedLinearAttention(GLAConfig(d_model=16, n_heads=2, backend="torch"))
    with pytest.raises(ValueError, match=r"\[batch, seq, 16\]"):
        layer(torch.randn(2, 5, 8))


@pytest.mark.skipif(available("fla"), reason="checks the message shown when fla is missing")
def test_missing_gpu_library_is_named():
    q, k, v, g = _inputs(1, 4, 1, 2, 2, seed=0)
    with pytest.raises(ImportError, match="flash-linear-attention"):
        gated_linear_attention(q, k, v, g, backend="fla")


@pytest.mark.skipif(available("mlstm_kernels"), reason="checks the message shown when missing")
def test_missing_mlstm_kernels_is_named():
    q, k, v, _ = _inputs(1, 4, 1, 2, 2, seed=0)
    i = torch.zeros(1, 4, 1, dtype=F64)
    with pytest.raises(ImportError, match="mlstm_kernels"):
        mlstm(q, k, v, i, i, backend="mlstm_kernels")


@pytest.mark.gpu
@pytest.mark.skipif(
    not (torch.cuda.is_available() and available("fla")),
    reason="needs CUDA and flash-linear-attention",
)
def test_matches_fla_on_gpu():
    from fla.ops.gla.naive import naive_recurrent_gla

    q, k, v, g = (x.float().cuda() for x in _inputs(2, 64, 2, 16, 16, seed=1))
    ours, _ = gated_linear_attention(q, k, v, g, backend="torch")
    theirs = naive_recurrent_gla(q, k, v, g)[0]
    torch.testing.assert_close(ours, theirs, rtol=2e-3, atol=2e-3)
    fla_chunk, _ = gated_linear_attention(q, k, v, g, backend="fla")
    torch.testing.assert_close(ours, fla_chunk, rtol=2e-3, atol=2e-3)
