"""The parts of ``benchmarks/solopo_qwen.py`` that need no model: prompts and pairs."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest

from lc_evals.tasks import babilong

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("solopo_qwen", BENCH / "solopo_qwen.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCH))


def test_answer_prefix_covers_every_question_form(bench) -> None:
    assert bench.answer_prefix("Where is Mary?") == "Mary is in the"
    assert bench.answer_prefix("Where is the apple?") == "The apple is in the"
    assert (
        bench.answer_prefix("Where was the milk before the garden?")
        == "Before the garden, the milk was in the"
    )
    with pytest.raises(ValueError, match="no answer prefix"):
        bench.answer_prefix("How many objects is Mary carrying?")
    for task in ("babilong_qa1", "babilong_qa2", "babilong_qa3"):
        for item in getattr(babilong, task)(5, 3000, 0):
            bench.answer_prefix(item.question)


def test_rejected_place_is_the_previous_place_and_never_the_answer(bench) -> None:
    items = babilong.babilong_qa1(40, 1500, 3)
    rng = random.Random(0)
    previous = 0
    for item in items:
        person = item.question.removeprefix("Where is ").rstrip("?")
        rejected = bench.near_miss(item, rng)
        assert rejected != item.answers[0]
        assert rejected in babilong.PLACES
        moves = [f for f in item.metadata["facts"] if f.startswith(person + " ")]
        places = [f.rstrip(".").split(" the ")[-1] for f in moves]
        earlier = [p for p in places if p != item.answers[0]]
        if earlier:
            assert rejected == earlier[-1]
            previous += 1
    assert previous > 10  # most people moved more than once: the near miss is real


def test_every_method_starts_from_the_same_seeded_adapters(bench) -> None:
    """``add_lora``: rank ``--lora-rank``, alpha twice the rank, every projection, initial
    values from ``--seed`` alone (not from whatever ran before)."""
    import argparse

    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from lc_train import LORA_TARGET_MODULES
    from lc_train.top_layers import split_top_layers

    pytest.importorskip("peft")
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(
        Qwen2Config(
            vocab_size=40,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=3,
            num_attention_heads=2,
            num_key_value_heads=1,
        )
    ).eval()
    _, make_upper = split_top_layers(model, 2)
    args = argparse.Namespace(lora_rank=4, seed=1)

    def adapters() -> dict[str, torch.Tensor]:
        upper = bench.add_lora(make_upper(), args)
        q = upper.get_base_model().model.layers[0].self_attn.q_proj
        assert q.scaling["default"] == pytest.approx(2.0)
        return {n: p.detach().clone() for n, p in upper.named_parameters() if p.requires_grad}

    torch.manual_seed(10)
    a = adapters()
    torch.manual_seed(20)
    b = adapters()
    assert len(a) == 2 * len(LORA_TARGET_MODULES) * 2
    assert all(n.startswith("base_model.model.model.layers.") for n in a)  # saved names
    assert a.keys() == b.keys()
    assert all(torch.equal(a[n], b[n]) for n in a)
