"""LycheeDecode on the real SmolLM2-135M-Instruct: exact when every token fits the budget."""

from __future__ import annotations

import pathlib

import pytest
import torch

from lc_attention.lychee import PreallocatedCache, RoleMap, enable_lychee, is_lychee_enabled

pytestmark = pytest.mark.model
ROLES = (
    pathlib.Path(__file__).resolve().parents[1]
    / "docs/benchmarks/lc-attention-lychee/smollm2_roles.json"
)


@pytest.fixture(scope="module")
def smollm2():
    from lc_agents.models import load_model

    return load_model("smollm2-135m-instruct")


def _prompt_ids(tok, length: int, seed: int) -> torch.Tensor:
    from lc_evals import generate, render_prompt

    item = generate("niah_single", n=1, length=length, seed=seed, tokenizer=tok)[0]
    msgs = [{"role": "user", "content": render_prompt(item)}]
    text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    return tok(text, return_tensors="pt").input_ids


def _gen(model, ids, n: int, **kw):
    with torch.no_grad():
        return model.generate(
            ids,
            max_new_tokens=n,
            do_sample=False,
            output_scores=True,
            return_dict_in_generate=True,
            **kw,
        )


def test_all_retrieval_heads_decode_like_full_attention(smollm2) -> None:
    model, tok = smollm2
    ids = _prompt_ids(tok, 600, seed=0)
    ref = _gen(model, ids, 8)
    with enable_lychee(model, RoleMap.from_model(model), topk=ids.shape[1]) as m:
        out = _gen(m, ids, 8)
    assert torch.equal(out.sequences, ref.sequences)
    diff = max(float((a - b).abs().max()) for a, b in zip(out.scores, ref.scores, strict=True))
    assert diff < 1e-3
    assert not is_lychee_enabled(model)


def test_sparse_heads_with_the_whole_context_match_full_attention(smollm2) -> None:
    model, tok = smollm2
    ids = _prompt_ids(tok, 400, seed=1)
    heads = model.config.num_attention_heads
    roles = [[True] * heads] + [[h % 3 == 0 for h in range(heads)]] * (
        model.config.num_hidden_layers - 1
    )
    with torch.no_grad():
        past = model(ids[:, :-1], use_cache=True).past_key_values
        ref = model(ids[:, -1:], past_key_values=past).logits
        past = model(ids[:, :-1], use_cache=True).past_key_values
        handle = enable_lychee(model, RoleMap.from_model(model, roles), topk=ids.shape[1])
        with handle:
            out = model(ids[:, -1:], past_key_values=past).logits
    assert handle.hybrid_steps == 1
    assert float((out - ref).abs().max()) < 1e-3


@pytest.mark.skipif(
    not ROLES.exists(), reason="run benchmarks/lychee_train.py to learn the role map"
)
def test_learned_role_map_fits_the_model_and_decodes(smollm2) -> None:
    model, tok = smollm2
    rm = RoleMap.load(ROLES)
    rm.check_model(model)
    assert rm.num_retrieval < rm.num_heads_total
    ids = _prompt_ids(tok, 1200, seed=2)
    with torch.no_grad():
        before = model(ids).logits
    handle = enable_lychee(model, rm, topk=128)
    with handle:
        out = _gen(model, ids, 6)
    assert handle.hybrid_steps == 5
    assert out.sequences.shape[1] == ids.shape[1] + 6
    with torch.no_grad():
        assert torch.equal(model(ids).logits, before)


@pytest.mark.skipif(
    not ROLES.exists(), reason="run benchmarks/lychee_train.py to learn the role map"
)
def test_preallocated_cache_gives_the_dynamic_cache_outputs(smollm2) -> None:
    """Same tokens and logits (1e-4) with the in-place cache, full and hybrid attention."""
    model, tok = smollm2
    ids = _prompt_ids(tok, 900, seed=3)
    ref = _gen(model, ids, 6)
    out = _gen(model, ids, 6, cache=PreallocatedCache(config=model.config))
    assert torch.equal(out.sequences, ref.sequences)
    with enable_lychee(model, RoleMap.load(ROLES), topk=128):
        a = _gen(model, ids, 6)
        b = _gen(model, ids, 6, cache=PreallocatedCache(config=model.config, capacity=1000))
    assert torch.equal(a.sequences, b.sequences)
    for x, y in ((out, ref), (a, b)):
        diff = max(float((p - q).abs().max()) for p, q in zip(x.scores, y.scores, strict=True))
        assert diff < 1e-4
