"""Copy-constrained decoding: the constraint state and the logits processor."""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lc_agents.constrained import CopyLogitsProcessor, SpanCopyConstraint, is_span_concatenation

SEP, END = 0, 1
token_lists = st.lists(st.integers(2, 12), min_size=1, max_size=30)


def test_allowed_tokens_follow_the_spans() -> None:
    c = SpanCopyConstraint([[5, 6, 7], [6, 9]], separator_ids=[SEP], end_ids=[END])
    assert c.allowed() == {5, 6, 7, 9}  # no separator or end before a span starts
    c.advance(6)
    assert c.allowed() == {7, 9, SEP, END}
    c.advance(7)
    assert c.allowed() == {SEP, END}  # end of source 1
    c.advance(SEP)
    assert c.allowed() == {5, 6, 7, 9}
    with pytest.raises(ValueError, match="does not continue"):
        c.advance(8)


def test_max_spans_forbids_a_further_separator() -> None:
    c = SpanCopyConstraint([[5, 6, 5, 6]], separator_ids=[SEP], end_ids=[END], max_spans=1)
    c.advance(5)
    assert SEP not in c.allowed()
    c.advance(6)
    c.advance(5)
    assert c.allowed() == {6, END}


def test_bad_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="at least one token"):
        SpanCopyConstraint([[], []])
    with pytest.raises(ValueError, match="max_spans"):
        SpanCopyConstraint([[1]], max_spans=0)


@given(
    sources=st.lists(token_lists, min_size=1, max_size=3),
    seed=st.integers(0, 2**16),
    max_spans=st.one_of(st.none(), st.integers(1, 3)),
)
def test_every_random_walk_is_a_concatenation_of_spans(sources, seed, max_spans) -> None:
    """Property: whatever allowed tokens are chosen, separator-free runs are source spans."""
    rng = random.Random(seed)
    c = SpanCopyConstraint(sources, separator_ids=[SEP], end_ids=[END], max_spans=max_spans)
    out: list[int] = []
    for _ in range(40):
        tok = rng.choice(sorted(c.allowed()))
        if tok == END:
            break
        c.advance(tok)
        out.append(tok)
    assert is_span_concatenation(out, sources, [SEP])
    spans = sum(1 for i, t in enumerate(out) if t != SEP and (i == 0 or out[i - 1] == SEP))
    assert max_spans is None or spans <= max_spans


def test_reference_checker_rejects_an_invented_run() -> None:
    assert is_span_concatenation([5, 6, SEP, 9], [[5, 6, 7], [9]], [SEP])
    assert not is_span_concatenation([5, 7], [[5, 6, 7]], [SEP])


@settings(max_examples=10)
@given(seed=st.integers(0, 1000))
def test_random_model_under_the_processor_only_copies(tiny_backend, seed) -> None:
    """A random Llama (which would emit anything) emits only spans of the source text."""
    tok = tiny_backend.tokenizer
    rng = random.Random(seed)
    words = ["river", "stone", "golden", "number", "1234567", "city", "quiet"]
    text = " ".join(rng.choice(words) for _ in range(20))
    source = tok.encode(text, add_special_tokens=False)
    sep = tok.encode("\n", add_special_tokens=False)
    constraint = SpanCopyConstraint(
        [source], separator_ids=sep, end_ids=tiny_backend.end_ids, max_spans=3
    )
    prompt = tiny_backend.prompt_ids([{"role": "user", "content": "copy: " + text}])
    out = tiny_backend.generate_ids(
        prompt, max_tokens=24, temperature=1.0, seed=seed, constraint=constraint
    )
    assert out  # the model did produce tokens
    assert is_span_concatenation(out, [source], sep)


def test_processor_masks_everything_outside_the_allowed_set() -> None:
    c = SpanCopyConstraint([[3, 4]], separator_ids=[SEP], end_ids=[END])
    proc = CopyLogitsProcessor(c, prompt_length=2)
    scores = torch.zeros(1, 8)
    masked = proc(torch.tensor([[7, 7]]), scores)
    assert torch.isfinite(masked[0]).nonzero().flatten().tolist() == [3, 4]
    masked = proc(torch.tensor([[7, 7, 3]]), scores)
    assert torch.isfinite(masked[0]).nonzero().flatten().tolist() == [SEP, END, 4]


def test_boundaries_make_spans_whole_units() -> None:
    # sources: "5 6 . 7 8 ." as sentences, with 9 the boundary ("." token)
    c = SpanCopyConstraint(
        [[5, 6, 9, 7, 8, 9]], separator_ids=[SEP], end_ids=[END], boundary_ids=[9]
    )
    assert c.allowed() == {5, 7}  # only sentence starts
    c.advance(7)
    assert c.allowed() == {8}  # no end inside a sentence
    c.advance(8)
    c.advance(9)
    assert c.allowed() == {SEP, END}  # source exhausted after a full sentence
    c.advance(SEP)
    c.advance(5)
    c.advance(6)
    assert c.allowed() == {9}
    c.advance(9)
    assert c.allowed() == {7, SEP, END}
