"""PreallocatedCache: same contents and same model outputs as DynamicCache, with and
without LycheeDecode, and in-place appends."""

from __future__ import annotations

import pytest
import torch
from transformers import DynamicCache

from lc_attention.lychee import PreallocatedCache, RoleMap, enable_lychee
from lc_attention.lychee.cache import PreallocatedLayer

torch.set_num_threads(1)
V = 96


def _llama(layers: int = 3) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=V, hidden_size=96, intermediate_size=128, num_hidden_layers=layers,
        num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=1024,
        eos_token_id=None, attn_implementation="sdpa",
    )  # fmt: skip
    return LlamaForCausalLM(cfg).eval()


@pytest.fixture(scope="module")
def llama() -> torch.nn.Module:
    return _llama()


def _ids(n: int, seed: int = 1, batch: int = 1) -> torch.Tensor:
    return torch.randint(0, V, (batch, n), generator=torch.Generator().manual_seed(seed))


def _gen(model, ids, cache, n=8, **kw):
    with torch.no_grad():
        return model.generate(
            ids, max_new_tokens=n, do_sample=False, output_scores=True,
            return_dict_in_generate=True, cache=cache, **kw,
        )  # fmt: skip


def _max_diff(a, b) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(a, b, strict=True))


def test_layer_matches_dynamic_cache_through_growth_crop_and_batch_ops() -> None:
    g = torch.Generator().manual_seed(0)
    pre, dyn = PreallocatedCache(capacity=12), DynamicCache()
    chunks = [10, 1, 1, 3, 1, 9, 1]  # crosses the first capacity (12) and the grown one (19)
    for n in chunks:
        k = torch.randn(2, 3, n, 4, generator=g)
        v = torch.randn(2, 3, n, 4, generator=g)
        kp, vp = pre.update(k, v, 0)
        kd, vd = dyn.update(k, v, 0)
        assert torch.equal(kp, kd)
        assert torch.equal(vp, vd)
        assert pre.get_seq_length() == dyn.get_seq_length()
    layer = pre.layers[0]
    assert isinstance(layer, PreallocatedLayer)
    assert layer.capacity >= 26
    pre.crop(-4)
    dyn.crop(-4)
    assert pre.get_seq_length() == dyn.get_seq_length() == 22
    k = torch.randn(2, 3, 1, 4, generator=g)
    kp, _ = pre.update(k, k, 0)
    kd, _ = dyn.update(k, k, 0)
    assert torch.equal(kp, kd)
    for op, arg in (
        ("reorder_cache", torch.tensor([1, 0])),
        ("batch_repeat_interleave", 2),
        ("batch_select_indices", torch.tensor([0, 3])),
    ):
        getattr(pre, op)(arg)
        getattr(dyn, op)(arg)
        assert torch.equal(pre.layers[0].keys, dyn.layers[0].keys), op
    kp, _ = pre.update(k, k, 0)
    kd, _ = dyn.update(k, k, 0)
    assert torch.equal(kp, kd)


def test_append_writes_in_place_without_moving_the_past() -> None:
    pre = PreallocatedCache(capacity=64)
    k = torch.randn(1, 2, 10, 8)
    keys, _ = pre.update(k, k, 0)
    ptr = keys.data_ptr()
    for _ in range(5):
        keys, _ = pre.update(k[:, :, :1], k[:, :, :1], 0)
    assert keys.data_ptr() == ptr  # same buffer: nothing was copied
    assert keys.shape == (1, 2, 15, 8)
    assert pre.layers[0].capacity == 64
    pre.reset()
    assert pre.get_seq_length() == 0


def test_bad_capacity_raises() -> None:
    with pytest.raises(ValueError, match="capacity must be an integer >= 1"):
        PreallocatedCache(capacity=0)
    with pytest.raises(ValueError, match="negative number"):
        PreallocatedLayer().crop(3)


def test_generate_with_preallocated_cache_equals_dynamic_cache(llama) -> None:
    ids = _ids(90)
    ref = _gen(llama, ids, DynamicCache())
    cache = PreallocatedCache(capacity=92)
    out = _gen(llama, ids, cache)  # grows during generate
    assert cache.get_seq_length() == 90 + 8 - 1
    assert cache.layers[0].capacity >= 97
    assert torch.equal(out.sequences, ref.sequences)
    assert _max_diff(out.scores, ref.scores) < 1e-5


def test_lychee_with_preallocated_cache_equals_dynamic_cache(llama) -> None:
    ids = _ids(120, seed=3)
    roles = RoleMap.from_model(llama, [[True] * 6] + [[True, False, False, False, True, False]] * 2)
    with enable_lychee(llama, roles, topk=6) as m:
        ref = _gen(m, ids, DynamicCache(), n=10)
        out = _gen(m, ids, PreallocatedCache(config=llama.config), n=10)
    assert torch.equal(out.sequences, ref.sequences)
    assert _max_diff(out.scores, ref.scores) < 1e-5


def test_all_retrieval_with_preallocated_cache_equals_full_attention(llama) -> None:
    ids = _ids(70, seed=4, batch=2)
    mask = torch.ones_like(ids)
    mask[1, :5] = 0  # left padding
    ref = _gen(llama, ids, DynamicCache(), attention_mask=mask)
    with enable_lychee(llama, RoleMap.from_model(llama), topk=8):
        out = _gen(llama, ids, PreallocatedCache(), attention_mask=mask)
    assert torch.equal(out.sequences, ref.sequences)
    assert _max_diff(out.scores, ref.scores) < 1e-5


def test_gemma3_sliding_layers_keep_the_dynamic_window_layer() -> None:
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig
    from transformers.cache_utils import DynamicSlidingWindowLayer

    torch.manual_seed(0)
    cfg = Gemma3TextConfig(
        vocab_size=V, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=32,
        layer_types=["sliding_attention", "full_attention", "full_attention"],
        max_position_embeddings=1024, eos_token_id=None, attn_implementation="sdpa",
    )  # fmt: skip
    model = Gemma3ForCausalLM(cfg).eval()
    cache = PreallocatedCache(config=cfg)
    assert isinstance(cache.layers[0], DynamicSlidingWindowLayer)
    assert all(isinstance(x, PreallocatedLayer) for x in cache.layers[1:])
    ids = _ids(60)
    ref = _gen(model, ids, DynamicCache(config=cfg), n=5)
    roles = RoleMap.from_model(model, [[True] * 4, [True] * 4, [True, False, True, False]])
    out = _gen(model, ids, cache, n=5)
    assert torch.equal(out.sequences, ref.sequences)
    assert _max_diff(out.scores, ref.scores) < 1e-5
    with enable_lychee(model, roles, topk=4):
        a = _gen(model, ids, DynamicCache(config=cfg), n=5)
        b = _gen(model, ids, PreallocatedCache(config=cfg), n=5)
    assert torch.equal(a.sequences, b.sequences)
    assert _max_diff(a.scores, b.scores) < 1e-5
