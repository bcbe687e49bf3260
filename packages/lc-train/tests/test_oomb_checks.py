"""Chunk-recurrent training refuses bad setups before doing any work."""

from __future__ import annotations

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

from lc_train.oomb import (
    SUPPORTED_MODEL_TYPES,
    ChunkRecurrentConfig,
    chunk_recurrent_backward,
    estimate_kv_bytes,
)

SMALL = dict(
    vocab_size=101,
    hidden_size=48,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=6,
    num_key_value_heads=2,
    max_position_embeddings=256,
)


def _llama() -> LlamaForCausalLM:
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**SMALL)).float()


def _no_grads(model: torch.nn.Module) -> bool:
    return all(p.grad is None for p in model.parameters())


def test_chunk_size_must_be_a_multiple_of_page_size() -> None:
    with pytest.raises(ValueError, match=r"chunk_size \(100\) must be a multiple of page_size"):
        ChunkRecurrentConfig(chunk_size=100, page_size=16, block_tokens=16)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"page_budget": 2, "sink_pages": 1, "local_pages": 2}, "page_budget"),
        ({"page_budget": 0, "sink_pages": 0, "local_pages": 0}, "page_budget"),
        ({"sink_pages": -1}, "sink_pages"),
        ({"memory_limit_bytes": 0}, "memory_limit_bytes"),
    ],
)
def test_sparse_and_memory_fields_are_validated(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        ChunkRecurrentConfig(chunk_size=16, page_size=4, block_tokens=4, **kwargs)


def test_sequence_shorter_than_one_chunk_is_refused() -> None:
    model = _llama()
    config = ChunkRecurrentConfig(chunk_size=64, page_size=8, block_tokens=8)
    with pytest.raises(ValueError, match=r"\(40 tokens\) is shorter than one chunk"):
        chunk_recurrent_backward(model, torch.randint(0, 101, (1, 40)), config=config)
    assert _no_grads(model)


def test_unsupported_model_family_lists_the_supported_ones() -> None:
    torch.manual_seed(0)
    gpt2 = GPT2LMHeadModel(GPT2Config(vocab_size=101, n_embd=48, n_layer=1, n_head=2))
    before = gpt2.config._attn_implementation
    with pytest.raises(ValueError, match=r"model_type='gpt2'.*llama, mistral, qwen2, qwen3"):
        chunk_recurrent_backward(
            gpt2,
            torch.randint(0, 101, (1, 16)),
            config=ChunkRecurrentConfig(chunk_size=8, page_size=4, block_tokens=4),
        )
    assert gpt2.config._attn_implementation == before
    assert _no_grads(gpt2)
    assert SUPPORTED_MODEL_TYPES == ("llama", "mistral", "qwen2", "qwen3")


def test_memory_estimate_matches_the_pools_and_too_much_memory_is_refused() -> None:
    model = _llama()
    ids = torch.randint(0, 101, (2, 40))
    config = ChunkRecurrentConfig(chunk_size=8, page_size=4, block_tokens=8)
    need = estimate_kv_bytes(model, 2, 40, config)
    # 4 pools x 2 layers x 10 pages x (batch 2 x 2 heads x 4 tokens x 8 dims x 4 bytes)
    assert need == 4 * 2 * 10 * (2 * 2 * 4 * 8 * 4)
    tight = ChunkRecurrentConfig(
        chunk_size=8, page_size=4, block_tokens=8, memory_limit_bytes=need - 1
    )
    with pytest.raises(ValueError, match="paged KV memory would need"):
        chunk_recurrent_backward(model, ids, config=tight)
    assert _no_grads(model)
    enough = ChunkRecurrentConfig(
        chunk_size=8, page_size=4, block_tokens=8, memory_limit_bytes=need
    )
    assert chunk_recurrent_backward(model, ids, config=enough).kv_bytes == need


def test_default_limit_is_the_available_memory() -> None:
    model = _llama()
    config = ChunkRecurrentConfig(chunk_size=8, page_size=4, block_tokens=8)
    # a batch so large that its pages cannot fit in this machine's memory (never allocated)
    huge = torch.zeros(1, 1, dtype=torch.long).expand(10**5, 10**5)
    with pytest.raises(ValueError, match="GiB is available"):
        chunk_recurrent_backward(model, huge, config=config)
