"""Preference pairs and their long-context twins."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lc_train.preference.data import PreferencePair, build_pairs, pad_context

DISTRACTORS = [f"Unrelated remark number {i} about the weather and the harbour." for i in range(12)]


@given(
    paragraphs=st.lists(
        st.text("abcdefgh ", min_size=3, max_size=30).filter(str.strip), min_size=1, max_size=4
    ),
    extra=st.integers(0, 2000),
    seed=st.integers(0, 1000),
)
def test_padding_keeps_relevant_paragraphs_in_order_and_fits(
    paragraphs: list[str], extra: int, seed: int
) -> None:
    short = "\n\n".join(p.strip() for p in paragraphs)
    target = len(short) + extra
    long = pad_context(short, DISTRACTORS, target, seed=seed)
    assert len(long) <= target
    # one more distractor would not have fitted: the padding is as long as allowed
    assert len(long) + max(map(len, DISTRACTORS)) + 2 > target
    PreferencePair("q?", short, long, "yes", "no")  # validates containment in order


def test_padding_in_tokens() -> None:
    words = lambda s: len(s.split())  # noqa: E731
    long = pad_context("The key is 42.", DISTRACTORS, 200, length_of=words, seed=1)
    assert 190 <= words(long) <= 200
    assert "The key is 42." in long


def test_pair_validation() -> None:
    with pytest.raises(ValueError, match="identical"):
        PreferencePair("q", "ctx", "ctx", "a", "a")
    with pytest.raises(ValueError, match="does not contain"):
        PreferencePair("q", "ctx", "other", "a", "b")
    with pytest.raises(ValueError, match="chosen"):
        PreferencePair("q", "ctx", "ctx", " ", "b")
    with pytest.raises(ValueError, match="more than target_length"):
        pad_context("x" * 50, DISTRACTORS, 10)


def test_build_pairs_keeps_items_with_both_outcomes() -> None:
    items = [
        ("The code is 7.", "What is the code?", ["7"]),
        ("The code is 9.", "What is the code?", ["9"]),
    ]
    answers = {"The code is 7.": ["7", "3", "7", "7"], "The code is 9.": ["9", "9", "9", "9"]}
    pairs = build_pairs(
        items,
        sample=lambda ctx, q, n: answers[ctx][:n],
        is_correct=lambda r, ans: r in ans,
        distractors=DISTRACTORS,
        long_length=500,
    )
    assert len(pairs) == 1
    assert (pairs[0].chosen, pairs[0].rejected) == ("7", "3")
    assert "The code is 7." in pairs[0].long_context
    assert len(pairs[0].long_context) > 300


def test_pair_records_chat_and_text() -> None:
    from lc_train.preference.data import pair_records
    from lc_train.preference.trainer import check_solopo_rows

    long = pad_context("The code is 7.", DISTRACTORS, 300, seed=2)
    pair = PreferencePair("What is the code?", "The code is 7.", long, "7", "3")
    chat = pair_records([pair])[0]
    assert chat["prompt"] == [{"role": "user", "content": "The code is 7.\n\nWhat is the code?"}]
    assert chat["long_prompt"][0]["content"].endswith("\n\nWhat is the code?")
    assert chat["chosen"] == [{"role": "assistant", "content": "7"}]
    text = pair_records([pair], chat=False)[0]
    assert text["prompt"] == "The code is 7.\n\nWhat is the code?\n"
    assert text["long_prompt"] == long + "\n\nWhat is the code?\n"
    check_solopo_rows([chat, text])  # both formats validate
