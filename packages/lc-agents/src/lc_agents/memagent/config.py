"""Configuration of :class:`~lc_agents.memagent.MemAgent`: sizes, decoding mode and prompts."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

__all__ = ["MemAgentConfig", "MemAgentPrompts"]

MEMORY_MODES = ("score", "generate")
_UPDATE_FIELDS = ("question", "memory", "chunk")
_ANSWER_FIELDS = ("question", "memory")


@dataclass(frozen=True)
class MemAgentPrompts:
    """The two prompts of the agent, as ``str.format`` templates.

    ``update`` is filled with ``{question}``, ``{memory}`` and ``{chunk}`` and asks for
    the new memory; ``answer`` is filled with ``{question}`` and ``{memory}`` and asks for
    the final answer. ``system`` (optional) is sent as the system message of both.
    Write ``{{`` and ``}}`` for literal braces.
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
                template.format(**{k: "" for k in needed})
            except (KeyError, IndexError, ValueError) as exc:
                raise ValueError(
                    f"MemAgentPrompts.{name} is not a valid template with placeholders "
                    f"{list(needed)}: {exc}"
                ) from exc


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
        if self.max_spans is not None and self.max_spans < 1:
            raise ValueError(f"MemAgentConfig.max_spans must be >= 1 or None, got {self.max_spans}")
        if not self.keep_word.strip():
            raise ValueError("MemAgentConfig.keep_word must be a non-empty word")
        if not isinstance(self.prompts, MemAgentPrompts):
            raise ValueError(
                f"MemAgentConfig.prompts must be a MemAgentPrompts, got {type(self.prompts).__name__}"
            )

    @classmethod
    def paper(cls) -> MemAgentConfig:
        """The MemAgent paper's setting: 5000-token chunks, 1024-token memory, free text."""
        return cls(
            chunk_tokens=5000,
            memory_tokens=1024,
            answer_tokens=256,
            memory_mode="generate",
            copy_memory=False,
            copy_answer=False,
            max_spans=None,
            whole_sentences=False,
            min_overlap=0,
            initial_memory="No previous memory",
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
