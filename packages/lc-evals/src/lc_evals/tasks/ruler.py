"""RULER's non-NIAH synthetic tasks: variable tracking and word-frequency extraction.

- ``variable_tracking``: chains ``VAR A = 12345``, ``VAR B = VAR A``, ... (``num_hops``
  assignments after the first) scattered in order through a haystack; the question asks
  for every variable that ends up holding the chain's value. ``num_chains - 1`` other
  chains with other values are distractors.
- ``common_words``: a numbered list of words in which ``num_common`` words occur
  ``common_freq`` times and every other word ``uncommon_freq`` times; the answer is the
  common words.
- ``frequent_words``: coded pseudo-words whose counts follow a Zipf law with exponent
  ``alpha``; the answer is the three most frequent words (strictly more frequent than
  the fourth by construction).
"""

from __future__ import annotations

import functools
import random
import string
from typing import Any

from lc_evals import words as W
from lc_evals.haystack import HAYSTACKS, essay_sentences, repeat_sentences
from lc_evals.length import Insert, fit_context, fit_count, length_unit, make_measure
from lc_evals.tasks._common import build_item, check_choice, check_int, distinct, item_rng
from lc_evals.types import TaskItem


def _var_name(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_uppercase) for _ in range(5))


def variable_tracking(
    n: int,
    length: int,
    seed: int,
    tokenizer: Any = None,
    *,
    num_chains: int = 1,
    num_hops: int = 4,
    haystack: str = "repeat",
) -> list[TaskItem]:
    """RULER variable tracking (VT).

    Examples:
        >>> item = variable_tracking(1, 2000, seed=0)[0]
        >>> all(f"VAR {v} " in item.context for v in item.answers)
        True
    """
    check_int("num_chains", num_chains, 1)
    check_int("num_hops", num_hops, 1)
    check_choice("haystack", haystack, ("repeat", "essay"))
    measure = make_measure(tokenizer)
    unit = length_unit(tokenizer)
    task = "variable_tracking"
    items = []
    for index in range(n):
        rng = item_rng(task, seed, index)
        names = distinct(rng, _var_name, num_chains * (num_hops + 1))
        values = distinct(rng, lambda r: str(r.randint(10_000, 99_999)), num_chains)
        chains = [names[c * (num_hops + 1) : (c + 1) * (num_hops + 1)] for c in range(num_chains)]
        statements: list[list[str]] = []
        for chain, value in zip(chains, values):
            lines = [f"VAR {chain[0]} = {value} ."]
            lines += [f"VAR {chain[j]} = VAR {chain[j - 1]} ." for j in range(1, len(chain))]
            statements.append(lines)
        # interleave the chains, keeping each chain's own order, at sorted random depths
        labels = [c for c in range(num_chains) for _ in range(num_hops + 1)]
        rng.shuffle(labels)
        depths = sorted(rng.random() for _ in labels)
        cursor = [0] * num_chains
        inserts = []
        for label, d in zip(labels, depths):
            inserts.append(Insert(statements[label][cursor[label]], d))
            cursor[label] += 1
        filler = repeat_sentences() if haystack == "repeat" else essay_sentences(rng)
        fitted = fit_context(
            filler, inserts, length, measure, what="the variable assignments", unit=unit
        )
        question = (
            f"Find all variables that are assigned the value {values[0]} in the text above, "
            "directly or through other variables."
        )
        items.append(
            build_item(
                task,
                seed,
                index,
                context=fitted.context,
                question=question,
                answers=chains[0],
                target_length=length,
                measured_length=fitted.length,
                unit=unit,
                value=values[0],
                chains=chains,
                haystack=haystack,
                needles=[i.text for i in inserts],
                needle_offsets=list(fitted.offsets),
                depths=[i.depth for i in inserts],
            )
        )
    return items


def _numbered(entries: list[str]) -> str:
    return " ".join(f"{i + 1}. {w}" for i, w in enumerate(entries))


def common_words(
    n: int,
    length: int,
    seed: int,
    tokenizer: Any = None,
    *,
    num_common: int = 10,
    common_freq: int | None = None,
    uncommon_freq: int = 3,
) -> list[TaskItem]:
    """RULER common-words extraction (CWE).

    ``common_freq=None`` picks the largest frequency <= 30 (RULER's value) whose common
    words fill at most half of the target length.
    """
    check_int("num_common", num_common, 1)
    check_int("uncommon_freq", uncommon_freq, 1)
    if common_freq is not None:
        check_int("common_freq", common_freq, uncommon_freq + 1)
    measure = make_measure(tokenizer)
    unit = length_unit(tokenizer)
    task = "common_words"
    items = []
    for index in range(n):
        rng = item_rng(task, seed, index)
        common = distinct(rng, lambda r: r.choice(W.NOUNS + W.ADJECTIVES), num_common)
        order_seed = rng.getrandbits(64)
        pool_rng = random.Random(rng.getrandbits(64))
        pool: list[str] = []

        def uncommon(
            k: int,
            pool: list[str] = pool,
            pool_rng: random.Random = pool_rng,
            common: list[str] = common,
        ) -> list[str]:
            if len(pool) < k:
                pool.extend(
                    W.distinct_words(pool_rng, max(2 * k, 64), exclude=set(common) | set(pool))[
                        : max(2 * k, 64)
                    ]
                )
            return pool[:k]

        def build(
            total: int, freq: int, common: list[str] = common, order_seed: int = order_seed
        ) -> str:
            entries = [w for w in common for _ in range(freq)]
            extra = max(total - len(entries), 0)
            words = uncommon(-(-extra // uncommon_freq))
            entries += [words[i // uncommon_freq] for i in range(extra)]
            random.Random(order_seed + total).shuffle(entries)
            return _numbered(entries)

        freq = common_freq
        if freq is None:
            candidates = [
                f for f in range(uncommon_freq + 1, 31) if measure(build(0, f)) <= length // 2
            ]
            if not candidates:
                raise ValueError(
                    f"impossible length: {num_common} common words at frequency {uncommon_freq + 1} "
                    f"take more than half of the target length {length}"
                )
            freq = max(candidates)
        f = freq
        total, context, measured = fit_count(
            functools.partial(build, freq=f),
            length,
            measure,
            minimum=num_common * f,
            what="the common words",
        )
        question = (
            f"What are the {num_common} most common words in the numbered list above? "
            "Answer with the words only."
        )
        items.append(
            build_item(
                task,
                seed,
                index,
                context=context,
                question=question,
                answers=common,
                target_length=length,
                measured_length=measured,
                unit=unit,
                common_freq=f,
                uncommon_freq=uncommon_freq,
                num_entries=total,
            )
        )
    return items


def zipf_counts(total: int, vocab: int, alpha: float) -> list[int]:
    """Counts summing to ``total`` proportional to ``rank ** -alpha`` (largest remainder).

    Examples:
        >>> zipf_counts(100, 4, 1.0)
        [48, 24, 16, 12]
    """
    weights = [(r + 1) ** -alpha for r in range(vocab)]
    z = sum(weights)
    exact = [total * w / z for w in weights]
    counts = [int(x) for x in exact]
    order = sorted(range(vocab), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: total - sum(counts)]:
        counts[i] += 1
    return counts


def frequent_words(
    n: int,
    length: int,
    seed: int,
    tokenizer: Any = None,
    *,
    alpha: float = 2.0,
    vocab_size: int = 200,
    top_k: int = 3,
) -> list[TaskItem]:
    """RULER frequent-words extraction (FWE) over Zipf-distributed coded words."""
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha!r}")
    check_int("vocab_size", vocab_size, 2)
    check_int("top_k", top_k, 1)
    if top_k >= vocab_size:
        raise ValueError(f"top_k must be < vocab_size, got top_k={top_k}, vocab_size={vocab_size}")
    measure = make_measure(tokenizer)
    unit = length_unit(tokenizer)
    task = "frequent_words"
    items = []
    for index in range(n):
        rng = item_rng(task, seed, index)
        vocab = W.distinct_words(
            random.Random(rng.getrandbits(64)), vocab_size, exclude=set(W.NOUNS + W.ADJECTIVES)
        )
        order_seed = rng.getrandbits(64)

        def build(total: int, vocab: list[str] = vocab, order_seed: int = order_seed) -> str:
            counts = zipf_counts(total, vocab_size, alpha)
            entries = [w for w, c in zip(vocab, counts) for _ in range(c)]
            random.Random(order_seed + total).shuffle(entries)
            return " ".join(entries)

        # smallest total at which the top_k counts are strictly above the next one
        minimum = 1
        while True:
            c = zipf_counts(minimum, vocab_size, alpha)
            if c[top_k - 1] > c[top_k] and all(c[i] >= c[i + 1] for i in range(top_k)):
                break
            minimum += 1
            if minimum > 100_000:
                raise ValueError(f"alpha={alpha} is too flat to separate the top {top_k} words")
        total, context, measured = fit_count(
            build, length, measure, minimum=minimum, what="the smallest separable word list"
        )
        counts = zipf_counts(total, vocab_size, alpha)
        if (
            not counts[top_k - 1] > counts[top_k]
        ):  # pragma: no cover - guarded by minimum, counts grow with total
            raise ValueError("top words are not separable at this length")
        question = (
            f"Read the coded text above and count each coded word. What are the {top_k} most "
            "frequent coded words? Answer with the words only."
        )
        items.append(
            build_item(
                task,
                seed,
                index,
                context=context,
                question=question,
                answers=vocab[:top_k],
                target_length=length,
                measured_length=measured,
                unit=unit,
                alpha=alpha,
                counts=dict(zip(vocab[: top_k + 1], counts[: top_k + 1])),
                num_entries=total,
            )
        )
    return items


__all__ = ["HAYSTACKS", "common_words", "frequent_words", "variable_tracking", "zipf_counts"]
