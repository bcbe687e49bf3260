"""The rewrite-everything baseline (Dynamic-Cheatsheet style cumulative memory).

After every task the model rewrites the whole memory from the old memory and the new
experience, and the new text replaces the old one. This is the design ACE replaces with
delta updates: each rewrite may silently drop details (context collapse).

Examples:
    >>> from lc_agents.ace import AceItem, Feedback, RewriteMemory
    >>> class Keep:  # a model that appends the latest lesson
    ...     def chat(self, messages, **options):
    ...         if "cheatsheet" in messages[0]["content"]:
    ...             old = messages[1]["content"].split("Current cheatsheet:\\n")[1].split("\\n\\n")[0]
    ...             return (old + " | learned").strip(" |")
    ...         return "Final answer: 4"
    >>> memory = RewriteMemory(Keep())
    >>> memory.adapt_online([AceItem("2+2?")], lambda item, g: Feedback(True, "ok")).correct
    1
    >>> memory.memory
    '(empty) | learned'
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lc_agents.ace.adapt import AceItem, AdaptReport, Feedback, FeedbackFn, exact_match
from lc_agents.ace.parsing import extract_answer
from lc_agents.ace.prompts import DEFAULT_PROMPTS, AcePrompts
from lc_agents.ace.roles import Generation, Generator
from lc_evals.types import ChatModel

__all__ = ["RewriteMemory"]


class RewriteMemory:
    """A single free-text memory rewritten in full after every task.

    Args:
        model: chat model for answering and rewriting.
        prompts: templates (the generator's and ``rewrite_*``).
        max_chars: the memory is cut to this many characters after a rewrite
            (``None``: no cut), mirroring a memory-size limit.
        options: chat options per role: ``{"generator": {...}, "rewrite": {...}}``.

    Attributes:
        memory: the current memory text.
        sizes: memory length (characters) after each rewrite.
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        prompts: AcePrompts = DEFAULT_PROMPTS,
        max_chars: int | None = None,
        options: Mapping[str, Mapping[str, Any]] | None = None,
        answer_parser: Callable[[str], str] = extract_answer,
    ) -> None:
        if max_chars is not None and max_chars < 1:
            raise ValueError(f"max_chars must be >= 1 or None, got {max_chars}")
        opts = dict(options or {})
        self.model = model
        self.prompts = prompts
        self.max_chars = max_chars
        self.memory = "(empty)"
        self.sizes: list[int] = []
        self.generator = Generator(
            model, prompts=prompts, options=opts.get("generator"), answer_parser=answer_parser
        )
        self.rewrite_options = dict(opts.get("rewrite") or {})

    def answer(self, question: str) -> Generation:
        """Answer with the current memory in place of a playbook."""
        return self.generator.answer(question, self.memory)

    def update(
        self, attempt: Generation, feedback: Feedback, *, ground_truth: str | None = None
    ) -> str:
        """Rewrite the memory after ``attempt``; returns the new memory."""
        user = self.prompts.rewrite_user.format(
            memory=self.memory,
            question=attempt.question,
            answer=attempt.answer,
            feedback=feedback.message,
            ground_truth=f"Correct answer: {ground_truth}\n" if ground_truth is not None else "",
        )
        reply = self.model.chat(
            [
                {"role": "system", "content": self.prompts.rewrite_system.format()},
                {"role": "user", "content": user},
            ],
            **self.rewrite_options,
        )
        text = reply.strip() or self.memory
        if self.max_chars is not None:
            text = text[: self.max_chars]
        self.memory = text
        self.sizes.append(len(text))
        return text

    def _loop(
        self, items: Sequence[AceItem], epochs: int, feedback: FeedbackFn, with_labels: bool
    ) -> AdaptReport:
        t0 = time.perf_counter()
        steps = []
        for epoch in range(epochs):
            for i, item in enumerate(items):
                attempt = self.answer(item.question)
                fb = feedback(item, attempt)
                self.update(attempt, fb, ground_truth=item.answer if with_labels else None)
                steps.append(
                    {
                        "item_id": item.id or str(i),
                        "epoch": epoch,
                        "prediction": attempt.answer,
                        "correct": fb.correct,
                    }
                )
        return AdaptReport(steps=steps, resumed=0, seconds=time.perf_counter() - t0)

    def adapt_offline(
        self,
        items: Sequence[AceItem],
        *,
        epochs: int = 1,
        scorer: Callable[[str, str], bool] = exact_match,
    ) -> AdaptReport:
        """Rewrite the memory over labelled ``items`` for ``epochs`` passes."""
        if epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {epochs}")

        def labelled(item: AceItem, attempt: Generation) -> Feedback:
            if item.answer is None:
                raise ValueError("offline adaptation needs labels")
            ok = scorer(attempt.answer, item.answer)
            return Feedback(ok, "correct" if ok else f"incorrect: expected {item.answer!r}")

        return self._loop(items, epochs, labelled, with_labels=True)

    def adapt_online(self, items: Sequence[AceItem], feedback: FeedbackFn) -> AdaptReport:
        """Answer each item, then rewrite the memory from ``feedback`` only."""
        return self._loop(items, 1, feedback, with_labels=False)
