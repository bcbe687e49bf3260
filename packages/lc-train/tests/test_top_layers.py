"""The lower / upper split of a causal LM gives the full model's logits and gradients."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from lc_train.preference import response_logps
from lc_train.top_layers import split_top_layers

SIZES = dict(
    vocab_size=50,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    tie_word_embeddings=True,
)


@pytest.mark.parametrize(
    "family", [(LlamaConfig, LlamaForCausalLM), (Qwen2Config, Qwen2ForCausalLM)]
)
@pytest.mark.parametrize("k", [1, 3])
def test_upper_of_lower_equals_full_model(family, k: int) -> None:
    config_cls, model_cls = family
    torch.manual_seed(0)
    model = model_cls(config_cls(**SIZES)).eval()
    ids = torch.randint(0, 50, (2, 11))
    lower, make_upper = split_top_layers(model, k)
    upper = make_upper()
    assert len(upper.model.layers) == k
    torch.testing.assert_close(upper(inputs_embeds=lower(ids)).logits, model(ids).logits)


def test_upper_copies_are_independent_and_cache_generation_works() -> None:
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(**SIZES)).eval()
    lower, make_upper = split_top_layers(model, 2)
    a, b = make_upper(), make_upper()
    with torch.no_grad():
        a.model.layers[0].mlp.up_proj.weight.add_(1.0)
    ids = torch.randint(0, 50, (1, 7))
    h = lower(ids)
    torch.testing.assert_close(b(inputs_embeds=h).logits, model(ids).logits)
    assert not torch.allclose(a(inputs_embeds=h).logits, model(ids).logits)
    # incremental decoding through the upper model's own cache matches one full pass
    out = b(inputs_embeds=h[:, :5], use_cache=True)
    step = b(inputs_embeds=h[:, 5:], past_key_values=out.past_key_values, use_cache=True)
    torch.testing.assert_close(step.logits, model(ids).logits[:, 5:], rtol=1e-5, atol=1e-5)


def test_response_logps_from_cached_states_match_and_train_only_the_top() -> None:
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**SIZES)).eval()
    lower, make_upper = split_top_layers(model, 2)
    upper = make_upper()
    ids = torch.randint(0, 50, (2, 10))
    mask = torch.zeros_like(ids)
    mask[0, 7:] = 1
    mask[1, 5:9] = 1
    want = response_logps(model, ids, mask)
    got = response_logps(upper, ids, mask, inputs_embeds=lower(ids))
    torch.testing.assert_close(got.logps, want.logps)
    got.logps.sum().backward()
    assert upper.model.layers[0].self_attn.q_proj.weight.grad is not None
    assert all(p.grad is None for p in model.model.layers.parameters())


def test_bad_split_is_refused() -> None:
    model = LlamaForCausalLM(LlamaConfig(**SIZES))
    for k in (0, 4, 2.0):
        with pytest.raises(ValueError, match="k must be"):
            split_top_layers(model, k)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Llama-style"):
        split_top_layers(torch.nn.Linear(2, 2), 1)
    with pytest.raises(ValueError, match="inputs_embeds"):
        response_logps(
            model,
            torch.zeros(1, 4, dtype=torch.long),
            torch.ones(1, 4),
            inputs_embeds=torch.zeros(1, 3, 32),
        )
