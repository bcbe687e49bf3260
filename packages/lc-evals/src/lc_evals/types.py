"""The data every task generator produces and every system under test consumes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable


class Message(TypedDict):
    """One chat message, as in the OpenAI chat-completions API."""

    role: Literal["system", "user", "assistant"]
    content: str


@runtime_checkable
class ChatModel(Protocol):
    """The smallest interface a chat model must offer to be evaluated.

    lc-evals never imports a model library: any object with this method works, for
    example an lc-agents backend or a thin wrapper around an HTTP client.
    """

    def chat(self, messages: Sequence[Message], **options: Any) -> str:
        """Return the assistant's reply to ``messages``.

        ``options`` are generation settings such as ``max_tokens`` or ``temperature``.
        """
        ...


@runtime_checkable
class Tokenizer(Protocol):
    """Anything with ``encode(text) -> list[int]``; Hugging Face tokenizers qualify."""

    def encode(self, text: str, /) -> list[int]: ...


@dataclass(frozen=True)
class TaskItem:
    """One evaluation item.

    Attributes:
        id: stable identifier, unique within a suite (``"<task>-<seed>-<index>"``).
        task: name of the task that generated the item.
        context: the long input (haystack, document, k-shot prompt ...).
        question: what is asked about ``context``.
        answers: every acceptable answer; scorers compare the prediction against these.
        metadata: generator facts (target length, measured length, depth, seed ...).
    """

    id: str
    task: str
    context: str
    question: str
    answers: tuple[str, ...]
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.answers:
            raise ValueError(f"TaskItem {self.id!r}: answers must not be empty")
        if not all(isinstance(a, str) for a in self.answers):
            raise ValueError(f"TaskItem {self.id!r}: answers must be strings, got {self.answers!r}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable view (used by the JSONL writers)."""
        return {
            "id": self.id,
            "task": self.task,
            "context": self.context,
            "question": self.question,
            "answers": list(self.answers),
            "metadata": self.metadata,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskItem:
        """Inverse of :meth:`to_dict`; raises ``ValueError`` naming a missing field."""
        missing = {"id", "task", "context", "question", "answers"} - data.keys()
        if missing:
            raise ValueError(f"task item is missing field(s) {sorted(missing)}")
        return cls(
            id=str(data["id"]),
            task=str(data["task"]),
            context=str(data["context"]),
            question=str(data["question"]),
            answers=tuple(data["answers"]),
            metadata=dict(data.get("metadata", {})),
        )
