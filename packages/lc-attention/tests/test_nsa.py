"""Native Sparse Attention layer: config checks, branch identities, causality, gradients."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lc_attention import NativeSparseAttention, NSAConfig, NSATransformer
from lc_attention.rope import apply_rotary, rotary_tables

torch.set_num_threads(1)


def test_defaults_are_the_papers():
    c = NSAConfig()
    assert (c.kernel_size, c.kernel_stride, c.block_size, c.top_k) == (32, 16, 64, 16)
    assert (c.init_blocks, c.local_blocks, c.window_size) == (1, 2, 512)
    s = NSAConfig.small()
    assert (s.kernel_size, s.kernel_stride, s.block_size, s.window_size) == (8, 4, 16, 128)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("num_kv_heads", 3),
        ("head_dim", 7),
        ("kernel_stride", 5),
        ("block_size", 48),
        ("top_k", 2),
        ("window_size", 0),
        ("kernel_order", "fast"),
        ("init_blocks", -1),
    ],
)
def test_bad_config_names_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        NSAConfig(**{field: value})


def _layer(seed=0, **over):
    torch.manual_seed(seed)
    cfg = NSAConfig.small(hidden_size=48, num_heads=6, num_kv_heads=2, **over)
    return NativeSparseAttention(cfg).double()


def _set_gates(layer, which):
    with torch.no_grad():
        layer.gate.weight.zero_()
        bias = torch.full((layer.config.num_heads, 3), -60.0, dtype=layer.gate.bias.dtype)
        bias[:, which] = 60.0
        layer.gate.bias.copy_(bias.flatten())


def _dense_rope_attention(layer, x):
    c = layer.config
    b, t, _ = x.shape
    q = layer.q_proj(x).view(b, t, c.num_heads, c.head_dim)
    k = layer.k_proj(x).view(b, t, c.num_kv_heads, c.head_dim)
    v = layer.v_proj(x).view(b, t, c.num_kv_heads, c.head_dim)
    cos, sin = rotary_tables(t, c.head_dim, c.rope_theta, x.device)
    q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
    g = c.group_size
    o = F.scaled_dot_product_attention(
        q.transpose(1, 2),
        k.repeat_interleave(g, 2).transpose(1, 2),
        v.repeat_interleave(g, 2).transpose(1, 2),
        is_causal=True,
    ).transpose(1, 2)
    return layer.o_proj(o.reshape(b, t, -1))


def test_window_branch_with_a_long_window_is_dense_causal_attention():
    layer = _layer(window_size=64)
    _set_gates(layer, 2)
    x = torch.randn(2, 50, 48, dtype=torch.float64)
    torch.testing.assert_close(layer(x), _dense_rope_attention(layer, x))


def test_selection_branch_with_every_block_selected_is_dense_causal_attention():
    layer = _layer(top_k=4, window_size=16)
    _set_gates(layer, 1)
    x = torch.randn(2, 61, 48, dtype=torch.float64)  # 4 blocks of 16: top 4 selects all
    out, idx = layer(x, return_indices=True)
    torch.testing.assert_close(out, _dense_rope_attention(layer, x))
    assert idx.shape == (2, 61, 2, 4)


def test_selection_keeps_forced_blocks_and_is_shared_by_the_group():
    layer = _layer(top_k=3, window_size=16)
    x = torch.randn(1, 100, 48, dtype=torch.float64)
    _, idx = layer(x, return_indices=True)
    for t in range(100):
        sel = set(idx[0, t, 0].tolist()) - {-1}
        assert {0, t // 16, max(t // 16 - 1, 0)} <= sel
        assert max(sel) <= t // 16


def test_layer_is_causal_and_every_parameter_gets_a_gradient():
    layer = _layer(top_k=3, window_size=8)
    x = torch.randn(1, 70, 48, dtype=torch.float64, requires_grad=True)
    y = layer(x)
    x2 = x.detach().clone()
    x2[:, 40:] += torch.randn_like(x2[:, 40:])
    torch.testing.assert_close(layer(x2)[:, :40], y[:, :40].detach())
    y.pow(2).sum().backward()
    for name, p in layer.named_parameters():
        assert p.grad is not None, name
        assert p.grad.abs().sum() > 0, name


def test_layer_rejects_wrong_width():
    with pytest.raises(ValueError, match="x must be"):
        _layer()(torch.randn(1, 5, 47, dtype=torch.float64))


# --------------------------------------------------------------------------- convergence

N_FILL, N_VAL, SEQ, WINDOW = 16, 8, 64, 8
QUERY = N_FILL + N_VAL


def _retrieval_batch(gen: torch.Generator, b: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Filler tokens with one value token at least WINDOW + 1 positions before the query."""
    x = torch.randint(0, N_FILL, (b, SEQ), generator=gen)
    pos = torch.randint(0, SEQ - WINDOW - 1, (b,), generator=gen)
    val = torch.randint(N_FILL, N_FILL + N_VAL, (b,), generator=gen)
    x[torch.arange(b), pos] = val
    x[:, -1] = QUERY
    return x, val


def test_tiny_nsa_transformer_learns_retrieval_beyond_the_window():
    """The answer lies outside the sliding window, so only compression/selection can fetch it."""
    cfg = NSAConfig.small(
        hidden_size=64,
        num_heads=4,
        num_kv_heads=2,
        kernel_size=8,
        kernel_stride=4,
        block_size=16,
        top_k=3,
        init_blocks=1,
        local_blocks=1,
        window_size=WINDOW,
    )
    model = NSATransformer(QUERY + 1, cfg, num_layers=1, mlp_ratio=2, seed=0)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    gen = torch.Generator().manual_seed(0)
    test_x, test_y = _retrieval_batch(torch.Generator().manual_seed(1), 256)
    with torch.no_grad():
        before = (model(test_x)[:, -1].argmax(-1) == test_y).float().mean().item()
    for _ in range(200):
        x, y = _retrieval_batch(gen, 32)
        loss = F.cross_entropy(model(x)[:, -1], y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        after = (model(test_x)[:, -1].argmax(-1) == test_y).float().mean().item()
    assert before < 0.3
    assert after > 0.9, f"accuracy {after:.3f} after 200 steps"


def test_decoding_with_the_cache_matches_the_full_forward():
    """Prefill 21 tokens, then decode one at a time: outputs and selections match a full pass."""
    layer = _layer(seed=3, top_k=3, window_size=10)
    x = torch.randn(2, 75, 48, dtype=torch.float64)
    full, idx_full = layer(x, return_indices=True)
    from lc_attention import NSACache

    cache = NSACache()
    outs, idxs = [], []
    for a, e in [(0, 21), *((t, t + 1) for t in range(21, 75))]:
        o, i = layer(x[:, a:e], return_indices=True, cache=cache)
        outs.append(o)
        idxs.append(i)
    assert cache.length == 75
    assert cache.k_cmp is not None
    assert cache.k_cmp.shape[1] == (75 - 8) // 4 + 1
    torch.testing.assert_close(torch.cat(outs, 1), full)
    got = torch.cat(idxs, 1).sort(-1).values
    assert torch.equal(got, idx_full.sort(-1).values)
