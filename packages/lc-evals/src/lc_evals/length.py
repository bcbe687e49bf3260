"""Measuring text length and fitting a context to an exact target length.

Length is counted in tokens of a caller-passed tokenizer, or in characters when none is
given. Tokenization is not additive over concatenation (merges happen across
boundaries), so every candidate context is measured whole.

The fitter assembles a context from an endless stream of filler sentences plus a few
*inserts* (needles, facts, ...) placed at fractional depths. It binary-searches the
number of filler words, then, if one word is still too coarse, the number of characters
of the next word, so the result is the longest context not exceeding the target. For
targets of a few hundred tokens or more this lands within 1% of the target.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from lc_evals.types import Tokenizer

Measure = Callable[[str], int]


def make_measure(tokenizer: Tokenizer | Any | None) -> Measure:
    """``text -> length``: tokens of ``tokenizer`` or characters when it is ``None``.

    Accepts any object with ``encode(text)`` returning a list of ids or an object with an
    ``ids`` attribute (a ``tokenizers.Encoding``).

    Examples:
        >>> make_measure(None)("abc")
        3
    """
    if tokenizer is None:
        return len
    if not callable(getattr(tokenizer, "encode", None)):
        raise TypeError(
            f"tokenizer must have an encode(text) method, got {type(tokenizer).__name__}"
        )

    def measure(text: str) -> int:
        out = tokenizer.encode(text)
        ids = getattr(out, "ids", out)
        return len(ids)

    return measure


def length_unit(tokenizer: object | None) -> str:
    """``"tokens"`` or ``"chars"``."""
    return "chars" if tokenizer is None else "tokens"


@dataclass(frozen=True)
class Insert:
    """A piece of text to place in the context at ``depth`` (0 = start, 1 = end)."""

    text: str
    depth: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.depth <= 1.0:
            raise ValueError(f"Insert.depth must be in [0, 1], got {self.depth}")


@dataclass(frozen=True)
class Fitted:
    """A fitted context: the text, its measured length and each insert's char offset."""

    context: str
    length: int
    offsets: tuple[int, ...]
    filler_chars: int


class _Filler:
    """Words drawn lazily from a sentence stream, with sentence boundaries remembered."""

    def __init__(self, sentences: Iterator[str]) -> None:
        self._sentences = sentences
        self.words: list[str] = []
        self.sentence_of: list[int] = []
        self._n_sentences = 0

    def ensure(self, n_words: int) -> None:
        while len(self.words) < n_words:
            sentence = next(self._sentences)
            parts = sentence.split()
            self.words.extend(parts)
            self.sentence_of.extend([self._n_sentences] * len(parts))
            self._n_sentences += 1

    def sentences(self, n_words: int, tail: str = "") -> list[str]:
        """The first ``n_words`` words regrouped into sentences, plus a partial ``tail`` word."""
        self.ensure(n_words + 1)
        out: list[str] = []
        for _, group in itertools.groupby(range(n_words), key=lambda i: self.sentence_of[i]):
            out.append(" ".join(self.words[i] for i in group))
        if tail:
            if out and self.sentence_of[n_words] == self.sentence_of[n_words - 1]:
                out[-1] = out[-1] + " " + tail
            else:
                out.append(tail)
        return out


def assemble(
    sentences: Sequence[str], inserts: Sequence[Insert], sep: str = " "
) -> tuple[str, tuple[int, ...]]:
    """Join ``sentences`` with ``sep`` and splice each insert at the sentence boundary
    nearest its depth (measured in characters of the filler alone).

    Returns the text and the character offset of every insert (in input order).

    Examples:
        >>> assemble(["A b.", "C d."], [Insert("X.", 0.5)])
        ('A b. X. C d.', (5,))
    """
    starts = [0]
    for s in sentences:
        starts.append(starts[-1] + len(s) + len(sep))
    total = max(starts[-1] - len(sep), 0)
    # boundary i = before sentence i (i == len(sentences): at the end)
    bounds = [min(p, total) for p in starts]
    order = sorted(range(len(inserts)), key=lambda k: inserts[k].depth)
    slots: dict[int, list[int]] = {}
    for k in order:
        target = inserts[k].depth * total
        i = min(range(len(bounds)), key=lambda j: (abs(bounds[j] - target), j))
        slots.setdefault(i, []).append(k)
    pieces: list[str] = []
    offsets = [0] * len(inserts)
    pos = 0
    for i in range(len(sentences) + 1):
        for k in slots.get(i, []):
            offsets[k] = pos
            pieces.append(inserts[k].text)
            pos += len(inserts[k].text) + len(sep)
        if i < len(sentences):
            pieces.append(sentences[i])
            pos += len(sentences[i]) + len(sep)
    return sep.join(pieces), tuple(offsets)


def fit_context(
    sentences: Iterator[str],
    inserts: Sequence[Insert],
    target: int,
    measure: Measure,
    *,
    prefix: str = "",
    sep: str = " ",
    what: str = "the needle(s)",
    unit: str = "units",
) -> Fitted:
    """The longest context ``prefix + filler-with-inserts`` whose length is ``<= target``.

    Args:
        sentences: endless filler sentence stream (consumed lazily).
        inserts: texts placed at their depths; their order of appearance follows depth.
        target: target length in the unit of ``measure`` (tokens or characters).
        measure: ``text -> length``.
        prefix: fixed text put before everything (e.g. a header line).
        sep: separator between sentences and inserts.
        what: how to name the inserts in the error message.
        unit: the unit of ``measure``, for the error message.

    Raises:
        ValueError: when the prefix and inserts alone are longer than ``target``.
    """
    if target <= 0:
        raise ValueError(f"length must be a positive integer, got {target}")
    filler = _Filler(sentences)

    def build(n_words: int, tail: str = "") -> tuple[str, tuple[int, ...]]:
        text, offsets = assemble(filler.sentences(n_words, tail), inserts, sep)
        return prefix + text, tuple(o + len(prefix) for o in offsets)

    def length(n_words: int, tail: str = "") -> int:
        return measure(build(n_words, tail)[0])

    base = length(0)
    if base > target:
        raise ValueError(
            f"impossible length: {what} alone take {base} {unit} but the target length is {target}; "
            f"ask for a longer context or fewer/shorter inserts"
        )
    best = largest_fitting(length, target, max(16, target // 4))
    tail = ""
    best_len = length(best)
    if target - best_len > max(1, target // 200):
        filler.ensure(best + 1)
        word = filler.words[best]
        c_lo, c_hi = 0, len(word)
        while c_hi - c_lo > 1:
            mid = (c_lo + c_hi) // 2
            if length(best, word[:mid]) <= target:
                c_lo = mid
            else:
                c_hi = mid
        if c_lo > 0:
            tail = word[:c_lo]
            best_len = length(best, tail)
    context, offsets = build(best, tail)
    filler_chars = len(context) - len(prefix) - sum(len(i.text) + len(sep) for i in inserts)
    return Fitted(
        context=context, length=best_len, offsets=offsets, filler_chars=max(filler_chars, 0)
    )


def largest_fitting(f: Callable[[int], int], target: int, start: int, *, minimum: int = 0) -> int:
    """Largest ``k >= minimum`` with ``f(k) <= target`` for a nondecreasing-ish ``f``.

    Brackets the answer by doubling from ``start``, then shrinks the bracket with two
    probes per round placed around the linear interpolation of ``f`` (a near-linear
    ``f``, as text length in words is, converges in a handful of rounds); every probe
    lies strictly inside the bracket, so it always terminates. ``f(minimum) <= target``
    is assumed.

    Examples:
        >>> largest_fitting(lambda k: 3 * k, 100, start=4)
        33
    """
    lo, flo = minimum, f(minimum)
    hi = max(start, minimum + 1)
    fhi = f(hi)
    while fhi <= target:
        lo, flo = hi, fhi
        hi *= 2
        fhi = f(hi)
    while hi - lo > 1:
        width = hi - lo
        guess = lo + (target - flo) * width / (fhi - flo) if fhi > flo else lo + width / 2
        pad = max(1, width // 256)
        probes = sorted({min(max(int(guess) + d, lo + 1), hi - 1) for d in (-pad, pad)})
        for k in probes:
            if not lo < k < hi:
                continue
            fk = f(k)
            if fk <= target:
                lo, flo = k, fk
            else:
                hi, fhi = k, fk
    return lo


def fit_count(
    build: Callable[[int], str],
    target: int,
    measure: Measure,
    *,
    minimum: int = 0,
    what: str = "the fixed content",
) -> tuple[int, str, int]:
    """Largest ``n >= minimum`` with ``measure(build(n)) <= target`` (binary search).

    Returns ``(n, text, length)``. Raises ``ValueError`` when even ``build(minimum)`` is
    too long.
    """
    if target <= 0:
        raise ValueError(f"length must be a positive integer, got {target}")
    base = measure(build(minimum))
    if base > target:
        raise ValueError(
            f"impossible length: {what} alone takes {base} but the target length is {target}"
        )
    lo = largest_fitting(lambda k: measure(build(k)), target, max(minimum * 2, 8), minimum=minimum)
    text = build(lo)
    return lo, text, measure(text)
