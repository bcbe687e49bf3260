"""distractor_qa: planted passages, determinism, length, oracle answer checks, bad input."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lc_evals
from lc_evals.tasks.distractor_qa import ATTRIBUTES, SEPARATOR, distractor_qa


def _fact(passage: str) -> tuple[str, str, str]:
    m = re.match(r"The (.+?) of the (.+?) is (\d{4})\.", passage)
    assert m, passage
    return m.group(1), m.group(2), m.group(3)


def test_registered_with_a_scorer() -> None:
    assert "distractor_qa" in lc_evals.available_tasks()
    assert lc_evals.task_spec("distractor_qa").scorer == "contains_all"


@settings(max_examples=25)
@given(seed=st.integers(0, 10**9), distractors=st.integers(0, 6), irrelevant=st.integers(0, 6))
def test_passages_answer_only_from_the_gold_one(seed, distractors, irrelevant) -> None:
    (item,) = distractor_qa(1, 10_000, seed, distractors=distractors, irrelevant=irrelevant)
    meta = item.metadata
    passages, kinds = meta["passages"], meta["kinds"]
    assert SEPARATOR.join(passages) == item.context
    assert kinds.count("gold") == 1
    assert kinds[meta["gold_index"]] == "gold"
    assert kinds.count("near_miss") == distractors
    assert kinds.count("irrelevant") == irrelevant
    q = re.match(r"What is the (.+?) of the (.+?)\?", item.question)
    assert q
    attribute, entity = q.group(1), q.group(2)
    assert attribute in ATTRIBUTES
    facts = [_fact(p) for p in passages]
    # Exactly one passage states the asked fact, and it holds the answer.
    stating = [i for i, (a, e, _) in enumerate(facts) if (a, e) == (attribute, entity)]
    assert stating == [meta["gold_index"]]
    assert facts[meta["gold_index"]][2] == item.answers[0]
    # Every number is distinct, so a distractor's number is never a right answer.
    values = [v for _, _, v in facts]
    assert len(set(values)) == len(values)
    adjective, noun = entity.split(" ")
    for (a, e, _), kind in zip(facts, kinds, strict=True):
        adj, nn = e.split(" ")
        shared = (a == attribute) + (adj == adjective) + (nn == noun)
        if kind == "near_miss":  # two of three (attribute, adjective, noun) shared
            assert shared == 2
        elif kind == "irrelevant":
            assert shared == 0


def test_deterministic_and_independent_of_n() -> None:
    a = distractor_qa(3, 1200, seed=5)
    b = distractor_qa(5, 1200, seed=5)
    assert [x.to_dict() for x in a] == [x.to_dict() for x in b[:3]]
    assert distractor_qa(1, 1200, seed=6)[0].context != a[0].context


@settings(max_examples=10)
@given(length=st.integers(600, 3000), seed=st.integers(0, 10**6))
def test_fills_the_length_with_irrelevant_passages(tokenizer, length, seed) -> None:
    (item,) = lc_evals.generate("distractor_qa", n=1, length=length, seed=seed, tokenizer=tokenizer)
    measured = len(tokenizer.encode(item.context))
    assert measured == item.metadata["length"] <= length
    # one more passage of the same size would not have fit
    longest = max(len(tokenizer.encode(p)) for p in item.metadata["passages"])
    assert measured + longest + 2 > 0.8 * length


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="distractors"):
        distractor_qa(1, 1000, 0, distractors=-1)
    with pytest.raises(ValueError, match="cannot hold"):
        distractor_qa(1, 50, 0)
    with pytest.raises(ValueError, match="cannot hold"):
        distractor_qa(1, 400, 0, irrelevant=20)
    with pytest.raises(ValueError, match="unknown option"):
        lc_evals.generate("distractor_qa", n=1, length=1000, seed=0, depth=0.5)
