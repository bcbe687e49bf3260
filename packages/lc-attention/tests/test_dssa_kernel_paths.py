"""DSSA through lc_kernels' selected attention for decode, chunked prefill and padding.

On CUDA (here: ``backend="triton"`` under Triton's interpreter) every call without an
``attention_mask`` goes to the Triton kernel, including queries shorter than the keys
and a ``kv_valid`` padding mask; the PyTorch paths are the reference.
"""

from __future__ import annotations

import pytest
import torch

from lc_attention.dssa import DSSAConfig, dssa_attention
from lc_attention.dssa.attention import padding_mask
from lc_attention.hf import key_padding

torch.set_num_threads(1)

CFG = DSSAConfig(kernel_size=16, stride=16, block_size=16, window_size=32, topk=4,
                 dense_len=64, backend="torch")  # fmt: skip


def _qkv(t: int, s: int, seed: int = 0, b: int = 2):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, t, 4, 16, generator=g)
    k, v = (torch.randn(b, s, 2, 16, generator=g) for _ in range(2))
    return q, k, v


def _valid(b: int, s: int) -> torch.Tensor:
    valid = torch.ones(b, s, dtype=torch.bool)
    valid[1, :21] = False  # row 1 is left-padded by 21 keys
    return valid


@pytest.mark.parametrize(("t", "padded"), [(1, False), (2, True), (36, True)])
def test_triton_kernel_equals_torch_paths(t: int, padded: bool) -> None:
    q, k, v = _qkv(t, 100)
    kv = _valid(2, 100) if padded else None
    ref = dssa_attention(q, k, v, CFG, kv_valid=kv)
    tri = dssa_attention(q, k, v, DSSAConfig(**{**CFG.__dict__, "backend": "triton"}), kv_valid=kv)
    torch.testing.assert_close(tri, ref, atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("t", [1, 40, 150])
def test_kv_valid_equals_the_same_padding_as_attention_mask(t: int) -> None:
    q, k, v = _qkv(t, 150, seed=1)
    kv = _valid(2, 150)
    ref = dssa_attention(q, k, v, CFG, attention_mask=padding_mask(kv, t))
    out = dssa_attention(q, k, v, CFG, kv_valid=kv)
    torch.testing.assert_close(out, ref, atol=1e-6, rtol=1e-6)
    if t <= 60:  # below dense_len: dense attention with the same mask
        short = dssa_attention(q, k[:, :60], v[:, :60], CFG, kv_valid=kv[:, :60])
        mask = padding_mask(kv[:, :60], t)
        dense = dssa_attention(q, k[:, :60], v[:, :60], CFG, attention_mask=mask)
        torch.testing.assert_close(short, dense, atol=1e-6, rtol=1e-6)


def test_kv_valid_boundary_errors() -> None:
    q, k, v = _qkv(4, 100)
    kv = _valid(2, 100)
    with pytest.raises(ValueError, match="not both"):
        dssa_attention(q, k, v, CFG, attention_mask=padding_mask(kv, 4), kv_valid=kv)
    with pytest.raises(ValueError, match=r"kv_valid must be a \[batch=2, keys=100\] bool"):
        dssa_attention(q, k, v, CFG, kv_valid=kv[:, :99])
    with pytest.raises(ValueError, match="kv_valid must be"):
        dssa_attention(q, k, v, CFG, kv_valid=kv.float())


def test_key_padding_reads_the_padding_row_of_a_causal_mask() -> None:
    kv = _valid(2, 50)
    for t in (1, 7, 50):
        mask = padding_mask(kv, t)
        assert torch.equal(key_padding(mask, 2, 50), kv)
        additive = torch.zeros(mask.shape).masked_fill(~mask, float("-inf"))
        assert torch.equal(key_padding(additive, 2, 50), kv)
    wide = torch.cat([padding_mask(kv, 5), torch.zeros(2, 1, 5, 6, dtype=torch.bool)], -1)
    assert torch.equal(key_padding(wide, 2, 50), kv)  # a preallocated mask is cut to the keys
    assert key_padding(padding_mask(kv[:1], 5), 3, 50).shape == (3, 50)  # batch-1 mask
    assert key_padding(None, 2, 50) is None


def test_generate_decodes_through_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """``generate()`` under ``enable_dssa`` with the Triton backend: every sparse decode
    step calls lc-kernels' selected attention with one query, and the tokens equal those
    of the PyTorch backend."""
    from transformers import LlamaConfig, LlamaForCausalLM

    import lc_attention.dssa.attention as dssa_mod
    from lc_attention.hf import enable_dssa

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        eos_token_id=None, attn_implementation="sdpa",
    )  # fmt: skip
    model = LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 64, (1, 66), generator=torch.Generator().manual_seed(3))
    calls: list[tuple[int, int]] = []
    real = dssa_mod.selected_attention

    def spy(q: torch.Tensor, k: torch.Tensor, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append((q.shape[1], k.shape[1]))
        return real(q, k, *args, **kwargs)

    monkeypatch.setattr(dssa_mod, "selected_attention", spy)
    out = {}
    for backend in ("torch", "triton"):
        with (
            torch.no_grad(),
            enable_dssa(model, DSSAConfig(**{**CFG.__dict__, "backend": backend})),
        ):
            out[backend] = model.generate(ids, max_new_tokens=2, do_sample=False)
    assert torch.equal(out["triton"], out["torch"])
    assert calls[0] == (66, 66)  # the prefill
    assert calls[1:] == [(1, 67)]  # the decode step: one query
