"""MemAgent: read a document chunk by chunk, rewriting a bounded memory, then answer.

For chunks ``c_1 .. c_K`` of the document (token-exact, ``chunk_tokens`` each) and a
question ``q``::

    m_0 = initial memory
    m_k = update(q, m_{k-1}, c_k)          k = 1 .. K   (|m_k| <= memory_tokens)
    answer = answer(q, m_K)

so time is linear and memory constant in the document length. With a backend that
supports constraints (the local backend) the memory holds verbatim text only: by default
(``memory_mode="score"``) ``m_k`` is the set of sentences of ``m_{k-1}`` and ``c_k``
that most raise the model's likelihood of ``q`` (:mod:`lc_agents.memagent.scoring`),
best first, within the token budget; with ``memory_mode="generate"`` the model writes
``m_k`` by copy-constrained generation, its tokens spans of ``c_k`` or ``m_{k-1}``
(:mod:`lc_agents.constrained`), and a reply equal to the keep word leaves the memory
unchanged.

Example:
    >>> from lc_agents import LocalBackend, MemAgent
    >>> agent = MemAgent(LocalBackend())  # doctest: +SKIP
    >>> result = agent.run(open("book.txt").read(), "Who wrote the letter?")  # doctest: +SKIP
    >>> result.answer, len(result.trace)  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lc_agents.backends.base import ChatBackend, Message
from lc_agents.constrained import SpanCopyConstraint
from lc_agents.errors import EmptyReplyError, InputError
from lc_agents.memagent.checkpoint import Checkpoint, MemoryStep
from lc_agents.memagent.config import MemAgentConfig
from lc_agents.memagent.scoring import QuestionScorer

__all__ = ["MemAgent", "MemAgentResult", "split_tokens"]

_SENTINEL = "\ue000CHUNK\ue000"


@dataclass(frozen=True)
class MemAgentResult:
    """Outcome of :meth:`MemAgent.run`.

    Attributes:
        answer: the final answer text.
        memory: the memory the answer was given from.
        trace: the memory after every chunk, in order.
        n_chunks: number of chunks the document was split into.
        document_tokens: length of the document in tokens.
        seconds: wall time of the whole run (s), including any resumed part.
        resumed_from: index of the first chunk read in this call (0 unless resumed).
    """

    answer: str
    memory: str
    trace: list[MemoryStep] = field(default_factory=list)
    n_chunks: int = 0
    document_tokens: int = 0
    seconds: float = 0.0
    resumed_from: int = 0


def split_tokens(ids: Sequence[int], chunk_tokens: int) -> list[list[int]]:
    """Split token ids into consecutive chunks of ``chunk_tokens`` (the last may be shorter).

    >>> split_tokens([1, 2, 3, 4, 5], 2)
    [[1, 2], [3, 4], [5]]
    """
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be >= 1, got {chunk_tokens}")
    return [list(ids[i : i + chunk_tokens]) for i in range(0, len(ids), chunk_tokens)]


class MemAgent:
    """Answer questions over documents of any length with a bounded, rewritten memory.

    Args:
        backend: any :class:`~lc_agents.backends.ChatBackend`. With
            ``supports_constraints`` (the local backend) prompts are built token-exactly
            and copy constraints apply.
        config: sizes, decoding mode and prompts.
        tokenizer: tokenizer counting chunk and memory tokens (default: the backend's, else
            the embedded SmolLM2 tokenizer).
    """

    def __init__(
        self,
        backend: ChatBackend,
        config: MemAgentConfig | None = None,
        *,
        tokenizer: Any = None,
    ) -> None:
        self.backend = backend
        self.config = config or MemAgentConfig()
        if tokenizer is None:
            tokenizer = getattr(backend, "tokenizer", None)
        if tokenizer is None:
            from lc_agents.models import load_tokenizer

            tokenizer = load_tokenizer()
        self.tokenizer = tokenizer
        self._sentence_ends: list[int] | None = None
        self._local = bool(getattr(backend, "supports_constraints", False)) and hasattr(
            backend, "generate_ids"
        )
        self._scorer: QuestionScorer | None = None
        model = getattr(backend, "model", None)
        if (
            self._local
            and self.config.copy_memory
            and self.config.memory_mode == "score"
            and model is not None
        ):
            self._scorer = QuestionScorer(model, self.tokenizer)

    # ------------------------------------------------------------------ public API
    def run(
        self,
        document: str,
        question: str,
        *,
        checkpoint: str | os.PathLike[str] | None = None,
        progress: bool = False,
        on_step: Callable[[MemoryStep], None] | None = None,
    ) -> MemAgentResult:
        """Read ``document`` chunk by chunk and answer ``question``.

        Args:
            document: the text to read (any length).
            question: what to answer.
            checkpoint: JSON file updated after every chunk; if it exists and matches this
                (document, question, config), reading resumes after its last chunk.
            progress: show a progress bar on stderr.
            on_step: called with each new :class:`MemoryStep`.

        Raises:
            InputError: empty document or question.
            CheckpointError: the checkpoint belongs to another run.
            EmptyReplyError: the model returned no answer.
        """
        if not document.strip():
            raise InputError("the document is empty")
        if not question.strip():
            raise InputError("the question is empty")
        start = time.perf_counter()
        ids = self._encode(document)
        chunks = split_tokens(ids, self.config.chunk_tokens)
        fp = self._fingerprint(document, question)
        state = Checkpoint.load(checkpoint, fp) if checkpoint is not None else None
        if state is None:
            state = Checkpoint(fingerprint=fp, n_chunks=len(chunks), memory="")
        resumed_from = state.next_chunk
        if self._scorer is not None:
            self._scorer.clear()
        bar = _Progress(len(chunks), resumed_from, enabled=progress)
        try:
            for k in range(resumed_from, len(chunks)):
                t0 = time.perf_counter()
                memory, kept = self.update(question, state.memory, chunks[k])
                step = MemoryStep(k, len(chunks[k]), memory, kept, time.perf_counter() - t0)
                state.memory = memory
                state.trace.append(step)
                if checkpoint is not None:
                    state.save(checkpoint)
                if on_step is not None:
                    on_step(step)
                bar.advance()
        finally:
            bar.close()
        answer = self.answer(question, state.memory)
        prior = sum(s.seconds for s in state.trace[:resumed_from])
        return MemAgentResult(
            answer=answer,
            memory=state.memory,
            trace=list(state.trace),
            n_chunks=len(chunks),
            document_tokens=len(ids),
            seconds=prior + time.perf_counter() - start,
            resumed_from=resumed_from,
        )

    def update(self, question: str, memory: str, chunk_ids: Sequence[int]) -> tuple[str, bool]:
        """One memory update: returns ``(new_memory, kept)`` for the chunk's token ids."""
        cfg = self.config
        if self._scorer is not None:
            return self._select(question, memory, chunk_ids)
        shown = memory if memory else cfg.initial_memory
        if self._local:
            constraint = None
            if cfg.copy_memory:
                candidates = self._candidates(question, chunk_ids)
                if not candidates:
                    return memory, True
                # Candidates passed the question filter, so the model must copy one of
                # them or the previous memory (which keeps it); no "none" reply here.
                sources = list(candidates)
                if memory:
                    sources.insert(0, self._encode(memory))
                constraint = SpanCopyConstraint(
                    sources,
                    separator_ids=self._separator_ids(),
                    end_ids=self.backend.end_ids,  # type: ignore[attr-defined]
                    max_spans=cfg.max_spans,
                    boundary_ids=self._sentence_end_ids() if cfg.whole_sentences else None,
                )
            prompt = self._prompt_ids(
                cfg.prompts.update, question=question, memory=shown, chunk=chunk_ids
            )
            if constraint is not None:
                prompt += self._encode(cfg.prompts.update_reply_prefix)
            out = self.backend.generate_ids(  # type: ignore[attr-defined]
                prompt, max_tokens=cfg.memory_tokens, constraint=constraint
            )
            reply = self.tokenizer.decode(out, skip_special_tokens=True).strip()
        else:
            chunk = self.tokenizer.decode(list(chunk_ids), skip_special_tokens=True)
            text = cfg.prompts.update.format(question=question, memory=shown, chunk=chunk)
            reply = self.backend.chat(self._messages(text), max_tokens=cfg.memory_tokens).strip()
        keep = _normalize(cfg.keep_word)
        lines = [ln.strip() for ln in reply.split("\n")]
        lines = [ln for ln in dict.fromkeys(lines) if ln and _normalize(ln) != keep]
        reply = "\n".join(lines)
        if not reply:
            return memory, True
        return self._fit_budget(reply), False

    def answer(self, question: str, memory: str) -> str:
        """The final answer from (question, memory).

        Raises:
            EmptyReplyError: the model returned nothing.
        """
        cfg = self.config
        shown = memory if memory else cfg.initial_memory
        if self._local:
            prompt = self._prompt_ids(cfg.prompts.answer, question=question, memory=shown)
            constraint = None
            if cfg.copy_answer and memory:
                lines = [line for line in memory.split("\n") if line.strip()]
                if self._scorer is not None:
                    lines = lines[:1]  # scored memories are kept best first
                    forced = self._forced_copy(lines[0])
                    if forced is not None:
                        return forced
                constraint = SpanCopyConstraint(
                    [self._encode(line) for line in lines],
                    end_ids=self.backend.end_ids,  # type: ignore[attr-defined]
                    max_spans=1,
                    boundary_ids=self._sentence_end_ids() if cfg.whole_sentences else None,
                )
            out = self.backend.generate_ids(  # type: ignore[attr-defined]
                prompt, max_tokens=cfg.answer_tokens, constraint=constraint
            )
            reply = self.tokenizer.decode(out, skip_special_tokens=True).strip()
        else:
            text = cfg.prompts.answer.format(question=question, memory=shown)
            reply = self.backend.chat(self._messages(text), max_tokens=cfg.answer_tokens).strip()
        if not reply:
            raise EmptyReplyError("the model returned an empty answer")
        return reply

    def scores(self, question: str, lines: Sequence[str]) -> list[float]:
        """The model's question-likelihood score of each line (nats; see ``scoring``).

        Raises:
            ValueError: the agent does not score (not ``memory_mode="score"`` with a local
                backend and ``copy_memory``).
        """
        if self._scorer is None:
            raise ValueError(
                "this MemAgent does not score sentences: it needs memory_mode='score', "
                "copy_memory=True and a local backend with a model"
            )
        return self._scorer.score(question, lines)

    # ------------------------------------------------------------------ internals
    def _select(self, question: str, memory: str, chunk_ids: Sequence[int]) -> tuple[str, bool]:
        """Score-mode update: keep the best-scoring sentences of memory + chunk in budget."""
        assert self._scorer is not None
        candidates = self._candidates(question, chunk_ids, sentences=True)
        new = [self.tokenizer.decode(c, skip_special_tokens=True).strip() for c in candidates]
        new = [line for line in new if line]
        if not new:
            return memory, True
        old = [line.strip() for line in memory.split("\n") if line.strip()]
        pool = list(dict.fromkeys([*old, *new]))
        scores = self._scorer.score(question, pool)
        # best first; ties keep the earlier line (the memory before the chunk)
        order = sorted(range(len(pool)), key=lambda i: -scores[i])
        kept: list[str] = []
        for i in order:
            if len(self._encode("\n".join([*kept, pool[i]]))) <= self.config.memory_tokens:
                kept.append(pool[i])
        if not kept:  # the best sentence alone is over budget: keep its head
            kept = [self._fit_budget(pool[order[0]])]
        updated = "\n".join(kept)
        return updated, updated == memory

    def _forced_copy(self, line: str) -> str | None:
        """``line`` if a whole-sentence copy of it can only be ``line`` itself, else None.

        With ``whole_sentences`` a copied span starts at the start of the line or after a
        sentence end and stops only after one; a line with no sentence end before its last
        token therefore admits exactly one non-empty copy, so no decoding is needed.
        """
        if not self.config.whole_sentences:
            return None
        ends = set(self._sentence_end_ids())
        ids = self._encode(line)
        if not ids or any(t in ends for t in ids[:-1]):
            return None
        return line.strip()

    def _encode(self, text: str) -> list[int]:
        return [int(t) for t in self.tokenizer.encode(text, add_special_tokens=False)]

    def _messages(self, user: str) -> list[Message]:
        msgs: list[Message] = []
        if self.config.prompts.system:
            msgs.append({"role": "system", "content": self.config.prompts.system})
        msgs.append({"role": "user", "content": user})
        return msgs

    def _prompt_ids(
        self, template: str, *, chunk: Sequence[int] | None = None, **kw: str
    ) -> list[int]:
        """Chat-formatted prompt ids with the chunk's own token ids spliced in exactly."""
        if chunk is None:
            return self.backend.prompt_ids(self._messages(template.format(**kw)))  # type: ignore[attr-defined]
        text = template.format(chunk=_SENTINEL, **kw)
        rendered = self.tokenizer.apply_chat_template(
            self._messages(text), add_generation_prompt=True, tokenize=False
        )
        before, after = rendered.split(_SENTINEL)
        return [*self._encode(before), *chunk, *self._encode(after)]

    def _candidates(
        self, question: str, chunk_ids: Sequence[int], *, sentences: bool = False
    ) -> list[list[int]]:
        """The chunk's sentences (token ids) that may be copied into the memory.

        Sentences are returned when ``whole_sentences`` or ``min_overlap`` is set, or
        ``sentences`` is true; otherwise the whole chunk is the one candidate.
        """
        split = sentences or self.config.whole_sentences or self.config.min_overlap > 0
        if not split:
            return [list(chunk_ids)]
        ends = set(self._sentence_end_ids())
        parts: list[list[int]] = [[]]
        for t in chunk_ids:
            parts[-1].append(int(t))
            if t in ends:
                parts.append([])
        parts = [p for p in parts if p]
        if self.config.min_overlap == 0:
            return parts
        words = _content_words(question)
        need = min(self.config.min_overlap, len(words))
        return [
            p
            for p in parts
            if len(words & _content_words(self.tokenizer.decode(p))) >= max(need, 1)
        ]

    def _sentence_end_ids(self) -> list[int]:
        """Ids of the tokens whose text ends a sentence (., !, ? or a newline)."""
        if self._sentence_ends is None:
            vocab = len(self.tokenizer)
            texts = self.tokenizer.batch_decode([[i] for i in range(vocab)])
            self._sentence_ends = [
                i for i, t in enumerate(texts) if t.rstrip(" ").endswith((".", "!", "?", "\n"))
            ]
        return self._sentence_ends

    def _separator_ids(self) -> list[int]:
        ids = self._encode("\n")
        return ids if len(ids) == 1 else []

    def _fit_budget(self, text: str) -> str:
        """Cut ``text`` so that it re-encodes to at most ``memory_tokens`` tokens."""
        budget = self.config.memory_tokens
        ids = self._encode(text)
        keep = min(len(ids), budget)
        while True:
            candidate = text if keep == len(ids) else self.tokenizer.decode(ids[:keep]).strip()
            if len(self._encode(candidate)) <= budget or keep == 0:
                return candidate
            keep -= 1

    def _fingerprint(self, document: str, question: str) -> str:
        h = hashlib.sha256()
        h.update(document.encode("utf-8"))
        h.update(b"\0" + question.encode("utf-8"))
        h.update(b"\0" + json.dumps(self.config.fingerprint_fields(), sort_keys=True).encode())
        return h.hexdigest()


_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "are",
        "was",
        "were",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "this",
        "that",
        "these",
        "those",
        "with",
        "from",
        "into",
        "about",
        "above",
        "below",
        "text",
        "mentioned",
        "is",
        "in",
        "of",
        "to",
        "a",
        "an",
        "it",
        "its",
        "be",
    ]
)


def _content_words(text: str) -> set[str]:
    """Lower-case words of 3+ letters/digits, plural 's' stripped, stop words removed."""
    import re

    words = {w.lower() for w in re.findall(r"[A-Za-z0-9]{3,}", text)}
    return {w[:-1] if w.endswith("s") and len(w) > 3 else w for w in words} - _STOP


def _normalize(text: str) -> str:
    return text.strip().strip(".!\"'").lower()


class _Progress:
    """A rich progress bar over chunks (no-op when disabled)."""

    def __init__(self, total: int, done: int, *, enabled: bool) -> None:
        self._bar: Any = None
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

        self._bar = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
        )
        self._bar.start()
        self._task = self._bar.add_task("reading chunks", total=total, completed=done)

    def advance(self) -> None:
        if self._bar is not None:
            self._bar.advance(self._task)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
