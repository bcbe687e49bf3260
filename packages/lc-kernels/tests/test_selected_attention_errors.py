"""Bad input to selected attention raises a clear error before any kernel runs."""

from __future__ import annotations

import pytest
import torch

from lc_kernels import selected_attention


def _ok(t=20, hq=4, hkv=2, d=8):
    q = torch.randn(1, t, hq, d)
    k = torch.randn(1, t, hkv, d)
    v = torch.randn(1, t, hkv, d)
    idx = (torch.arange(t) // 16).view(1, t, 1, 1).repeat(1, 1, hkv, 2).contiguous()
    return q, k, v, idx


def test_valid_input_runs():
    q, k, v, idx = _ok()
    assert selected_attention(q, k, v, idx, 16).shape == q.shape


@pytest.mark.parametrize(
    ("mutate", "exc", "match"),
    [
        (lambda q, k, v, i: (q[:, :, :3].contiguous(), k, v, i), ValueError, "mismatched heads"),
        (lambda q, k, v, i: (q, k, v[:, :, :1].contiguous(), i), ValueError, "same shape"),
        (
            lambda q, k, v, i: (q, k[:, :19].contiguous(), v[:, :19].contiguous(), i),
            ValueError,
            "agree",
        ),
        (lambda q, k, v, i: (q.int(), k, v, i), TypeError, "dtype"),
        (lambda q, k, v, i: (q.half(), k, v, i), TypeError, "share a dtype"),
        (
            lambda q, k, v, i: (q.transpose(1, 2).contiguous().transpose(1, 2), k, v, i),
            ValueError,
            "contiguous",
        ),
        (lambda q, k, v, i: (q, k, v, i.float()), TypeError, "integer"),
        (lambda q, k, v, i: (q, k, v, i[:, :, :1].contiguous()), ValueError, "kv_heads"),
        (lambda q, k, v, i: (q, k, v, i - 2), ValueError, "allowed are -1"),
        (lambda q, k, v, i: (q, k, v, i + 1), ValueError, "future block"),
        (lambda q, k, v, i: (q, k, v, i.to("meta")), ValueError, "block_indices is on"),
        (lambda q, k, v, i: (q, k.to("meta"), v, i), ValueError, "share a device"),
        (lambda q, k, v, i: (q[..., :0], k, v, i), ValueError, "agree"),
    ],
)
def test_bad_input_raises(mutate, exc, match):
    with pytest.raises(exc, match=match):
        selected_attention(*mutate(*_ok()), block_size=16)


def test_bad_options_raise():
    q, k, v, idx = _ok()
    with pytest.raises(ValueError, match="backend"):
        selected_attention(q, k, v, idx, 16, backend="cuda")
    with pytest.raises(ValueError, match="order"):
        selected_attention(q, k, v, idx, 16, order="xyz")
    with pytest.raises(ValueError, match="block_size"):
        selected_attention(q, k, v, idx, 0)
    with pytest.raises(ValueError, match="scale"):
        selected_attention(q, k, v, idx, 16, scale=-1.0)
    with pytest.raises(ValueError, match="power of two"):
        selected_attention(q, k, v, (idx * 0), 24, backend="triton")


def test_varlen_rejects_bad_offsets_and_blocks_past_a_sequence_end():
    q, k, v, idx = _ok(t=40)
    with pytest.raises(ValueError, match="end at seq"):
        selected_attention(q, k, v, idx * 0, 16, cu_seqlens=torch.tensor([0, 10, 30]))
    q2, k2, v2 = (torch.cat([x, x]) for x in (q, k, v))
    with pytest.raises(ValueError, match="batch dimension must be 1"):
        selected_attention(
            q2, k2, v2, torch.cat([idx, idx]) * 0, 16, cu_seqlens=torch.tensor([0, 40])
        )
    with pytest.raises(TypeError, match="int32 or int64"):
        selected_attention(q, k, v, idx * 0, 16, cu_seqlens=torch.tensor([0.0, 40.0]))
    # block 1 exists in the packed batch but not in the second sequence, which starts at 30
    bad = torch.zeros_like(idx)
    bad[0, 35, 0, 0] = 1
    with pytest.raises(ValueError, match="future block"):
        selected_attention(q, k, v, bad, 16, cu_seqlens=torch.tensor([0, 30, 40]))
