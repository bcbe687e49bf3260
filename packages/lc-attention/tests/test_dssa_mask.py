"""DSSA checks ``attention_mask`` at the boundary: ``[B or 1, 1 | heads, T, S]``, bool or
floating, on the queries' device."""

from __future__ import annotations

import pytest
import torch

from lc_attention.dssa import DSSAConfig, dense_attention, dssa_attention

torch.set_num_threads(1)
B, T, HQ, HKV, D = 2, 150, 4, 2, 8
SPARSE = DSSAConfig(window_size=64, topk=2, dense_len=128, backend="torch")


def _qkv(t: int = T, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, t, HQ, D, generator=g)
    k = torch.randn(B, t, HKV, D, generator=g)
    v = torch.randn(B, t, HKV, D, generator=g)
    return q, k, v


def _causal(t: int, s: int) -> torch.Tensor:
    return torch.arange(s)[None, :] <= torch.arange(s - t, s)[:, None]


@pytest.mark.parametrize("fn", ["dense", "dssa"])
@pytest.mark.parametrize(
    "shape",
    [(B, T, T), (B, 1, T, T + 1), (B, 1, T - 1, T), (3, 1, T, T), (B, 3, T, T), (1, 1, 1, T, T)],
    ids=str,
)
def test_wrong_mask_shape_raises_naming_the_argument(fn: str, shape: tuple[int, ...]) -> None:
    q, k, v = _qkv()
    mask = torch.ones(shape, dtype=torch.bool)
    run = dense_attention if fn == "dense" else lambda *a, **kw: dssa_attention(*a, SPARSE, **kw)
    with pytest.raises(ValueError, match=rf"attention_mask .*\[{B} or 1, 1.*{T}, {T}\]"):
        run(q, k, v, attention_mask=mask)


@pytest.mark.parametrize("fn", ["dense", "dssa"])
def test_mask_dtype_and_device_are_checked(fn: str) -> None:
    q, k, v = _qkv()

    def run(mask: torch.Tensor) -> torch.Tensor:
        if fn == "dense":
            return dense_attention(q, k, v, attention_mask=mask)
        return dssa_attention(q, k, v, SPARSE, attention_mask=mask)

    with pytest.raises(ValueError, match=r"attention_mask must be bool .* or floating"):
        run(torch.ones(B, 1, T, T, dtype=torch.long))
    with pytest.raises(ValueError, match="attention_mask is on meta"):
        run(torch.ones(B, 1, T, T, dtype=torch.bool, device="meta"))


def test_a_batch_one_mask_broadcasts_over_the_batch() -> None:
    q, k, v = _qkv(seed=1)
    causal = _causal(T, T)[None, None]
    for fn in (
        lambda m: dense_attention(q, k, v, attention_mask=m),
        lambda m: dssa_attention(q, k, v, SPARSE, attention_mask=m),
        lambda m: dssa_attention(q[:, -3:], k, v, SPARSE, attention_mask=m[:, :, -3:]),
    ):
        torch.testing.assert_close(fn(causal), fn(causal.expand(B, 1, T, T)))


def test_dense_attention_takes_a_mask_per_query_or_kv_head() -> None:
    """``[B, HQ, T, S]`` masks each query head, ``[B, HKV, T, S]`` each KV group."""
    q, k, v = _qkv(40, seed=2)
    g = torch.Generator().manual_seed(3)
    per_q = _causal(40, 40) & (torch.rand(B, HQ, 40, 40, generator=g) > 0.3)
    per_q[..., 0] = True  # every row keeps a key
    got = dense_attention(q, k, v, attention_mask=per_q)
    kx, vx = k.repeat_interleave(2, 2), v.repeat_interleave(2, 2)
    logits = torch.einsum("bthd,bshd->bhts", q, kx) * D**-0.5
    ref = torch.einsum("bhts,bshd->bthd", logits.masked_fill(~per_q, -torch.inf).softmax(-1), vx)
    torch.testing.assert_close(got, ref)
    per_kv = per_q[:, ::2]
    got_kv = dense_attention(q, k, v, attention_mask=per_kv)
    want_kv = dense_attention(q, k, v, attention_mask=per_kv.repeat_interleave(2, 1))
    torch.testing.assert_close(got_kv, want_kv)


def test_dssa_attention_takes_one_padding_mask_for_all_heads() -> None:
    """The block selection serves all heads of a group and its paths apply one padding
    mask per batch row, so a per-head mask is refused at any length (not only once the
    keys reach ``dense_len``)."""
    q, k, v = _qkv()
    per_head = _causal(T, T)[None, None].expand(B, HQ, T, T)
    for s in (T, 100):  # sparse, and dense below dense_len
        with pytest.raises(ValueError, match=r"attention_mask .* one mask for all heads"):
            dssa_attention(
                q[:, :s], k[:, :s], v[:, :s], SPARSE, attention_mask=per_head[..., :s, :s]
            )
