"""Chunk-recurrent gradients stay exact under transformers activation checkpointing."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from lc_train.oomb import ChunkRecurrentConfig, chunk_recurrent_backward

SMALL = dict(
    vocab_size=101,
    hidden_size=48,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=6,
    num_key_value_heads=2,
    max_position_embeddings=128,
)


@pytest.mark.parametrize(
    ("reentrant", "offload"), [(True, False), (False, False), (True, True), (False, True)]
)
def test_gradients_equal_full_backprop_with_activation_checkpointing(
    reentrant: bool, offload: bool
) -> None:
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**SMALL)).float()
    ids = torch.randint(0, 101, (2, 40), generator=torch.Generator().manual_seed(1))
    loss = model(ids, labels=ids).loss
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
    model.train()
    config = ChunkRecurrentConfig(chunk_size=16, page_size=8, block_tokens=8, offload=offload)
    result = chunk_recurrent_backward(model, ids, config=config)
    torch.testing.assert_close(result.loss, loss.detach(), rtol=1e-5, atol=1e-6)
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        err = ((p.grad - grads[name]).norm() / grads[name].norm().clamp_min(1e-12)).item()
        assert err < 1e-4, f"{name}: relative error {err:.2e}"
