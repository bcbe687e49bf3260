"""NIAH generators: lengths, depths, oracle retrieval, determinism and bad input."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lc_evals
from lc_evals.tasks.niah import NEEDLE_TEMPLATE

NIAH = ["niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery"]
NEEDLE_RE = re.compile(r"One of the special magic (\w+) for ([\w-]+) is: ([\w-]+)\.")


def oracle(item: lc_evals.TaskItem) -> list[str]:
    """Regex lookup of every needle value whose key is asked in the question."""
    found = []
    for _kind, key, value in NEEDLE_RE.findall(item.context):
        if re.search(rf"\b{re.escape(key)}\b", item.question):
            found.append(value)
    return found


@settings(max_examples=12)
@given(
    task=st.sampled_from(NIAH),
    length=st.integers(400, 3000),
    seed=st.integers(0, 10**6),
    haystack=st.sampled_from(["repeat", "essay", "needles"]),
    value_kind=st.sampled_from(["word", "number", "uuid"]),
)
def test_length_depth_oracle_with_tokenizer(
    tokenizer, task, length, seed, haystack, value_kind
) -> None:
    item = lc_evals.generate(
        task,
        n=1,
        length=length,
        seed=seed,
        tokenizer=tokenizer,
        haystack=haystack,
        value_kind=value_kind,
    )[0]
    measured = len(tokenizer.encode(item.context))
    assert measured == item.metadata["length"]
    assert length * 0.99 <= measured <= length
    assert sorted(oracle(item)) == sorted(item.answers)


@settings(max_examples=15)
@given(length=st.integers(1000, 20000), depth=st.floats(0, 1), seed=st.integers(0, 1000))
def test_needle_sits_at_the_requested_depth(length, depth, seed) -> None:
    item = lc_evals.generate(
        "niah_single", n=1, length=length, seed=seed, haystack="essay", depth=depth
    )[0]
    meta = item.metadata
    (offset,) = meta["needle_offsets"]
    needle = meta["needles"][0]
    assert item.context[offset : offset + len(needle)] == needle
    # the filler before the needle is `depth` of all filler, up to one sentence (< 200 chars)
    assert abs(offset - depth * meta["filler_chars"]) <= 200
    assert len(item.context) == meta["length"] <= length


@pytest.mark.parametrize("depth", [0.0, 1.0])
def test_extreme_depths_put_the_needle_at_the_edges(depth) -> None:
    item = lc_evals.generate(
        "niah_single", n=1, length=2000, seed=3, haystack="repeat", depth=depth
    )[0]
    needle = item.metadata["needles"][0]
    if depth == 0.0:
        assert item.context.startswith(needle)
    else:
        assert item.context.endswith(needle)


def test_needle_template_is_rulers() -> None:
    item = lc_evals.generate(
        "niah_single", n=1, length=1000, seed=1, value_kind="number", depth=0.3
    )[0]
    key = item.metadata["keys"][0]
    assert NEEDLE_TEMPLATE.format(type="numbers", key=key, value=item.answers[0]) in item.context
    assert re.fullmatch(r"\d{7}", item.answers[0])
    uuid_item = lc_evals.generate("niah_single", n=1, length=1000, seed=1, value_kind="uuid")[0]
    assert re.fullmatch(
        r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", uuid_item.answers[0]
    )


@pytest.mark.parametrize("task", NIAH)
def test_same_seed_same_items_and_prefix_stability(task) -> None:
    a = lc_evals.generate(task, n=3, length=1500, seed=7)
    b = lc_evals.generate(task, n=3, length=1500, seed=7)
    c = lc_evals.generate(task, n=2, length=1500, seed=7)
    d = lc_evals.generate(task, n=1, length=1500, seed=8)
    assert a == b
    assert a[:2] == c
    assert d[0].context != a[0].context
    assert len({i.id for i in a}) == 3


def test_multi_variants_count_needles() -> None:
    mk = lc_evals.generate("niah_multikey", n=1, length=3000, seed=0, num_distractors=5)[0]
    assert len(NEEDLE_RE.findall(mk.context)) == 6
    assert len(mk.answers) == 1
    mv = lc_evals.generate("niah_multivalue", n=1, length=3000, seed=0, num_values=3)[0]
    assert len(mv.answers) == 3
    assert len(set(mv.answers)) == 3
    mq = lc_evals.generate("niah_multiquery", n=1, length=3000, seed=0, num_queries=2)[0]
    assert len(mq.answers) == 2
    assert all(k in mq.question for k in mq.metadata["keys"])


def test_lc_agents_call_shape(tokenizer) -> None:
    (item,) = lc_evals.generate(
        "niah_single",
        n=1,
        length=4096,
        seed=0,
        tokenizer=tokenizer,
        haystack="essay",
        value_kind="number",
    )
    assert 4096 * 0.99 <= len(tokenizer.encode(item.context)) <= 4096
    (mk,) = lc_evals.generate(
        "niah_multikey", n=1, length=4096, seed=0, tokenizer=tokenizer, num_distractors=3
    )
    assert oracle(mk) == list(mk.answers)


def test_raw_tokenizers_object_is_accepted(tokenizer) -> None:
    (item,) = lc_evals.generate("niah_single", n=1, length=800, seed=0, tokenizer=tokenizer.inner)
    assert item.metadata["length"] == len(tokenizer.inner.encode(item.context).ids)


def test_bad_input_is_reported() -> None:
    with pytest.raises(ValueError, match=r"unknown task 'niah_nope'.*niah_single"):
        lc_evals.generate("niah_nope", n=1, length=100, seed=0)
    with pytest.raises(ValueError, match="impossible length"):
        lc_evals.generate("niah_single", n=1, length=30, seed=0)
    with pytest.raises(ValueError, match="haystack must be one of"):
        lc_evals.generate("niah_single", n=1, length=1000, seed=0, haystack="pg19")
    with pytest.raises(ValueError, match="value_kind"):
        lc_evals.generate("niah_single", n=1, length=1000, seed=0, value_kind="emoji")
    with pytest.raises(ValueError, match="depth"):
        lc_evals.generate("niah_single", n=1, length=1000, seed=0, depth=1.5)
    with pytest.raises(ValueError, match="unknown option"):
        lc_evals.generate("niah_single", n=1, length=1000, seed=0, depht=0.5)
    with pytest.raises(ValueError, match="n must be"):
        lc_evals.generate("niah_single", n=0, length=1000, seed=0)
