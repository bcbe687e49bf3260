"""Aggregation-free retrieval and whole-context aggregation tasks of the multi-agent
chunking study (key-value retrieval and min/max over numbers, as in InfiniteBench).

- ``kv_retrieval``: lines ``"<uuid key>": "<uuid value>",`` filling the context; one
  key is asked. Every line is a distractor except the target at ``depth``.
- ``minmax``: integers spread through the context; the answer is the largest (``op=
  "max"``) or smallest (``op="min"``) of them. The answer is computed from the final
  context, so truncating the last number to fit the length can never make it wrong.
  Unlike retrieval, every chunk matters: this is the task that punishes aggregation.
"""

from __future__ import annotations

import functools
import random
import re
import uuid
from typing import Any

from lc_evals.haystack import needle_sentences
from lc_evals.length import Insert
from lc_evals.tasks._common import (
    Draft,
    ItemPrompt,
    Sizer,
    check_choice,
    check_depth,
    check_int,
)
from lc_evals.types import TaskItem

KV_HEADER = "JSON data (one key-value pair per line):\n"


def _uuid(rng: Any) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _random_kv_line(rng: random.Random) -> str:
    return kv_line(_uuid(rng), _uuid(rng))


def _random_number(rng: random.Random, low: int, high: int) -> str:
    return str(rng.randint(low, high))


def kv_line(key: str, value: str) -> str:
    """One key-value line of the ``kv_retrieval`` context."""
    return f'"{key}": "{value}",'


def kv_retrieval(
    n: int,
    length: int,
    seed: int,
    tokenizer: Any = None,
    *,
    depth: float | None = None,
) -> list[TaskItem]:
    """Key-value retrieval over UUID pairs.

    Examples:
        >>> item = kv_retrieval(1, 3000, seed=0, depth=0.5)[0]
        >>> kv_line(item.metadata["key"], item.answers[0]) in item.context
        True
    """
    check_depth(depth)
    sizer = Sizer.of(tokenizer, length)

    def draft(rng: random.Random, index: int) -> Draft:
        key, value = _uuid(rng), _uuid(rng)
        d = float(depth) if depth is not None else rng.random()
        filler = needle_sentences(functools.partial(_random_kv_line, rng))
        prompt = ItemPrompt(
            f'What is the value associated with the key "{key}" in the JSON data above?'
        )
        fitted = sizer.fit(
            filler,
            [Insert(kv_line(key, value), d)],
            prompt,
            prefix=KV_HEADER,
            sep="\n",
            what="the header and target pair",
        )
        return Draft.of(
            fitted,
            prompt,
            (value,),
            depth=d,
            key=key,
            needles=[kv_line(key, value)],
            needle_offsets=list(fitted.offsets),
            filler_chars=fitted.filler_chars,
        )

    return sizer.items("kv_retrieval", n, seed, draft)


NUMBER_RE = re.compile(r"-?\d+")


def minmax(
    n: int,
    length: int,
    seed: int,
    tokenizer: Any = None,
    *,
    op: str | None = None,
    low: int = 0,
    high: int = 99_999,
) -> list[TaskItem]:
    """Min/max over numbers spread through the context; ``op=None`` draws max or min."""
    if op is not None:
        check_choice("op", op, ("max", "min"))
    check_int("low", low, -(10**12))
    if not isinstance(high, int) or high <= low:
        raise ValueError(f"high must be an integer > low={low}, got {high!r}")
    sizer = Sizer.of(tokenizer, length)

    def draft(rng: random.Random, index: int) -> Draft:
        which = op if op is not None else rng.choice(("max", "min"))
        filler = needle_sentences(functools.partial(_random_number, rng, low, high))
        word = "largest" if which == "max" else "smallest"
        prompt = ItemPrompt(
            f"What is the {word} number in the list of numbers above? Answer with the number only."
        )
        fitted = sizer.fit(filler, [], prompt, prefix="Numbers: ", what="the header")
        numbers = [int(x) for x in NUMBER_RE.findall(fitted.context)]
        check_int("count of numbers that fit", len(numbers), 1)
        answer = max(numbers) if which == "max" else min(numbers)
        return Draft.of(
            fitted,
            prompt,
            (str(answer),),
            op=which,
            num_numbers=len(numbers),
            answer_offset=_offset(fitted.context, answer),
        )

    return sizer.items("minmax", n, seed, draft)


def _offset(context: str, value: int) -> int:
    m = re.search(rf"(?<![\d-]){value}(?!\d)", context)
    return m.start() if m else -1
