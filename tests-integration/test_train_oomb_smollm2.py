"""Chunk-recurrent training of the real SmolLM2-135M-Instruct equals full back-propagation."""

from __future__ import annotations

import pytest
import torch

from lc_train.oomb import ChunkRecurrentConfig, chunk_recurrent_backward

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def smollm2() -> torch.nn.Module:
    from lc_agents.models import load_model

    model, _ = load_model("smollm2-135m-instruct")
    return model


@pytest.mark.parametrize(("length", "chunk", "page"), [(203, 64, 32)])
def test_smollm2_gradients_equal_full_backprop(
    smollm2: torch.nn.Module, length: int, chunk: int, page: int
) -> None:
    ids = torch.randint(
        0, smollm2.config.vocab_size, (1, length), generator=torch.Generator().manual_seed(length)
    )
    smollm2.zero_grad()
    ref_loss = smollm2(ids, labels=ids).loss
    ref_loss.backward()
    ref = {n: p.grad.clone() for n, p in smollm2.named_parameters() if p.grad is not None}
    smollm2.zero_grad()

    config = ChunkRecurrentConfig(chunk_size=chunk, page_size=page, block_tokens=2 * page)
    result = chunk_recurrent_backward(smollm2, ids, config=config)

    torch.testing.assert_close(result.loss, ref_loss.detach(), rtol=1e-5, atol=1e-5)
    worst = max(
        ((p.grad - ref[n]).norm() / ref[n].norm().clamp_min(1e-12)).item()
        for n, p in smollm2.named_parameters()
        if n in ref
    )
    assert worst < 1e-4
    smollm2.zero_grad()
