"""Chunk-recurrent training gives the loss and gradients of ordinary back-propagation."""

from __future__ import annotations

import pytest
import torch
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

from lc_train.oomb import ChunkRecurrentConfig, chunk_recurrent_backward

SMALL = dict(
    vocab_size=101,
    hidden_size=48,
    intermediate_size=96,
    num_hidden_layers=3,
    num_attention_heads=6,
    num_key_value_heads=2,
    max_position_embeddings=256,
)


def _llama(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(**SMALL)).float()


def _cfg(chunk: int, page: int, **kw) -> ChunkRecurrentConfig:
    return ChunkRecurrentConfig(chunk_size=chunk, page_size=page, block_tokens=page, **kw)


def _reference(model: torch.nn.Module, ids: torch.Tensor, labels: torch.Tensor | None = None):
    model.zero_grad()
    loss = model(ids, labels=ids if labels is None else labels).loss
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    return loss.detach(), grads


def _assert_same_gradients(model: torch.nn.Module, grads: dict[str, torch.Tensor]) -> None:
    for name, p in model.named_parameters():
        err = ((p.grad - grads[name]).norm() / grads[name].norm().clamp_min(1e-12)).item()
        assert err < 1e-4, f"{name}: relative error {err:.2e}"


@pytest.mark.parametrize(
    ("seq_len", "chunk", "page"),
    [(64, 16, 8), (53, 12, 4), (40, 32, 16), (37, 3, 3), (30, 30, 30)],
)
def test_llama_gradients_equal_full_backprop(seq_len: int, chunk: int, page: int) -> None:
    model = _llama()
    ids = torch.randint(
        0, SMALL["vocab_size"], (2, seq_len), generator=torch.Generator().manual_seed(seq_len)
    )
    loss, grads = _reference(model, ids)
    config = ChunkRecurrentConfig(chunk_size=chunk, page_size=page, block_tokens=2 * page)
    result = chunk_recurrent_backward(model, ids, config=config)
    torch.testing.assert_close(result.loss, loss, rtol=1e-5, atol=1e-6)
    assert result.num_targets == 2 * (seq_len - 1)
    _assert_same_gradients(model, grads)


def test_ignored_labels_are_excluded_like_transformers_does() -> None:
    model = _llama(1)
    ids = torch.randint(0, SMALL["vocab_size"], (1, 45), generator=torch.Generator().manual_seed(3))
    labels = ids.clone()
    labels[:, :20] = -100  # e.g. a prompt that is not trained on
    loss, grads = _reference(model, ids, labels)
    result = chunk_recurrent_backward(
        model, ids, labels, ChunkRecurrentConfig(chunk_size=8, page_size=4, block_tokens=8)
    )
    torch.testing.assert_close(result.loss, loss, rtol=1e-5, atol=1e-6)
    _assert_same_gradients(model, grads)


def test_qwen2_gradients_equal_full_backprop() -> None:
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(**SMALL, use_sliding_window=False)).float()
    ids = torch.randint(0, SMALL["vocab_size"], (1, 41), generator=torch.Generator().manual_seed(5))
    loss, grads = _reference(model, ids)
    result = chunk_recurrent_backward(
        model, ids, config=ChunkRecurrentConfig(chunk_size=8, page_size=4, block_tokens=8)
    )
    torch.testing.assert_close(result.loss, loss, rtol=1e-5, atol=1e-6)
    _assert_same_gradients(model, grads)


def test_kv_memory_is_the_four_page_pools() -> None:
    model = _llama()
    ids = torch.randint(0, SMALL["vocab_size"], (1, 50))
    result = chunk_recurrent_backward(
        model, ids, config=ChunkRecurrentConfig(chunk_size=16, page_size=8, block_tokens=8)
    )
    pages = -(-50 // 8)
    head_dim = SMALL["hidden_size"] // SMALL["num_attention_heads"]
    expected = (
        4 * SMALL["num_hidden_layers"] * pages * 8 * SMALL["num_key_value_heads"] * head_dim * 4
    )
    assert result.kv_bytes == expected


def test_attention_implementation_is_restored_even_after_an_error() -> None:
    model = _llama()
    before = model.config._attn_implementation
    with pytest.raises(ValueError, match="at least 2 tokens"):
        chunk_recurrent_backward(model, torch.tensor([[5]]), config=_cfg(1, 1))
    torch.manual_seed(0)
    mistral = MistralForCausalLM(MistralConfig(**SMALL, sliding_window=8)).float()
    mistral_before = mistral.config._attn_implementation
    with pytest.raises(ValueError, match="sliding-window"):
        chunk_recurrent_backward(
            mistral,
            torch.randint(0, 101, (1, 20)),
            config=ChunkRecurrentConfig(chunk_size=8, page_size=4, block_tokens=8),
        )
    assert model.config._attn_implementation == before
    assert mistral.config._attn_implementation == mistral_before


def test_bad_input_is_rejected_at_the_boundary() -> None:
    model = _llama()
    with pytest.raises(ValueError, match=r"\[batch, seq\]"):
        chunk_recurrent_backward(model, torch.randint(0, 101, (12,)))
    with pytest.raises(ValueError, match="labels"):
        chunk_recurrent_backward(
            model, torch.randint(0, 101, (1, 12)), torch.zeros(1, 11, dtype=torch.long)
        )
    with pytest.raises(ValueError, match="multiple of page_size"):
        ChunkRecurrentConfig(page_size=128, block_tokens=100)
