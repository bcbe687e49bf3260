"""Question answering over a few passages: the gold one among near-miss distractors.

Each item asks for one attribute (a four-digit number) of one entity, e.g. "What is the
access code of the quiet harbor?". The context is a list of short passages, separated by
blank lines, in a seeded order:

- one **gold** passage stating the answer ("The access code of the quiet harbor is 4821.");
- ``distractors`` **near-miss** passages that look like the gold one to a retriever but
  state another number: the same attribute of an entity sharing its noun ("... of the
  golden harbor is 7730.") or its adjective ("... of the quiet tower ..."), or another
  attribute of the same entity ("The gate number of the quiet harbor is 1290.");
- **irrelevant** passages about other entities and attributes, ``irrelevant`` of them or,
  when ``None``, as many as fit in ``length``.

Every passage ends with ``filler_sentences`` sentences of essay prose. All numbers in an
item are distinct, so a reply naming a distractor's number is wrong under any scorer.
The passages, their kinds and the gold index are in ``metadata`` so that retrieval
methods (top-k, learned selectors) can work on passages rather than on the joined text.
This is the test bed of distraction-aware retrieval (LDAR): more passages raise the
chance of including the gold one and the number of distractors together.
"""

from __future__ import annotations

import functools
import random
from typing import Any

from lc_evals import words as W
from lc_evals.haystack import essay_sentences
from lc_evals.tasks._common import (
    TEMPLATES,
    Draft,
    ItemPrompt,
    Sizer,
    check_choice,
    check_int,
    ruler_prompt,
)
from lc_evals.types import TaskItem

TASK = "distractor_qa"

ATTRIBUTES: tuple[str, ...] = (
    "access code",
    "gate number",
    "room number",
    "locker number",
    "permit number",
    "serial number",
    "ticket number",
    "badge number",
)
"""Attributes asked about; every value is a four-digit number."""

FACT_TEMPLATE = "The {attribute} of the {entity} is {value}."
QUESTION_TEMPLATE = "What is the {attribute} of the {entity}?"
SEPARATOR = "\n\n"
DOCUMENT_TEMPLATE = "Document {i}:\n{document}"
"""RULER's QA document format (NVIDIA/RULER, scripts/data/synthetic/qa.py)."""
NEAR_MISS_KINDS: tuple[str, ...] = ("same_noun", "same_adjective", "other_attribute")
"""The three kinds of near-miss distractor, used in turn."""


def fact_text(attribute: str, entity: str, value: str) -> str:
    """The sentence stating ``attribute`` of ``entity``.

    Examples:
        >>> fact_text("access code", "quiet harbor", "4821")
        'The access code of the quiet harbor is 4821.'
    """
    return FACT_TEMPLATE.format(attribute=attribute, entity=entity, value=value)


def _passage(fact: str, filler: Any, sentences: int) -> str:
    return " ".join([fact, *(next(filler) for _ in range(sentences))])


def _other(rng: random.Random, pool: tuple[str, ...], exclude: set[str]) -> str:
    choices = [w for w in pool if w not in exclude]
    return rng.choice(choices)


def _new_value(rng: random.Random, used: set[str]) -> str:
    """A four-digit number not in ``used`` (added to it)."""
    while True:
        v = str(rng.randint(1000, 9999))
        if v not in used:
            used.add(v)
            return v


def _irrelevant(
    rng: random.Random,
    used: set[str],
    filler: Any,
    sentences: int,
    adjective: str,
    noun: str,
    attribute: str,
) -> tuple[str, str]:
    """A passage sharing neither adjective, noun nor attribute with the asked fact."""
    adj = _other(rng, W.ADJECTIVES, {adjective})
    nn = _other(rng, W.NOUNS, {noun})
    attr = _other(rng, ATTRIBUTES, {attribute})
    fact = fact_text(attr, f"{adj} {nn}", _new_value(rng, used))
    return _passage(fact, filler, sentences), "irrelevant"


def _joined(passages: list[tuple[str, str]]) -> str:
    return SEPARATOR.join(p for p, _ in passages)


def _documents(passages: list[tuple[str, str]]) -> str:
    """RULER's QA context: ``Document i:`` and the passage, blank lines between."""
    return SEPARATOR.join(
        DOCUMENT_TEMPLATE.format(i=i + 1, document=p) for i, (p, _) in enumerate(passages)
    )


def distractor_qa(
    n: int,
    length: int,
    seed: int,
    tokenizer: Any = None,
    *,
    distractors: int = 3,
    irrelevant: int | None = None,
    filler_sentences: int = 1,
    template: str = "plain",
    length_counts: str = "context",
    reserve: int = 0,
) -> list[TaskItem]:
    """QA items whose gold passage sits among near-miss distractors and irrelevant text.

    Args:
        n: number of items.
        length: cap on the context length (tokens of ``tokenizer``, else characters).
            With ``irrelevant=None`` irrelevant passages are added while they fit.
        seed: explicit seed; item ``i`` does not depend on ``n``.
        tokenizer: anything with ``encode``; ``None`` measures characters.
        distractors: number of near-miss passages (>= 0).
        irrelevant: exact number of irrelevant passages, or ``None`` to fill ``length``.
        filler_sentences: essay sentences appended to every passage (>= 0).
        template: ``"plain"`` (passages between blank lines, the question after them) or
            ``"ruler"`` (RULER's QA prompt: ``Document i:`` before every passage, its
            instruction before and after the documents, its answer prefix).
        length_counts: ``"context"`` or ``"prompt"`` (the whole prompt plus
            ``reserve`` units must fit ``length``).
        reserve: units kept free for the answer when the prompt is counted.

    Returns:
        Items with ``metadata["passages"]`` (context order), ``metadata["kinds"]``
        (``"gold"``, ``"near_miss"`` or ``"irrelevant"`` per passage),
        ``metadata["gold_index"]`` and ``metadata["distractor_values"]``.

    Raises:
        ValueError: bad option values, or the gold and near-miss passages (plus an exact
            ``irrelevant`` count) do not fit in ``length``.

    Examples:
        >>> item = distractor_qa(1, 2000, seed=0, distractors=3, irrelevant=4)[0]
        >>> len(item.metadata["passages"]), item.metadata["kinds"].count("near_miss")
        (8, 3)
        >>> item.answers[0] in item.metadata["passages"][item.metadata["gold_index"]]
        True
    """
    check_int("distractors", distractors, 0)
    check_int("filler_sentences", filler_sentences, 0)
    if irrelevant is not None:
        check_int("irrelevant", irrelevant, 0)
    check_choice("template", template, TEMPLATES)
    sizer = Sizer.of(tokenizer, length, length_counts=length_counts, reserve=reserve)
    unit = sizer.unit
    join = _documents if template == "ruler" else _joined

    def draft(rng: random.Random, index: int) -> Draft:
        filler = essay_sentences(rng)
        adjective, noun = rng.choice(W.ADJECTIVES), rng.choice(W.NOUNS)
        attribute = rng.choice(ATTRIBUTES)
        used_values: set[str] = set()
        answer = _new_value(rng, used_values)
        entity = f"{adjective} {noun}"
        passages = [
            (_passage(fact_text(attribute, entity, answer), filler, filler_sentences), "gold")
        ]
        used_facts = {(attribute, entity)}
        distractor_values = []
        for j in range(distractors):
            kind = NEAR_MISS_KINDS[j % len(NEAR_MISS_KINDS)]
            for _ in range(1000):
                attr, adj, nn = attribute, adjective, noun
                if kind == "same_noun":
                    adj = _other(rng, W.ADJECTIVES, {adjective})
                elif kind == "same_adjective":
                    nn = _other(rng, W.NOUNS, {noun})
                else:
                    attr = _other(rng, ATTRIBUTES, {attribute})
                if (attr, f"{adj} {nn}") not in used_facts:
                    break
            used_facts.add((attr, f"{adj} {nn}"))
            v = _new_value(rng, used_values)
            distractor_values.append(v)
            fact = fact_text(attr, f"{adj} {nn}", v)
            passages.append((_passage(fact, filler, filler_sentences), "near_miss"))

        irrelevant_passage = functools.partial(
            _irrelevant, rng, used_values, filler, filler_sentences, adjective, noun, attribute
        )

        question = QUESTION_TEMPLATE.format(attribute=attribute, entity=entity)
        prompt = ruler_prompt("qa", query=question) if template == "ruler" else ItemPrompt(question)
        counter = sizer.counter(prompt)

        def size(passages: list[tuple[str, str]], counter: Any = counter) -> int:
            return int(counter(join(passages)))

        if size(passages) > length:
            raise ValueError(
                f"length={length} {unit} cannot hold the gold passage and {distractors} "
                f"near-miss distractors ({size(passages)} {unit})"
            )
        if irrelevant is not None:
            passages += [irrelevant_passage() for _ in range(irrelevant)]
            if size(passages) > length:
                raise ValueError(
                    f"length={length} {unit} cannot hold {len(passages)} passages "
                    f"({size(passages)} {unit}); lower irrelevant or raise length"
                )
        else:
            while True:
                extra = irrelevant_passage()
                if size([*passages, extra]) > length:
                    break
                passages.append(extra)
        order = list(range(len(passages)))
        rng.shuffle(order)
        ordered = [passages[i] for i in order]
        context = join(ordered)
        return Draft(
            context,
            counter(context),
            prompt,
            (answer,),
            {
                "passages": [p for p, _ in ordered],
                "kinds": [k for _, k in ordered],
                "gold_index": order.index(0),
                "distractor_values": distractor_values,
                "entity": entity,
                "attribute": attribute,
            },
        )

    return sizer.items(TASK, n, seed, draft)
