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
from collections.abc import Iterable, Iterator
from typing import Any

from lc_evals import words as W
from lc_evals.haystack import HAYSTACKS, essay_sentences, repeat_lines, repeat_sentences
from lc_evals.length import Insert
from lc_evals.tasks._common import (
    TEMPLATES,
    Draft,
    ItemPrompt,
    Sizer,
    check_choice,
    check_int,
    distinct,
    haystack_separator,
    ruler_prompt,
)
from lc_evals.types import TaskItem

ONE_SHOT_LENGTH: dict[str, int] = {"tokens": 500, "chars": 2000}
"""Length of RULER's VT one-shot example (500 tokens; 2,000 characters without a
tokenizer), capped at a quarter of the target length."""

CWE_SHOT_SWITCH = 4096
"""Below this target length RULER's CWE example is 20 words (10 common ones 3 times,
10 others once), from it on 40 words (10 common ones 10 times, 30 others 3 times)."""


def _var_name(rng: random.Random, letters: int = 5) -> str:
    return "".join(rng.choice(string.ascii_uppercase) for _ in range(letters))


def _chains(
    rng: random.Random, num_chains: int, num_hops: int, letters: int, exclude: Iterable[str] = ()
) -> tuple[list[list[str]], list[str], list[Insert]]:
    """Variable chains, their values and the assignments at sorted random depths."""
    names = distinct(rng, lambda r: _var_name(r, letters), num_chains * (num_hops + 1))
    values = distinct(rng, lambda r: str(r.randint(10_000, 99_999)), num_chains, exclude=exclude)
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
    return chains, values, inserts


def _filler(haystack: str, rng: random.Random, sep: str = " ") -> Iterator[str]:
    if haystack == "repeat":
        return repeat_lines() if sep == "\n" else repeat_sentences()
    return essay_sentences(rng)


def _vt_example(
    rng: random.Random,
    sizer: Sizer,
    *,
    num_chains: int,
    num_hops: int,
    haystack: str,
    value: str,
) -> str:
    """RULER's VT one-shot example with its answer: 3-letter names, at most 10 hops, a
    haystack of :data:`ONE_SHOT_LENGTH` (or a quarter of the target), another value."""
    hops = min(10, num_hops)
    chains, values, inserts = _chains(rng, num_chains, hops, 3, exclude=[value])
    prompt = ruler_prompt("variable_tracking", query=values[0], num_v=num_hops + 1)
    target = min(ONE_SHOT_LENGTH[sizer.unit], sizer.target // 4)
    shot = Sizer(sizer.measure, sizer.unit, target, "prompt")
    sep = haystack_separator("ruler", haystack)
    fitted = shot.fit(
        _filler(haystack, rng, sep),
        inserts,
        prompt,
        what="the one-shot example's assignments",
        sep=sep,
    )
    return prompt.render(fitted.context) + " " + " ".join(chains[0]) + "\n"


def variable_tracking(
    n: int,
    length: int,
    seed: int,
    tokenizer: Any = None,
    *,
    num_chains: int = 1,
    num_hops: int = 4,
    haystack: str = "repeat",
    template: str = "plain",
    length_counts: str = "context",
    reserve: int = 0,
) -> list[TaskItem]:
    """RULER variable tracking (VT).

    With ``template="ruler"`` the prompt is RULER's, led by its one-shot example (a
    smaller item of the same kind with its answer); ``length_counts`` and ``reserve``
    as for :func:`~lc_evals.tasks.niah.niah_single`.

    Examples:
        >>> item = variable_tracking(1, 2000, seed=0)[0]
        >>> all(f"VAR {v} " in item.context for v in item.answers)
        True
    """
    check_int("num_chains", num_chains, 1)
    check_int("num_hops", num_hops, 1)
    check_choice("haystack", haystack, ("repeat", "essay"))
    check_choice("template", template, TEMPLATES)
    sizer = Sizer.of(tokenizer, length, length_counts=length_counts, reserve=reserve)

    def draft(rng: random.Random, index: int) -> Draft:
        chains, values, inserts = _chains(rng, num_chains, num_hops, 5)
        if template == "ruler":
            shot = _vt_example(
                random.Random(rng.getrandbits(64)),
                sizer,
                num_chains=num_chains,
                num_hops=num_hops,
                haystack=haystack,
                value=values[0],
            )
            prompt = ruler_prompt(
                "variable_tracking", head=shot + "\n", query=values[0], num_v=num_hops + 1
            )
        else:
            prompt = ItemPrompt(
                f"Find all variables that are assigned the value {values[0]} in the text "
                "above, directly or through other variables."
            )
        sep = haystack_separator(template, haystack)
        fitted = sizer.fit(
            _filler(haystack, rng, sep), inserts, prompt, what="the variable assignments", sep=sep
        )
        return Draft.of(
            fitted,
            prompt,
            chains[0],
            value=values[0],
            chains=chains,
            haystack=haystack,
            needles=[i.text for i in inserts],
            needle_offsets=list(fitted.offsets),
            depths=[i.depth for i in inserts],
        )

    return sizer.items("variable_tracking", n, seed, draft)


def _numbered(entries: list[str]) -> str:
    return " ".join(f"{i + 1}. {w}" for i, w in enumerate(entries))


def _cwe_example(rng: random.Random, num_common: int, small: bool, exclude: set[str]) -> str:
    """RULER's CWE one-shot example: a smaller numbered list with its answer."""
    total, common_freq, uncommon_freq = (20, 3, 1) if small else (40, 10, 3)
    words = W.distinct_words(rng, max(total, num_common + 1), exclude=exclude)
    common, uncommon = words[:num_common], words[num_common:]
    entries = common * common_freq + uncommon * uncommon_freq
    rng.shuffle(entries)
    prompt = _cwe_prompt("ruler", num_common)
    return prompt.render(_numbered(entries)) + " " + _numbered(common)


def _cwe_prompt(template: str, num_common: int, head: str = "") -> ItemPrompt:
    if template == "ruler":
        return ruler_prompt(
            "common_words_extraction", head=head, replace=[(" 10 ", f" {num_common} ")]
        )
    return ItemPrompt(
        f"What are the {num_common} most common words in the numbered list above? "
        "Answer with the words only."
    )


def common_words(
    n: int,
    length: int,
    seed: int,
    tokenizer: Any = None,
    *,
    num_common: int = 10,
    common_freq: int | None = None,
    uncommon_freq: int = 3,
    template: str = "plain",
    length_counts: str = "context",
    reserve: int = 0,
) -> list[TaskItem]:
    """RULER common-words extraction (CWE).

    ``common_freq=None`` picks the largest frequency <= 30 (RULER's value) whose common
    words fill at most half of the room for the list (the lowest one,
    ``uncommon_freq + 1``, when none does). With ``template="ruler"`` the prompt is
    RULER's, led by its one-shot example (see :data:`CWE_SHOT_SWITCH`);
    ``length_counts`` and ``reserve`` as for :func:`~lc_evals.tasks.niah.niah_single`.
    """
    check_int("num_common", num_common, 1)
    check_int("uncommon_freq", uncommon_freq, 1)
    if common_freq is not None:
        check_int("common_freq", common_freq, uncommon_freq + 1)
    check_choice("template", template, TEMPLATES)
    sizer = Sizer.of(tokenizer, length, length_counts=length_counts, reserve=reserve)

    def draft(rng: random.Random, index: int) -> Draft:
        common = distinct(rng, lambda r: r.choice(W.NOUNS + W.ADJECTIVES), num_common)
        order_seed = rng.getrandbits(64)
        pool_rng = random.Random(rng.getrandbits(64))
        pool: list[str] = []
        head = ""
        if template == "ruler":
            small = length < CWE_SHOT_SWITCH
            shot_rng = random.Random(rng.getrandbits(64))
            head = _cwe_example(shot_rng, num_common, small, set(common)) + "\n"
        prompt = _cwe_prompt(template, num_common, head)
        counter = sizer.counter(prompt)

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
            frame = counter("")  # 0 when the context alone is counted
            room = (length - frame) // 2
            candidates = [
                f for f in range(uncommon_freq + 1, 31) if counter(build(0, f)) - frame <= room
            ]
            # none within half: the lowest frequency, if the words fit at all (fit_count says)
            freq = max(candidates, default=uncommon_freq + 1)
        f = freq
        total, context, measured = sizer.fit_count(
            functools.partial(build, freq=f),
            prompt,
            minimum=num_common * f,
            what="the common words",
        )
        metadata = {"common_freq": f, "uncommon_freq": uncommon_freq, "num_entries": total}
        return Draft(context, measured, prompt, common, metadata)

    return sizer.items("common_words", n, seed, draft)


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


NUMBER_NAMES: tuple[str, ...] = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"
)  # fmt: skip

NOISE_WORD = "..."
"""RULER's FWE gives its most frequent coded word's place to dots, which the prompt
says to ignore (``template="ruler"``)."""


def _fwe_prompt(template: str, top_k: int) -> ItemPrompt:
    if template == "ruler":
        name = NUMBER_NAMES[top_k] if top_k < len(NUMBER_NAMES) else str(top_k)
        return ruler_prompt("freq_words_extraction", replace=[("three", name)])
    return ItemPrompt(
        f"Read the coded text above and count each coded word. What are the {top_k} most "
        "frequent coded words? Answer with the words only."
    )


def frequent_words(
    n: int,
    length: int,
    seed: int,
    tokenizer: Any = None,
    *,
    alpha: float = 2.0,
    vocab_size: int = 200,
    top_k: int = 3,
    template: str = "plain",
    length_counts: str = "context",
    reserve: int = 0,
) -> list[TaskItem]:
    """RULER frequent-words extraction (FWE) over Zipf-distributed coded words.

    With ``template="ruler"`` the prompt is RULER's and, as in RULER, the top-ranked
    word is :data:`NOISE_WORD` (the answer is the next ``top_k``); ``length_counts``
    and ``reserve`` as for :func:`~lc_evals.tasks.niah.niah_single`.
    """
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0, got {alpha!r}")
    check_int("vocab_size", vocab_size, 2)
    check_int("top_k", top_k, 1)
    check_choice("template", template, TEMPLATES)
    skip = 1 if template == "ruler" else 0  # ranks before the answers
    if top_k + skip >= vocab_size:
        raise ValueError(
            f"top_k must be < vocab_size{' - 1' if skip else ''}, got top_k={top_k}, "
            f"vocab_size={vocab_size}"
        )
    sizer = Sizer.of(tokenizer, length, length_counts=length_counts, reserve=reserve)
    prompt = _fwe_prompt(template, top_k)
    last = skip + top_k  # rank of the first word after the answers

    def draft(rng: random.Random, index: int) -> Draft:
        vocab = W.distinct_words(
            random.Random(rng.getrandbits(64)), vocab_size, exclude=set(W.NOUNS + W.ADJECTIVES)
        )
        if skip:
            vocab[0] = NOISE_WORD
        order_seed = rng.getrandbits(64)

        def build(total: int, vocab: list[str] = vocab, order_seed: int = order_seed) -> str:
            counts = zipf_counts(total, vocab_size, alpha)
            entries = [w for w, c in zip(vocab, counts) for _ in range(c)]
            random.Random(order_seed + total).shuffle(entries)
            return " ".join(entries)

        # smallest total at which the answers' counts are strictly above the next one
        minimum = 1
        while True:
            c = zipf_counts(minimum, vocab_size, alpha)
            if c[last - 1] > c[last] and all(c[i] >= c[i + 1] for i in range(last)):
                break
            minimum += 1
            if minimum > 100_000:
                raise ValueError(f"alpha={alpha} is too flat to separate the top {top_k} words")
        total, context, measured = sizer.fit_count(
            build, prompt, minimum=minimum, what="the smallest separable word list"
        )
        counts = zipf_counts(total, vocab_size, alpha)
        if (
            not counts[last - 1] > counts[last]
        ):  # pragma: no cover - guarded by minimum, counts grow with total
            raise ValueError("top words are not separable at this length")
        top = dict(zip(vocab[: last + 1], counts[: last + 1]))
        metadata = {"alpha": alpha, "counts": top, "num_entries": total}
        return Draft(context, measured, prompt, vocab[skip:last], metadata)

    return sizer.items("frequent_words", n, seed, draft)


__all__ = [
    "CWE_SHOT_SWITCH",
    "HAYSTACKS",
    "NOISE_WORD",
    "ONE_SHOT_LENGTH",
    "common_words",
    "frequent_words",
    "variable_tracking",
    "zipf_counts",
]
