"""SWAX and the linear layers on shared ops: lc-kernels' sliding window, torch's RMSNorm.

Both replace hand-written copies; these tests pin that the behaviour is the old one.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lc_attention.linear import (
    GatedLinearAttention,
    GLAConfig,
    MLSTMConfig,
    MLSTMLayer,
    SWAXConfig,
    SWAXModel,
    sliding_window_attention,
)


def _masked_sdpa(q, k, v, window):
    """The former SWAX implementation: one SDPA with a [T, T] band mask."""
    pos = torch.arange(q.shape[1])
    dist = pos[:, None] - pos[None, :]
    allowed = (dist >= 0) & (dist < window)
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=allowed
    )
    return out.transpose(1, 2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("t", "window"), [(7, 7), (100, 33), (600, 64), (300, 300)])
def test_sliding_window_equals_the_former_masked_sdpa(dtype, t, window) -> None:
    g = torch.Generator().manual_seed(t)
    q, k, v = (torch.randn(2, t, 3, 8, generator=g, dtype=dtype) for _ in range(3))
    got = sliding_window_attention(q, k, v, window)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {}
    torch.testing.assert_close(got, _masked_sdpa(q, k, v, window), **tol)


def test_sliding_window_takes_non_contiguous_views_and_backpropagates() -> None:
    x = torch.randn(1, 40, 3, 2, 4, dtype=torch.float64, requires_grad=True)
    q, k, v = x.unbind(2)  # strided views, as SlidingWindowAttention produces
    sliding_window_attention(q, k, v, 5).sum().backward()
    want = torch.autograd.grad(_masked_sdpa(q, k, v, 5).sum(), x)[0]
    torch.testing.assert_close(x.grad, want)


def _former_rms(x, w, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


@pytest.mark.parametrize(
    "module",
    [
        lambda: SWAXModel(SWAXConfig(vocab_size=20, d_model=16, n_layers=2, n_heads=2, window=4)),
        lambda: GatedLinearAttention(GLAConfig(d_model=16, n_heads=2, backend="torch")),
        lambda: MLSTMLayer(MLSTMConfig(d_model=16, n_heads=2, backend="torch")),
    ],
)
def test_rmsnorms_keep_their_state_dict_and_fp32_values(module) -> None:
    torch.manual_seed(0)
    m = module()
    norms = {n: mod for n, mod in m.named_modules() if isinstance(mod, torch.nn.RMSNorm)}
    assert norms, "no RMSNorm found"
    for name, norm in norms.items():
        assert f"{name}.weight" in m.state_dict()  # the former modules' key
        assert norm.eps == 1e-6
        with torch.no_grad():
            norm.weight.uniform_(0.5, 1.5)
        x = torch.randn(3, 5, norm.weight.shape[0])
        assert torch.equal(norm(x), _former_rms(x, norm.weight))  # bit for bit in fp32
        x64, w64 = x.double(), norm.weight.detach().double()
        torch.testing.assert_close(norm.double()(x64), _former_rms(x64, w64))
