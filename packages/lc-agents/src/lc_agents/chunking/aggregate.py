"""Ways to merge the workers' partial answers into one answer."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from lc_agents.chunking.prompts import MANAGER_TEMPLATE, fill

#: A custom aggregator: ``(question, worker answers in document order) -> final answer``.
AggregatorFn = Callable[[str, Sequence[str]], str]

DEFAULT_ABSTENTIONS: tuple[str, ...] = ("none", "na", "n/a", "no answer", "unknown", "")

_TRAILING = re.compile(r"[\s\.\,\;\:\!\?\"'`]+$")
_LEADING = re.compile(r"^[\s\"'`]+")


def normalise_answer(answer: str) -> str:
    """Case-folded answer with surrounding whitespace, quotes and end punctuation removed.

    Examples:
        >>> normalise_answer('  "Paris." ')
        'paris'
    """
    return _LEADING.sub("", _TRAILING.sub("", answer)).casefold()


def majority_vote(
    answers: Iterable[str],
    *,
    abstentions: Iterable[str] = DEFAULT_ABSTENTIONS,
    no_answer: str = "none",
) -> str:
    """The most frequent answer, comparing answers after :func:`normalise_answer`.

    Answers that normalise to one of ``abstentions`` ("none", "n/a", empty ...) do not vote.
    Ties go to the answer that appears first in ``answers`` (document order), so the
    result never depends on hashing or thread timing. The winner is returned as first
    written (stripped).

    Args:
        answers: the workers' answers in document order.
        abstentions: answers that mean "this chunk has nothing"; compared normalised.
        no_answer: returned when every worker abstained.

    Examples:
        >>> majority_vote(["none", "42", "41", "41", "42"])
        '42'
    """
    skip = {normalise_answer(a) for a in abstentions}
    counts: dict[str, int] = {}
    first: dict[str, tuple[int, str]] = {}
    for position, answer in enumerate(answers):
        key = normalise_answer(answer)
        if key in skip:
            continue
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, (position, answer.strip()))
    if not counts:
        return no_answer
    best = min(counts, key=lambda k: (-counts[k], first[k][0]))
    return first[best][1]


@dataclass(frozen=True)
class MajorityVote:
    """Aggregator object for :func:`majority_vote` (abstentions do not vote; ties go first).

    Examples:
        >>> MajorityVote()("q", ["none", "7", "none"])
        '7'
    """

    abstentions: tuple[str, ...] = DEFAULT_ABSTENTIONS
    no_answer: str = "none"

    def __call__(self, question: str, answers: Sequence[str]) -> str:
        return majority_vote(answers, abstentions=self.abstentions, no_answer=self.no_answer)


class ManagerAggregator:
    """A manager model reads the question and every worker's reply and writes the answer.

    Args:
        model: any chat model (``chat(messages, **options) -> str``).
        template: prompt with ``{question}`` and ``{responses}`` placeholders.
        options: generation options passed to ``model.chat``.

    Examples:
        >>> class Echo:
        ...     def chat(self, messages, **options):
        ...         return "7"
        >>> ManagerAggregator(Echo())("q", ["none", "7"])
        '7'
    """

    def __init__(
        self, model: Any, template: str = MANAGER_TEMPLATE, options: dict[str, Any] | None = None
    ) -> None:
        if not callable(getattr(model, "chat", None)):
            raise TypeError(
                f"manager model must have a chat(messages, **options) method, got {model!r}"
            )
        if "{responses}" not in template:
            raise ValueError("manager template must contain the {responses} placeholder")
        self.model = model
        self.template = template
        self.options = dict(options or {})

    def prompt(self, question: str, answers: Sequence[str]) -> str:
        """The manager's prompt: replies numbered in document order."""
        responses = "\n".join(f"#{i + 1}: {a.strip()}" for i, a in enumerate(answers))
        return fill(self.template, question=question, responses=responses)

    def __call__(self, question: str, answers: Sequence[str]) -> str:
        reply = self.model.chat(
            [{"role": "user", "content": self.prompt(question, answers)}], **self.options
        )
        return str(reply).strip()
