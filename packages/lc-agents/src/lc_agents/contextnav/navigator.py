"""ContextNav: agentic construction of in-context examples under a tool grammar.

A :class:`ContextNav` owns an :class:`~lc_agents.contextnav.ExamplePool`, a library of
tools (:func:`default_tools`) and an
:class:`~lc_agents.contextnav.OperationalGrammarGraph` over them
(:func:`default_grammar`). For a query it

1. plans a toolchain with the graph (``START -> retrieve -> filters -> select -> END``);
2. runs it: retrieval from the vector store, structural alignment (sentence structure,
   label space), noise-robust filtering (neighbour label agreement, de-duplication) and
   selection of ``shots`` examples;
3. widens retrieval (doubles ``k`` up to ``max_candidates``) and reruns the chain when
   the filters left fewer than ``shots`` examples: retrieval adapts to what survived.

:meth:`ContextNav.optimize` closes the loop: each candidate chain builds contexts for a
validation set, a downstream ICL model answers (:class:`IclAnswerer`), and the
right/wrong outcomes re-weight the graph's edges and steer a local search over chains
(:meth:`~lc_agents.contextnav.OperationalGrammarGraph.refine`).

Examples:
    >>> import tempfile
    >>> from lc_agents.retrieval import HashingEmbedder
    >>> from lc_agents.contextnav import ContextItem, ContextNav, ContextNavConfig, ExamplePool
    >>> pool = ExamplePool.open(tempfile.mkdtemp(), HashingEmbedder(dim=128))
    >>> _ = pool.add([ContextItem(f"s{i}", f"my parcel {w} is late", "shipping")
    ...               for i, w in enumerate(["box", "order", "gift"])] +
    ...              [ContextItem("q0", "is my parcel box late?", "yes")])
    >>> nav = ContextNav(pool, ContextNavConfig(shots=2, candidates=4))
    >>> res = nav.build(ContextItem("q", "my parcel toy is late"), label_space=["shipping"])
    >>> [c.item.label for c in res.shots]
    ['shipping', 'shipping']
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from lc_agents._validation import check_fields
from lc_agents.contextnav.alignment import filter_label_space, filter_structure, infer_label_space
from lc_agents.contextnav.graph import END, START, Chain, OperationalGrammarGraph, RefineStep
from lc_agents.contextnav.items import Candidate, ContextItem
from lc_agents.contextnav.pool import ExamplePool
from lc_agents.contextnav.selection import (
    deduplicate,
    filter_consistent,
    select_balanced,
    select_top,
)
from lc_evals import ChatModel, Message

__all__ = [
    "ContextNav",
    "ContextNavConfig",
    "ContextResult",
    "IclAnswerer",
    "NavState",
    "Tool",
    "default_grammar",
    "default_tools",
    "random_shots",
    "similarity_shots",
]

SELECTORS = ("select_top", "select_balanced")
FILTERS = ("align_structure", "align_labels", "consistency", "dedup")
RETRIEVERS = ("retrieve", "retrieve_wide")


@dataclass(frozen=True)
class ContextNavConfig:
    """Settings of context construction.

    Attributes:
        shots: examples per context (>= 1).
        candidates: ``k`` of the first retrieval (>= shots).
        max_candidates: cap on ``k`` when retrieval widens (>= candidates).
        wide_factor: ``retrieve_wide`` fetches ``wide_factor * k`` (>= 1).
        consistency_neighbours: neighbourhood of the label-agreement vote (>= 1).
        consistency_threshold: least agreement kept, in [0, 1].
        dedup_threshold: cosine from which two candidates are duplicates, in [-1, 1].
        refine_budget: chains evaluated by :meth:`ContextNav.optimize` (>= 1).
    """

    shots: int = 4
    candidates: int = 24
    max_candidates: int = 96
    wide_factor: int = 3
    consistency_neighbours: int = 5
    consistency_threshold: float = 0.5
    dedup_threshold: float = 0.95
    refine_budget: int = 6

    def __post_init__(self) -> None:
        checks: list[tuple[str, Any, bool, str]] = [
            ("shots", self.shots, self.shots >= 1, ">= 1"),
            ("candidates", self.candidates, self.candidates >= self.shots, ">= shots"),
            (
                "max_candidates",
                self.max_candidates,
                self.max_candidates >= self.candidates,
                ">= candidates",
            ),
            ("wide_factor", self.wide_factor, self.wide_factor >= 1, ">= 1"),
            (
                "consistency_neighbours",
                self.consistency_neighbours,
                self.consistency_neighbours >= 1,
                ">= 1",
            ),
            (
                "consistency_threshold",
                self.consistency_threshold,
                0.0 <= self.consistency_threshold <= 1.0,
                "in [0, 1]",
            ),
            (
                "dedup_threshold",
                self.dedup_threshold,
                -1.0 <= self.dedup_threshold <= 1.0,
                "in [-1, 1]",
            ),
            ("refine_budget", self.refine_budget, self.refine_budget >= 1, ">= 1"),
        ]
        check_fields("ContextNavConfig", checks)


@dataclass
class NavState:
    """What flows through a toolchain."""

    query: ContextItem
    k: int
    label_space: tuple[str, ...] | None
    candidates: list[Candidate] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)


Tool = Callable[[NavState], NavState]


@dataclass(frozen=True)
class ContextResult:
    """The constructed context of one query.

    Attributes:
        shots: the chosen examples, in prompt order (closest to the query last).
        chain: the toolchain that chose them.
        trace: one line per tool call (``"consistency: 18 -> 12"``) and widening.
        k: the retrieval size finally used.
    """

    shots: list[Candidate]
    chain: Chain
    trace: list[str]
    k: int

    @property
    def examples(self) -> list[ContextItem]:
        return [c.item for c in self.shots]


def default_tools(pool: ExamplePool, config: ContextNavConfig) -> dict[str, Tool]:
    """The built-in tool library (see :data:`RETRIEVERS`, :data:`FILTERS`, :data:`SELECTORS`)."""

    def logged(name: str, fn: Callable[[NavState], list[Candidate]]) -> Tool:
        def run(state: NavState) -> NavState:
            before = len(state.candidates)
            out = fn(state)
            return replace(
                state, candidates=out, trace=[*state.trace, f"{name}: {before} -> {len(out)}"]
            )

        run.__name__ = name
        return run

    def label_space(state: NavState) -> tuple[str, ...] | None:
        # The given space, else the one the aligned candidates show; None (keep every
        # candidate) when no candidate is aligned: an empty estimate means "unknown",
        # not "no label is allowed".
        if state.label_space is not None:
            return state.label_space
        return infer_label_space(state.query.text, state.candidates) or None

    return {
        "retrieve": logged("retrieve", lambda s: pool.search(s.query, min(s.k, max(len(pool), 1)))),
        "retrieve_wide": logged(
            "retrieve_wide",
            lambda s: pool.search(s.query, min(s.k * config.wide_factor, max(len(pool), 1))),
        ),
        "align_structure": logged(
            "align_structure", lambda s: filter_structure(s.query.text, s.candidates)
        ),
        "align_labels": logged(
            "align_labels", lambda s: filter_label_space(s.candidates, label_space(s))
        ),
        "consistency": logged(
            "consistency",
            lambda s: filter_consistent(
                s.candidates,
                neighbours=config.consistency_neighbours,
                threshold=config.consistency_threshold,
            ),
        ),
        "dedup": logged(
            "dedup", lambda s: deduplicate(s.candidates, threshold=config.dedup_threshold)
        ),
        "select_top": logged("select_top", lambda s: select_top(s.candidates, config.shots)),
        "select_balanced": logged(
            "select_balanced", lambda s: select_balanced(s.candidates, config.shots)
        ),
    }


def default_grammar() -> OperationalGrammarGraph:
    """The built-in grammar: a retriever first, then any of the filters (alignment before
    the label vote, which alignment makes meaningful), then a selector.

    Priors favour the full chain ``retrieve -> align_structure -> align_labels ->
    consistency -> dedup -> select_top`` until feedback says otherwise.
    """
    after_filter = {
        "align_structure": ["align_labels", "consistency", "dedup", *SELECTORS],
        "align_labels": ["align_structure", "consistency", "dedup", *SELECTORS],
        "consistency": ["dedup", *SELECTORS],
        "dedup": ["consistency", *SELECTORS],
    }
    edges: dict[str, list[str]] = {START: list(RETRIEVERS)}
    for r in RETRIEVERS:
        edges[r] = [*FILTERS, *SELECTORS]
    edges.update(after_filter)
    for s in SELECTORS:
        edges[s] = [END]
    priors = {
        ("retrieve", "align_structure"): 0.6,
        ("align_structure", "align_labels"): 0.6,
        ("align_labels", "consistency"): 0.6,
        ("consistency", "dedup"): 0.55,
        ("dedup", "select_top"): 0.6,
    }
    return OperationalGrammarGraph(edges, priors=priors)


class ContextNav:
    """Plans and runs toolchains that pick in-context examples from a pool.

    Args:
        pool: the example pool.
        config: settings (shots, retrieval sizes, thresholds).
        graph: the tool grammar (default: :func:`default_grammar`).
        tools: extra or replacement tools by name; every tool in ``graph`` must exist.
    """

    def __init__(
        self,
        pool: ExamplePool,
        config: ContextNavConfig | None = None,
        *,
        graph: OperationalGrammarGraph | None = None,
        tools: dict[str, Tool] | None = None,
    ) -> None:
        self.pool = pool
        self.config = config or ContextNavConfig()
        self.graph = graph or default_grammar()
        self.tools = {**default_tools(pool, self.config), **(tools or {})}
        missing = sorted(set(self.graph.tools) - set(self.tools))
        if missing:
            raise ValueError(f"the grammar names tools with no implementation: {missing}")

    def run_chain(
        self,
        chain: Sequence[str],
        query: ContextItem,
        label_space: Sequence[str] | None = None,
    ) -> ContextResult:
        """Run ``chain`` for ``query``; widen retrieval while too few examples survive."""
        chain = tuple(chain)
        if not self.graph.allows(chain):
            raise ValueError(f"chain {list(chain)} is not accepted by the grammar")
        space = tuple(label_space) if label_space is not None else None
        k = self.config.candidates
        widen: list[str] = []
        while True:
            state = NavState(query, k, space)
            for name in chain:
                state = self.tools[name](state)
            if len(state.candidates) >= self.config.shots or k >= self.config.max_candidates:
                break
            if k >= len(self.pool):
                break
            new_k = min(2 * k, self.config.max_candidates)
            widen.append(
                f"widen: {len(state.candidates)} < {self.config.shots} shots, k {k} -> {new_k}"
            )
            k = new_k
        shots = state.candidates[: self.config.shots]
        return ContextResult(shots, chain, [*widen, *state.trace], k)

    def build(self, query: ContextItem, label_space: Sequence[str] | None = None) -> ContextResult:
        """The context of ``query`` from the graph's current plan."""
        return self.run_chain(self.graph.plan(), query, label_space)

    def optimize(
        self,
        validation: Sequence[ContextItem],
        answerer: IclAnswerer,
        label_space: Sequence[str] | None = None,
        *,
        budget: int | None = None,
        progress: bool = False,
    ) -> list[RefineStep]:
        """Refine the graph from downstream ICL feedback on labelled ``validation`` items.

        Args:
            validation: queries with gold labels.
            answerer: the downstream model wrapper (:class:`IclAnswerer`).
            label_space: the task's labels (else inferred per query).
            budget: chains to evaluate (default: ``config.refine_budget``).
            progress: print one line per evaluated chain.

        Returns:
            The refinement steps (chain, validation accuracy, accepted).
        """
        if not validation or any(v.label is None for v in validation):
            raise ValueError("validation items must be non-empty and all labelled")

        def evaluate(chain: Chain) -> list[bool]:
            out = []
            for q in validation:
                res = self.run_chain(chain, q, label_space)
                out.append(answerer.correct(q, res.examples))
            if progress:
                print(f"  {' -> '.join(chain)}: {sum(out)}/{len(out)}")
            return out

        return self.graph.refine(evaluate, budget=budget or self.config.refine_budget)


def similarity_shots(pool: ExamplePool, query: ContextItem, shots: int) -> list[ContextItem]:
    """Baseline: the ``shots`` most similar examples, closest last."""
    return [c.item for c in select_top(pool.search(query, shots), shots)]


def random_shots(
    examples: Sequence[ContextItem], shots: int, seed: int, query_id: str = ""
) -> list[ContextItem]:
    """Baseline: ``shots`` examples drawn uniformly (seeded by ``seed`` and ``query_id``)."""
    rng = random.Random(f"{seed}:{query_id}")
    return rng.sample(list(examples), min(shots, len(examples)))


class IclAnswerer:
    """The downstream in-context learner: prompts a chat model with shots and a query.

    The prompt is ``instruction`` as the system message and, as the user message, each
    shot as ``"{input_prefix} {text}\\n{label_prefix} {label}"`` then the query with an
    open label; the reply's first label of ``labels`` (whole word, case-insensitive) is
    the prediction.

    Args:
        model: any chat model (``chat(messages, **options) -> str``).
        instruction: task instruction (system message).
        labels: the label space used to parse replies.
        input_prefix: field name before each example's text.
        label_prefix: field name before each example's label.
        max_tokens: reply cap.
    """

    def __init__(
        self,
        model: ChatModel,
        instruction: str,
        labels: Sequence[str],
        *,
        input_prefix: str = "Message:",
        label_prefix: str = "Topic:",
        max_tokens: int = 6,
    ) -> None:
        if not labels:
            raise ValueError("labels must not be empty")
        self.model = model
        self.instruction = instruction
        self.labels = tuple(labels)
        self.input_prefix = input_prefix
        self.label_prefix = label_prefix
        self.max_tokens = max_tokens
        alternatives = "|".join(re.escape(x) for x in sorted(self.labels, key=len, reverse=True))
        self._label_re = re.compile(rf"\b({alternatives})\b", re.IGNORECASE)

    def prompt(self, query: ContextItem, shots: Sequence[ContextItem]) -> list[Message]:
        """The chat messages for ``query`` with ``shots``."""
        parts = [f"{self.input_prefix} {s.text}\n{self.label_prefix} {s.label}" for s in shots]
        parts.append(f"{self.input_prefix} {query.text}\n{self.label_prefix}")
        return [
            {"role": "system", "content": self.instruction},
            {"role": "user", "content": "\n\n".join(parts)},
        ]

    def parse(self, reply: str) -> str | None:
        """The first label named in ``reply`` (as spelled in ``labels``), else ``None``."""
        m = self._label_re.search(reply)
        if not m:
            return None
        return next(x for x in self.labels if x.lower() == m.group(1).lower())

    def answer(self, query: ContextItem, shots: Sequence[ContextItem]) -> str | None:
        """The model's predicted label (``None`` when the reply names none)."""
        reply = self.model.chat(self.prompt(query, shots), max_tokens=self.max_tokens)
        return self.parse(reply)

    def correct(self, query: ContextItem, shots: Sequence[ContextItem]) -> bool:
        """Whether the predicted label equals ``query.label``."""
        return self.answer(query, shots) == query.label
