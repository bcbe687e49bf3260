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
    ItemPrompt,
    Sizer,
    check_choice,
    check_depth,
    check_int,
    distinct,
    haystack_separator,
    item_rng,
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


def _niah(
    task: str,
    *,
    n: int,
    length: int,
    seed: int,
    tokenizer: Any,
    haystack: str,
    value_kind: str,
    depth: float | None,
    key_kind: str,
    num_keys: int,
    values_per_key: int,
    queried_keys: int,
    template: str,
    length_counts: str,
    reserve: int,
) -> list[TaskItem]:
    check_choice("haystack", haystack, HAYSTACKS)
    check_choice("value_kind", value_kind, VALUE_KINDS)
    check_choice("key_kind", key_kind, KEY_KINDS)
    check_choice("template", template, TEMPLATES)
    check_depth(depth)
    sizer = Sizer.of(tokenizer, length, length_counts=length_counts, reserve=reserve)
    items = []
    for index in range(n):
        rng = item_rng(task, seed, index)
        keys = distinct(rng, lambda r: _make_key(r, key_kind), num_keys)
        needles: list[tuple[str, str]] = []  # (key, value), target needle(s) first
        taken = _forbidden_values(haystack, keys)  # every value unique in the context
        for key in keys:
            for value in distinct(
                rng, lambda r: make_value(r, value_kind), values_per_key, exclude=taken
            ):
                taken.add(value)
                needles.append((key, value))
        # needle order: the queried needles first, so the first one is the depth-controlled one
        depths = [float(depth) if depth is not None else rng.random()]
        depths += [rng.random() for _ in needles[1:]]
        inserts = [Insert(needle_text(k, v, value_kind), d) for (k, v), d in zip(needles, depths)]
        sep = haystack_separator(template, haystack)
        sentences = _haystack(
            haystack, rng, value_kind, set(keys), {v for _, v in needles}, key_kind, sep == "\n"
        )
        asked = keys[:queried_keys]
        answers = [v for k, v in needles if k in asked]
        prompt = _prompt(template, VALUE_TYPE_NAMES[value_kind], asked, len(answers))
        fitted = sizer.fit(sentences, inserts, prompt, what="the needle(s)", sep=sep)
        items.append(
            sizer.item(
                task,
                seed,
                index,
                context=fitted.context,
                prompt=prompt,
                answers=answers,
                measured=fitted.length,
                depth=depths[0],
                depths=depths,
                haystack=haystack,
                value_kind=value_kind,
                key_kind=key_kind,
                keys=asked,
                needles=[i.text for i in inserts],
                needle_offsets=list(fitted.offsets),
                filler_chars=fitted.filler_chars,
            )
        )
    return items


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
    return _niah(
        "niah_single",
        n=n,
        length=length,
        seed=seed,
        tokenizer=tokenizer,
        haystack=haystack,
        value_kind=value_kind,
        depth=depth,
        key_kind=key_kind,
        template=template,
        length_counts=length_counts,
        reserve=reserve,
        num_keys=1,
        values_per_key=1,
        queried_keys=1,
    )


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
    return _niah(
        "niah_multikey",
        n=n,
        length=length,
        seed=seed,
        tokenizer=tokenizer,
        haystack=haystack,
        value_kind=value_kind,
        depth=depth,
        key_kind=key_kind,
        template=template,
        length_counts=length_counts,
        reserve=reserve,
        num_keys=1 + num_distractors,
        values_per_key=1,
        queried_keys=1,
    )


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
    return _niah(
        "niah_multivalue",
        n=n,
        length=length,
        seed=seed,
        tokenizer=tokenizer,
        haystack=haystack,
        value_kind=value_kind,
        depth=depth,
        key_kind=key_kind,
        template=template,
        length_counts=length_counts,
        reserve=reserve,
        num_keys=1,
        values_per_key=num_values,
        queried_keys=1,
    )


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
    return _niah(
        "niah_multiquery",
        n=n,
        length=length,
        seed=seed,
        tokenizer=tokenizer,
        haystack=haystack,
        value_kind=value_kind,
        depth=depth,
        key_kind=key_kind,
        template=template,
        length_counts=length_counts,
        reserve=reserve,
        num_keys=num_queries,
        values_per_key=1,
        queried_keys=num_queries,
    )
