"""The Operational Grammar Graph (OGG): which tool may follow which, and how well it went.

Nodes are tool names plus the two markers :data:`START` and :data:`END`; a directed edge
``a -> b`` says tool ``b`` may run right after ``a``. A *toolchain* is a path
``START -> t1 -> ... -> tn -> END`` that uses each tool at most once; only chains the
grammar accepts are ever planned or run.

Each edge carries feedback statistics: how many downstream answers produced by chains
through it were right (``successes``) out of how many (``trials``), plus a prior
(``prior_weight`` pseudo-answers at rate ``prior``). Its *weight* is the posterior
mean ``(successes + prior * prior_weight) / (trials + prior_weight)``. A chain's
*estimate* is its measured accuracy when it has been run on the validation set (memory
of whole chains), else the mean weight of its edges. :meth:`plan` returns the best
estimated chain; :meth:`refine` improves it from feedback: run the planned chain, record
its right/wrong answers on every edge it used (so tools whose chains failed lose
weight), then run the untried chain with the best estimate (a one-edit neighbour of the
current best on ties: a tool replaced, removed or inserted), and so on within a budget.
Untried edges keep their prior, so failures steer the search towards tools not yet
blamed.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["END", "START", "EdgeStats", "OperationalGrammarGraph", "RefineStep"]

START = "START"
END = "END"

Chain = tuple[str, ...]


@dataclass
class EdgeStats:
    """Feedback on one edge (counts of downstream answers)."""

    successes: float = 0.0
    trials: float = 0.0
    prior: float = 0.5
    prior_weight: float = 2.0

    @property
    def weight(self) -> float:
        """Posterior mean success rate of chains through this edge."""
        return (self.successes + self.prior * self.prior_weight) / (self.trials + self.prior_weight)


@dataclass(frozen=True)
class RefineStep:
    """One evaluation made by :meth:`OperationalGrammarGraph.refine`."""

    chain: Chain
    accuracy: float
    accepted: bool


@dataclass
class OperationalGrammarGraph:
    """A tool grammar with feedback-weighted edges.

    Args:
        edges: ``{tool_or_START: iterable of tools (or END) that may follow}``.
        priors: optional ``{(a, b): prior success rate}`` per edge (default 0.5); they
            shape the first plan before any feedback.
        max_length: longest chain (number of tools) considered.

    Examples:
        >>> g = OperationalGrammarGraph({"START": ["r"], "r": ["f", "s"], "f": ["s"], "s": ["END"]},
        ...                             priors={("r", "f"): 0.6})
        >>> g.chains()
        [('r', 'f', 's'), ('r', 's')]
        >>> g.plan()
        ('r', 'f', 's')
        >>> _ = g.record(("r", "f", "s"), [False, False, False, False])
        >>> g.plan()
        ('r', 's')
    """

    edges: Mapping[str, Iterable[str]]
    priors: Mapping[tuple[str, str], float] = field(default_factory=dict)
    max_length: int = 8
    stats: dict[tuple[str, str], EdgeStats] = field(init=False)
    memory: dict[Chain, tuple[float, int]] = field(init=False)

    def __post_init__(self) -> None:
        self.edges = {a: tuple(bs) for a, bs in self.edges.items()}
        if START not in self.edges:
            raise ValueError(f"edges must have outgoing edges from {START!r}")
        if END in self.edges:
            raise ValueError(f"{END!r} must have no outgoing edges")
        if self.max_length < 1:
            raise ValueError(f"max_length must be >= 1, got {self.max_length}")
        for (a, b), p in self.priors.items():
            if b not in self.edges.get(a, ()):
                raise ValueError(f"prior given for {a!r} -> {b!r}, which is not an edge")
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"prior of {a!r} -> {b!r} must lie in [0, 1], got {p}")
        self.stats = {
            (a, b): EdgeStats(prior=self.priors.get((a, b), 0.5))
            for a, bs in self.edges.items()
            for b in bs
        }
        self.memory = {}
        if not self.chains():
            raise ValueError(f"the grammar accepts no chain from {START!r} to {END!r}")

    # ------------------------------------------------------------------ grammar

    @property
    def tools(self) -> tuple[str, ...]:
        """Every tool named in the grammar (sorted)."""
        names = set(self.edges) | {b for bs in self.edges.values() for b in bs}
        return tuple(sorted(names - {START, END}))

    def allows(self, chain: Sequence[str]) -> bool:
        """Whether ``START -> chain -> END`` follows the grammar without repeating a tool."""
        path = [START, *chain, END]
        if len(set(chain)) != len(chain) or not 1 <= len(chain) <= self.max_length:
            return False
        return all(b in self.edges.get(a, ()) for a, b in itertools.pairwise(path))

    def chains(self) -> list[Chain]:
        """Every chain the grammar accepts (sorted)."""
        out: list[Chain] = []

        def walk(node: str, path: list[str]) -> None:
            for nxt in self.edges.get(node, ()):
                if nxt == END:
                    if path:
                        out.append(tuple(path))
                elif nxt not in path and nxt != START and len(path) < self.max_length:
                    walk(nxt, [*path, nxt])

        walk(START, [])
        return sorted(set(out))

    def _check(self, chain: Sequence[str]) -> Chain:
        chain = tuple(chain)
        if not self.allows(chain):
            raise ValueError(f"chain {list(chain)} is not accepted by the grammar")
        return chain

    # ------------------------------------------------------------------ feedback

    def _edges_of(self, chain: Chain) -> list[tuple[str, str]]:
        path = [START, *chain, END]
        return list(itertools.pairwise(path))

    def record(self, chain: Sequence[str], outcomes: Sequence[bool | float]) -> float:
        """Add downstream outcomes (1 = right answer) of ``chain`` to its edges and to
        the chain memory; returns the chain's accuracy on ``outcomes``."""
        c = self._check(chain)
        values = [float(x) for x in outcomes]
        if not values or any(not 0.0 <= v <= 1.0 for v in values):
            raise ValueError("outcomes must be a non-empty sequence of values in [0, 1]")
        wins, n = sum(values), len(values)
        for e in self._edges_of(c):
            self.stats[e].successes += wins
            self.stats[e].trials += n
        old_acc, old_n = self.memory.get(c, (0.0, 0))
        self.memory[c] = ((old_acc * old_n + wins) / (old_n + n), old_n + n)
        return wins / n

    def edge_weight(self, a: str, b: str) -> float:
        """Posterior weight of edge ``a -> b``."""
        return self.stats[(a, b)].weight

    def estimate(self, chain: Sequence[str]) -> float:
        """Measured accuracy if ``chain`` was run, else the mean weight of its edges."""
        c = self._check(chain)
        if c in self.memory:
            return self.memory[c][0]
        return sum(self.stats[e].weight for e in self._edges_of(c)) / (len(c) + 1)

    def plan(self) -> Chain:
        """The accepted chain with the best :meth:`estimate` (shorter chain on ties)."""
        return max(self.chains(), key=lambda c: (round(self.estimate(c), 12), -len(c)))

    def neighbours(self, chain: Sequence[str]) -> list[Chain]:
        """Accepted chains one edit away: a tool replaced, removed or inserted, ordered
        so edits at the weakest edges (and then the best estimates) come first."""
        c = self._check(chain)
        tools = self.tools
        cands: set[Chain] = set()
        for i in range(len(c)):
            cands.add(c[:i] + c[i + 1 :])
            for t in tools:
                cands.add((*c[:i], t, *c[i + 1 :]))
        for i in range(len(c) + 1):
            for t in tools:
                cands.add((*c[:i], t, *c[i:]))
        ok = [x for x in cands if x != c and self.allows(x)]
        weakness = {t: 1.0 for t in c}
        for a, b in self._edges_of(c):
            for t in (a, b):
                if t in weakness:
                    weakness[t] = min(weakness[t], self.stats[(a, b)].weight)

        def key(x: Chain) -> tuple[float, float, Chain]:
            changed = set(c) ^ set(x)
            weak = min((weakness.get(t, 1.0) for t in changed), default=1.0)
            return (weak, -self.estimate(x), x)

        return sorted(ok, key=key)

    def refine(
        self,
        evaluate: Callable[[Chain], Sequence[bool | float]],
        *,
        budget: int = 6,
        start: Sequence[str] | None = None,
    ) -> list[RefineStep]:
        """Improve the plan from downstream feedback.

        Args:
            evaluate: runs a chain on a validation set and returns one outcome per item
                (1/True = right answer).
            budget: number of chains to evaluate (>= 1), the start chain included.
            start: first chain (default: :meth:`plan`).

        Returns:
            The steps taken; afterwards :meth:`plan` returns the best chain measured
            (or a still better estimated one).
        """
        if budget < 1:
            raise ValueError(f"budget must be >= 1, got {budget}")
        current = self._check(start) if start is not None else self.plan()
        steps = [RefineStep(current, self.record(current, evaluate(current)), True)]
        best = steps[0].accuracy
        tried = {current}
        while len(steps) < budget:
            options = [x for x in self.chains() if x not in tried]
            if not options:
                break
            neighbours = set(self.neighbours(current))
            nxt = max(
                options, key=lambda x: (round(self.estimate(x), 12), x in neighbours, -len(x))
            )
            tried.add(nxt)
            acc = self.record(nxt, evaluate(nxt))
            accepted = acc > best
            steps.append(RefineStep(nxt, acc, accepted))
            if accepted:
                current, best = nxt, acc
        return steps

    # ------------------------------------------------------------------ persistence

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready grammar, priors, edge statistics and chain memory."""
        return {
            "edges": {a: list(bs) for a, bs in self.edges.items()},
            "priors": [[a, b, p] for (a, b), p in self.priors.items()],
            "max_length": self.max_length,
            "stats": [[a, b, s.successes, s.trials] for (a, b), s in self.stats.items()],
            "memory": [[list(c), acc, n] for c, (acc, n) in self.memory.items()],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OperationalGrammarGraph:
        """Inverse of :meth:`to_dict`."""
        g = cls(
            data["edges"],
            priors={(a, b): float(p) for a, b, p in data.get("priors", [])},
            max_length=int(data.get("max_length", 8)),
        )
        for a, b, s, t in data.get("stats", []):
            g.stats[(a, b)].successes, g.stats[(a, b)].trials = float(s), float(t)
        for c, acc, n in data.get("memory", []):
            g.memory[tuple(c)] = (float(acc), int(n))
        return g

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write :meth:`to_dict` as JSON."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=1)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> OperationalGrammarGraph:
        """Read a graph written by :meth:`save`."""
        with open(path, encoding="utf-8") as f:
            return cls.from_dict(json.load(f))

    def describe(self) -> str:
        """Edges with their weights, one per line (for logs and docs)."""
        lines = []
        for (a, b), s in sorted(self.stats.items()):
            lines.append(f"{a} -> {b}: w={s.weight:.3f} ({s.successes:g}/{s.trials:g})")
        return "\n".join(lines)
