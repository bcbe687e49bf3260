"""Page-level sparse attention in chunk-recurrent training.

The reference is the same model run over the whole sequence at once with ordinary
autograd, where each layer's attention is masked to what the sparse chunk-recurrent run
attended to: a query of the chunk starting at ``s`` sees its own chunk causally plus the
past pages recorded in ``page_selections[(layer, s)]``. Loss and gradients must agree.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AttentionInterface, LlamaConfig, LlamaForCausalLM
from transformers.masking_utils import AttentionMaskInterface

from lc_train.oomb import ChunkRecurrentConfig, chunk_recurrent_backward

SMALL = dict(
    vocab_size=101,
    hidden_size=48,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=6,
    num_key_value_heads=2,
    max_position_embeddings=256,
)
SEQ, CHUNK, PAGE = 48, 8, 4
MASKS: dict[int, torch.Tensor] = {}


def _masked_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: Any,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    g = query.shape[1] // key.shape[1]
    k = key.repeat_interleave(g, dim=1)
    v = value.repeat_interleave(g, dim=1)
    s = query @ k.transpose(-1, -2) * scaling
    s = s.masked_fill(~MASKS[module.layer_idx], float("-inf"))
    return (torch.softmax(s, -1) @ v).transpose(1, 2), None


def _llama() -> LlamaForCausalLM:
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**SMALL)).float()


def _grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    out = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    return out


def _masks(selections: dict[tuple[int, int], list[int]]) -> dict[int, torch.Tensor]:
    masks = {}
    for layer in range(SMALL["num_hidden_layers"]):
        allowed = torch.zeros(SEQ, SEQ, dtype=torch.bool)
        for start in range(0, SEQ, CHUNK):
            end = min(start + CHUNK, SEQ)
            allowed[start:end, start:end] = torch.ones(end - start, end - start).tril().bool()
            for page in selections[(layer, start)]:
                allowed[start:end, page * PAGE : (page + 1) * PAGE] = True
        masks[layer] = allowed
    return masks


def test_sparse_gradients_equal_autograd_through_the_same_sparsity() -> None:
    model = _llama()
    ids = torch.randint(0, 101, (2, SEQ), generator=torch.Generator().manual_seed(1))
    config = ChunkRecurrentConfig(
        chunk_size=CHUNK, page_size=PAGE, block_tokens=PAGE, page_budget=4, local_pages=2
    )
    result = chunk_recurrent_backward(model, ids, config=config)
    sparse = _grads(model)
    sel = result.page_selections
    assert sel is not None
    for (_, start), pages in sel.items():
        n_past = start // PAGE
        assert pages == sorted(pages)
        assert len(pages) == min(n_past, 4)
        if n_past > 4:  # sink page and the two most recent pages are always kept
            assert {0, n_past - 2, n_past - 1} <= set(pages)
    assert any(len(p) < s // PAGE for (_, s), p in sel.items())  # really sparse

    MASKS.clear()
    MASKS.update(_masks(sel))
    AttentionInterface.register("lc_test_page_masked", _masked_attention)
    AttentionMaskInterface.register("lc_test_page_masked", lambda *a, **k: None)
    model.set_attn_implementation("lc_test_page_masked")
    ref_loss = model(ids, labels=ids).loss
    ref_loss.backward()
    model.set_attn_implementation("eager")
    reference = _grads(model)
    torch.testing.assert_close(result.loss, ref_loss.detach(), rtol=1e-5, atol=1e-6)
    for name, g in reference.items():
        err = ((sparse[name] - g).norm() / g.norm().clamp_min(1e-12)).item()
        assert err < 1e-4, f"{name}: relative error {err:.2e}"

    exact = chunk_recurrent_backward(
        model, ids, config=ChunkRecurrentConfig(chunk_size=CHUNK, page_size=PAGE, block_tokens=PAGE)
    )
    assert abs(float(exact.loss) - float(result.loss)) > 1e-6  # the budget changed the model


def test_budget_covering_the_whole_past_is_exact() -> None:
    model = _llama()
    ids = torch.randint(0, 101, (1, SEQ), generator=torch.Generator().manual_seed(2))
    base = ChunkRecurrentConfig(chunk_size=CHUNK, page_size=PAGE, block_tokens=PAGE)
    exact = chunk_recurrent_backward(model, ids, config=base)
    g_exact = _grads(model)
    wide = ChunkRecurrentConfig(
        chunk_size=CHUNK, page_size=PAGE, block_tokens=PAGE, page_budget=SEQ // PAGE
    )
    res = chunk_recurrent_backward(model, ids, config=wide)
    torch.testing.assert_close(res.loss, exact.loss, rtol=1e-6, atol=1e-7)
    for name, g in _grads(model).items():
        torch.testing.assert_close(g, g_exact[name], rtol=1e-5, atol=1e-7)
    assert exact.page_selections is None
    assert res.page_selections is not None
    assert res.page_selections[(0, 40)] == list(range(10))
