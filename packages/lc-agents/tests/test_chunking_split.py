"""Splitting covers the document exactly, with balanced chunks and the requested overlap."""

from __future__ import annotations

import itertools
import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lc_agents.chunking import chunk_spans, count_units, split_document


class PieceTokenizer:
    """Words, spaces and punctuation as tokens; decode concatenates, so it round-trips."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.pieces: list[str] = []

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        ids = [] if not add_special_tokens else [-1]  # a BOS that must not be used
        for piece in re.findall(r"\s+|\w+|[^\w\s]", text):
            if piece not in self.vocab:
                self.vocab[piece] = len(self.pieces)
                self.pieces.append(piece)
            ids.append(self.vocab[piece])
        return ids

    def decode(self, ids: list[int]) -> str:
        return "".join(self.pieces[i] for i in ids)


@st.composite
def span_args(draw: st.DrawFn) -> tuple[int, int, int]:
    overlap = draw(st.integers(0, 12))
    chunk_size = draw(st.integers(overlap + 1, overlap + 40))
    n = draw(st.integers(1, 600))
    return n, chunk_size, overlap


@given(span_args())
def test_spans_cover_exactly_with_fixed_overlap(args: tuple[int, int, int]) -> None:
    n, size, overlap = args
    spans = chunk_spans(n, chunk_size=size, overlap=overlap)
    assert spans[0][0] == 0
    assert spans[-1][1] == n
    for (_s0, e0), (s1, _) in itertools.pairwise(spans):
        assert s1 == e0 - overlap  # consecutive chunks share exactly `overlap` units
    lengths = [e - s for s, e in spans]
    assert max(lengths) <= size
    assert max(lengths) - min(lengths) <= 1  # balanced: no tiny last chunk
    if len(spans) > 1:
        assert min(lengths) > overlap
        # the fewest chunks that fit: one chunk fewer would need a longer chunk
        k = len(spans) - 1
        assert math.ceil((n + (k - 1) * overlap) / k) > size
    # every unit is covered; without overlap, exactly once
    cover = [0] * n
    for s, e in spans:
        for i in range(s, e):
            cover[i] += 1
    assert min(cover) >= 1
    if overlap == 0:
        assert max(cover) == 1


@given(st.text(min_size=1, max_size=400), st.integers(1, 50), st.integers(0, 5))
def test_character_chunks_reassemble_the_document(text: str, size: int, overlap: int) -> None:
    if size <= overlap:
        size = overlap + 1
    chunks = split_document(text, chunk_size=size, overlap=overlap)
    rebuilt = chunks[0].text + "".join(c.text[overlap:] for c in chunks[1:])
    assert rebuilt == text
    assert all(c.text == text[c.start : c.end] and c.unit == "chars" for c in chunks)
    assert [c.index for c in chunks] == list(range(len(chunks)))


@given(
    st.lists(
        st.sampled_from(["alpha", "beta", " ", "  ", ",", "key", "7", "\n", "."]),
        min_size=1,
        max_size=200,
    ),
    st.integers(2, 30),
    st.integers(0, 3),
)
def test_token_chunks_reassemble_the_document(pieces: list[str], size: int, overlap: int) -> None:
    text = "".join(pieces)
    tok = PieceTokenizer()
    n_tokens = len(tok.encode(text, add_special_tokens=False))
    if size <= overlap:
        size = overlap + 1
    chunks = split_document(text, chunk_size=size, overlap=overlap, tokenizer=tok)
    assert all(c.unit == "tokens" and c.length <= size for c in chunks)
    assert chunks[-1].end == n_tokens == count_units(text, tok)
    ids = tok.encode(text, add_special_tokens=False)
    assert all(c.text == tok.decode(ids[c.start : c.end]) for c in chunks)
    rebuilt = tok.decode(ids[: chunks[0].end]) + "".join(
        tok.decode(ids[c.start + overlap : c.end]) for c in chunks[1:]
    )
    assert rebuilt == text


def test_split_by_worker_count() -> None:
    spans = chunk_spans(100, n_chunks=3, overlap=5)
    assert spans == [(0, 37), (32, 69), (64, 100)]
    assert [c.length for c in split_document("x" * 10, n_chunks=10)] == [1] * 10


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"chunk_size": 4, "overlap": 4}, "chunk_size must be > overlap"),
        ({"chunk_size": 4, "n_chunks": 2}, "exactly one"),
        ({}, "exactly one"),
        ({"n_chunks": 0}, "n_chunks must be >= 1"),
        ({"n_chunks": 8, "overlap": 3}, "longer than the overlap"),
        ({"chunk_size": 4, "overlap": -1}, "overlap must be >= 0"),
    ],
)
def test_bad_split_arguments_are_rejected(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        split_document("abcdefghij", **kwargs)


def test_empty_document_is_rejected() -> None:
    with pytest.raises(ValueError, match="empty"):
        split_document("", chunk_size=4)
    with pytest.raises(TypeError, match="decode"):
        split_document("abc", chunk_size=2, tokenizer=object())  # type: ignore[arg-type]
