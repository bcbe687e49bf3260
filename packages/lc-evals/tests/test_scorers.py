"""Scorers against hand-computed values and their invariants."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import lc_evals
from lc_evals.scorers import (
    contains_all,
    contains_any,
    exact_match,
    extract_answer,
    normalize,
    rouge_l,
    token_f1,
)


def test_exact_match_normalizes_and_extracts() -> None:
    assert exact_match("The Kitchen.", ["kitchen"]) == 1.0
    assert exact_match("kitchens", ["kitchen"]) == 0.0
    assert exact_match("Let me think... the answer is: 42.", ["42"]) == 1.0
    assert exact_match(r"so we get \boxed{7} in the end", ["7"]) == 1.0
    assert exact_match("no", ["yes"]) == 0.0


def test_extract_answer_variants() -> None:
    assert extract_answer(r"\boxed{a} then \boxed{\frac{1}{2}}") == r"\frac{1}{2}"
    assert extract_answer("The final answer is 12\nbecause ...") == "12"
    assert extract_answer("  plain  ") == "plain"
    assert extract_answer(r"broken \boxed{unclosed") == r"broken \boxed{unclosed"


def test_contains_uses_whole_words() -> None:
    assert contains_all("The number is 12345678.", ["1234567"]) == 0.0
    assert contains_all("It is 1234567.", ["1234567"]) == 1.0
    assert contains_all("a-b-c and X", ["a-b-c", "x", "y", "z"]) == 0.5
    assert contains_any("I do not know", ["no"]) == 0.0
    assert contains_any("No.", ["no"]) == 1.0


def test_token_f1_and_rouge_l_hand_values() -> None:
    # pred tokens [cat, sat], ref [cat, sat, down]: P = 1, R = 2/3, F1 = 0.8
    assert token_f1("the cat sat", ["a cat sat down"]) == pytest.approx(0.8)
    # LCS([x, y, z, w], [x, z, y, w]) = 3 -> P = R = 3/4
    assert rouge_l("x y z w", ["x z y w"]) == pytest.approx(0.75)
    # token F1 ignores order, ROUGE-L does not
    assert token_f1("x y z w", ["w z y x"]) == 1.0
    assert rouge_l("x y z w", ["w z y x"]) == pytest.approx(0.25)
    assert token_f1("", [""]) == 1.0
    assert rouge_l("", ["x"]) == 0.0


words = st.lists(
    st.sampled_from(["alpha", "beta", "gamma", "delta", "7", "x"]), min_size=1, max_size=8
).map(" ".join)


@given(pred=words, ref=words)
def test_scores_are_bounded_and_perfect_on_identity(pred, ref) -> None:
    for fn in lc_evals.SCORERS.values():
        assert 0.0 <= fn(pred, [ref]) <= 1.0
        assert fn(ref, [ref]) == 1.0


@given(pred=words, ref=words)
def test_rouge_l_never_exceeds_token_f1(pred, ref) -> None:
    # the LCS is a common multiset, so it can't exceed the multiset overlap
    assert rouge_l(pred, [ref]) <= token_f1(pred, [ref]) + 1e-12


def test_score_uses_the_task_default() -> None:
    (item,) = lc_evals.generate("niah_multivalue", n=1, length=2000, seed=0, num_values=2)
    assert lc_evals.score(item, f"{item.answers[0]}") == 0.5
    assert lc_evals.score(item, " ".join(item.answers)) == 1.0
    assert lc_evals.score(item, " and ".join(item.answers), scorer="exact_match") == 0.0
    (babi,) = lc_evals.generate("babilong_qa7", n=1, length=2000, seed=0)
    assert lc_evals.score(babi, babi.answers[0].upper()) == 1.0


def test_bad_scorer_input() -> None:
    with pytest.raises(ValueError, match="unknown scorer 'bleu'"):
        lc_evals.get_scorer("bleu")
    with pytest.raises(ValueError, match="non-empty"):
        exact_match("x", "x")
    assert normalize("An  Apple!") == "apple"


def test_docstring_examples() -> None:
    import doctest

    from lc_evals import executors, harness, length, registry, report, scorers, suite
    from lc_evals.tasks import chunking, niah, ruler

    for module in (
        executors,
        harness,
        length,
        registry,
        report,
        scorers,
        suite,
        chunking,
        niah,
        ruler,
    ):
        assert doctest.testmod(module).failed == 0, module.__name__
