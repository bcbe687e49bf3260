"""``lc_train.lora.apply_lora``: adapters on the projections of a tiny random model."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from lc_train import LORA_TARGET_MODULES, apply_lora

peft = pytest.importorskip("peft")

SIZES = dict(
    vocab_size=50,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
)


def _model(family: str = "qwen2") -> torch.nn.Module:
    torch.manual_seed(0)
    if family == "llama":
        return LlamaForCausalLM(LlamaConfig(**SIZES)).eval()
    return Qwen2ForCausalLM(Qwen2Config(**SIZES)).eval()


def _adapters(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


@pytest.mark.parametrize("family", ["qwen2", "llama"])
def test_adapters_on_every_projection_and_only_they_train(family: str) -> None:
    model = _model(family)
    ids = torch.randint(0, 50, (1, 9))
    with torch.no_grad():
        before = model(ids).logits
    wrapped = apply_lora(model, rank=4, alpha=8, seed=0)
    assert wrapped.get_base_model() is model
    trainable = _adapters(wrapped)
    # A and B on each of the 7 projections of each of the 2 layers
    assert len(trainable) == 2 * 7 * 2
    assert all(".lora_A." in n or ".lora_B." in n for n in trainable)
    for target in LORA_TARGET_MODULES:
        assert sum(f".{target}.lora_A." in n for n in trainable) == 2
    assert all(not p.requires_grad for n, p in model.named_parameters() if "lora_" not in n)
    q = model.model.layers[0].self_attn.q_proj
    assert q.lora_A["default"].weight.shape == (4, 32)
    assert q.lora_B["default"].weight.shape == (32, 4)
    assert q.scaling["default"] == pytest.approx(2.0)  # alpha / rank
    # B starts at zero: the adapted model computes what the base model did
    with torch.no_grad():
        torch.testing.assert_close(wrapped(input_ids=ids).logits, before, rtol=0, atol=0)


def test_layers_limit_the_adapters_to_the_chosen_decoder_layers() -> None:
    model = Qwen2ForCausalLM(Qwen2Config(**{**SIZES, "num_hidden_layers": 4})).eval()
    wrapped = apply_lora(model, rank=2, alpha=4, seed=0, layers=range(2, 4))
    trainable = _adapters(wrapped)
    assert len(trainable) == 2 * 7 * 2
    assert {int(n.split(".layers.")[1].split(".")[0]) for n in trainable} == {2, 3}
    assert not hasattr(model.model.layers[1].self_attn.q_proj, "lora_A")


@pytest.mark.parametrize(
    ("layers", "error", "match"),
    [
        (
            [2],
            ValueError,
            r"layers \[2\] hold none of the target modules \(layers with targets: 0..1\)",
        ),
        ([], ValueError, "layers is empty"),
        ([0, 0], ValueError, "repeats an index"),
        ([0.5], TypeError, "layer indices"),
        ("0", TypeError, "sequence of layer indices"),
    ],
)
def test_bad_layers_are_refused_before_the_model_changes(layers, error, match) -> None:
    model = _model()
    with pytest.raises(error, match=match):
        apply_lora(model, rank=2, alpha=4, seed=0, layers=layers)
    assert all(p.requires_grad for p in model.parameters())


def test_the_seed_decides_the_adapters_whatever_ran_before() -> None:
    models = [_model() for _ in range(3)]  # (each build reseeds the global generator)
    torch.manual_seed(123)
    a = _adapters(apply_lora(models[0], rank=4, alpha=8, seed=5))
    torch.manual_seed(456)
    b = _adapters(apply_lora(models[1], rank=4, alpha=8, seed=5))
    torch.manual_seed(123)
    c = _adapters(apply_lora(models[2], rank=4, alpha=8, seed=6))
    assert a.keys() == b.keys() == c.keys()
    for name in a:  # same seed after other global states: the same adapters
        assert torch.equal(a[name], b[name]), name
    lora_a = [n for n in a if ".lora_A." in n]
    assert all(a[n].abs().max() > 0 for n in lora_a)
    # same global state, another seed: other values
    assert all(not torch.equal(a[n], c[n]) for n in lora_a)


def test_the_global_generator_is_left_as_it_was() -> None:
    model = _model()
    torch.manual_seed(7)
    state = torch.get_rng_state()
    apply_lora(model, rank=4, alpha=8, seed=5)
    assert torch.equal(torch.get_rng_state(), state)


def test_chosen_targets_dropout_and_task_type() -> None:
    model = _model()
    wrapped = apply_lora(
        model,
        rank=4,
        alpha=5,
        seed=0,
        dropout=0.1,
        target_modules=["q_proj", "v_proj"],
        task_type="CAUSAL_LM",
    )
    assert isinstance(wrapped, peft.PeftModelForCausalLM)
    names = _adapters(wrapped)
    assert {n.split(".")[-4] for n in names} == {"q_proj", "v_proj"}
    q = model.model.layers[1].self_attn.q_proj
    assert q.lora_dropout["default"].p == pytest.approx(0.1)
    assert q.scaling["default"] == pytest.approx(1.25)
    assert not hasattr(model.model.layers[1].self_attn.k_proj, "lora_A")


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"rank": 0}, ValueError, "rank must be >= 1"),
        ({"rank": -3}, ValueError, "rank must be >= 1"),
        ({"rank": 2.0}, TypeError, "rank must be an int"),
        ({"rank": True}, TypeError, "rank must be an int"),
        ({"alpha": 0}, ValueError, "alpha must be >= 1"),
        ({"alpha": -8}, ValueError, "alpha must be >= 1"),
        ({"alpha": 8.0}, TypeError, "alpha must be an int"),
        ({"alpha": "8"}, TypeError, "alpha must be an int"),
        ({"dropout": 1.0}, ValueError, r"dropout must be in \[0, 1\)"),
        ({"dropout": -0.1}, ValueError, r"dropout must be in \[0, 1\)"),
        ({"seed": None}, TypeError, "seed must be an int"),
        ({"seed": 1.5}, TypeError, "seed must be an int"),
        ({"target_modules": "q_proj"}, TypeError, "not the string 'q_proj'"),
        ({"target_modules": []}, ValueError, "target_modules is empty"),
        ({"target_modules": ["q_proj", 3]}, TypeError, "must hold module names"),
        ({"target_modules": ["q_proj", "qkv_proj"]}, ValueError, r"\['qkv_proj'\] match no"),
        ({"target_modules": ["proj"]}, ValueError, r"\['proj'\] match no module of Qwen2"),
    ],
)
def test_bad_input_is_refused_before_the_model_changes(kwargs, error, match) -> None:
    model = _model()
    args = {"rank": 4, "alpha": 8, "seed": 0, **kwargs}
    with pytest.raises(error, match=match):
        apply_lora(model, **args)
    assert all(p.requires_grad for p in model.parameters())  # untouched
    assert not any("lora_" in n for n, _ in model.named_modules())


def test_missing_peft_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "peft", None)  # "import peft" raises ImportError
    with pytest.raises(ImportError, match=r"lc-train\[trl\]"):
        apply_lora(_model(), rank=4, alpha=8, seed=0)
