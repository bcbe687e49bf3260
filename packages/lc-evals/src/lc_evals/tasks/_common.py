"""Helpers shared by the task generators: seeding, option checks, values, items."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable
from typing import Any

from lc_evals import words as W
from lc_evals.types import TaskItem

VALUE_KINDS: tuple[str, ...] = ("word", "number", "uuid")
VALUE_TYPE_NAMES: dict[str, str] = {"word": "words", "number": "numbers", "uuid": "uuids"}


def item_rng(task: str, seed: int, index: int) -> random.Random:
    """The random stream of one item: independent of ``n`` and of other items."""
    return random.Random(f"lc-evals:{task}:{seed}:{index}")


def item_id(task: str, seed: int, index: int) -> str:
    return f"{task}-{seed}-{index}"


def check_choice(name: str, value: Any, allowed: Iterable[Any]) -> None:
    allowed = tuple(allowed)
    if value not in allowed:
        raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")


def check_int(name: str, value: Any, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def check_depth(depth: Any) -> None:
    if depth is None:
        return
    if (
        isinstance(depth, bool)
        or not isinstance(depth, int | float)
        or not 0.0 <= float(depth) <= 1.0
    ):
        raise ValueError(f"depth must be a float in [0, 1] or None (seeded random), got {depth!r}")


def make_value(rng: random.Random, kind: str) -> str:
    """A needle value: a word, a 7-digit number or a UUID."""
    if kind == "word":
        return rng.choice(W.NOUNS)
    if kind == "number":
        return str(rng.randint(1_000_000, 9_999_999))
    if kind == "uuid":
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))
    raise ValueError(f"value_kind must be one of {list(VALUE_KINDS)}, got {kind!r}")


def make_key(rng: random.Random) -> str:
    """A needle key such as ``"quiet-harbor"``."""
    return f"{rng.choice(W.ADJECTIVES)}-{rng.choice(W.NOUNS)}"


def distinct(rng: random.Random, make: Any, count: int, exclude: Iterable[str] = ()) -> list[str]:
    """``count`` distinct values from ``make(rng)``, none in ``exclude``."""
    seen = set(exclude)
    out: list[str] = []
    for _ in range(count * 1000 + 1000):
        if len(out) == count:
            break
        v = make(rng)
        if v not in seen:
            seen.add(v)
            out.append(v)
    if len(out) < count:
        raise ValueError(f"cannot draw {count} distinct values")
    return out


def build_item(
    task: str,
    seed: int,
    index: int,
    *,
    context: str,
    question: str,
    answers: Iterable[str],
    target_length: int,
    measured_length: int,
    unit: str,
    **metadata: Any,
) -> TaskItem:
    """A :class:`TaskItem` with the common metadata fields filled in."""
    meta: dict[str, Any] = {
        "target_length": target_length,
        "length": measured_length,
        "length_unit": unit,
        "seed": seed,
        "index": index,
    }
    meta.update(metadata)
    return TaskItem(
        id=item_id(task, seed, index),
        task=task,
        context=context,
        question=question,
        answers=tuple(answers),
        metadata=meta,
    )
