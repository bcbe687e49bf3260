"""Structural alignment: keep only examples shaped like the query.

Similarity retrieval finds examples about the same thing as the query, but some of them
ask a different kind of question: their sentence structure differs (a yes/no question
where the query is a statement, an instruction where it is a question) or their label
comes from another label space. ContextNav filters both before selection.

The structure of a text is summarised by a :class:`Signature`: its *mood* (``question``,
``instruction`` or ``statement``, from the final punctuation and the first word) and its
*layout* (``lines``: one line, or several ``key: value`` lines, or free multi-line
text). Any function ``text -> hashable`` can replace :func:`signature`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass

from lc_agents.contextnav.items import Candidate

__all__ = [
    "Signature",
    "filter_label_space",
    "filter_structure",
    "infer_label_space",
    "signature",
]

_QUESTION_WORDS = frozenset(
    [
        "who",
        "what",
        "when",
        "where",
        "why",
        "how",
        "which",
        "whose",
        "whom",
        "is",
        "are",
        "was",
        "were",
        "do",
        "does",
        "did",
        "can",
        "could",
        "will",
        "would",
        "should",
        "shall",
        "may",
        "might",
        "has",
        "have",
        "had",
        "am",
    ]
)
_IMPERATIVE_WORDS = frozenset(
    [
        "give",
        "list",
        "name",
        "write",
        "find",
        "tell",
        "describe",
        "explain",
        "classify",
        "translate",
        "summarize",
        "summarise",
        "compute",
        "calculate",
        "choose",
        "select",
        "return",
        "show",
        "please",
        "answer",
        "identify",
    ]
)
_KEY_VALUE = re.compile(r"^\s*[\w ]{1,30}:\s*\S")


@dataclass(frozen=True)
class Signature:
    """The structural summary of a text (see the module docs)."""

    mood: str
    layout: str


def signature(text: str) -> Signature:
    """Mood and layout of ``text``.

    Examples:
        >>> signature("Was I charged twice?").mood
        'question'
        >>> signature("I was charged twice.").mood
        'statement'
        >>> signature("List the charges.").mood
        'instruction'
        >>> signature("Name: Ann\\nAge: 3").layout
        'key_value'
    """
    stripped = text.strip()
    words = re.findall(r"[A-Za-z']+", stripped.lower())
    first = words[0] if words else ""
    if stripped.endswith("?"):
        mood = "question"
    elif first in _IMPERATIVE_WORDS and not re.match(r"^\s*\w+\s*:", stripped):
        mood = "instruction"
    elif first in _QUESTION_WORDS and not stripped.endswith("."):
        mood = "question"
    else:
        mood = "statement"
    lines = [ln for ln in stripped.splitlines() if ln.strip()]
    if len(lines) <= 1:
        layout = "single_line"
    elif all(_KEY_VALUE.match(ln) for ln in lines):
        layout = "key_value"
    else:
        layout = "multi_line"
    return Signature(mood=mood, layout=layout)


def filter_structure(
    query_text: str,
    candidates: Sequence[Candidate],
    *,
    signature_fn: Callable[[str], Hashable] = signature,
) -> list[Candidate]:
    """Candidates whose text has the same structural signature as ``query_text``.

    Examples:
        >>> import numpy as np
        >>> from lc_agents.contextnav.items import ContextItem
        >>> c = [Candidate(ContextItem(str(i), t, "x"), 1.0, np.zeros(2))
        ...      for i, t in enumerate(["Was it late?", "It was late."])]
        >>> [x.item.text for x in filter_structure("My box is late.", c)]
        ['It was late.']
    """
    want = signature_fn(query_text)
    return [c for c in candidates if signature_fn(c.item.text) == want]


def filter_label_space(
    candidates: Sequence[Candidate], label_space: Iterable[str] | None
) -> list[Candidate]:
    """Candidates whose label lies in ``label_space`` (case-insensitive); all when ``None``."""
    if label_space is None:
        return list(candidates)
    allowed = {str(x).strip().lower() for x in label_space}
    return [
        c
        for c in candidates
        if c.item.label is not None and c.item.label.strip().lower() in allowed
    ]


def infer_label_space(
    query_text: str,
    candidates: Sequence[Candidate],
    *,
    signature_fn: Callable[[str], Hashable] = signature,
    min_share: float = 0.1,
) -> tuple[str, ...]:
    """Labels of the structurally aligned candidates that make up at least ``min_share``
    of them: an estimate of the query's label space when none is given.

    Returns:
        The labels, most frequent first (empty when no candidate is aligned).
    """
    from collections import Counter

    aligned = filter_structure(query_text, candidates, signature_fn=signature_fn)
    counts = Counter(c.item.label for c in aligned if c.item.label is not None)
    total = sum(counts.values())
    return tuple(lab for lab, n in counts.most_common() if total and n / total >= min_share)
