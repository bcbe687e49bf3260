"""Needle values occur in the context only inside their own needles."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lc_evals

NIAH = ["niah_single", "niah_multikey", "niah_multivalue", "niah_multiquery"]


def _occurrences(value: str, text: str) -> int:
    return len(re.findall(rf"(?<![\w]){re.escape(value)}(?![\w])", text, re.I))


@pytest.mark.parametrize("haystack", ["essay", "repeat", "needles"])
@pytest.mark.parametrize("value_kind", ["word", "number", "uuid"])
@settings(max_examples=6, deadline=None, derandomize=True)
@given(seed=st.integers(0, 10_000), task=st.sampled_from(NIAH))
def test_every_needle_value_occurs_once_in_the_context(haystack, value_kind, seed, task) -> None:
    (item,) = lc_evals.generate(
        task, n=1, length=600, seed=seed, haystack=haystack, value_kind=value_kind
    )
    for value in item.answers:
        assert _occurrences(value, item.context) == 1, (task, value)


def test_word_values_in_essays_were_ambiguous_before() -> None:
    # 40 word-valued essay items: every answer word only in its needle
    items = lc_evals.generate("niah_multikey", n=40, length=800, seed=7, value_kind="word")
    assert all(_occurrences(a, i.context) == 1 for i in items for a in i.answers)
