"""Every built-in generator: exact length, determinism, independent oracles, bad input."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lc_evals
from lc_evals.tasks import babilong

BUILTIN = [
    "niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery",
    "variable_tracking", "common_words", "frequent_words",
    "babilong_qa1", "babilong_qa2", "babilong_qa3", "babilong_qa6", "babilong_qa7",
    "kv_retrieval", "minmax",
]  # fmt: skip


def test_registry_lists_the_builtins() -> None:
    assert set(BUILTIN) <= set(lc_evals.available_tasks())
    for name in BUILTIN:
        assert lc_evals.task_spec(name).scorer


@settings(max_examples=20)
@given(task=st.sampled_from(BUILTIN), length=st.integers(1000, 6000), seed=st.integers(0, 10**9))
def test_length_within_one_percent_with_a_tokenizer(tokenizer, task, length, seed) -> None:
    (item,) = lc_evals.generate(task, n=1, length=length, seed=seed, tokenizer=tokenizer)
    measured = len(tokenizer.encode(item.context))
    assert item.metadata["length"] == measured
    assert item.metadata["target_length"] == length
    assert item.metadata["length_unit"] == "tokens"
    assert 0.99 * length <= measured <= length
    assert item.metadata["seed"] == seed


@settings(max_examples=20)
@given(task=st.sampled_from(BUILTIN), length=st.integers(1500, 8000), seed=st.integers(0, 10**9))
def test_length_within_one_percent_in_characters(task, length, seed) -> None:
    (item,) = lc_evals.generate(task, n=1, length=length, seed=seed)
    assert 0.99 * length <= len(item.context) == item.metadata["length"] <= length


@pytest.mark.parametrize("task", BUILTIN)
def test_same_seed_same_items(task, seeded_items) -> None:
    seeded_items(task, 2500)


# --- independent oracles -------------------------------------------------------------


def vt_oracle(item: lc_evals.TaskItem) -> set[str]:
    value = re.search(r"assigned the value (\d+)", item.question).group(1)
    holds = {value}
    names: set[str] = set()
    for name, rhs in re.findall(r"VAR (\w+) = ((?:VAR )?\w+) \.", item.context):
        src = rhs.removeprefix("VAR ")
        if src in holds:
            names.add(name)
            holds.add(name)
    return names


def cwe_oracle(item: lc_evals.TaskItem) -> set[str]:
    words = re.findall(r"\d+\. (\w+)", item.context)
    return {w for w, _ in Counter(words).most_common(10)}


def fwe_oracle(item: lc_evals.TaskItem) -> set[str]:
    counts = Counter(item.context.split()).most_common(4)
    assert counts[2][1] > counts[3][1]
    return {w for w, _ in counts[:3]}


def kv_oracle(item: lc_evals.TaskItem) -> set[str]:
    key = re.search(r'key "([\w-]+)"', item.question).group(1)
    return set(re.findall(rf'"{key}": "([\w-]+)",', item.context))


def minmax_oracle(item: lc_evals.TaskItem) -> set[str]:
    numbers = [int(x) for x in re.findall(r"\d+", item.context)]
    pick = max if "largest" in item.question else min
    return {str(pick(numbers))}


def babi_oracle(item: lc_evals.TaskItem) -> set[str]:
    """Replay the facts found by regex (background text never matches them)."""
    names = "|".join(babilong.PEOPLE)
    fact_re = re.compile(
        rf"\b({names}) (went to|moved to|journeyed to|travelled to|picked up|grabbed|took|dropped|put down|left) the (\w+)\."
    )
    where: dict[str, str] = {}
    held: dict[str, str] = {}
    floor: dict[str, str] = {}
    trail: dict[str, list[str]] = {}
    facts = fact_re.findall(item.context)
    assert [f"{p} {v} the {x}." for p, v, x in facts] == item.metadata["facts"]
    for person, verb, thing in facts:
        if verb in ("went to", "moved to", "journeyed to", "travelled to"):
            where[person] = thing
            for obj, h in held.items():
                if h == person:
                    trail[obj].append(thing)
        elif verb in ("picked up", "grabbed", "took"):
            held[thing] = person
            trail.setdefault(thing, [])
            if not trail[thing] or trail[thing][-1] != where[person]:
                trail[thing].append(where[person])
        else:
            floor[thing] = where[held.pop(thing)]
    q = item.question
    if m := re.fullmatch(r"Where is (\w+)\?", q):
        return {where[m.group(1)]}
    if m := re.fullmatch(r"Is (\w+) in the (\w+)\?", q):
        return {"yes" if where[m.group(1)] == m.group(2) else "no"}
    if m := re.fullmatch(r"Where is the (\w+)\?", q):
        o = m.group(1)
        return {where[held[o]] if o in held else floor[o]}
    if m := re.fullmatch(r"Where was the (\w+) before the (\w+)\?", q):
        t = trail[m.group(1)]
        assert t[-1] == m.group(2)
        return {t[-2]}
    if m := re.fullmatch(r"How many objects is (\w+) carrying\?", q):
        k = sum(h == m.group(1) for h in held.values())
        return {["none", "one", "two", "three", "four"][k], str(k)}
    raise AssertionError(q)


ORACLES = {
    "variable_tracking": vt_oracle,
    "common_words": cwe_oracle,
    "frequent_words": fwe_oracle,
    "kv_retrieval": kv_oracle,
    "minmax": minmax_oracle,
    **{t: babi_oracle for t in babilong.VARIANTS},
}


@settings(max_examples=25)
@given(
    task=st.sampled_from(sorted(ORACLES)),
    length=st.integers(1500, 6000),
    seed=st.integers(0, 10**9),
)
def test_answer_is_recoverable_by_an_oracle(task, length, seed) -> None:
    (item,) = lc_evals.generate(task, n=1, length=length, seed=seed)
    assert ORACLES[task](item) == set(item.answers)


@settings(max_examples=10)
@given(chains=st.integers(1, 3), hops=st.integers(1, 5), seed=st.integers(0, 1000))
def test_variable_tracking_distractor_chains(chains, hops, seed) -> None:
    (item,) = lc_evals.generate(
        "variable_tracking", n=1, length=4000, seed=seed, num_chains=chains, num_hops=hops
    )
    assert len(item.answers) == hops + 1
    assert len(re.findall(r"VAR \w+ =", item.context)) == chains * (hops + 1)
    assert vt_oracle(item) == set(item.answers)
    offsets = item.metadata["needle_offsets"]
    assert offsets == sorted(offsets)


@settings(max_examples=10)
@given(depth=st.floats(0, 1), seed=st.integers(0, 1000), length=st.integers(2000, 20000))
def test_kv_target_pair_sits_at_depth(depth, seed, length) -> None:
    (item,) = lc_evals.generate("kv_retrieval", n=1, length=length, seed=seed, depth=depth)
    (offset,) = item.metadata["needle_offsets"]
    assert item.context[offset:].startswith(item.metadata["needles"][0])
    header = len(lc_evals.tasks.chunking.KV_HEADER)
    assert abs(offset - header - depth * item.metadata["filler_chars"]) <= 80


def test_babilong_background_never_mentions_the_story_world() -> None:
    from lc_evals import words

    vocab = set(words.NOUNS + words.ADJECTIVES + words.VERBS_PAST + words.ADVERBS)
    world = {w.lower() for w in babilong.PEOPLE + babilong.PLACES + babilong.OBJECTS}
    assert not vocab & world


@pytest.mark.parametrize(
    ("task", "options", "match"),
    [
        ("variable_tracking", {"num_hops": 0}, "num_hops"),
        ("common_words", {"common_freq": 2, "uncommon_freq": 3}, "common_freq"),
        ("frequent_words", {"alpha": -1.0}, "alpha"),
        ("frequent_words", {"top_k": 10, "vocab_size": 5}, "top_k"),
        ("minmax", {"op": "median"}, "op must be one of"),
        ("kv_retrieval", {"depth": -0.1}, "depth"),
        ("babilong_qa1", {"num_facts": 0}, "num_facts"),
    ],
)
def test_bad_options_are_rejected(task, options, match) -> None:
    with pytest.raises(ValueError, match=match):
        lc_evals.generate(task, n=1, length=3000, seed=0, **options)


@pytest.mark.parametrize("task", BUILTIN)
def test_impossible_length_is_a_clear_error(task) -> None:
    with pytest.raises(ValueError, match="impossible length"):
        lc_evals.generate(task, n=1, length=5, seed=0)
