"""k-shot prompt builders and the window-fitting helper of the ICL probes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lc_evals import TaskItem
from lc_evals.icl import (
    DELTAS,
    ICL_TASKS,
    PROMPT_STYLES,
    check_label,
    fit_shots,
    item_prompt,
    make_icl_items,
    preamble,
)
from lc_evals.icl.prompts import DESCRIPTIONS, SALAD_WORDS


class CharTokenizer:
    """One token per UTF-8 byte: a real, exact, dependency-free tokenizer."""

    def encode(self, text: str) -> list[int]:
        return list(text.encode())


def _shot_blocks(item: TaskItem) -> int:
    # every exemplar ends with "Output: <label>" on its own line; the query has no output yet
    return sum(1 for line in item.context.split("\n") if line.startswith("Output: "))


@pytest.mark.parametrize("task", ICL_TASKS)
@settings(max_examples=10)
@given(
    shots=st.integers(0, 10),
    delta=st.sampled_from(DELTAS),
    seed=st.integers(0, 10_000),
    style=st.sampled_from(PROMPT_STYLES),
)
def test_items_have_exact_shots_and_checked_answers(
    task: str, shots: int, delta: float, seed: int, style: str
) -> None:
    items = make_icl_items(task, 2, shots, delta=delta, seed=seed, prompt_style=style)
    assert len(items) == 2
    for it in items:
        assert _shot_blocks(it) == shots == it.metadata["shots"]
        assert len(it.metadata["shot_labels"]) == shots
        assert it.question == "Output:"
        assert it.metadata["scorer"] == "exact_match"
        assert it.answers == (it.metadata["label"],)
        assert check_label(task, it.metadata["query"]) == it.answers[0]
        assert it.context.endswith(it.metadata["query"])
        assert item_prompt(it).endswith("\nOutput:")
        assert it.metadata["delta"] == delta
        assert it.metadata["prompt_style"] == style


def test_exemplar_labels_in_the_prompt_are_correct() -> None:
    item = make_icl_items("vending_machine_sum", 1, 20, delta=0.2, seed=4)[0]
    blocks = item.context.split("\n\n")[1:-1]  # drop the description and the query
    assert len(blocks) == 20
    for block, label in zip(blocks, item.metadata["shot_labels"]):
        text, out = block.rsplit("\nOutput: ", 1)
        assert out == label == check_label("vending_machine_sum", text.removeprefix("Input: "))


@settings(max_examples=10)
@given(seed=st.integers(0, 10_000), shots=st.integers(0, 10))
def test_same_seed_same_items_and_shots_are_prefixes(seed: int, shots: int) -> None:
    a = make_icl_items("reversal", 3, shots, delta=0.45, seed=seed)
    assert a == make_icl_items("reversal", 3, shots, delta=0.45, seed=seed)
    more = make_icl_items("reversal", 3, shots + 1, delta=0.45, seed=seed)
    for short, long in zip(a, more):
        query = "\n\n" + short.context.rsplit("\n\n", 1)[-1]
        assert long.context.startswith(short.context.removesuffix(query) if shots else "")
        assert long.metadata["query"] == short.metadata["query"]
    assert [i.id for i in a] != [i.id for i in make_icl_items("reversal", 3, shots, 0.45, seed + 1)]


def test_query_labels_alternate_so_a_constant_answer_scores_half() -> None:
    items = make_icl_items("pattern_matching", 10, 2, delta=0.2, seed=0)
    assert [it.answers[0] for it in items] == ["1", "0"] * 5


def test_ids_are_unique_across_a_suite() -> None:
    ids = [
        it.id
        for task in ICL_TASKS
        for d in DELTAS
        for it in make_icl_items(task, 3, 1, delta=d, seed=0)
    ]
    assert len(ids) == len(set(ids))


def test_styles_differ_only_in_the_preamble() -> None:
    bodies = {}
    for style in PROMPT_STYLES:
        it = make_icl_items("parity", 1, 4, delta=0.0, seed=9, prompt_style=style)[0]
        pre = preamble("parity", style, seed=9)
        assert it.context.startswith(pre)
        bodies[style] = it.context.removeprefix(pre).lstrip("\n")
    assert len(set(bodies.values())) == 1
    assert preamble("parity", "plain") == ""
    assert preamble("parity", "description") == DESCRIPTIONS["parity"]


def test_word_salad_keeps_length_and_drops_meaning() -> None:
    salad = preamble("stack", "word_salad", seed=0)
    words = salad.split()
    assert len(words) == len(DESCRIPTIONS["stack"].split())
    assert set(words) <= set(SALAD_WORDS)
    assert salad == preamble("stack", "word_salad", seed=0)
    assert salad != preamble("stack", "word_salad", seed=1)


@pytest.mark.parametrize("task", ["parity", "maze_solve", "hamiltonian"])
def test_fit_shots_is_the_largest_count_that_fits(task: str) -> None:
    tok = CharTokenizer()
    window = 1500
    k = fit_shots(task, tok, window, prompt_style="description", reserve=10, n_probe=4)
    assert 0 <= k < 100

    def longest(shots: int) -> int:
        its = make_icl_items(task, 4, shots, delta=0.85, seed=0, prompt_style="description")
        return max(len(tok.encode(item_prompt(it))) for it in its)

    assert longest(k) + 10 <= window
    assert longest(k + 1) + 10 > window


def test_fit_shots_caps_at_the_maximum_and_rejects_tiny_windows() -> None:
    tok = CharTokenizer()
    assert fit_shots("parity", tok, 10**7, max_shots=30, n_probe=2) == 30
    with pytest.raises(ValueError, match="0-shot"):
        fit_shots("maze_solve", tok, 40, reserve=0)
    with pytest.raises(ValueError, match="reserve"):
        fit_shots("parity", tok, 8, reserve=8)


def test_bad_arguments_raise_clear_errors() -> None:
    with pytest.raises(ValueError, match="shots"):
        make_icl_items("parity", 1, 101)
    with pytest.raises(ValueError, match="prompt_style"):
        make_icl_items("parity", 1, 1, prompt_style="cot")
    with pytest.raises(ValueError, match="unknown ICL task"):
        make_icl_items("chess", 1, 1)
    with pytest.raises(ValueError, match="n must"):
        make_icl_items("parity", -1, 1)


def test_shared_exemplars_are_identical_across_queries_and_deltas() -> None:
    def prefix(it: TaskItem) -> str:
        return it.context.rsplit("\n\n", 1)[0]

    a = make_icl_items("stack", 4, 5, delta=0.0, seed=3, shared_exemplars=True)
    b = make_icl_items("stack", 4, 5, delta=0.85, seed=3, shared_exemplars=True)
    assert len({prefix(it) for it in a + b}) == 1
    assert [it.metadata["query"] for it in a] != [it.metadata["query"] for it in b]
    # per-query exemplars differ between queries
    c = make_icl_items("stack", 4, 5, delta=0.0, seed=3)
    assert len({prefix(it) for it in c}) == 4
    assert a[0].id != c[0].id


def test_items_are_scored_by_the_harness_scorer_without_registration() -> None:
    from lc_evals.scorers import score

    for it in make_icl_items("vending_machine", 4, 2, delta=0.2, seed=1):
        wrong = "0" if it.answers[0] == "1" else "1"
        assert score(it, it.answers[0]) == 1.0
        assert score(it, wrong) == 0.0
