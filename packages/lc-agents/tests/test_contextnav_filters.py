"""ContextNav alignment and noise-robust selection against closed forms and planted noise."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lc_agents.contextnav import (
    Candidate,
    ContextItem,
    deduplicate,
    filter_consistent,
    filter_label_space,
    filter_structure,
    infer_label_space,
    label_consistency,
    select_balanced,
    select_top,
    signature,
)


def cand(i: int, text: str, label: str | None, vec, score: float = 1.0) -> Candidate:
    v = np.asarray(vec, dtype=np.float32)
    return Candidate(ContextItem(str(i), text, label), score, v / np.linalg.norm(v))


@pytest.mark.parametrize(
    ("text", "mood", "layout"),
    [
        ("Was I charged twice for my order?", "question", "single_line"),
        ("Does the app crash", "question", "single_line"),
        ("I was charged twice.", "statement", "single_line"),
        ("Is is a word.", "statement", "single_line"),
        ("Classify the message below.", "instruction", "single_line"),
        ("Name: Ann\nAge: 3", "statement", "key_value"),
        ("first line\nsecond line", "statement", "multi_line"),
    ],
)
def test_signature(text, mood, layout) -> None:
    s = signature(text)
    assert (s.mood, s.layout) == (mood, layout)


def test_structure_and_label_space_filters() -> None:
    c = [
        cand(0, "My parcel is late.", "shipping", [1, 0]),
        cand(1, "Is my parcel late?", "yes", [1, 0.1]),
        cand(2, "I am upset that my parcel is late.", "negative", [1, 0.2]),
        cand(3, "My card was charged twice.", "billing", [0, 1]),
    ]
    aligned = filter_structure("My box is late.", c)
    assert [x.item.id for x in aligned] == ["0", "2", "3"]
    assert [x.item.id for x in filter_label_space(aligned, ["Shipping", "billing"])] == ["0", "3"]
    assert filter_label_space(c, None) == c
    # a custom signature: everything aligned
    assert len(filter_structure("x", c, signature_fn=lambda t: 0)) == 4
    space = infer_label_space("My box is late.", c, min_share=0.3)
    assert set(space) == {"shipping", "negative", "billing"}
    assert infer_label_space("Where is it?", c[:1]) == ()


def test_planted_mislabel_has_the_lowest_agreement() -> None:
    rng = np.random.default_rng(0)
    centres = {"a": np.array([1.0, 0, 0]), "b": np.array([0, 1.0, 0])}
    c = []
    for i in range(12):
        lab = "a" if i < 6 else "b"
        c.append(cand(i, "t", lab, centres[lab] + 0.05 * rng.standard_normal(3)))
    # example 12 sits in cluster a but is labelled b
    c.append(cand(12, "t", "b", centres["a"] + 0.05 * rng.standard_normal(3)))
    agree = label_consistency(c, neighbours=4)
    assert int(np.argmin(agree)) == 12
    assert agree[12] == pytest.approx(0.0, abs=1e-5)
    assert all(agree[i] > 0.7 for i in range(12))
    kept = filter_consistent(c, neighbours=4, threshold=0.5)
    assert "12" not in {k.item.id for k in kept}
    assert all("consistency" in k.notes for k in kept)


@settings(max_examples=20)
@given(n=st.integers(2, 12), k=st.integers(1, 6), seed=st.integers(0, 1000))
def test_consistency_is_one_for_a_single_label(n, k, seed) -> None:
    rng = np.random.default_rng(seed)
    c = [cand(i, "t", "x", rng.standard_normal(4) + 0.01) for i in range(n)]
    assert np.allclose(label_consistency(c, neighbours=k), 1.0)


def test_consistency_manual_weights() -> None:
    # neighbours of 0 are 1 (cos 0.8, same label) and 2 (cos 0.6, other): 0.8 / 1.4
    c = [
        cand(0, "t", "a", [1, 0, 0]),
        cand(1, "t", "a", [0.8, 0.6, 0]),
        cand(2, "t", "b", [0.6, 0, 0.8]),
    ]
    agree = label_consistency(c, neighbours=2)
    assert agree[0] == pytest.approx((0.8 + 1e-6) / (1.4 + 2e-6), rel=1e-5)


def test_filter_consistent_keeps_the_best_when_none_passes() -> None:
    c = [cand(0, "t", "a", [1, 0]), cand(1, "t", "b", [1, 0.1])]
    kept = filter_consistent(c, threshold=1.0)
    assert len(kept) == 1
    with pytest.raises(ValueError, match="threshold"):
        filter_consistent(c, threshold=2)


def test_dedup_and_selection() -> None:
    c = [
        cand(0, "t", "a", [1, 0], score=0.9),
        cand(1, "t", "a", [1, 0.01], score=0.95),  # duplicate of 0, better score
        cand(2, "t", "b", [0, 1], score=0.5),
        cand(3, "t", "c", [0.7, 0.7], score=0.7),
    ]
    kept = deduplicate(c, threshold=0.99)
    assert [k.item.id for k in kept] == ["1", "3", "2"]
    top = select_top(c, 2)
    assert [t.item.id for t in top] == ["0", "1"]  # closest last
    bal = select_balanced(c, 3)
    assert sorted(t.item.label for t in bal) == ["a", "b", "c"]
    assert select_top(c, 0) == []
