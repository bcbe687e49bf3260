"""Offline and online adaptation loops: generate -> reflect -> curate -> merge deltas.

One step on an item: the generator answers with the current playbook; feedback is
computed (offline: against the label, which the reflector also sees; online: from the
execution feedback function only); the reflector diagnoses the attempt and tags the
bullets it cited; the curator turns the insights into delta operations; the tags, the
deltas and the progress marker are committed to the store in ONE transaction; then
near-duplicates are merged (grow-and-refine).

The store is the whole state: re-running a loop on the same store and run name skips
the steps already committed, so an interrupted run resumes where it stopped.

Examples:
    >>> from lc_agents.ace import Ace, AceConfig, AceItem, PlaybookStore
    >>> class Teacher:  # a scripted chat model standing in for a real one
    ...     def chat(self, messages, **options):
    ...         system = messages[0]["content"]
    ...         if "review" in system:
    ...             return '{"diagnosis": "wrong unit", "insights": ["Answer in cents."]}'
    ...         if "maintain a playbook" in system:
    ...             return '{"operations": [{"op": "ADD", "section": "units", "content": "Answer in cents."}]}'
    ...         return "Final answer: 100" if "cents" in messages[1]["content"] else "Final answer: 1"
    >>> ace = Ace(Teacher(), PlaybookStore(), config=AceConfig(dedup="off", progress=False))
    >>> report = ace.adapt_offline([AceItem("One dollar is?", answer="100")])
    >>> report.correct, len(ace.store), ace.generator.answer("Two?", ace.store).answer
    (0, 1, '100')
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from lc_agents.ace.dedup import deduplicate
from lc_agents.ace.deltas import Delta
from lc_agents.ace.prompts import DEFAULT_PROMPTS, AcePrompts
from lc_agents.ace.roles import Curation, Curator, Generation, Generator, Reflection, Reflector
from lc_agents.ace.store import PlaybookStore
from lc_agents.retrieval.embedders import Embedder, MiniLMEmbedder
from lc_evals.types import ChatModel

__all__ = [
    "Ace",
    "AceConfig",
    "AceItem",
    "AdaptReport",
    "Feedback",
    "StepRecord",
    "exact_match",
]


def _norm(text: str) -> str:
    return " ".join(text.lower().strip().strip(".").split())


def exact_match(prediction: str, answer: str) -> bool:
    """Case- and whitespace-insensitive equality (a trailing period ignored)."""
    return _norm(prediction) == _norm(answer)


@dataclass(frozen=True)
class AceItem:
    """One task.

    Attributes:
        question: the task text shown to the generator.
        answer: the label (offline adaptation needs it; online never shows it).
        id: a stable name, used in progress markers (default: the position).
        meta: anything the feedback function needs (e.g. a test case).
    """

    question: str
    answer: str | None = None
    id: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.question, str) or not self.question.strip():
            raise ValueError("AceItem.question must be a non-empty string")


@dataclass(frozen=True)
class Feedback:
    """Execution feedback on one attempt.

    Attributes:
        correct: whether the attempt succeeded (``None`` when unknown).
        message: what the environment said (error text, test output ...).
    """

    correct: bool | None
    message: str


FeedbackFn = Callable[[AceItem, Generation], Feedback]


@dataclass(frozen=True)
class AceConfig:
    """Settings of an ACE adaptation run.

    Attributes:
        epochs: passes over the training set (offline mode).
        reflection_rounds: reflector refinement rounds per step.
        budget: playbook budget in the generator's prompt, tokens (with
            ``count_tokens``) or characters; ``None`` for no limit.
        dedup: ``"proactive"`` (after every step), ``"lazy"`` (only when the playbook
            exceeds ``budget``) or ``"off"``.
        dedup_threshold: cosine similarity for near-duplicates (paper: 0.9).
        curator_fallback: when the curator's reply cannot be parsed (or every operation
            in it is malformed), ADD the reflector's insights verbatim (deterministic; no
            rewrite). A reply with an empty operation list is respected.
        fallback_section: section of fallback ADDs.
        reflect_on_success: also reflect (and curate) when the attempt was correct.
        progress: show a progress bar.
    """

    epochs: int = 1
    reflection_rounds: int = 1
    budget: int | None = None
    dedup: Literal["proactive", "lazy", "off"] = "proactive"
    dedup_threshold: float = 0.9
    curator_fallback: bool = True
    fallback_section: str = "strategies"
    reflect_on_success: bool = True
    progress: bool = True

    def __post_init__(self) -> None:
        if self.epochs < 1:
            raise ValueError(f"epochs must be >= 1, got {self.epochs}")
        if self.reflection_rounds < 1:
            raise ValueError(f"reflection_rounds must be >= 1, got {self.reflection_rounds}")
        if self.budget is not None and self.budget < 1:
            raise ValueError(f"budget must be >= 1 or None, got {self.budget}")
        if self.dedup not in ("proactive", "lazy", "off"):
            raise ValueError(f"dedup is {self.dedup!r}; allowed: ['proactive', 'lazy', 'off']")
        if not 0.0 < self.dedup_threshold <= 1.0:
            raise ValueError(f"dedup_threshold must be in (0, 1], got {self.dedup_threshold}")
        if not self.fallback_section.strip():
            raise ValueError("fallback_section must be non-empty")


@dataclass
class StepRecord:
    """What one adaptation step did.

    Attributes:
        item_id: the item's id.
        epoch: 0-based epoch (online: 0).
        prediction: the generator's answer (made before this step's update).
        correct: the feedback's verdict.
        used_ids: bullets the generator cited.
        reflection: the reflector's result.
        curation: the curator's result (``None`` when skipped).
        deltas: the operations proposed (curator's, or the fallback ADDs); invalid ones are skipped.
        applied: ids touched by the applied deltas.
        merged: near-duplicate groups merged after the step.
        seconds: wall time of the step.
    """

    item_id: str
    epoch: int
    prediction: str
    correct: bool | None
    used_ids: list[str]
    reflection: Reflection | None
    curation: Curation | None
    deltas: list[Delta]
    applied: list[str]
    merged: int
    seconds: float

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary (kept in the store's progress markers)."""
        return {
            "item_id": self.item_id,
            "epoch": self.epoch,
            "prediction": self.prediction,
            "correct": self.correct,
            "used_ids": self.used_ids,
            "deltas": [d.to_dict() for d in self.deltas],
            "reflection_error": self.reflection.error if self.reflection else None,
            "curation_error": self.curation.error if self.curation else None,
        }


@dataclass
class AdaptReport:
    """Outcome of :meth:`Ace.adapt_offline` / :meth:`Ace.adapt_online`.

    Attributes:
        steps: summaries of every step of the run, including ones done before a resume.
        resumed: steps skipped because the store had them already.
        seconds: wall time of this call.
    """

    steps: list[dict[str, Any]]
    resumed: int
    seconds: float

    @property
    def correct(self) -> int:
        """Steps whose attempt was correct."""
        return sum(1 for s in self.steps if s["correct"])

    @property
    def accuracy(self) -> float:
        """Fraction of steps with a correct attempt (online: the test accuracy)."""
        judged = [s for s in self.steps if s["correct"] is not None]
        return sum(1 for s in judged if s["correct"]) / len(judged) if judged else 0.0


class Ace:
    """Agentic Context Engineering: a playbook that grows from the model's own attempts.

    Args:
        model: chat model of the generator (and of the other roles unless given).
        store: the playbook (its SQLite file is the run's state).
        reflector_model: chat model of the reflector (default ``model``).
        curator_model: chat model of the curator (default ``model``).
        embedder: sentence embedder for de-duplication (default: MiniLM, loaded on
            first use; ignored with ``config.dedup == "off"``).
        config: run settings.
        prompts: role templates.
        count_tokens: tokenizer length function for ``config.budget``.
        options: chat options per role, e.g. ``{"generator": {"max_tokens": 64}}``.
    """

    def __init__(
        self,
        model: ChatModel,
        store: PlaybookStore,
        *,
        reflector_model: ChatModel | None = None,
        curator_model: ChatModel | None = None,
        embedder: Embedder | None = None,
        config: AceConfig | None = None,
        prompts: AcePrompts = DEFAULT_PROMPTS,
        count_tokens: Callable[[str], int] | None = None,
        options: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self.config = config or AceConfig()
        opts = dict(options or {})
        unknown = set(opts) - {"generator", "reflector", "curator"}
        if unknown:
            raise ValueError(
                f"options has unknown roles {sorted(unknown)}; allowed: generator, reflector, curator"
            )
        self.store = store
        self.count_tokens = count_tokens
        self.generator = Generator(
            model,
            prompts=prompts,
            budget=self.config.budget,
            count_tokens=count_tokens,
            options=opts.get("generator"),
        )
        self.reflector = Reflector(
            reflector_model or model,
            rounds=self.config.reflection_rounds,
            prompts=prompts,
            options=opts.get("reflector"),
        )
        self.curator = Curator(
            curator_model or model,
            default_section=self.config.fallback_section,
            prompts=prompts,
            options=opts.get("curator"),
        )
        self._embedder = embedder

    @property
    def embedder(self) -> Embedder:
        """The de-duplication embedder (MiniLM by default, created on first use)."""
        if self._embedder is None:
            self._embedder = MiniLMEmbedder()
        return self._embedder

    # ------------------------------------------------------------------ one step
    def answer(self, question: str) -> Generation:
        """Answer with the current playbook (no adaptation)."""
        return self.generator.answer(question, self.store)

    def step(
        self,
        item: AceItem,
        feedback: Feedback,
        attempt: Generation,
        *,
        ground_truth: str | None = None,
        progress: tuple[str, Mapping[str, Any]] | None = None,
        epoch: int = 0,
    ) -> StepRecord:
        """Reflect on ``attempt``, curate, and commit tags + deltas + ``progress`` atomically."""
        t0 = time.perf_counter()
        item_id = item.id or item.question[:40]
        reflection: Reflection | None = None
        curation: Curation | None = None
        deltas: list[Delta] = []
        if self.config.reflect_on_success or feedback.correct is not True:
            reflection = self.reflector.reflect(
                attempt, feedback.message, ground_truth=ground_truth, playbook=self.store
            )
            prov = {"role": "curator", "item": item_id, "epoch": epoch}
            if reflection.insights or reflection.error is None:
                curation = self.curator.curate(reflection, self.store, **prov)
                deltas = list(curation.deltas)
            unusable = (
                curation is None
                or curation.error is not None
                or (not deltas and bool(curation.rejected))
            )
            if unusable and self.config.curator_fallback and reflection.insights:
                deltas = [
                    Delta.add(
                        self.config.fallback_section,
                        text,
                        role="reflector",
                        item=item_id,
                        epoch=epoch,
                    )
                    for text in reflection.insights
                ]
        tags = dict(reflection.tags) if reflection else {}
        if feedback.correct is not None and not tags:
            # no usable tags from the reflector: credit the cited bullets with the outcome
            tags = {bid: ("helpful" if feedback.correct else "harmful") for bid in attempt.used_ids}
        record = StepRecord(
            item_id=item_id,
            epoch=epoch,
            prediction=attempt.answer,
            correct=feedback.correct,
            used_ids=list(attempt.used_ids),
            reflection=reflection,
            curation=curation,
            deltas=deltas,
            applied=[],
            merged=0,
            seconds=0.0,
        )
        markers = None
        if progress is not None:
            run, values = progress
            markers = (run, {**values, f"step:{int(values['done']) - 1}": record.summary()})
        # tags, deltas and the progress marker land together or not at all
        report = self.store.apply(deltas, tags=tags, progress=markers, on_invalid="skip")
        record.applied = [r for r in report.results if r is not None]
        record.merged = self._refine()
        record.seconds = time.perf_counter() - t0
        return record

    def _refine(self) -> int:
        mode = self.config.dedup
        if mode == "off" or len(self.store) < 2:
            return 0
        if mode == "lazy":
            budget = self.config.budget
            if budget is None:
                return 0
            measure = self.count_tokens or len
            size = sum(measure(b.line()) + 1 for b in self.store.bullets())
            if size <= budget:
                return 0
        return len(deduplicate(self.store, self.embedder, threshold=self.config.dedup_threshold))

    # ------------------------------------------------------------------ loops
    def adapt_offline(
        self,
        items: Sequence[AceItem],
        *,
        run: str = "offline",
        scorer: Callable[[str, str], bool] = exact_match,
        feedback: FeedbackFn | None = None,
    ) -> AdaptReport:
        """Adapt on labelled ``items`` for ``config.epochs`` epochs (resumable).

        The reflector sees the label. Feedback defaults to ``scorer(prediction, label)``
        with a message stating the verdict; pass ``feedback`` to use execution feedback
        as well.
        """
        for i, it in enumerate(items):
            if it.answer is None:
                raise ValueError(f"offline adaptation needs labels; items[{i}].answer is None")

        def labelled(item: AceItem, attempt: Generation) -> Feedback:
            assert item.answer is not None
            if feedback is not None:
                return feedback(item, attempt)
            ok = scorer(attempt.answer, item.answer)
            return Feedback(
                ok,
                "correct" if ok else f"incorrect: expected {item.answer!r}, got {attempt.answer!r}",
            )

        schedule = [(e, i) for e in range(self.config.epochs) for i in range(len(items))]
        return self._loop(items, schedule, run, labelled, with_labels=True)

    def adapt_online(
        self, items: Sequence[AceItem], feedback: FeedbackFn, *, run: str = "online"
    ) -> AdaptReport:
        """Test-time adaptation: answer each item, then learn from ``feedback`` only.

        Labels are never shown to the reflector. Each prediction is made before the
        playbook learns from that item, so the report's accuracy is a fair online score.
        """
        schedule = [(0, i) for i in range(len(items))]
        return self._loop(items, schedule, run, feedback, with_labels=False)

    def _loop(
        self,
        items: Sequence[AceItem],
        schedule: list[tuple[int, int]],
        run: str,
        feedback: FeedbackFn,
        *,
        with_labels: bool,
    ) -> AdaptReport:
        t0 = time.perf_counter()
        state = self.store.get_progress(run)
        if state and state.get("total") != len(schedule):
            raise ValueError(
                f"run {run!r} in this store has {state.get('total')} steps, this call has {len(schedule)}; "
                "use another run name"
            )
        done = int(state.get("done", 0))
        resumed = done
        with _progress_bar(self.config.progress, len(schedule), f"ACE {run}", done) as advance:
            for k in range(done, len(schedule)):
                epoch, i = schedule[k]
                item = items[i]
                attempt = self.generator.answer(item.question, self.store)
                fb = feedback(item, attempt)
                rec = self.step(
                    item if item.id else AceItem(item.question, item.answer, str(i), item.meta),
                    fb,
                    attempt,
                    ground_truth=item.answer if with_labels else None,
                    progress=(run, {"done": k + 1, "total": len(schedule)}),
                    epoch=epoch,
                )
                advance(rec)
        state = self.store.get_progress(run)
        steps = [state[f"step:{k}"] for k in range(len(schedule)) if f"step:{k}" in state]
        return AdaptReport(steps=steps, resumed=resumed, seconds=time.perf_counter() - t0)


@contextmanager
def _progress_bar(
    enabled: bool, total: int, label: str, done: int
) -> Iterator[Callable[[StepRecord], None]]:
    if not enabled:
        yield lambda rec: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    ) as bar:
        task = bar.add_task(label, total=total, completed=done)
        seen = {"ok": 0, "n": 0}

        def advance(rec: StepRecord) -> None:
            seen["n"] += 1
            seen["ok"] += bool(rec.correct)
            bar.update(task, advance=1, description=f"{label} acc={seen['ok']}/{seen['n']}")

        yield advance
