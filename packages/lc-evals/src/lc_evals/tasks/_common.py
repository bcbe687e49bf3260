"""Helpers shared by the task generators: seeding, option checks, values, length
fitting, prompts and items."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from lc_evals import words as W
from lc_evals.length import (
    Fitted,
    Insert,
    Measure,
    fit_context,
    fit_count,
    length_unit,
    make_measure,
)
from lc_evals.prompts import PROMPT_TEMPLATE, RULER_TEMPLATES
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


TEMPLATES: tuple[str, ...] = ("plain", "ruler")
"""Prompt wordings of the RULER tasks: lc-evals' own question after the context, or RULER's."""


def haystack_separator(template: str, haystack: str) -> str:
    """What joins the haystack's sentences: RULER puts its noise and needle haystacks on
    lines of their own (``template="ruler"``); spaces otherwise."""
    return "\n" if template == "ruler" and haystack in ("repeat", "needles") else " "


LENGTH_COUNTS: tuple[str, ...] = ("context", "prompt")
"""What the target length counts: the context alone, or the whole rendered prompt."""


@dataclass(frozen=True)
class ItemPrompt:
    """An item's prompt around its context: question, template and answer prefix.

    ``template`` is a format string with ``{context}`` and ``{question}``; the plain one
    (:data:`~lc_evals.prompts.PROMPT_TEMPLATE`) is not recorded on the item.

    Examples:
        >>> ItemPrompt("Q?", "Read.\\n{context}\\n{question}", " A:").render("text")
        'Read.\\ntext\\nQ? A:'
    """

    question: str
    template: str = PROMPT_TEMPLATE
    answer_prefix: str = ""

    def render(self, context: str) -> str:
        """The whole prompt for ``context``, as :func:`~lc_evals.render_prompt` makes it."""
        return self.template.format(context=context, question=self.question) + self.answer_prefix

    def metadata(self) -> dict[str, str]:
        """The item metadata that makes :func:`~lc_evals.render_prompt` use this prompt."""
        if self.template == PROMPT_TEMPLATE and not self.answer_prefix:
            return {}
        return {"prompt_template": self.template, "answer_prefix": self.answer_prefix}


@dataclass(frozen=True)
class Draft:
    """One item as a generator drew it, before its id and length facts are added:
    the context, its length as the sizer's counter measured it, the prompt, the
    answers and the task's own metadata (kept in its order)."""

    context: str
    measured: int
    prompt: ItemPrompt
    answers: Iterable[str]
    metadata: dict[str, Any]

    @classmethod
    def of(
        cls, fitted: Fitted, prompt: ItemPrompt, answers: Iterable[str], **metadata: Any
    ) -> Draft:
        """The draft of a context fitted by :meth:`Sizer.fit`."""
        return cls(fitted.context, fitted.length, prompt, answers, metadata)


@dataclass(frozen=True)
class Sizer:
    """How a generator fits its items to the target length: one helper for every task.

    It measures in tokens of the tokenizer (characters without one) and counts, per
    ``counts``, the context alone or the whole prompt of the item (instruction, context,
    question and answer prefix, measured whole) plus ``reserve`` units kept free for
    the answer, as RULER counts its length.
    """

    measure: Measure
    unit: str
    target: int
    counts: str = "context"
    reserve: int = 0

    @classmethod
    def of(
        cls, tokenizer: Any, length: int, *, length_counts: str = "context", reserve: int = 0
    ) -> Sizer:
        """The sizer of ``length`` units of ``tokenizer``; checks the options."""
        check_choice("length_counts", length_counts, LENGTH_COUNTS)
        check_int("reserve", reserve, 0)
        if reserve and length_counts != "prompt":
            raise ValueError(f"reserve={reserve} needs length_counts='prompt'")
        return cls(make_measure(tokenizer), length_unit(tokenizer), length, length_counts, reserve)

    def counter(self, prompt: ItemPrompt) -> Measure:
        """``context -> counted length`` for an item with ``prompt``."""
        if self.counts == "context":
            return self.measure
        head, tail = prompt.render("\0").split("\0")
        measure, reserve = self.measure, self.reserve
        return lambda context: measure(head + context + tail) + reserve

    def _what(self, what: str) -> str:
        if self.counts == "context":
            return what
        return f"{what}, the prompt around the context and {self.reserve} reserved {self.unit}"

    def fit(
        self,
        sentences: Iterator[str],
        inserts: Sequence[Insert],
        prompt: ItemPrompt,
        *,
        what: str,
        prefix: str = "",
        sep: str = " ",
    ) -> Fitted:
        """:func:`~lc_evals.length.fit_context` under this sizer's count."""
        return fit_context(
            sentences,
            inserts,
            self.target,
            self.counter(prompt),
            prefix=prefix,
            sep=sep,
            what=self._what(what),
            unit=self.unit,
        )

    def fit_count(
        self, build: Callable[[int], str], prompt: ItemPrompt, *, minimum: int, what: str
    ) -> tuple[int, str, int]:
        """:func:`~lc_evals.length.fit_count` under this sizer's count."""
        return fit_count(
            build, self.target, self.counter(prompt), minimum=minimum, what=self._what(what)
        )

    def items(
        self, task: str, n: int, seed: int, draft: Callable[[random.Random, int], Draft]
    ) -> list[TaskItem]:
        """Items ``0 .. n-1`` of ``task``: ``draft(rng, index)`` draws each from its own
        seeded stream (:func:`item_rng`) and :meth:`item` completes it."""
        items = []
        for index in range(n):
            d = draft(item_rng(task, seed, index), index)
            items.append(
                self.item(
                    task,
                    seed,
                    index,
                    context=d.context,
                    prompt=d.prompt,
                    answers=d.answers,
                    measured=d.measured,
                    **d.metadata,
                )
            )
        return items

    def item(
        self,
        task: str,
        seed: int,
        index: int,
        *,
        context: str,
        prompt: ItemPrompt,
        answers: Iterable[str],
        measured: int,
        **metadata: Any,
    ) -> TaskItem:
        """The item, with the length facts of this sizer and the prompt's metadata.

        ``measured`` is what the counter gave; ``metadata["length"]`` is the context's
        length, or the whole prompt's (without the reserve) when the prompt is counted.
        """
        extra: dict[str, Any] = dict(prompt.metadata())
        if self.counts == "prompt":
            extra.update(length_counts="prompt", reserve=self.reserve)
            measured -= self.reserve
        return build_item(
            task,
            seed,
            index,
            context=context,
            question=prompt.question,
            answers=answers,
            target_length=self.target,
            measured_length=measured,
            unit=self.unit,
            **extra,
            **metadata,
        )


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def ruler_prompt(
    name: str,
    *,
    head: str = "",
    replace: Sequence[tuple[str, str]] = (),
    **fields: Any,
) -> ItemPrompt:
    """RULER's prompt ``name`` (a key of :data:`~lc_evals.prompts.RULER_TEMPLATES`) with
    ``fields`` filled in and the context left open.

    ``replace`` rewrites template and answer prefix first (RULER's singular wording when
    one NIAH answer is asked); ``head`` goes before the instruction (a one-shot example).
    The question is the template's last line, without its ``"Question: "`` label.

    Examples:
        >>> p = ruler_prompt("qa", query="Who?")
        >>> p.question, p.answer_prefix
        ('Who?', ' Answer:')
        >>> p.render("DOCS").endswith("DOCS\\n\\nAnswer the question based on the given "
        ...     "documents. Only give me the answer and do not output any other words.\\n\\n"
        ...     "Question: Who? Answer:")
        True
    """
    spec = RULER_TEMPLATES[name]
    template, prefix = spec.template, spec.answer_prefix
    for old, new in replace:
        template, prefix = template.replace(old, new), prefix.replace(old, new)
    marker = "\0"
    filled = template.format(context=marker, **fields)
    question = filled.rsplit("\n", 1)[1].removeprefix("Question: ")
    body = _escape(filled[: len(filled) - len(question)]).replace(marker, "{context}")
    return ItemPrompt(question, _escape(head) + body + "{question}", prefix.format(**fields))
