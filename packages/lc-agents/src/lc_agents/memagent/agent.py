"""MemAgent: read a document chunk by chunk, rewriting a bounded memory, then answer.

For chunks ``c_1 .. c_K`` of the document (token-exact, ``chunk_tokens`` each) and a
question ``q``::

    m_0 = initial memory
    m_k = update(q, m_{k-1}, c_k)          k = 1 .. K   (|m_k| <= memory_tokens)
    answer = answer(q, m_K)

so time is linear and memory constant in the document length: the document is
tokenized as a stream (:func:`iter_token_chunks`), never whole. With the ``notes`` and
``paper`` presets the model overwrites ``m_k`` in its own words (a reply equal to the
keep word leaves the memory unchanged) and the answer is generated from ``m_K`` alone;
with abstention on, an agent whose memory holds nothing that answers says so
(:attr:`MemAgentResult.found`). :attr:`MemAgentResult.sources` names the chunks the
final memory's content came from.

With the ``sentences`` preset (``memory_mode="score"`` and a local backend) the memory
holds verbatim text only: ``m_k`` is the set of sentences of ``m_{k-1}`` and ``c_k``
that most raise the model's likelihood of ``q`` (:mod:`lc_agents.memagent.scoring`),
best first, within the token budget; with ``memory_mode="generate"`` and
``copy_memory`` the model writes ``m_k`` by copy-constrained generation, its tokens
spans of ``c_k`` or ``m_{k-1}`` (:mod:`lc_agents.constrained`).

:meth:`MemAgent.run_many` answers several questions over one document, reading each
chunk once for all of them (each question keeps its own memory), so a backend with a
prefix cache (the local backend) computes a chunk's keys and values once.

Example:
    >>> from lc_agents import LocalBackend, MemAgent
    >>> agent = MemAgent(LocalBackend())  # doctest: +SKIP
    >>> result = agent.run(open("book.txt").read(), "Who wrote the letter?")  # doctest: +SKIP
    >>> result.answer, len(result.trace)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from lc_agents.backends.base import ChatBackend, Message
from lc_agents.constrained import SpanCopyConstraint
from lc_agents.errors import EmptyReplyError, InputError
from lc_agents.memagent.checkpoint import Checkpoint, MemoryStep
from lc_agents.memagent.config import MemAgentConfig, default_preset
from lc_agents.memagent.scoring import QuestionScorer
from lc_agents.retrieval.embedders import Embedder

__all__ = [
    "MemAgent",
    "MemAgentResult",
    "extract_boxed",
    "grounded",
    "iter_token_chunks",
    "names_match",
    "says_not_found",
    "split_tokens",
    "support_lines",
]

_SENTINEL = "\ue000CHUNK\ue000"
_LETTERS = re.compile(r"[A-Za-z]{3,}")


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
        found: ``False`` when the agent abstained (the answer is the configured
            abstention phrase because the memory holds nothing that answers).
        sources: 0-based indices of the chunks the final memory's content came from
            (empty when the memory never took anything from the document).
    """

    answer: str
    memory: str
    trace: list[MemoryStep] = field(default_factory=list)
    n_chunks: int = 0
    document_tokens: int = 0
    seconds: float = 0.0
    resumed_from: int = 0
    found: bool = True
    sources: tuple[int, ...] = ()


def split_tokens(ids: Sequence[int], chunk_tokens: int) -> list[list[int]]:
    """Split token ids into consecutive chunks of ``chunk_tokens`` (the last may be shorter).

    >>> split_tokens([1, 2, 3, 4, 5], 2)
    [[1, 2], [3, 4], [5]]
    """
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be >= 1, got {chunk_tokens}")
    return [list(ids[i : i + chunk_tokens]) for i in range(0, len(ids), chunk_tokens)]


_PIECE_CHARS = 1 << 16


def _text_pieces(document: str | Iterable[str]) -> Iterator[str]:
    """The document as pieces of about ``_PIECE_CHARS`` characters, each cut right before
    a space or newline that follows a letter or digit, so no token spans two pieces."""
    source = [document] if isinstance(document, str) else document
    carry = ""
    for part in source:
        if not isinstance(part, str):
            raise InputError(f"document pieces must be strings, got {type(part).__name__}")
        carry += part
        while len(carry) > 2 * _PIECE_CHARS:
            cut = _cut_point(carry, _PIECE_CHARS)
            yield carry[:cut]
            carry = carry[cut:]
    while len(carry) > 2 * _PIECE_CHARS:
        cut = _cut_point(carry, _PIECE_CHARS)
        yield carry[:cut]
        carry = carry[cut:]
    if carry:
        yield carry


def _cut_point(text: str, start: int) -> int:
    """First index >= ``start`` where a space or newline follows a letter or digit.

    (After punctuation some tokenizers, Qwen2's among them, fold the newlines that follow
    into the punctuation's token, so a cut there would change the ids.)"""
    for i in range(start, len(text)):
        if text[i] in " \n" and text[i - 1].isalnum():
            return i
    return len(text)


def iter_token_chunks(
    tokenizer: Any, document: str | Iterable[str], chunk_tokens: int
) -> Iterator[list[int]]:
    """Token ids of ``document`` in consecutive chunks of ``chunk_tokens`` (the last may
    be shorter), tokenized piece by piece so memory stays flat in the document length.

    ``document`` is a string or any iterable of text pieces (e.g. a file object read in
    blocks). Pieces are re-cut before a space after a letter or digit, where tokenizers of
    the GPT-2/Llama/Qwen family start a new token, so the ids match tokenizing the whole
    text at once on ordinary prose.

    >>> from lc_agents.memagent.agent import iter_token_chunks
    >>> class Chars:  # one token per character
    ...     def encode(self, text, add_special_tokens=False):
    ...         return [ord(c) for c in text]
    >>> sizes = [len(c) for c in iter_token_chunks(Chars(), "abcdefg", 3)]
    >>> sizes
    [3, 3, 1]
    """
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be >= 1, got {chunk_tokens}")
    buffer: list[int] = []
    for piece in _text_pieces(document):
        buffer.extend(int(t) for t in tokenizer.encode(piece, add_special_tokens=False))
        while len(buffer) >= chunk_tokens:
            yield buffer[:chunk_tokens]
            del buffer[:chunk_tokens]
    if buffer:
        yield buffer


_SENTENCE_ENDS: weakref.WeakKeyDictionary[Any, list[int]] = weakref.WeakKeyDictionary()
_WORD = re.compile(r"[A-Za-z0-9]+")


@dataclass
class _Reader:
    """One question's state while a document is read: memory, trace, provenance."""

    question: str
    memory: str = ""
    trace: list[MemoryStep] = field(default_factory=list)
    origins: dict[str, frozenset[int]] = field(default_factory=dict)


class MemAgent:
    """Answer questions over documents of any length with a bounded, rewritten memory.

    Args:
        backend: any :class:`~lc_agents.backends.ChatBackend`. With
            ``supports_constraints`` (the local backend) prompts are built token-exactly
            and copy constraints apply.
        config: sizes, decoding mode and prompts (default: the preset that suits the
            backend's model, see :func:`~lc_agents.memagent.default_preset`).
        tokenizer: tokenizer counting chunk and memory tokens (default: the backend's, else
            the default embedded model's tokenizer).
        embedder: sentence embedder of ``config.recall_top`` (any
            :class:`~lc_agents.retrieval.Embedder`; default: the embedded MiniLM, loaded
            only when ``recall_top > 0``).

    Raises:
        ModelLoadError: ``recall_top > 0``, no embedder given and the embedded MiniLM
            cannot be loaded (the ``embeddings`` extra is missing).
    """

    def __init__(
        self,
        backend: ChatBackend,
        config: MemAgentConfig | None = None,
        *,
        tokenizer: Any = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.backend = backend
        self.config = config or MemAgentConfig.preset(default_preset(_model_name(backend)))
        if embedder is None and self.config.recall_top > 0:
            from lc_agents.retrieval.embedders import MiniLMEmbedder, minilm_model_dir

            minilm_model_dir()  # a missing model fails here, before any reading
            embedder = MiniLMEmbedder()
        self.embedder = embedder
        self._question_vec: dict[str, Any] = {}
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
        document: str | Iterable[str],
        question: str,
        *,
        checkpoint: str | os.PathLike[str] | None = None,
        progress: bool = False,
        on_step: Callable[[MemoryStep], None] | None = None,
    ) -> MemAgentResult:
        """Read ``document`` chunk by chunk and answer ``question``.

        Args:
            document: the text to read (any length), or an iterable of text pieces (a
                file object, a generator) read as a stream.
            question: what to answer.
            checkpoint: JSON file updated after every chunk; if it exists and matches this
                (document, question, config), reading resumes after its last chunk. Needs
                the document as a string.
            progress: show a progress bar on stderr.
            on_step: called with each new :class:`MemoryStep`.

        Raises:
            InputError: empty document or question, or a checkpoint with a streamed
                document.
            CheckpointError: the checkpoint belongs to another run.
            EmptyReplyError: the model returned no answer.
        """
        if not question.strip():
            raise InputError("the question is empty")
        if isinstance(document, str) and not document.strip():
            raise InputError("the document is empty")
        reader = _Reader(question)
        state: Checkpoint | None = None
        if checkpoint is not None:
            if not isinstance(document, str):
                raise InputError("a checkpoint needs the document as a string, not a stream")
            fp = self._fingerprint(document, question)
            state = Checkpoint.load(checkpoint, fp) or Checkpoint(fp, n_chunks=-1, memory="")
            reader.memory, reader.trace = state.memory, list(state.trace)

        def save(_: int, __: MemoryStep) -> None:
            if state is not None and checkpoint is not None:
                state.memory, state.trace = reader.memory, list(reader.trace)
                state.save(checkpoint)

        def step_hook(_: int, step: MemoryStep) -> None:
            save(_, step)
            if on_step is not None:
                on_step(step)

        resumed_from = len(reader.trace)
        start = time.perf_counter()
        n_chunks, n_tokens = self._read(document, [reader], progress=progress, on_step=step_hook)
        if state is not None and checkpoint is not None:
            state.n_chunks = n_chunks
            state.save(checkpoint)
        prior = sum(s.seconds for s in reader.trace[:resumed_from])
        return self._finish(
            reader, n_chunks, n_tokens, prior + time.perf_counter() - start, resumed_from
        )

    def run_many(
        self,
        document: str | Iterable[str],
        questions: Sequence[str],
        *,
        progress: bool = False,
    ) -> list[MemAgentResult]:
        """Answer several questions over one document, reading each chunk once for all.

        Each question keeps its own memory, exactly as in :meth:`run`; the updates of one
        chunk run one question after another, so the backend's prefix cache (the local
        backend keeps one) computes the chunk's shared prompt prefix once. Results keep
        the order of ``questions``; ``seconds`` is the wall time of the whole call.

        Raises:
            InputError: empty document, no questions or an empty question.
        """
        if not questions:
            raise InputError("give at least one question")
        if any(not q.strip() for q in questions):
            raise InputError("a question is empty")
        if isinstance(document, str) and not document.strip():
            raise InputError("the document is empty")
        readers = [_Reader(q) for q in questions]
        start = time.perf_counter()
        n_chunks, n_tokens = self._read(document, readers, progress=progress)
        seconds = time.perf_counter() - start
        return [self._finish(r, n_chunks, n_tokens, seconds, 0) for r in readers]

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
                cfg.prompts.update,
                question=question,
                memory=shown,
                chunk=chunk_ids,
                abstain=cfg.abstain or "",
            )
            if constraint is not None and cfg.prompts.update_reply_prefix:
                prompt += self._encode(cfg.prompts.update_reply_prefix)
            out = self.backend.generate_ids(  # type: ignore[attr-defined]
                prompt, max_tokens=cfg.memory_tokens, constraint=constraint
            )
            reply = self.tokenizer.decode(out, skip_special_tokens=True).strip()
        else:
            chunk = self.tokenizer.decode(list(chunk_ids), skip_special_tokens=True)
            text = cfg.prompts.update.format(
                question=question, memory=shown, chunk=chunk, abstain=cfg.abstain or ""
            )
            reply = self.backend.chat(self._messages(text), max_tokens=cfg.memory_tokens).strip()
        keep = _normalize(cfg.keep_word)
        lines = [ln.strip() for ln in reply.split("\n")]
        lines = [
            ln
            for ln in dict.fromkeys(lines)
            if ln and _normalize(ln) != keep and not self._parroted(ln)
        ]
        reply = "\n".join(lines)
        if not reply:
            return memory, True
        return self._fit_budget(reply), False

    def answer(self, question: str, memory: str) -> str:
        """The final answer from (question, memory) (see :meth:`answer_found`)."""
        return self.answer_found(question, memory)[0]

    def answer_found(self, question: str, memory: str) -> tuple[str, bool]:
        """``(answer, found)`` from (question, memory).

        With ``config.abstain`` set, an empty memory gives ``(abstain, False)`` without a
        model call, and a reply saying that the notes hold no answer is reported as
        ``(abstain, False)``.

        Raises:
            EmptyReplyError: the model returned nothing.
        """
        cfg = self.config
        if cfg.abstain is not None and not memory.strip():
            return cfg.abstain, False
        shown = memory if memory else cfg.initial_memory
        fill = {"question": question, "memory": shown, "abstain": cfg.abstain or ""}
        if self._local:
            prompt = self._prompt_ids(
                cfg.prompts.answer, question=question, memory=shown, abstain=fill["abstain"]
            )
            constraint = None
            lines = [line for line in memory.split("\n") if line.strip()]
            names_ok = any(names_match(question, line) for line in lines)
            if (
                self._scorer is not None
                and cfg.abstain is not None
                and not cfg.copy_answer
                and not names_ok
            ):
                return cfg.abstain, False
            if cfg.copy_answer and memory:
                if self._scorer is not None:
                    lines = lines[:1]  # scored memories are kept best first
                    if cfg.abstain is not None and not names_match(question, lines[0]):
                        return cfg.abstain, False
                    forced = self._forced_copy(lines[0])
                    if forced is not None:
                        return forced, True
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
            text = cfg.prompts.answer.format(**fill)
            reply = self.backend.chat(self._messages(text), max_tokens=cfg.answer_tokens).strip()
        if cfg.answer_format == "boxed":
            reply = extract_boxed(reply)
        if not reply:
            raise EmptyReplyError("the model returned an empty answer")
        if cfg.abstain is not None and says_not_found(reply, cfg.abstain):
            return cfg.abstain, False
        if cfg.ground_answer and self._scorer is not None and not grounded(reply, memory, question):
            return self._best_line(question, memory), True
        return reply, True

    def _best_line(self, question: str, memory: str) -> str:
        """The memory line that best answers ``question``: among the lines naming whom
        the question names (all lines if none does), the closest in meaning with an
        embedder, else the first (scored memories are kept best first)."""
        lines = [line.strip() for line in memory.split("\n") if line.strip()]
        named = [line for line in lines if names_match(question, line)] or lines
        if self.embedder is None or len(named) == 1:
            return named[0]
        return named[int(self._similarities(question, named).argmax())]

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
    def _read(
        self,
        document: str | Iterable[str],
        readers: list[_Reader],
        *,
        progress: bool,
        on_step: Callable[[int, MemoryStep], None] | None = None,
    ) -> tuple[int, int]:
        """Stream the chunks through every reader; returns (chunks, document tokens).

        A reader whose trace already covers chunk ``k`` (a resumed run) skips it, but
        its provenance is replayed so that ``sources`` is the same as without resuming.
        """
        if self._scorer is not None:
            self._scorer.clear()
        self._question_vec.clear()
        done = min(len(r.trace) for r in readers)
        bar = _Progress(None, done, enabled=progress)
        n_chunks = n_tokens = 0
        try:
            for k, chunk_ids in enumerate(
                iter_token_chunks(self.tokenizer, document, self.config.chunk_tokens)
            ):
                n_chunks, n_tokens = k + 1, n_tokens + len(chunk_ids)
                chunk_words: set[str] | None = None
                for i, r in enumerate(readers):
                    if k < len(r.trace):  # read before the resume: replay provenance
                        before = r.trace[k - 1].memory if k else ""
                        after = r.trace[k].memory
                        if after != before:
                            chunk_words = chunk_words or self._chunk_words(chunk_ids)
                            r.origins = _attribute(before, r.origins, after, k, chunk_words)
                        continue
                    t0 = time.perf_counter()
                    memory, kept = self.update(r.question, r.memory, chunk_ids)
                    step = MemoryStep(k, len(chunk_ids), memory, kept, time.perf_counter() - t0)
                    if memory != r.memory:
                        chunk_words = chunk_words or self._chunk_words(chunk_ids)
                        r.origins = _attribute(r.memory, r.origins, memory, k, chunk_words)
                    r.memory = memory
                    r.trace.append(step)
                    if on_step is not None:
                        on_step(i, step)
                bar.advance()
        finally:
            bar.close()
        if n_chunks == 0:
            raise InputError("the document is empty")
        return n_chunks, n_tokens

    def _finish(
        self, reader: _Reader, n_chunks: int, n_tokens: int, seconds: float, resumed_from: int
    ) -> MemAgentResult:
        answer, found = self.answer_found(reader.question, reader.memory)
        sources = sorted(set().union(*reader.origins.values())) if reader.origins else []
        return MemAgentResult(
            answer=answer,
            memory=reader.memory,
            trace=list(reader.trace),
            n_chunks=n_chunks,
            document_tokens=n_tokens,
            seconds=seconds,
            resumed_from=resumed_from,
            found=found,
            sources=tuple(sources),
        )

    def _parroted(self, line: str) -> bool:
        """Whether a reply line only repeats the prompt's own wording (the instructions
        or the initial memory): such a line carries nothing from the document."""
        text = " ".join(_normalize(line).split())
        if len(text) < 8:
            return text == _normalize(self.config.initial_memory)
        return text in self._prompt_text

    @functools.cached_property
    def _prompt_text(self) -> str:
        """The update prompt's own words and the initial memory, lower-cased, one space."""
        fixed = self.config.prompts.update + "\n" + self.config.initial_memory
        for key in ("{question}", "{memory}", "{chunk}", "{abstain}"):
            fixed = fixed.replace(key, "\n")
        return " ".join(fixed.lower().split())

    def _chunk_words(self, chunk_ids: Sequence[int]) -> set[str]:
        return _content_words(self.tokenizer.decode(list(chunk_ids), skip_special_tokens=True))

    def _select(self, question: str, memory: str, chunk_ids: Sequence[int]) -> tuple[str, bool]:
        """Score-mode update: keep the best-scoring sentences of memory + chunk in budget."""
        assert self._scorer is not None
        candidates = self._candidates(question, chunk_ids, sentences=True, memory=memory)
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
        self,
        question: str,
        chunk_ids: Sequence[int],
        *,
        sentences: bool = False,
        memory: str = "",
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
        bridges: set[str] = set()
        if self.config.follow_names and memory:
            bridges = question_names(memory.replace("\n", " ")) - question_names(question)
        texts = [self.tokenizer.decode(p) for p in parts]
        keep = {
            i
            for i, text in enumerate(texts)
            if len(words & _content_words(text)) >= max(need, 1)
            or (bridges and any(re.search(rf"\b{re.escape(n)}\b", text) for n in bridges))
        }
        keep.update(self._recall(question, texts))
        return [parts[i] for i in sorted(keep)]

    def _recall(self, question: str, texts: Sequence[str]) -> list[int]:
        """Indices of the ``recall_top`` texts closest to ``question`` in meaning (cosine
        at least ``recall_min``)."""
        k = self.config.recall_top
        idx = [i for i, t in enumerate(texts) if _LETTERS.search(t)]  # not rules or symbols
        if k == 0 or self.embedder is None or not idx:
            return []
        import numpy as np

        sims = self._similarities(question, [texts[i] for i in idx])
        best = np.argsort(-sims, kind="stable")[:k]
        return [idx[int(j)] for j in best if sims[j] >= self.config.recall_min]

    def _similarities(self, question: str, texts: Sequence[str]) -> Any:
        """Cosine of each text with ``question`` under the embedder (float32 ``[n]``,
        :func:`~lc_agents.retrieval.cosine_similarities`); the question's vector is
        computed once per read."""
        from lc_agents.retrieval.embedders import cosine_similarities

        assert self.embedder is not None
        if question not in self._question_vec:
            self._question_vec[question] = self.embedder.embed_texts([question])[0]
        return cosine_similarities(
            self._question_vec[question], self.embedder.embed_texts(list(texts))
        )

    def _sentence_end_ids(self) -> list[int]:
        """Ids of the tokens whose text ends a sentence (., !, ? or a newline); computed
        once per tokenizer (a pass over the whole vocabulary)."""
        if self._sentence_ends is None:
            try:
                cached = _SENTENCE_ENDS.get(self.tokenizer)
            except TypeError:  # not weak-referenceable
                cached = None
            if cached is None:
                vocab = len(self.tokenizer)
                texts = self.tokenizer.batch_decode([[i] for i in range(vocab)])
                cached = [
                    i for i, t in enumerate(texts) if t.rstrip(" ").endswith((".", "!", "?", "\n"))
                ]
                with contextlib.suppress(TypeError):
                    _SENTENCE_ENDS[self.tokenizer] = cached
            self._sentence_ends = cached
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
        if self.config.recall_top and self.embedder is not None:
            h.update(b"\0" + self.embedder.name.encode("utf-8"))
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


def _model_name(backend: Any) -> str | None:
    """The backend's model name (a local model's config name, an endpoint's model)."""
    model = getattr(backend, "model", None)
    if isinstance(model, str):
        return model
    config = getattr(model, "config", None)
    name = getattr(config, "_name_or_path", None) or getattr(config, "name_or_path", None)
    return str(name) if name else None


def _units(memory: str) -> list[str]:
    """The memory's sentences (split at ., !, ? followed by a space, and at newlines)."""
    parts = re.split(r"(?<=[.!?])\s+|\n+", memory)
    return [p.strip() for p in parts if p.strip()]


def _attribute(
    before: str,
    origins: dict[str, frozenset[int]],
    after: str,
    k: int,
    chunk_words: set[str],
) -> dict[str, frozenset[int]]:
    """Which chunks each sentence of the new memory ``after`` came from.

    A sentence kept verbatim keeps its origins. Otherwise it inherits the origins of the
    earlier sentences it shares content words with, and it is credited to chunk ``k``
    when it brings content words that the previous memory lacked and chunk ``k`` holds.
    """
    before_words = _content_words(before)
    previous = [(u, _content_words(u), origins.get(u, frozenset())) for u in _units(before)]
    out: dict[str, frozenset[int]] = {}
    for unit in _units(after):
        if unit in origins:
            out[unit] = origins[unit]
            continue
        words = _content_words(unit)
        src: set[int] = set()
        for _, pw, po in previous:
            if pw & words:
                src |= po
        if (words - before_words) & chunk_words or (not src and words & chunk_words):
            src.add(k)
        out[unit] = frozenset(src)
    return out


_BOXED = re.compile(r"\\boxed\{")


def extract_boxed(reply: str) -> str:
    r"""The content of the last ``\boxed{...}`` in ``reply`` (braces may nest); the
    whole reply when there is none.

    >>> extract_boxed(r"so the answer is \boxed{Vessby}.")
    'Vessby'
    >>> extract_boxed(r"\boxed{\frac{1}{2}} done")
    '\\frac{1}{2}'
    >>> extract_boxed("plain")
    'plain'
    """
    starts = [m.end() for m in _BOXED.finditer(reply)]
    if not starts:
        return reply.strip()
    i = starts[-1]
    depth, j = 1, i
    while j < len(reply) and depth:
        depth += {"{": 1, "}": -1}.get(reply[j], 0)
        j += 1
    return reply[i : j - 1 if depth == 0 else j].strip()


_NOT_FOUND = re.compile(
    r"\b(not (found|mentioned|stated|specified|given|provided|available|present|"
    r"contained|included)|no (information|mention|answer|relevant)|"
    r"(does|do|did) not (say|mention|contain|state|specify|provide|include|indicate|appear)|"
    r"cannot be (found|determined|answered)|unknown|not in the (notes|document|text))\b",
    re.IGNORECASE,
)


_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]+(?:[-'][A-Za-z]+)?\b")


def question_names(question: str) -> set[str]:
    """Capitalised words of ``question`` that are not its first word (likely names).

    >>> sorted(question_names("Where does Mara Quell's brother work?"))
    ['Mara', 'Quell']
    """
    return {m.group(0).split("'")[0] for m in _NAME.finditer(question.strip())}


def names_match(question: str, sentence: str) -> bool:
    """Whether ``sentence`` names someone the question names (true without names)."""
    names = question_names(question)
    return not names or any(re.search(rf"\b{re.escape(n)}\b", sentence) for n in names)


_NUMBER_WORDS = frozenset(
    re.findall(
        r"\w+",
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty "
        "sixty seventy eighty ninety hundred thousand total",
    )
)


def support_lines(question: str, memory: str) -> list[str]:
    """The memory lines that can support an answer to ``question``: with names in the
    question, the lines naming them and the lines naming someone those lines name (one
    hop); without names, every line.

    >>> memory = "Mara Quell's cousin is Tobin Asher.\\nTobin Asher works in Vessby.\\nIlse Varn works in Ostrell."
    >>> support_lines("Where does Mara Quell's cousin work?", memory)
    ["Mara Quell's cousin is Tobin Asher.", 'Tobin Asher works in Vessby.']
    """
    lines = [line.strip() for line in memory.split("\n") if line.strip()]
    names = question_names(question)
    if not names:
        return lines
    named = [line for line in lines if names_match(question, line)]
    linked = question_names(" ".join(named)) - names
    return [
        line
        for line in lines
        if line in named or any(re.search(rf"\b{re.escape(n)}\b", line) for n in linked)
    ]


def grounded(reply: str, memory: str, question: str = "") -> bool:
    """Whether every content word of ``reply`` occurs in the memory lines that can
    support an answer to ``question`` (:func:`support_lines`; all of ``memory`` without
    a question). Numbers and number words are exempt: a count or a total need not be
    written in the memory.

    >>> grounded("Brennick", "The pilot has moved to Brennick.")
    True
    >>> grounded("The aviator's new town", "The pilot has moved to Brennick.")
    False
    >>> grounded("three", "Mara hired a boat. Tobin hired a boat.")
    True
    >>> memory = "Zoran Lasker rides an ochre bicycle.\\nNesta Marwood rides a teal bicycle."
    >>> grounded("Teal", memory, "What colour is the bicycle Zoran Lasker rides?")
    False
    """
    have = _content_words("\n".join(support_lines(question, memory)))
    words = {w for w in _content_words(reply) if not w.isdigit() and w not in _NUMBER_WORDS}
    return words <= have


def says_not_found(reply: str, phrase: str = "not found in the document") -> bool:
    """Whether ``reply`` says that the answer is not there (the phrase or a paraphrase).

    >>> says_not_found("Not found in the document."), says_not_found("The notes do not say.")
    (True, True)
    >>> says_not_found("Vessby")
    False
    """
    text = reply.strip().lower()
    if phrase.strip().lower().rstrip(".") in text:
        return True
    return bool(_NOT_FOUND.search(text))


class _Progress:
    """A rich progress bar over chunks (no-op when disabled)."""

    def __init__(self, total: int | None, done: int, *, enabled: bool) -> None:
        self._bar: Any = None
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        columns: list[Any] = ["[progress.description]{task.description}"]
        if total is None:  # a streamed document: chunks read so far and elapsed time
            columns += ["{task.completed} chunks", TimeElapsedColumn()]
        else:
            columns += [BarColumn(), MofNCompleteColumn(), TimeRemainingColumn()]
        self._bar = Progress(*columns, console=Console(stderr=True))
        self._bar.start()
        self._task = self._bar.add_task("reading chunks", total=total, completed=done)

    def advance(self) -> None:
        if self._bar is not None:
            self._bar.advance(self._task)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
