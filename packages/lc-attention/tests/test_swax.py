"""SWAX: sliding-window attention, the stochastic window schedule and the hybrid model."""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lc_attention.linear import StochasticWindow, SWAXConfig, SWAXModel, sliding_window_attention


def _naive_swa(q, k, v, window):
    t, d = q.shape[1], q.shape[-1]
    out = torch.zeros_like(v)
    for i in range(t):
        lo = max(0, i - window + 1)
        s = torch.einsum("bhd,bshd->bhs", q[:, i], k[:, lo : i + 1]) / d**0.5
        out[:, i] = torch.einsum("bhs,bshd->bhd", s.softmax(-1), v[:, lo : i + 1])
    return out


@settings(max_examples=10)
@given(t=st.integers(1, 24), window=st.integers(1, 24), seed=st.integers(0, 999))
def test_sliding_window_matches_naive(t, window, seed):
    window = min(window, t)
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(2, t, 2, 4, generator=gen, dtype=torch.float64) for _ in range(3))
    torch.testing.assert_close(
        sliding_window_attention(q, k, v, window), _naive_swa(q, k, v, window)
    )


def test_full_window_is_causal_attention_and_bad_windows_raise():
    q, k, v = (torch.randn(1, 9, 2, 4, dtype=torch.float64) for _ in range(3))
    full = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
    ).transpose(1, 2)
    torch.testing.assert_close(sliding_window_attention(q, k, v, 9), full)
    with pytest.raises(ValueError, match="larger than the sequence"):
        sliding_window_attention(q, k, v, 10)
    with pytest.raises(ValueError, match="window must be"):
        sliding_window_attention(q, k, v, 0)
    with pytest.raises(ValueError, match="matching shapes"):
        sliding_window_attention(q, k[..., :2], v, 3)


def test_stochastic_window_schedule_follows_its_probabilities():
    sched = StochasticWindow(short=4, long=32, p_short=0.3, final_fraction=0.2)
    rng = random.Random(0)
    total = 5000
    draws = [sched.sample(s, total, rng) for s in range(total)]
    head, tail = draws[: int(0.8 * total)], draws[int(0.8 * total) :]
    assert set(tail) == {32}
    frac_short = head.count(4) / len(head)
    assert abs(frac_short - 0.3) < 0.03  # 4000 Bernoulli(0.3) draws: sd ~ 0.007
    fixed = StochasticWindow(short=8, long=8, p_short=1.0, final_fraction=0.0)
    assert {fixed.sample(s, 10, rng) for s in range(10)} == {8}
    with pytest.raises(ValueError, match="long must be"):
        StochasticWindow(short=16, long=8)
    with pytest.raises(ValueError, match="p_short"):
        StochasticWindow(p_short=1.5)
    with pytest.raises(ValueError, match="step"):
        sched.sample(10, 10, rng)


def _model(window=4, seed=0):
    torch.manual_seed(seed)
    cfg = SWAXConfig(
        vocab_size=20, d_model=16, n_layers=2, n_heads=2, window=window, backend="torch"
    )
    return SWAXModel(cfg)


def test_window_one_still_carries_long_range_information_through_the_mlstm():
    model = _model()
    tokens = torch.randint(0, 20, (1, 30))
    emb = model.embed(tokens).detach().requires_grad_()
    x = emb
    for block in model.blocks:
        x = block(x, 1)
    model.head(model.norm(x))[0, -1].sum().backward()
    assert emb.grad[0, 0].abs().sum() > 0  # the first token reaches the last through mLSTM
    # and the attention alone, with window 1, is position-local: drop the mLSTM path
    attn_block = model.blocks[0]
    e2 = model.embed(tokens).detach().requires_grad_()
    attn_block(e2, 1)[0, -1].sum().backward()
    assert e2.grad[0, :-1].abs().sum() == 0


def test_inference_window_is_a_free_choice_and_matters():
    model = _model(window=4)
    tokens = torch.randint(0, 20, (2, 16))
    a, b = model(tokens), model(tokens, window=16)
    assert a.shape == b.shape == (2, 16, 20)
    torch.testing.assert_close(a[:, :4], b[:, :4])  # first 4 positions see the same keys
    assert not torch.allclose(a[:, 8:], b[:, 8:])
    # a window beyond the sequence is causal attention over it (as window=16 here)
    torch.testing.assert_close(model(tokens, window=17), b)
    with pytest.raises(ValueError, match="window must be"):
        model(tokens, window=0)
    with pytest.raises(ValueError, match="token ids"):
        model(torch.full((1, 5), 20))
    with pytest.raises(ValueError, match="n_layers must be even"):
        SWAXConfig(n_layers=3)


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_inputs_shorter_than_the_window_run_causal_attention(train: bool) -> None:
    """A window longer than the input (the default long window of 2048 on any shorter
    sequence) is causal attention over the tokens there are: forward and backward."""
    long = StochasticWindow().long
    torch.manual_seed(0)
    model = SWAXModel(
        SWAXConfig(vocab_size=20, d_model=16, n_layers=2, n_heads=2, window=long, backend="torch")
    )
    model.train(train)
    tokens = torch.randint(0, 20, (2, 7), generator=torch.Generator().manual_seed(1))
    out = model(tokens)  # the config's window
    sampled = model(tokens, window=StochasticWindow().sample(0, 1, random.Random(0)))
    causal = model(tokens, window=7)  # window == T: plain causal attention
    torch.testing.assert_close(out, causal)
    torch.testing.assert_close(sampled, causal)
    out.sum().backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    assert all(g is not None and torch.isfinite(g).all() for g in grads.values())
    layer = model.blocks[0].mixer
    x = torch.randn(1, 5, 16)
    torch.testing.assert_close(layer(x, window=long), layer(x, window=5))
