"""Cache correction: the corrected entries and logits are exactly full attention's."""

from __future__ import annotations

import pytest
import torch

from lc_attention.lychee import (
    PreallocatedCache,
    RoleMap,
    correct_cache,
    enable_lychee,
    generate_with_correction,
)

torch.set_num_threads(1)
V = 96


@pytest.fixture(scope="module")
def llama() -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=V, hidden_size=96, intermediate_size=128, num_hidden_layers=3,
        num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=1024,
        eos_token_id=None, attn_implementation="sdpa",
    )  # fmt: skip
    return LlamaForCausalLM(cfg).eval()


def _ids(n: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, V, (1, n), generator=torch.Generator().manual_seed(seed))


def _roles(model) -> RoleMap:
    return RoleMap.from_model(model, [[True] * 6] + [[True, False, False, False, False, False]] * 2)


def _greedy(model, ids, n):
    with torch.no_grad():
        return model.generate(ids, max_new_tokens=n, do_sample=False)


def test_correct_cache_gives_full_attention_entries_and_logits(llama) -> None:
    ids = _ids(80)
    cache = PreallocatedCache(config=llama.config)
    with torch.no_grad(), enable_lychee(llama, _roles(llama), topk=3) as m:
        m(ids[:, :70], cache=cache, use_cache=True)
        for i in range(70, 80):  # ten sparse decode steps: their entries drift
            m(ids[:, i : i + 1], cache=cache, use_cache=True)
        logits = correct_cache(m, cache, ids, start=70)
    with torch.no_grad():
        dense = llama(ids, use_cache=True)
    want = dense.past_key_values
    for layer in (1, 2):  # layer 0 is all retrieval, later layers read the drift
        for got, ref in ((cache.layers[layer].keys, want.layers[layer].keys),
                         (cache.layers[layer].values, want.layers[layer].values)):  # fmt: skip
            assert float((got - ref).abs().max()) < 1e-5
    assert float((logits - dense.logits[:, -1]).abs().max()) < 1e-5


def test_sparse_decode_alone_drifts_from_full_attention(llama) -> None:
    """The premise: without correction, the sparse entries differ from dense ones."""
    ids = _ids(80)
    cache = PreallocatedCache()
    with torch.no_grad(), enable_lychee(llama, _roles(llama), topk=3) as m:
        m(ids[:, :70], cache=cache, use_cache=True)
        for i in range(70, 80):
            m(ids[:, i : i + 1], cache=cache, use_cache=True)
    with torch.no_grad():
        want = llama(ids, use_cache=True).past_key_values
    assert float((cache.layers[2].values - want.layers[2].values).abs().max()) > 1e-3


def test_every_step_corrected_is_full_attention_decoding(llama) -> None:
    ids = _ids(60, seed=2)
    ref = _greedy(llama, ids, 10)
    with enable_lychee(llama, _roles(llama), topk=3) as m:
        out = generate_with_correction(m, ids, max_new_tokens=10, every=1)
    assert torch.equal(out, ref)


def test_no_correction_within_the_run_is_lychee_decoding(llama) -> None:
    ids = _ids(60, seed=3)
    with enable_lychee(llama, _roles(llama), topk=3) as m:
        ref = _greedy(m, ids, 10)
        out = generate_with_correction(m, ids, max_new_tokens=10, every=50)
        mid = generate_with_correction(m, ids, max_new_tokens=10, every=4)
    assert torch.equal(out, ref)
    assert mid.shape == ref.shape
    assert torch.equal(mid[:, : 60 + 4], ref[:, : 60 + 4])  # identical before the first pass


def test_bad_input_raises(llama) -> None:
    ids = _ids(20)
    with pytest.raises(ValueError, match="every must be an integer >= 1"):
        generate_with_correction(llama, ids, max_new_tokens=3, every=0)
    cache = PreallocatedCache()
    with torch.no_grad():
        llama(ids, cache=cache, use_cache=True)
    with pytest.raises(ValueError, match="start must lie in"):
        correct_cache(llama, cache, ids, start=20)
    with pytest.raises(ValueError, match="cache length"):
        correct_cache(llama, cache, ids[:, :5], start=0)
