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
