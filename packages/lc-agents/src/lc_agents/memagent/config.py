"""Configuration of :class:`~lc_agents.memagent.MemAgent`: sizes, decoding mode and prompts.

Three named presets (:data:`MEMAGENT_PRESETS`, :meth:`MemAgentConfig.preset`):

- ``"notes"``: the model reads each chunk and rewrites a bounded memory in its own words;
  the answer comes from the final memory alone, and the agent abstains ("not found in the
  document") when the memory holds nothing that answers. The project's own prompts. The
  default for every model that reads documents (the Qwen models, any endpoint).
- ``"paper"``: the MemAgent paper's prompt templates (arXiv 2507.02259, its Table 1:
  problem, memory and section in tags; the answer in ``\\boxed{}``), 5000-token chunks
  and a 1024-token memory. No abstention: the paper's prompts do not ask for it.
- ``"sentences"``: the memory is a set of verbatim sentences chosen by the model's
  question likelihood behind a word filter, and the answer is copied from the best one
  (:mod:`lc_agents.memagent.scoring`). It suits the 135M SmolLM2, which cannot write
  notes, and it is the default for it.
- ``"evidence"``: the same scored verbatim memory, larger, also admitting the sentences
  of each chunk closest to the question in meaning (a sentence embedder's cosine, so a
  reworded question finds its fact) and sentences that name someone the memory already
  names (the second fact of a two-hop question), and an answer the model generates from
  those sentences (so it can combine and count them), abstaining when none names whom
  the question names; an answer with words the memory does not hold is replaced by
  the memory's best sentence.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

__all__ = [
    "ABSTAIN_ANSWER",
    "MEMAGENT_PRESETS",
    "MemAgentConfig",
    "MemAgentPrompts",
    "default_preset",
]

MEMORY_MODES = ("score", "generate")
ANSWER_FORMATS = ("plain", "boxed")
MEMAGENT_PRESETS = ("notes", "paper", "sentences", "evidence")
"""Names accepted by :meth:`MemAgentConfig.preset`."""

ABSTAIN_ANSWER = "not found in the document"
"""What the agent answers when its memory holds nothing that answers the question."""

_FREE_TEXT: dict[str, Any] = {
    "memory_mode": "generate",
    "copy_memory": False,
    "copy_answer": False,
    "max_spans": None,
    "whole_sentences": False,
    "min_overlap": 0,
    "keep_word": "none",
}
"""The fields of a memory the model writes in free text (no copy constraints)."""

_UPDATE_FIELDS = ("question", "memory", "chunk")
_ANSWER_FIELDS = ("question", "memory")
_OPTIONAL_FIELDS = ("abstain",)


@dataclass(frozen=True)
class MemAgentPrompts:
    """The two prompts of the agent, as ``str.format`` templates.

    ``update`` is filled with ``{question}``, ``{memory}`` and ``{chunk}`` and asks for
    the new memory; ``answer`` is filled with ``{question}`` and ``{memory}`` and asks for
    the final answer. Both may also use ``{abstain}`` (the configured abstention phrase).
    ``system`` (optional) is sent as the system message of both. Write ``{{`` and ``}}``
    for literal braces.
    """

    system: str = "You take careful, literal notes. You never make up facts."
    update: str = (
        "I am reading a long document section by section and keeping notes for one question.\n"
        "\n"
        "Question: {question}\n"
        "\n"
        "Notes so far:\n"
        "{memory}\n"
        "\n"
        "Next section of the document:\n"
        "<section>\n"
        "{chunk}\n"
        "</section>\n"
        "\n"
        "Write the new notes. Copy word for word the sentence from the section or from the "
        "notes that answers the question. If the section says nothing about the question, "
        "reply with the single word: none"
    )
    update_reply_prefix: str = "Notes:"
    answer: str = (
        "Notes taken while reading a document:\n"
        "{memory}\n"
        "\n"
        "Question: {question}\n"
        "Answer with the exact value copied from the notes, nothing else."
    )

    def __post_init__(self) -> None:
        for name, needed in (("update", _UPDATE_FIELDS), ("answer", _ANSWER_FIELDS)):
            template = getattr(self, name)
            for key in needed:
                if "{" + key + "}" not in template:
                    raise ValueError(
                        f"MemAgentPrompts.{name} must contain the placeholder {{{key}}}; "
                        f"allowed placeholders: {list(needed)}"
                    )
            try:
                template.format(**{k: "" for k in (*needed, *_OPTIONAL_FIELDS)})
            except (KeyError, IndexError, ValueError) as exc:
                raise ValueError(
                    f"MemAgentPrompts.{name} is not a valid template with placeholders "
                    f"{list(needed)} (and optional {list(_OPTIONAL_FIELDS)}): {exc}"
                ) from exc

    @classmethod
    def notes(cls) -> MemAgentPrompts:
        """The project's prompts for a model that writes its own notes and may abstain.

        The section comes first in the update prompt, so the updates of several questions
        over one chunk share a prompt prefix (see :meth:`MemAgent.run_many`)."""
        return cls(
            system="You are a careful reader. You only state what the document says.",
            update=(
                "<section>\n"
                "{chunk}\n"
                "</section>\n"
                "\n"
                "Question: {question}\n"
                "\n"
                "Notes so far:\n"
                "{memory}\n"
                "\n"
                "Update the notes for answering the question. If the section has facts "
                "about the people, places or things the question asks about, reply with "
                "the updated notes: the useful notes so far, then those facts from the "
                "section as short sentences. Otherwise reply with exactly: none"
            ),
            update_reply_prefix="",
            answer=(
                "Your notes from reading a document:\n"
                "{memory}\n"
                "\n"
                "Question: {question}\n"
                "\n"
                "Answer from the notes only, in a few words. If the notes do not contain "
                "the answer, reply exactly: {abstain}"
            ),
        )

    @classmethod
    def paper(cls) -> MemAgentPrompts:
        """The MemAgent paper's templates (arXiv 2507.02259, Table 1), no system prompt."""
        return cls(
            system="",
            update=(
                "You are presented with a problem, a section of an article that may contain "
                "the answer to the problem, and a previous memory. Please read the provided "
                "section carefully and update the memory with the new information that helps "
                "to answer the problem. Be sure to retain all relevant details from the "
                "previous memory while adding any new, useful information.\n"
                "\n"
                "<problem>\n{question}\n</problem>\n"
                "\n"
                "<memory>\n{memory}\n</memory>\n"
                "\n"
                "<section>\n{chunk}\n</section>\n"
                "\n"
                "Updated memory:\n"
            ),
            update_reply_prefix="",
            answer=(
                "You are presented with a problem and a previous memory. Please answer the "
                "problem based on the previous memory and put the answer in \\boxed{{}}.\n"
                "\n"
                "<problem>\n{question}\n</problem>\n"
                "\n"
                "<memory>\n{memory}\n</memory>\n"
                "\n"
                "Your answer:\n"
            ),
        )


@dataclass(frozen=True)
class MemAgentConfig:
    """Sizes and decoding choices of MemAgent.

    The defaults are tuned for the embedded SmolLM2-135M-Instruct (8K window): 1024-token
    chunks, a 64-token memory of verbatim sentences chosen by the model's question
    likelihood (``memory_mode="score"``, see :mod:`lc_agents.memagent.scoring`) and a
    copy-constrained answer, so that the small model can only keep and answer with text
    it has read (see :mod:`lc_agents.constrained`). :meth:`paper` gives the paper's setting (5000-token
    chunks, 1024-token memory, free generation), meant for capable models.

    Attributes:
        chunk_tokens: tokens of the document per chunk (> 0).
        memory_tokens: token budget of the memory (> 0); longer memories are cut.
        answer_tokens: cap on the tokens of the final answer (> 0).
        memory_mode: how the memory is updated with a local backend and ``copy_memory``:
            ``"score"`` keeps the sentences (of the previous memory and the chunk's
            candidates) that most raise the model's likelihood of the question, best first,
            within ``memory_tokens``, and the answer is copied from the best one;
            ``"generate"`` lets the model write the new memory by copy-constrained
            generation (at most ``max_spans`` spans). Backends without constraints always
            generate free text.
        copy_memory: constrain memory updates to spans of the chunk and previous memory
            (needs a backend with ``supports_constraints``; others fall back to free text).
        copy_answer: constrain the final answer to one span of the memory (one whole
            sentence of it with ``whole_sentences``).
        max_spans: at most this many copied spans per memory update.
        whole_sentences: copied memory spans start and end at sentence boundaries.
        min_overlap: with ``copy_memory``, a sentence of the chunk is a copy candidate only
            if it shares at least this many content words with the question; a chunk
            without candidates keeps the memory without calling the model (0: off).
        keep_word: reply lines equal to this word (case-insensitive) are dropped, and a
            reply with nothing else keeps the memory unchanged.
        initial_memory: the memory shown before the first chunk.
        prompts: the prompt templates.
        abstain: the answer given when the memory holds nothing that answers; ``None``
            turns abstention off (the model always answers). With abstention on, an
            agent whose memory never took anything from the document answers ``abstain``
            without asking the model, and a reply that says the answer is not there is
            reported as this phrase with ``found=False``.
        follow_names: with scored memories, a chunk sentence is also a candidate when it
            names someone (a capitalised word) the memory names and the question does not.
        recall_top: with ``min_overlap`` set, the ``recall_top`` sentences of each chunk
            closest to the question under the agent's sentence embedder (cosine) are also
            candidates, so a sentence that says the same thing in other words (*aviator*
            for *pilot*) can enter the memory; the model's score still decides what stays.
            0 turns it off; > 0 needs an embedder (the embedded MiniLM by default, extra
            ``embeddings``).
        recall_min: a recalled sentence's cosine similarity to the question must be at
            least this (in ``[-1, 1]``), so a chunk with nothing related recalls nothing.
        ground_answer: with scored memories and a generated answer, a reply whose words
            are not in the memory (it rewords the question or names something the memory
            does not hold; numbers are exempt, they may be counted) is replaced by the
            memory line that best answers: among the lines naming whom the question
            names, the closest to the question in meaning (with an embedder), else the
            best scored.
        answer_format: ``"plain"`` (the reply is the answer) or ``"boxed"`` (the answer is
            the content of the reply's last ``\\boxed{...}``, as in the paper).
    """

    chunk_tokens: int = 1024
    memory_tokens: int = 64
    answer_tokens: int = 48
    memory_mode: str = "score"
    copy_memory: bool = True
    copy_answer: bool = True
    max_spans: int | None = 2
    whole_sentences: bool = True
    min_overlap: int = 2
    keep_word: str = "none"
    initial_memory: str = "No notes yet."
    prompts: MemAgentPrompts = field(default_factory=MemAgentPrompts)
    abstain: str | None = None
    follow_names: bool = False
    recall_top: int = 0
    recall_min: float = 0.0
    ground_answer: bool = False
    answer_format: str = "plain"

    def __post_init__(self) -> None:
        for name in ("chunk_tokens", "memory_tokens", "answer_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"MemAgentConfig.{name} must be an integer >= 1, got {value!r}")
        if self.memory_mode not in MEMORY_MODES:
            raise ValueError(
                f"MemAgentConfig.memory_mode must be one of {list(MEMORY_MODES)}, "
                f"got {self.memory_mode!r}"
            )
        if self.min_overlap < 0:
            raise ValueError(f"MemAgentConfig.min_overlap must be >= 0, got {self.min_overlap}")
        if not isinstance(self.recall_top, int) or self.recall_top < 0:
            raise ValueError(
                f"MemAgentConfig.recall_top must be an integer >= 0, got {self.recall_top!r}"
            )
        if not isinstance(self.recall_min, (int, float)) or not -1.0 <= self.recall_min <= 1.0:
            raise ValueError(
                f"MemAgentConfig.recall_min must be a number in [-1, 1], got {self.recall_min!r}"
            )
        if self.max_spans is not None and self.max_spans < 1:
            raise ValueError(f"MemAgentConfig.max_spans must be >= 1 or None, got {self.max_spans}")
        if not self.keep_word.strip():
            raise ValueError("MemAgentConfig.keep_word must be a non-empty word")
        if self.abstain is not None and not self.abstain.strip():
            raise ValueError("MemAgentConfig.abstain must be a non-empty phrase or None")
        if self.answer_format not in ANSWER_FORMATS:
            raise ValueError(
                f"MemAgentConfig.answer_format must be one of {list(ANSWER_FORMATS)}, "
                f"got {self.answer_format!r}"
            )
        if not isinstance(self.prompts, MemAgentPrompts):
            raise ValueError(
                f"MemAgentConfig.prompts must be a MemAgentPrompts, got {type(self.prompts).__name__}"
            )

    @classmethod
    def paper(cls, chunk_tokens: int = 5000, memory_tokens: int = 1024) -> MemAgentConfig:
        """The MemAgent paper's setting: its prompt templates, 5000-token chunks, a
        1024-token memory written in free text, the answer in ``\\boxed{}``."""
        return cls(
            chunk_tokens=chunk_tokens,
            memory_tokens=memory_tokens,
            answer_tokens=256,
            **_FREE_TEXT,
            initial_memory="No previous memory",
            prompts=MemAgentPrompts.paper(),
            answer_format="boxed",
        )

    @classmethod
    def notes(
        cls,
        chunk_tokens: int = 5000,
        memory_tokens: int = 1024,
        *,
        abstain: str | None = ABSTAIN_ANSWER,
    ) -> MemAgentConfig:
        """The model rewrites its own notes each chunk and answers from them, abstaining
        with ``abstain`` when they hold no answer. Sizes default to the paper's."""
        return cls(
            chunk_tokens=chunk_tokens,
            memory_tokens=memory_tokens,
            answer_tokens=64,
            **_FREE_TEXT,
            initial_memory="(no notes yet)",
            prompts=MemAgentPrompts.notes(),
            abstain=abstain,
        )

    @classmethod
    def sentences(
        cls,
        chunk_tokens: int = 1024,
        memory_tokens: int = 64,
        *,
        abstain: str | None = ABSTAIN_ANSWER,
    ) -> MemAgentConfig:
        """Verbatim sentences scored by question likelihood (``memory_mode="score"``).

        With ``abstain``, the agent abstains when no sentence passed the question filter,
        or when the question names someone (capitalised words) and the best sentence
        names none of them."""
        return cls(chunk_tokens=chunk_tokens, memory_tokens=memory_tokens, abstain=abstain)

    @classmethod
    def evidence(
        cls,
        chunk_tokens: int = 1024,
        memory_tokens: int = 192,
        *,
        abstain: str | None = ABSTAIN_ANSWER,
        recall_top: int = 3,
        recall_min: float = 0.25,
    ) -> MemAgentConfig:
        """Scored verbatim sentences, found by shared words, by meaning (the
        ``recall_top`` closest sentences of each chunk under a sentence embedder, cosine
        at least ``recall_min``) and by following names, and a generated answer.

        ``recall_min = 0.25`` suits the embedded MiniLM: on docqa items its cosine
        between a question and sentences of Python's documentation is mostly below 0.2,
        and between a question and its planted fact 0.29 to 0.88."""
        notes = MemAgentPrompts.notes()
        return cls(
            chunk_tokens=chunk_tokens,
            memory_tokens=memory_tokens,
            copy_answer=False,
            follow_names=True,
            recall_top=recall_top,
            recall_min=recall_min,
            ground_answer=True,
            abstain=abstain,
            prompts=MemAgentPrompts(system=notes.system, answer=notes.answer),
        )

    @classmethod
    def preset(cls, name: str) -> MemAgentConfig:
        """The named preset (one of :data:`MEMAGENT_PRESETS`, see the module docstring).

        Raises:
            ValueError: unknown name.
        """
        if name not in MEMAGENT_PRESETS:
            raise ValueError(f"unknown MemAgent preset {name!r}; known: {list(MEMAGENT_PRESETS)}")
        return getattr(cls, name)()

    def with_sizes(
        self, chunk_tokens: int | None = None, memory_tokens: int | None = None
    ) -> MemAgentConfig:
        """A copy with the given sizes (``None`` keeps a size)."""
        return replace(
            self,
            chunk_tokens=self.chunk_tokens if chunk_tokens is None else chunk_tokens,
            memory_tokens=self.memory_tokens if memory_tokens is None else memory_tokens,
        )

    @classmethod
    def plain(cls, chunk_tokens: int = 1024, memory_tokens: int = 64) -> MemAgentConfig:
        """Plain prompting (no decoding constraints) at the given sizes: the baseline."""
        return cls(
            chunk_tokens=chunk_tokens,
            memory_tokens=memory_tokens,
            memory_mode="generate",
            copy_memory=False,
            copy_answer=False,
        )

    def fingerprint_fields(self) -> dict[str, object]:
        """The fields that change a run's result (what a checkpoint must match)."""
        out: dict[str, object] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = (
                {p.name: getattr(value, p.name) for p in fields(value)}
                if isinstance(value, MemAgentPrompts)
                else value
            )
        return out


_SENTENCE_MODELS = ("smollm2", "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b", "gemma-3-270m")


def default_preset(model: str | None = None) -> str:
    """The preset suiting a model name: ``"sentences"`` for the small embedded models,
    ``"notes"`` for any other (an endpoint's model, a local directory).

    The embedded models (up to 1.5B parameters, not trained to keep a memory) find facts
    reliably by scoring sentences but write poor notes (see the docqa benchmark in the
    lc-agents guide); capable models write notes. ``None`` is the default embedded model.

    >>> default_preset("smollm2-135m-instruct"), default_preset(None), default_preset("gpt-x")
    ('sentences', 'sentences', 'notes')
    """
    name = (model or "qwen2.5-coder-0.5b-instruct").lower()
    return "sentences" if any(tag in name for tag in _SENTENCE_MODELS) else "notes"
