"""Background text ("haystacks") generated offline and deterministically.

Three kinds, as in RULER:

- ``"repeat"``: a short block of plain sentences repeated (the passkey-style filler);
- ``"essay"``: essay-like prose from a small phrase grammar over the shipped vocabulary
  in :mod:`lc_evals.words` (no corpus is downloaded);
- ``"needles"``: distractor needles, i.e. the needle template with other keys and values.

Each is an endless iterator of sentences; the length fitter in :mod:`lc_evals.length`
takes as many as the target length needs.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator

from lc_evals import words as W

HAYSTACKS: tuple[str, ...] = ("repeat", "essay", "needles")

REPEAT_BLOCK: tuple[str, ...] = (
    "The river runs down to the sea.",
    "The hills are quiet tonight.",
    "The wind turns the old mill.",
    "Here the long road bends.",
    "Far away a bell is ringing.",
)


def repeat_sentences() -> Iterator[str]:
    """The repeated-filler haystack: :data:`REPEAT_BLOCK` over and over."""
    return itertools.cycle(REPEAT_BLOCK)


def repeat_lines() -> Iterator[str]:
    """The repeated filler as RULER lays out its noise: the whole block on every line
    (joined with newlines, needles go between lines)."""
    return itertools.cycle([" ".join(REPEAT_BLOCK)])


def _np(rng: random.Random) -> str:
    noun = rng.choice(W.NOUNS)
    if rng.random() < 0.6:
        return f"the {rng.choice(W.ADJECTIVES)} {noun}"
    return f"the {noun}"


def _essay_sentence(rng: random.Random) -> str:
    form = rng.randrange(6)
    if form == 0:
        s = f"{_np(rng)} {rng.choice(W.VERBS_PAST)} {_np(rng)} {rng.choice(W.PREPOSITIONS)} {_np(rng)}"
    elif form == 1:
        s = f"{rng.choice(W.CONNECTIVES)} {_np(rng)} {rng.choice(W.ADVERBS)} {rng.choice(W.VERBS_PAST)} {_np(rng)}"
    elif form == 2:
        s = f"{_np(rng)} was {rng.choice(W.ADJECTIVES)}, and {_np(rng)} was {rng.choice(W.ADJECTIVES)}"
    elif form == 3:
        s = f"no one {rng.choice(W.VERBS_PAST)} {_np(rng)} until {_np(rng)} {rng.choice(W.VERBS_PAST)} {_np(rng)}"
    elif form == 4:
        s = f"it is {rng.choice(W.ADJECTIVES)} to think that {_np(rng)} {rng.choice(W.VERBS_PAST)} {_np(rng)}"
    else:
        s = f"{_np(rng)} {rng.choice(W.PREPOSITIONS)} {_np(rng)} {rng.choice(W.ADVERBS)} {rng.choice(W.VERBS_PAST)} {_np(rng)}"
    return s[0].upper() + s[1:] + "."


def essay_sentences(rng: random.Random) -> Iterator[str]:
    """Essay-like prose, one grammatical sentence at a time (seeded by ``rng``)."""
    while True:
        yield _essay_sentence(rng)


def needle_sentences(make: Callable[[], str]) -> Iterator[str]:
    """Distractor needles: ``make()`` called for every sentence."""
    while True:
        yield make()
