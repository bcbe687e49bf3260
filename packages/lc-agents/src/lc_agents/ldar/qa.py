"""The downstream reader LDAR is trained against: a chat model answering from passages."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from lc_evals import ChatModel, Message

__all__ = ["QaReader", "first_answer_correct", "qa_messages"]

SYSTEM = "Answer the question from the passages. Reply with the answer only."


def qa_messages(question: str, passages: Sequence[str], *, system: str = SYSTEM) -> list[Message]:
    """Chat messages: numbered passages, then the question.

    Examples:
        >>> qa_messages("Q?", ["a", "b"])[1]["content"]
        'Passages:\\n[1] a\\n[2] b\\n\\nQuestion: Q?'
    """
    body = "\n".join(f"[{i + 1}] {p}" for i, p in enumerate(passages))
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": f"Passages:\n{body}\n\nQuestion: {question}"},
    ]


_NUMBER = re.compile(r"\d+")


def first_answer_correct(reply: str, answers: Sequence[str]) -> bool:
    """Whether the reply's answer is right.

    When every answer is a number the first number in the reply must equal one (so a
    reply quoting a distractor's number first is wrong); otherwise some answer must
    occur in the reply (case-insensitive).

    Examples:
        >>> first_answer_correct("The code is 4821.", ["4821"])
        True
        >>> first_answer_correct("7730 or 4821", ["4821"])
        False
    """
    if not answers:
        raise ValueError("answers must not be empty")
    if all(a.strip().isdigit() for a in answers):
        m = _NUMBER.search(reply)
        return m is not None and m.group(0) in {a.strip() for a in answers}
    low = reply.lower()
    return any(a.lower() in low for a in answers)


class QaReader:
    """Asks a chat model a question over chosen passages and scores the reply.

    Args:
        model: any chat model (``chat(messages, **options) -> str``).
        count_tokens: ``text -> int`` used for token accounting (e.g. the backend's
            ``count_tokens``); default: whitespace words.
        max_tokens: reply cap.
        correct_fn: ``(reply, answers) -> bool`` (default :func:`first_answer_correct`).
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        count_tokens: Callable[[str], int] | None = None,
        max_tokens: int = 8,
        correct_fn: Callable[[str, Sequence[str]], bool] = first_answer_correct,
    ) -> None:
        self.model = model
        self.count_tokens = count_tokens or (lambda text: len(text.split()))
        self.max_tokens = max_tokens
        self.correct_fn = correct_fn

    def reply(self, question: str, passages: Sequence[str]) -> str:
        return self.model.chat(qa_messages(question, passages), max_tokens=self.max_tokens)

    def correct(self, question: str, passages: Sequence[str], answers: Sequence[str]) -> bool:
        """Whether the model answers ``question`` right from ``passages``."""
        return self.correct_fn(self.reply(question, passages), answers)

    def passage_tokens(self, passages: Sequence[str]) -> int:
        """Tokens of the passages block of the prompt."""
        return self.count_tokens("\n".join(f"[{i + 1}] {p}" for i, p in enumerate(passages)))
