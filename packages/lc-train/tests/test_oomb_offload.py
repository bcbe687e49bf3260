"""Host offload with staged, prefetched pages gives the same loss and gradients.

On this CPU-only machine the stager copies between separate host buffers with
synchronous copies (the CUDA side stream and events are replaced by no-ops), so what is
checked here is the bookkeeping: which pages a slot holds, when gradient pages go back
to host, and that the prefetch schedule serves the attention calls. The same tests run
on CUDA (side stream, events, pinned host pages) where a GPU is present.
"""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from lc_train.oomb import ChunkRecurrentConfig, chunk_recurrent_backward

SMALL = dict(
    vocab_size=101,
    hidden_size=48,
    intermediate_size=96,
    num_hidden_layers=4,
    num_attention_heads=6,
    num_key_value_heads=2,
    max_position_embeddings=256,
)
DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _llama(device: str, layers: int = 4) -> LlamaForCausalLM:
    torch.manual_seed(0)
    return (
        LlamaForCausalLM(LlamaConfig(**{**SMALL, "num_hidden_layers": layers})).float().to(device)
    )


def _grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    out = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    return out


def _assert_close(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], tol: float) -> None:
    for name, g in b.items():
        err = ((a[name] - g).norm() / g.norm().clamp_min(1e-12)).item()
        assert err < tol, f"{name}: relative error {err:.2e}"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("resident", "layers"), [(2, 4), (3, 4), (2, 1)])
def test_offload_equals_full_backprop(device: str, resident: int, layers: int) -> None:
    """With one layer, the prefetch for the next chunk reads the pages the same layer has
    just written: it must come after that write."""
    model = _llama(device, layers)
    ids = torch.randint(0, 101, (2, 45), generator=torch.Generator().manual_seed(4)).to(device)
    ref = model(ids, labels=ids).loss
    ref.backward()
    reference = _grads(model)
    config = ChunkRecurrentConfig(
        chunk_size=8, page_size=4, block_tokens=8, offload=True, resident_layers=resident
    )
    result = chunk_recurrent_backward(model, ids, config=config)
    torch.testing.assert_close(result.loss, ref.detach(), rtol=1e-5, atol=1e-6)
    _assert_close(_grads(model), reference, 1e-4)

    assert result.device_kv_bytes * layers == result.kv_bytes * resident  # `resident` layers
    stats = result.offload_stats
    assert stats is not None
    chunks_with_past = -(-45 // 8) - 1
    # pass 1: L calls per chunk with a past, pass 2: L forward + L backward calls
    assert stats.acquires == 3 * layers * chunks_with_past
    # every call is served by a prefetch (the first chunk has no past)
    assert stats.prefetch_hits == stats.acquires
    assert stats.pages_out > 0  # gradient pages went back to host


@pytest.mark.parametrize("device", DEVICES)
def test_offload_with_page_budget_equals_resident_sparse_training(device: str) -> None:
    model = _llama(device, layers=2)
    ids = torch.randint(0, 101, (1, 40), generator=torch.Generator().manual_seed(5)).to(device)
    base = dict(chunk_size=8, page_size=4, block_tokens=4, page_budget=4, local_pages=1)
    plain = chunk_recurrent_backward(model, ids, config=ChunkRecurrentConfig(**base))
    g_plain = _grads(model)
    staged = chunk_recurrent_backward(model, ids, config=ChunkRecurrentConfig(**base, offload=True))
    assert staged.page_selections == plain.page_selections
    torch.testing.assert_close(staged.loss, plain.loss, rtol=1e-6, atol=1e-7)
    _assert_close(_grads(model), g_plain, 1e-5)
    assert staged.offload_stats is not None
    # a slot holds at most the budget: 2 slots x 4 pages vs 2 layers x 10 pages in the pools
    assert staged.device_kv_bytes * 10 == staged.kv_bytes * 4


def test_offload_sparse_with_repeated_selections_keeps_gradients_fresh() -> None:
    """Without local pages, consecutive chunks can pick the same pages of a layer; a slot
    that still holds them must not reuse gradients another slot has since changed."""
    model = _llama("cpu", layers=2)
    ids = torch.randint(0, 101, (1, 32), generator=torch.Generator().manual_seed(6))
    base = dict(
        chunk_size=4, page_size=4, block_tokens=4, page_budget=2, sink_pages=1, local_pages=0
    )
    plain = chunk_recurrent_backward(model, ids, config=ChunkRecurrentConfig(**base))
    g_plain = _grads(model)
    for resident in (2, 3):
        staged = chunk_recurrent_backward(
            model, ids, config=ChunkRecurrentConfig(**base, offload=True, resident_layers=resident)
        )
        torch.testing.assert_close(staged.loss, plain.loss, rtol=1e-6, atol=1e-7)
        _assert_close(_grads(model), g_plain, 1e-5)


def test_resident_layers_is_validated() -> None:
    with pytest.raises(ValueError, match="resident_layers"):
        ChunkRecurrentConfig(resident_layers=1)
    with pytest.raises(ValueError, match="attention_backend"):
        ChunkRecurrentConfig(attention_backend="cuda")
