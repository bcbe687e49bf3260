"""Generators say when they cannot do what was asked, and say what their pictures mean."""

from __future__ import annotations

import pytest

import lc_evals
from lc_evals.icl import make_icl_items
from lc_evals.icl.prompts import preamble


def test_noisy_pool_refuses_a_context_longer_than_its_pool() -> None:
    (item,) = lc_evals.generate("icl_noisy_pool", n=1, length=2000, seed=0, pool_size=50)
    assert item.metadata["length"] >= 0.9 * 2000
    with pytest.raises(ValueError, match=r"pool_size=50.*only \d+ chars.*2000000"):
        lc_evals.generate("icl_noisy_pool", n=1, length=2_000_000, seed=0, pool_size=50)


def test_fractional_shot_counts_are_refused_clearly() -> None:
    with pytest.raises(ValueError, match="shots must be an integer"):
        make_icl_items("parity", n=1, shots=2.5, delta=0.0, seed=0)


@pytest.mark.parametrize("task", ["maze_solve", "maze_complete"])
def test_default_maze_prompt_says_a_move_spans_two_characters(task) -> None:
    text = preamble(task, "description")
    assert "two characters" in text
    (item,) = make_icl_items(task, n=1, shots=1, delta=0.0, seed=0)
    assert text in item.context + item.question
