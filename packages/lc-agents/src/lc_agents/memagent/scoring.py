"""Question-likelihood scores of candidate memory sentences under the agent's own model.

For a question ``q`` and a sentence ``s`` the score is the pointwise mutual information
the language model assigns between them,

    score(s) = log p("\\nQuestion: " q | "Note: " s) - log p("\\nQuestion: " q | "Note:")

(summed over the tokens of the question line, in nats). A sentence that names the key
the question asks about (``... for huge-canyon is: 5081235.`` for *What is the number
for huge-canyon?*) makes the question much more predictable than a sentence about another
key, so the score separates the needle from distractor needles that share every other
word. This is classic query-likelihood retrieval with the agent's LM as the scorer; the
subtracted baseline is constant per question, so it changes no ranking, only makes the
scores readable (0 = the sentence does not help predict the question).

Example:
    >>> from lc_agents import LocalBackend
    >>> from lc_agents.memagent.scoring import QuestionScorer
    >>> backend = LocalBackend()  # doctest: +SKIP
    >>> scorer = QuestionScorer(backend.model, backend.tokenizer)  # doctest: +SKIP
    >>> question = "What is the special magic number for huge-canyon?"
    >>> notes = [
    ...     "One of the special magic numbers for huge-canyon is: 5081235.",
    ...     "One of the special magic numbers for rude-carriage is: 6456336.",
    ... ]
    >>> first, second = scorer.score(question, notes)  # doctest: +SKIP
    >>> first > second + 5  # nats: the asked key wins  # doctest: +SKIP
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["QuestionScorer"]

NOTE_PREFIX = "Note:"
QUESTION_PREFIX = "\nQuestion: "


class QuestionScorer:
    """Scores sentences by how much they raise the model's likelihood of the question.

    Scores are cached per (question, sentence), so a memory line is scored once per
    run however many updates it survives.

    Args:
        model: a causal LM (``model(input_ids, attention_mask=...).logits``).
        tokenizer: its tokenizer.
        batch_size: sentences scored per forward pass (> 0).
    """

    def __init__(self, model: Any, tokenizer: Any, *, batch_size: int = 16) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self._cache: dict[tuple[str, str], float] = {}
        self._baseline: dict[str, float] = {}
        self._keeps_logits: bool | None = None

    def clear(self) -> None:
        """Forget cached scores (call between documents to bound the cache)."""
        self._cache.clear()
        self._baseline.clear()

    def score(self, question: str, sentences: Sequence[str]) -> list[float]:
        """PMI of ``question`` with each sentence (nats; higher = more relevant).

        Args:
            question: the question text.
            sentences: the sentences (surrounding whitespace is ignored).

        Returns:
            One float per sentence, in order.
        """
        keys = [(question, s.strip()) for s in sentences]
        todo = list(dict.fromkeys(k for k in keys if k not in self._cache))
        if todo:
            q_ids = self._encode(QUESTION_PREFIX + question.strip())
            if question not in self._baseline:
                self._baseline[question] = self._logprobs([self._encode(NOTE_PREFIX)], q_ids)[0]
            base = self._baseline[question]
            for i in range(0, len(todo), self.batch_size):
                batch = todo[i : i + self.batch_size]
                contexts = [self._encode(f"{NOTE_PREFIX} {k[1]}") for k in batch]
                for k, lp in zip(batch, self._logprobs(contexts, q_ids), strict=True):
                    self._cache[k] = lp - base
        return [self._cache[k] for k in keys]

    # ------------------------------------------------------------------ internals
    def _encode(self, text: str) -> list[int]:
        return [int(t) for t in self.tokenizer.encode(text, add_special_tokens=False)]

    def _logprobs(self, contexts: list[list[int]], target: list[int]) -> list[float]:
        """log p(target | context) for each context, one left-padded forward pass.

        Left padding puts the target at the end of every row, so the model computes
        logits for the last ``len(target) + 1`` positions only (``logits_to_keep``), not
        ``[rows, width, vocab]``; positions count from each row's first real token.
        """
        import torch

        from lc_agents.backends.local import takes_logits_to_keep

        if self._keeps_logits is None:
            self._keeps_logits = takes_logits_to_keep(self.model)
        rows = [[*c, *target] for c in contexts]
        width = max(len(r) for r in rows)
        n = len(target)
        device = next(self.model.parameters()).device
        ids = torch.zeros((len(rows), width), dtype=torch.long, device=device)
        mask = torch.zeros((len(rows), width), dtype=torch.long, device=device)
        for i, r in enumerate(rows):
            ids[i, width - len(r) :] = torch.tensor(r, dtype=torch.long)
            mask[i, width - len(r) :] = 1
        kwargs: dict[str, Any] = {"position_ids": (mask.cumsum(-1) - 1).clamp(min=0)}
        if self._keeps_logits:
            kwargs["logits_to_keep"] = n + 1
        with torch.inference_mode():
            logits = self.model(input_ids=ids, attention_mask=mask, **kwargs).logits
        # the logits at position j predict token j + 1: the n positions before the last
        logp = logits[:, -(n + 1) : -1].float().log_softmax(-1)
        tgt = torch.tensor(target, dtype=torch.long, device=device).expand(len(rows), n)
        return logp.gather(-1, tgt[..., None]).squeeze(-1).sum(-1).tolist()
