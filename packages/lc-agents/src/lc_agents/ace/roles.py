"""The three ACE roles: Generator, Reflector and Curator.

Each role wraps any chat model (an object with ``chat(messages, **options) -> str``,
i.e. an ``lc_evals.ChatModel``, such as :class:`lc_agents.LocalBackend`) and turns its
text into a typed result. Parsing is tolerant (see :mod:`lc_agents.ace.parsing`); when
a reply is unusable the result says so in its ``error`` field instead of guessing.

Examples:
    >>> from lc_agents.ace import Generator, PlaybookStore, Delta
    >>> class Fixed:  # any chat model
    ...     def chat(self, messages, **options):
    ...         return "Use [rules-00001].\\nFinal answer: 42"
    >>> store = PlaybookStore()
    >>> _ = store.apply([Delta.add("rules", "The answer is always 42.")])
    >>> out = Generator(Fixed()).answer("What is it?", store)
    >>> out.answer, out.used_ids
    ('42', ['rules-00001'])
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lc_agents.ace.deltas import Delta, Tag, normalize_tag
from lc_agents.ace.errors import CuratorOutputError, DeltaError
from lc_agents.ace.parsing import cited_ids, extract_answer, extract_json
from lc_agents.ace.prompts import DEFAULT_PROMPTS, AcePrompts
from lc_agents.ace.store import PlaybookStore
from lc_evals.types import ChatModel

__all__ = [
    "Curation",
    "Curator",
    "Generation",
    "Generator",
    "Reflection",
    "Reflector",
]


def _chat(model: ChatModel, system: str, user: str, options: Mapping[str, Any]) -> str:
    reply = model.chat(
        [{"role": "system", "content": system}, {"role": "user", "content": user}], **options
    )
    if not isinstance(reply, str):
        raise TypeError(f"chat model returned {type(reply).__name__}, expected str")
    return reply


@dataclass
class Generation:
    """A generator's attempt.

    Attributes:
        question: the task.
        answer: the extracted final answer.
        used_ids: playbook ids the reply cites (only ids the playbook holds).
        raw: the full reply (the reasoning trace).
        prompt_chars: characters of the prompt sent (system + user).
    """

    question: str
    answer: str
    used_ids: list[str]
    raw: str
    prompt_chars: int = 0


class Generator:
    """Answer a task with the playbook in the prompt and cite the bullets used.

    Args:
        model: the chat model.
        prompts: templates (default :data:`~lc_agents.ace.prompts.DEFAULT_PROMPTS`).
        budget: playbook budget in tokens (with ``count_tokens``) or characters.
        count_tokens: tokenizer length function for the budget.
        answer_parser: reply -> answer (default: the ``Final answer:`` line).
        options: chat options (``max_tokens``, ``temperature`` ...).
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        prompts: AcePrompts = DEFAULT_PROMPTS,
        budget: int | None = None,
        count_tokens: Callable[[str], int] | None = None,
        answer_parser: Callable[[str], str] = extract_answer,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self.model = model
        self.prompts = prompts
        self.budget = budget
        self.count_tokens = count_tokens
        self.answer_parser = answer_parser
        self.options = dict(options or {})

    def answer(self, question: str, playbook: PlaybookStore | str) -> Generation:
        """Answer ``question`` with ``playbook`` (a store, rendered within the budget, or text)."""
        if not isinstance(question, str) or not question.strip():
            raise ValueError("question must be a non-empty string")
        if isinstance(playbook, PlaybookStore):
            text = playbook.render(self.budget, count_tokens=self.count_tokens)
            known: list[str] | None = [b.id for b in playbook.bullets()]
        else:
            text, known = playbook or "(empty)", None
        system = self.prompts.generator_system.format()
        user = self.prompts.generator_user.format(playbook=text, question=question)
        raw = _chat(self.model, system, user, self.options)
        return Generation(
            question=question,
            answer=self.answer_parser(raw),
            used_ids=cited_ids(raw, known),
            raw=raw,
            prompt_chars=len(system) + len(user),
        )


@dataclass
class Reflection:
    """A reflector's diagnosis of one attempt.

    Attributes:
        diagnosis: why the attempt succeeded or failed.
        insights: reusable lessons (candidate bullets).
        tags: ``{bullet id: "helpful" | "harmful" | "neutral"}`` for cited bullets.
        rounds: refinement rounds run.
        raw: the last reply.
        error: why the reply could not be parsed (``None`` when it could).
    """

    diagnosis: str = ""
    insights: list[str] = field(default_factory=list)
    tags: dict[str, Tag] = field(default_factory=dict)
    rounds: int = 0
    raw: str = ""
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The reflection as the JSON the reflector is asked to write."""
        return {
            "diagnosis": self.diagnosis,
            "insights": list(self.insights),
            "bullet_tags": [{"id": k, "tag": v} for k, v in self.tags.items()],
        }


def _as_text_list(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    out = []
    for v in value:
        if isinstance(v, Mapping):  # {"content": ...} / {"insight": ...}
            v = next((v[k] for k in ("content", "insight", "text", "lesson") if k in v), None)
        if isinstance(v, str) and v.strip():
            out.append(v.strip())
    return out


class Reflector:
    """Diagnose an attempt (with or without the ground truth) and tag the bullets it used.

    Args:
        model: the chat model.
        rounds: refinement rounds (the paper's iterative refinement); round ``k > 1``
            shows the model its previous reflection and asks for a sharper one. Stops
            early when a round returns the same reflection.
        prompts: templates.
        options: chat options.
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        rounds: int = 1,
        prompts: AcePrompts = DEFAULT_PROMPTS,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        if rounds < 1:
            raise ValueError(f"rounds must be >= 1, got {rounds}")
        self.model = model
        self.rounds = rounds
        self.prompts = prompts
        self.options = dict(options or {})

    def parse(self, raw: str, used_ids: Sequence[str]) -> Reflection:
        """Read a reflection from a reply; unknown tags and ids not cited are dropped.

        Never raises on bad model output: the returned reflection carries ``error``.
        """
        try:
            data = extract_json(raw)
        except CuratorOutputError as err:
            return Reflection(raw=raw, error=str(err))
        tags: dict[str, Tag] = {}
        raw_tags = data.get("bullet_tags", data.get("tags", []))
        if isinstance(raw_tags, Mapping):
            raw_tags = [{"id": k, "tag": v} for k, v in raw_tags.items()]
        for entry in raw_tags if isinstance(raw_tags, list) else []:
            if not isinstance(entry, Mapping):
                continue
            bid = entry.get("id", entry.get("bullet_id"))
            try:
                tag = normalize_tag(entry.get("tag"))
            except DeltaError:
                continue
            if isinstance(bid, str) and bid in used_ids:
                tags[bid] = tag
        diagnosis = data.get("diagnosis", data.get("error_identification", ""))
        return Reflection(
            diagnosis=diagnosis.strip() if isinstance(diagnosis, str) else "",
            insights=_as_text_list(data.get("insights", data.get("key_insight", []))),
            tags=tags,
            raw=raw,
        )

    def reflect(
        self,
        attempt: Generation,
        feedback: str,
        *,
        ground_truth: str | None = None,
        playbook: PlaybookStore | None = None,
    ) -> Reflection:
        """Reflect on ``attempt`` given execution ``feedback`` (and the answer if known)."""
        used_lines = []
        if playbook is not None:
            for bid in attempt.used_ids:
                if bid in playbook:
                    used_lines.append(playbook.get(bid).line(show_counters=False))
        fields = {
            "question": attempt.question,
            "attempt": attempt.raw,
            "answer": attempt.answer,
            "feedback": feedback,
            "ground_truth": f"Correct answer: {ground_truth}\n" if ground_truth is not None else "",
            "used": "\n".join(used_lines) or "(none)",
        }
        system = self.prompts.reflector_system.format()
        best: Reflection | None = None
        for k in range(self.rounds):
            previous = ""
            if best is not None and best.error is None:
                previous = self.prompts.reflector_refine.format(previous=json.dumps(best.to_dict()))
            raw = _chat(
                self.model,
                system,
                self.prompts.reflector_user.format(previous=previous, **fields),
                self.options,
            )
            current = self.parse(raw, attempt.used_ids)
            current.rounds = k + 1
            if best is not None and current.error is not None:
                break  # keep the last usable reflection
            if best is not None and current.to_dict() == best.to_dict():
                best.rounds = k + 1
                break
            best = current
        assert best is not None
        return best


@dataclass
class Curation:
    """A curator's decision.

    Attributes:
        deltas: the valid operations, in the order the curator wrote them.
        rejected: ``(operation as written, reason)`` for malformed ones.
        raw: the reply.
        error: why the reply could not be parsed at all (``None`` when it could).
    """

    deltas: list[Delta] = field(default_factory=list)
    rejected: list[tuple[Any, str]] = field(default_factory=list)
    raw: str = ""
    error: str | None = None


class Curator:
    """Turn a reflection into delta operations (JSON), never a rewrite of the playbook.

    Args:
        model: the chat model.
        default_section: section of ADDs that name none.
        prompts: templates.
        options: chat options.
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        default_section: str = "strategies",
        prompts: AcePrompts = DEFAULT_PROMPTS,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        Delta.add(default_section, "x")  # validates the section name
        self.model = model
        self.default_section = default_section
        self.prompts = prompts
        self.options = dict(options or {})

    def parse(self, raw: str, **provenance: Any) -> Curation:
        """Read operations from a reply. Accepts ``{"operations": [...]}`` or a bare list.

        Never raises on bad model output: malformed operations go to ``rejected``, an
        unparseable reply sets ``error``.
        """
        ops: Any = None
        problem = "the reply's JSON has no 'operations' list"
        try:
            data = extract_json(raw, expect=dict)
            ops = data.get("operations", data.get("deltas", data.get("ops")))
        except CuratorOutputError as err:
            problem = str(err)
        if not isinstance(ops, list):
            try:
                ops = extract_json(raw, expect=list)
            except CuratorOutputError:
                return Curation(raw=raw, error=problem)
        out = Curation(raw=raw)
        for entry in ops:
            try:
                if isinstance(entry, Mapping) and str(entry.get("op", "")).upper() == "ADD":
                    entry = {"section": self.default_section, **entry}
                delta = Delta.from_dict(entry)
            except DeltaError as err:
                out.rejected.append((entry, str(err)))
                continue
            content = delta.content
            if content is not None:
                content = self.strip_echo(content)
                if not content:
                    out.rejected.append((entry, "the content only repeats the prompt's labels"))
                    continue
            out.deltas.append(
                Delta(
                    delta.op,
                    delta.ids,
                    delta.section,
                    content,
                    {**provenance, **delta.provenance},
                )
            )
        return out

    def strip_echo(self, content: str) -> str:
        """``content`` without leading labels of the curator's own prompt and list markers.

        Small models copy the prompt's layout into notes ("Lessons: - Refunds over $50
        go to R7", "Diagnosis: (none)"). The labels are read from ``curator_user`` (each
        line's text before a colon), so replaced prompts are handled too. Returns ``""``
        when nothing but labels, markers or "(none)" is left.
        """
        labels = re.findall(r"(?m)^([^\n:{}]+):", self.prompts.curator_user)
        heads = [rf"{re.escape(x.strip())}\s*:" for x in labels if x.strip()]
        heads.append(r"[-*\u2022]\s")
        head = re.compile(rf"^\s*(?:{'|'.join(heads)})\s*", re.IGNORECASE)
        previous = None
        while previous != content:
            previous, content = content, head.sub("", content, count=1)
        content = content.strip()
        return "" if content.lower() in ("(none)", "none") else content

    def curate(
        self, reflection: Reflection, playbook: PlaybookStore, **provenance: Any
    ) -> Curation:
        """Ask the model for operations that fold ``reflection`` into ``playbook``."""
        sections = playbook.sections() or [self.default_section]
        system = self.prompts.curator_system.format(sections=", ".join(sections))
        user = self.prompts.curator_user.format(
            playbook=playbook.render(show_counters=True),
            diagnosis=reflection.diagnosis or "(none)",
            insights="\n".join(f"- {i}" for i in reflection.insights) or "(none)",
        )
        return self.parse(_chat(self.model, system, user, self.options), **provenance)
