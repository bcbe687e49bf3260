"""ICL example pools: exact planted counts, kinds are what they claim, determinism."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lc_evals
from lc_evals.icl import POOL_LABELS, format_shots, make_icl_pool, make_pool_queries
from lc_evals.icl.pool import _STATEMENTS, FORMAT_LABELS, SENTIMENT_LABELS


@settings(max_examples=20)
@given(
    size=st.integers(8, 300),
    noise=st.floats(0.0, 0.45),
    mis=st.floats(0.0, 0.45),
    seed=st.integers(0, 10**6),
)
def test_planted_counts_and_kinds(size, noise, mis, seed) -> None:
    pool = make_icl_pool(size, noise_rate=noise, misaligned_rate=mis, seed=seed)
    ex = pool.examples
    assert len(ex) == size
    assert len({e.id for e in ex}) == size
    assert pool.stats["noisy"] == round(noise * size)
    assert pool.stats["misaligned_format"] + pool.stats["misaligned_labels"] == round(mis * size)
    for e in ex:
        if e.kind == "clean":
            assert e.label == e.topic
            assert e.structure == "statement"
            assert e.label_space == "topic"
        elif e.kind == "noisy":
            assert e.label != e.topic
            assert e.label in POOL_LABELS
            assert e.structure == "statement"
        elif e.kind == "misaligned_format":
            assert e.text.endswith("?")
            assert e.label in FORMAT_LABELS
        else:
            assert e.text.endswith(".")
            assert e.label in SENTIMENT_LABELS
        assert e.topic in POOL_LABELS


def test_clean_texts_follow_their_topic_templates() -> None:
    pool = make_icl_pool(200, seed=3)
    starts = {t: {s.split("{")[0] for s in tpl} for t, tpl in _STATEMENTS.items()}
    for e in pool.examples:
        if e.kind in ("clean", "noisy"):
            assert any(e.text.startswith(s) for s in starts[e.topic])


def test_queries_are_clean_new_and_deterministic() -> None:
    pool = make_icl_pool(150, seed=1)
    q = make_pool_queries(pool, 30, seed=1)
    assert [x.text for x in q[:10]] == [x.text for x in make_pool_queries(pool, 10, seed=1)]
    texts = {e.text for e in pool.examples}
    assert all(x.text not in texts and x.label == x.topic for x in q)
    assert {x.label for x in q} == set(POOL_LABELS)


def test_registered_task_and_prompt() -> None:
    items = lc_evals.generate("icl_noisy_pool", n=2, length=600, seed=0, pool_size=50)
    item = items[0]
    assert lc_evals.task_spec("icl_noisy_pool").scorer == "exact_match"
    assert len(item.metadata["pool"]) == 50
    assert item.metadata["length"] <= 600
    assert item.metadata["shots_in_context"] < 50
    assert item.question.endswith(f"Message: {item.metadata['query']}\nTopic:")
    prompt = format_shots([("a b", "billing")], "c d")
    assert prompt == "Message: a b\nTopic: billing\n\nMessage: c d\nTopic:"


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="noise_rate"):
        make_icl_pool(50, noise_rate=1.5)
    with pytest.raises(ValueError, match="< 1"):
        make_icl_pool(50, noise_rate=0.6, misaligned_rate=0.5)
    with pytest.raises(ValueError, match="pool_size"):
        make_icl_pool(3)
