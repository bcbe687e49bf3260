"""RULER-style needle-in-a-haystack tasks.

A needle is the sentence ``"One of the special magic {type} for {key} is: {value}."``
with ``type`` one of ``words``, ``numbers``, ``uuids``. Variants:

- ``niah_single``: one needle; haystack ``repeat``, ``essay`` or ``needles``
  (distractor needles with other keys).
- ``niah_multikey``: the target needle among ``num_distractors`` needles with other keys.
- ``niah_multivalue``: ``num_values`` needles sharing one key; all values are answers.
- ``niah_multiquery``: ``num_queries`` needles with different keys, all asked at once.

Keys are adjective-noun pairs, or UUIDs with ``key_kind="uuid"`` (RULER's
``niah_multikey_3``: UUID keys and values in a haystack of other such needles).

Every variant takes ``template``: ``"plain"`` asks its own question after the context;
``"ruler"`` words the item as RULER does (its instruction before the context, its
question and answer prefix after; see :mod:`lc_evals.prompts`) and lays out the
``repeat`` and ``needles`` haystacks in lines, as RULER does. ``length_counts=
"prompt"`` makes the target length count the whole prompt plus ``reserve`` units for
the answer, as RULER's length does; ``"context"`` (the default) counts the context.

The first (target) needle goes at ``depth`` (fraction of the haystack before it, 0-1);
``depth=None`` draws it from the item's seeded stream. Other needles get random depths.

Every needle value occurs in the context once, in its own needle: values are distinct
across needles and never a word of a key, of the needle template or of the repeated
filler; essay sentences and distractor needles that would state a value are skipped.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from lc_evals.haystack import (
    HAYSTACKS,
    REPEAT_BLOCK,
    essay_sentences,
    needle_sentences,
    repeat_lines,
    repeat_sentences,
)
from lc_evals.length import Insert
from lc_evals.tasks._common import (
    TEMPLATES,
    VALUE_KINDS,
    VALUE_TYPE_NAMES,
    Draft,
    ItemPrompt,
    Sizer,
    check_choice,
    check_depth,
    check_int,
    distinct,
    haystack_separator,
    make_key,
    make_value,
    ruler_prompt,
)
from lc_evals.types import TaskItem

NEEDLE_TEMPLATE = "One of the special magic {type} for {key} is: {value}."


def needle_text(key: str, value: str, value_kind: str) -> str:
    """The RULER needle sentence for ``key`` and ``value``."""
    return NEEDLE_TEMPLATE.format(type=VALUE_TYPE_NAMES[value_kind], key=key, value=value)


_TEMPLATE_WORDS = frozenset(
    w.lower() for w in re.findall(r"[A-Za-z]+", NEEDLE_TEMPLATE + " words numbers uuids")
)
_REPEAT_WORDS = frozenset(w.lower() for w in re.findall(r"[A-Za-z]+", " ".join(REPEAT_BLOCK)))


def _word_pattern(words: Iterable[str]) -> re.Pattern[str] | None:
    alternatives = sorted({re.escape(w) for w in words}, key=len, reverse=True)
    if not alternatives:
        return None
    return re.compile(r"(?<!\w)(?:" + "|".join(alternatives) + r")(?!\w)", re.I)


def avoiding(sentences: Iterator[str], words: Iterable[str]) -> Iterator[str]:
    """The sentences of ``sentences`` that contain none of ``words`` as a whole word.

    Keeps every needle value unique in its context: filler never states an answer.

    Raises:
        ValueError: 10,000 sentences in a row contained one of the words.
    """
    pattern = _word_pattern(words)
    if pattern is None:
        yield from sentences
        return
    rejected = 0
    for sentence in sentences:
        if pattern.search(sentence):
            rejected += 1
            if rejected > 10_000:
                raise ValueError(
                    f"the haystack keeps stating a needle value ({sorted(set(words))[:5]}); "
                    "choose another haystack or value_kind"
                )
            continue
        rejected = 0
        yield sentence


def _haystack(
    kind: str,
    rng: random.Random,
    value_kind: str,
    taken_keys: set[str],
    answers: set[str],
    key_kind: str = "word",
    lines: bool = False,
) -> Iterator[str]:
    if kind == "repeat":
        return repeat_lines() if lines else repeat_sentences()
    if kind == "essay":
        return avoiding(essay_sentences(rng), answers)
    answer_words = {a.lower() for a in answers}

    def distractor() -> str:
        while True:
            key = _make_key(rng, key_kind)
            if key not in taken_keys and not set(key.lower().split("-")) & answer_words:
                break
        while True:
            value = make_value(rng, value_kind)
            if value.lower() not in answer_words:
                break
        return needle_text(key, value, value_kind)

    return needle_sentences(distractor)


KEY_KINDS: tuple[str, ...] = ("word", "uuid")


def _make_key(rng: random.Random, key_kind: str) -> str:
    """An adjective-noun key (``"quiet-harbor"``) or, for ``"uuid"``, a UUID (RULER MK3)."""
    return make_key(rng) if key_kind == "word" else make_value(rng, "uuid")


def _forbidden_values(haystack: str, keys: Sequence[str]) -> set[str]:
    """Words a needle value must not be: they occur in the context anyway."""
    out = set(_TEMPLATE_WORDS)
    for key in keys:
        out.update(key.lower().split("-"))
    if haystack == "repeat":
        out |= _REPEAT_WORDS
    return out


# RULER's wording when one answer is asked (NVIDIA/RULER, scripts/data/synthetic/niah.py)
_SINGULAR: tuple[tuple[str, str], ...] = (
    ("Some", "A"),
    ("are all", "is"),
    ("are", "is"),
    ("answers", "answer"),
)


def _prompt(template: str, type_name: str, asked: Sequence[str], num_answers: int) -> ItemPrompt:
    """The question of a NIAH item about the keys ``asked`` (``type_name``: ``"numbers"`` ...)."""
    if template == "ruler":
        query = ", ".join(asked[:-1]) + ", and " + asked[-1] if len(asked) > 1 else asked[0]
        if num_answers == 1:
            return ruler_prompt(
                "niah", replace=_SINGULAR, type_needle_v=type_name[:-1], query=query
            )
        return ruler_prompt("niah", type_needle_v=type_name, query=query)
    if num_answers == 1:
        return ItemPrompt(
            f"What is the special magic {type_name[:-1]} for {asked[0]} mentioned in the text above?"
        )
    joined = ", ".join(asked[:-1]) + f" and {asked[-1]}" if len(asked) > 1 else asked[0]
    return ItemPrompt(
        f"What are all the special magic {type_name} for {joined} mentioned in the text above?"
    )


@dataclass(frozen=True)
class _Options:
    """The options every NIAH variant takes (see the module docstring)."""

    haystack: str
    value_kind: str
    depth: float | None
    key_kind: str
    template: str
    length_counts: str
    reserve: int


def _niah(
    task: str,
    n: int,
    length: int,
    seed: int,
    tokenizer: Any,
    opts: _Options,
    num_keys: int,
    values_per_key: int,
    queried_keys: int,
) -> list[TaskItem]:
    """Items of ``task`` with ``num_keys`` keys of ``values_per_key`` needles each; the
    first ``queried_keys`` keys are asked."""
    check_choice("haystack", opts.haystack, HAYSTACKS)
    check_choice("value_kind", opts.value_kind, VALUE_KINDS)
    check_choice("key_kind", opts.key_kind, KEY_KINDS)
    check_choice("template", opts.template, TEMPLATES)
    check_depth(opts.depth)
    sizer = Sizer.of(tokenizer, length, length_counts=opts.length_counts, reserve=opts.reserve)

    def draft(rng: random.Random, index: int) -> Draft:
        keys = distinct(rng, lambda r: _make_key(r, opts.key_kind), num_keys)
        needles: list[tuple[str, str]] = []  # (key, value), target needle(s) first
        taken = _forbidden_values(opts.haystack, keys)  # every value unique in the context
        for key in keys:
            for value in distinct(
                rng, lambda r: make_value(r, opts.value_kind), values_per_key, exclude=taken
            ):
                taken.add(value)
                needles.append((key, value))
        # needle order: the queried needles first, so the first one is the depth-controlled one
        depths = [float(opts.depth) if opts.depth is not None else rng.random()]
        depths += [rng.random() for _ in needles[1:]]
        inserts = [
            Insert(needle_text(k, v, opts.value_kind), d) for (k, v), d in zip(needles, depths)
        ]
        sep = haystack_separator(opts.template, opts.haystack)
        values = {v for _, v in needles}
        lines = sep == "\n"
        sentences = _haystack(
            opts.haystack, rng, opts.value_kind, set(keys), values, opts.key_kind, lines
        )
        asked = keys[:queried_keys]
        answers = [v for k, v in needles if k in asked]
        prompt = _prompt(opts.template, VALUE_TYPE_NAMES[opts.value_kind], asked, len(answers))
        fitted = sizer.fit(sentences, inserts, prompt, what="the needle(s)", sep=sep)
        return Draft.of(
            fitted,
            prompt,
            answers,
            depth=depths[0],
            depths=depths,
            haystack=opts.haystack,
            value_kind=opts.value_kind,
            key_kind=opts.key_kind,
            keys=asked,
            needles=[i.text for i in inserts],
            needle_offsets=list(fitted.offsets),
            filler_chars=fitted.filler_chars,
        )

    return sizer.items(task, n, seed, draft)


def niah_single(
    n: int,
    length: int,
    seed: int,
    tokenizer: Any = None,
    *,
    haystack: str = "essay",
    value_kind: str = "number",
    depth: float | None = None,
    key_kind: str = "word",
    template: str = "plain",
    length_counts: str = "context",
    reserve: int = 0,
) -> list[TaskItem]:
    """One needle in a ``haystack`` of ``"repeat"``, ``"essay"`` or ``"needles"``.

    Examples:
        >>> item = niah_single(1, 1500, seed=0, haystack="repeat", depth=0.5)[0]
        >>> item.answers[0] in item.context
        True
    """
    opts = _Options(haystack, value_kind, depth, key_kind, template, length_counts, reserve)
    return _niah("niah_single", n, length, seed, tokenizer, opts, 1, 1, 1)


def niah_multikey(
    n: int,
    length: int,
    seed: int,
    tokenizer: Any = None,
    *,
    num_distractors: int = 3,
    haystack: str = "essay",
    value_kind: str = "number",
    depth: float | None = None,
    key_kind: str = "word",
    template: str = "plain",
    length_counts: str = "context",
    reserve: int = 0,
) -> list[TaskItem]:
    """The target needle plus ``num_distractors`` needles with other keys (RULER MK)."""
    check_int("num_distractors", num_distractors, 0)
    opts = _Options(haystack, value_kind, depth, key_kind, template, length_counts, reserve)
    return _niah("niah_multikey", n, length, seed, tokenizer, opts, 1 + num_distractors, 1, 1)


def niah_multivalue(
    n: int,
    length: int,
    seed: int,
    tokenizer: Any = None,
    *,
    num_values: int = 4,
    haystack: str = "essay",
    value_kind: str = "number",
    depth: float | None = None,
    key_kind: str = "word",
    template: str = "plain",
    length_counts: str = "context",
    reserve: int = 0,
) -> list[TaskItem]:
    """``num_values`` needles sharing one key; every value must be retrieved (RULER MV)."""
    check_int("num_values", num_values, 1)
    opts = _Options(haystack, value_kind, depth, key_kind, template, length_counts, reserve)
    return _niah("niah_multivalue", n, length, seed, tokenizer, opts, 1, num_values, 1)


def niah_multiquery(
    n: int,
    length: int,
    seed: int,
    tokenizer: Any = None,
    *,
    num_queries: int = 4,
    haystack: str = "essay",
    value_kind: str = "number",
    depth: float | None = None,
    key_kind: str = "word",
    template: str = "plain",
    length_counts: str = "context",
    reserve: int = 0,
) -> list[TaskItem]:
    """``num_queries`` needles with different keys, all asked in one question (RULER MQ)."""
    check_int("num_queries", num_queries, 1)
    opts = _Options(haystack, value_kind, depth, key_kind, template, length_counts, reserve)
    return _niah("niah_multiquery", n, length, seed, tokenizer, opts, num_queries, 1, num_queries)
