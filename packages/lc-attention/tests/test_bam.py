"""BAM prior and attention: special cases, closed forms, and path equality (fwd + bwd)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lc_attention.bam import (
    BAMPrior,
    BAMPriorConfig,
    alibi_slopes,
    bam_attention,
    bam_attention_reference,
    bam_bias,
)

torch.set_num_threads(1)


def _qkv(b: int, t: int, h: int, hk: int, d: int, seed: int = 0, tq: int | None = None):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, tq or t, h, d, generator=g, requires_grad=True)
    k = torch.randn(b, t, hk, d, generator=g, requires_grad=True)
    v = torch.randn(b, t, hk, d, generator=g, requires_grad=True)
    return q, k, v


def _rel_rms(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach(), b.detach()
    return float((a - b).pow(2).mean().sqrt() / b.pow(2).mean().sqrt().clamp_min(1e-12))


def _alibi_attention(q, k, v, slopes):
    t = q.shape[1]
    pos = torch.arange(t)
    rel = (pos[None, :] - pos[:, None]).float()
    bias = -torch.tensor(slopes)[:, None, None] * rel.abs()[None]
    bias = bias.masked_fill(rel[None] > 0, float("-inf"))
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1]) + bias
    return torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), v)


def test_alibi_slopes_match_the_alibi_paper() -> None:
    assert alibi_slopes(8) == [2.0**-i for i in range(1, 9)]
    # non-power of two: the 4 slopes of 4 heads, then every other slope of 8 heads
    assert alibi_slopes(6) == alibi_slopes(4) + alibi_slopes(8)[0::2][:2]
    with pytest.raises(ValueError, match="num_heads"):
        alibi_slopes(0)


def test_shape_one_location_zero_is_exactly_alibi_bias() -> None:
    prior = BAMPrior(BAMPriorConfig(num_heads=8, eps=0.0))
    pos = torch.arange(50)
    want = (
        -torch.tensor(alibi_slopes(8))[:, None, None]
        * (pos[None, :] - pos[:, None]).abs()[None].float()
    )
    torch.testing.assert_close(prior(pos, pos), want, rtol=1e-6, atol=0)


def test_default_eps_gives_exactly_alibi_attention() -> None:
    # the eps offset is a per-head constant on every logit of a row: softmax cancels it
    q, k, v = _qkv(2, 29, 4, 4, 8)
    prior = BAMPrior(BAMPriorConfig(num_heads=4))
    for method in ("sdpa", "blockwise"):
        got = bam_attention(
            q, k, v, prior.theta_a, prior.theta_b, prior.theta_m, method=method, block_size=8
        )
        torch.testing.assert_close(
            got, _alibi_attention(q, k, v, alibi_slopes(4)), rtol=1e-5, atol=1e-5
        )


def test_no_prior_is_nope() -> None:
    q, k, v = _qkv(2, 23, 2, 2, 16)
    want = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
    ).transpose(1, 2)
    for method in ("sdpa", "blockwise"):
        torch.testing.assert_close(
            bam_attention(q, k, v, method=method, block_size=5), want, rtol=1e-5, atol=1e-5
        )


def test_zero_scale_limit_is_nope() -> None:
    q, k, v = _qkv(1, 19, 2, 2, 8)
    very_small = torch.full((2,), -60.0)  # alpha = e^-60: the prior vanishes
    got = bam_attention(q, k, v, very_small, torch.full((2,), 1.7), torch.zeros(2))
    torch.testing.assert_close(got, bam_attention(q, k, v), rtol=1e-6, atol=1e-6)


def test_generalized_gaussian_closed_form_and_location() -> None:
    a, b, m = torch.tensor([math.log(0.3)]), torch.tensor([2.0]), torch.tensor([math.asinh(1.5)])
    q_pos, k_pos = torch.tensor([10]), torch.arange(20)
    bias = bam_bias(a, b, m, q_pos, k_pos, eps=0.0)[0, 0]
    mu = 3.0  # 2 sinh(asinh(1.5))
    want = -0.3 * ((k_pos - 10).float() - mu).abs() ** 2
    torch.testing.assert_close(bias, want, rtol=1e-5, atol=1e-5)
    assert int(bias.argmax()) == 13
    prior = BAMPrior(
        BAMPriorConfig(num_heads=1, scale_init=0.3, shape_init=2.0, loc_init=3.0, eps=0.0)
    )
    torch.testing.assert_close(prior.loc, torch.tensor([3.0]))
    torch.testing.assert_close(prior(q_pos, k_pos)[0, 0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("method", ["sdpa", "blockwise"])
@pytest.mark.parametrize("ssmax", [False, True])
def test_paths_match_reference_forward_and_backward(method: str, ssmax: bool) -> None:
    q, k, v = _qkv(2, 37, 4, 2, 12, seed=1)
    prior = BAMPrior(
        BAMPriorConfig(num_heads=4, shape_init=1.4, loc_init=0.7, scalable_softmax=ssmax)
    )
    theta = (prior.theta_a, prior.theta_b, prior.theta_m)
    out = bam_attention(q, k, v, *theta, ssmax_s=prior.ssmax_s, method=method, block_size=8)
    ref = bam_attention_reference(q, k, v, *theta, ssmax_s=prior.ssmax_s)
    assert _rel_rms(out, ref) < 1e-5
    leaves = [q, k, v, *prior.parameters()]
    g = torch.randn_like(ref)
    got = torch.autograd.grad(out, leaves, g)
    want = torch.autograd.grad(ref, leaves, g)
    for a, b in zip(got, want, strict=True):
        assert _rel_rms(a, b) < 1e-4
    assert all(float(p.abs().max()) > 0 for p in got[3:])  # gradients reach every prior parameter


def test_blockwise_queries_at_the_end_and_non_causal() -> None:
    q, k, v = _qkv(1, 41, 2, 2, 8, seed=2, tq=9)
    prior = BAMPrior(BAMPriorConfig(num_heads=2, shape_init=0.6))
    theta = (prior.theta_a, prior.theta_b, prior.theta_m)
    for causal in (True, False):
        out = bam_attention(q, k, v, *theta, causal=causal, method="blockwise", block_size=4)
        ref = bam_attention_reference(q, k, v, *theta, causal=causal)
        assert _rel_rms(out, ref) < 1e-5
        assert _rel_rms(bam_attention(q, k, v, *theta, causal=causal, method="sdpa"), ref) < 1e-5


@settings(max_examples=8)
@given(
    t=st.integers(1, 50),
    heads=st.sampled_from([(1, 1), (2, 1), (4, 2), (3, 3)]),
    d=st.sampled_from([4, 8, 12]),
    block=st.integers(1, 40),
    shape=st.floats(0.2, 2.5),
    loc=st.floats(-5.0, 5.0),
)
def test_blockwise_matches_reference_on_random_shapes(t, heads, d, block, shape, loc) -> None:
    h, hk = heads
    q, k, v = _qkv(1, t, h, hk, d, seed=t)
    prior = BAMPrior(BAMPriorConfig(num_heads=h, shape_init=shape, loc_init=loc))
    theta = (prior.theta_a, prior.theta_b, prior.theta_m)
    out = bam_attention(q, k, v, *theta, method="blockwise", block_size=block)
    ref = bam_attention_reference(q, k, v, *theta)
    assert out.shape == (1, t, h, d)
    assert _rel_rms(out, ref) < 1e-5
    (gq,) = torch.autograd.grad(out.sum(), [q])
    (rq,) = torch.autograd.grad(ref.sum(), [q])
    if t == 1:  # one key: the output is v whatever q is, so dq is 0 up to rounding
        assert float(gq.abs().max()) < 1e-5
    else:
        assert _rel_rms(gq, rq) < 1e-4


def test_bad_inputs_raise() -> None:
    q, k, v = _qkv(1, 8, 4, 4, 8)
    with pytest.raises(ValueError, match="method"):
        bam_attention(q, k, v, method="flash")
    with pytest.raises(ValueError, match="together"):
        bam_attention(q, k, v, torch.zeros(4))
    with pytest.raises(ValueError, match="theta_b must have shape"):
        bam_attention(q, k, v, torch.zeros(4), torch.ones(3), torch.zeros(4))
    with pytest.raises(ValueError, match=r"\[B, T, H, D\]"):
        bam_attention(q[0], k, v)
    with pytest.raises(ValueError, match="multiple of key heads"):
        bam_attention(q, k[:, :, :3], v[:, :, :3])
    with pytest.raises(ValueError, match="block_size"):
        bam_attention(q, k, v, method="blockwise", block_size=0)
    for bad in (
        {"num_heads": 0},
        {"num_heads": 2, "shape_init": 0.0},
        {"num_heads": 2, "scale_init": -1.0},
        {"num_heads": 2, "scale_init": "rope"},
        {"num_heads": 2, "eps": -1.0},
        {"num_heads": 2, "ssmax_init": 0.0},
        {"num_heads": 2, "loc_init": float("nan")},
    ):
        with pytest.raises(ValueError, match=next(iter(bad)) if len(bad) == 1 else list(bad)[1]):
            BAMPriorConfig(**bad)
