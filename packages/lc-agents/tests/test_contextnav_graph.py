"""The Operational Grammar Graph: grammar, posterior weights, planning, refinement, I/O."""

from __future__ import annotations

import itertools

import pytest

from lc_agents.contextnav import END, START, OperationalGrammarGraph, default_grammar

EDGES = {
    START: ["r1", "r2"],
    "r1": ["f1", "f2", "s"],
    "r2": ["f1", "f2", "s"],
    "f1": ["f2", "s"],
    "f2": ["f1", "s"],
    "s": [END],
}


def brute_force(g: OperationalGrammarGraph) -> list[tuple[str, ...]]:
    out = []
    for n in range(1, len(g.tools) + 1):
        for perm in itertools.permutations(g.tools, n):
            if g.allows(perm):
                out.append(perm)
    return sorted(out)


def test_chains_match_brute_force() -> None:
    g = OperationalGrammarGraph(EDGES)
    assert g.chains() == brute_force(g)
    assert len(g.chains()) == 2 * (1 + 2 + 2)
    assert not g.allows(("r1", "f1", "f1", "s"))
    assert not g.allows(("f1", "s"))
    d = default_grammar()
    assert d.chains() == brute_force(d)
    assert d.plan() == (
        "retrieve",
        "align_structure",
        "align_labels",
        "consistency",
        "dedup",
        "select_top",
    )


def test_posterior_weights_closed_form() -> None:
    g = OperationalGrammarGraph(EDGES, priors={("r1", "f1"): 0.8})
    assert g.edge_weight("r1", "f1") == pytest.approx(0.8)
    acc = g.record(("r1", "f1", "s"), [True, False, True, True])
    assert acc == pytest.approx(0.75)
    # (3 + 0.8 * 2) / (4 + 2)
    assert g.edge_weight("r1", "f1") == pytest.approx(4.6 / 6)
    assert g.edge_weight(START, "r1") == pytest.approx(4.0 / 6)
    assert g.edge_weight("r2", "f1") == pytest.approx(0.5)
    assert g.estimate(("r1", "f1", "s")) == pytest.approx(0.75)  # memory wins
    g.record(("r1", "f1", "s"), [False, False, False, False])
    assert g.estimate(("r1", "f1", "s")) == pytest.approx(3 / 8)


def test_bad_grammar_and_input() -> None:
    with pytest.raises(ValueError, match="START"):
        OperationalGrammarGraph({"a": [END]})
    with pytest.raises(ValueError, match="no chain"):
        OperationalGrammarGraph({START: ["a"], "a": ["b"]})
    with pytest.raises(ValueError, match="not an edge"):
        OperationalGrammarGraph(EDGES, priors={("s", "r1"): 0.5})
    g = OperationalGrammarGraph(EDGES)
    with pytest.raises(ValueError, match="not accepted"):
        g.record(("s",), [True])
    with pytest.raises(ValueError, match="outcomes"):
        g.record(("r1", "s"), [])


def test_refine_finds_the_chain_the_feedback_favours() -> None:
    """Downstream accuracy is 0.9 with f2 after r2, 0.2 otherwise; the initial plan
    (priors) avoids both, so only feedback can lead there."""
    g = OperationalGrammarGraph(EDGES, priors={("r1", "f1"): 0.9, ("f1", "s"): 0.9})
    assert g.plan() == ("r1", "f1", "s")

    def evaluate(chain):
        good = "r2" in chain and "f2" in chain
        n_right = 9 if good else 2
        return [True] * n_right + [False] * (10 - n_right)

    steps = g.refine(evaluate, budget=10)
    assert steps[0].chain == ("r1", "f1", "s")
    assert len(steps) <= 10
    best = g.plan()
    assert "r2" in best
    assert "f2" in best
    assert g.estimate(best) == pytest.approx(0.9)
    # every recorded failure lowered the weights of the edges used
    assert g.edge_weight("r1", "f1") < 0.9


def test_save_load_roundtrip(tmp_path) -> None:
    g = OperationalGrammarGraph(EDGES, priors={("r1", "f1"): 0.7})
    g.record(("r2", "f2", "s"), [True, True, False])
    g.save(tmp_path / "ogg.json")
    h = OperationalGrammarGraph.load(tmp_path / "ogg.json")
    assert h.plan() == g.plan()
    assert h.memory == g.memory
    assert h.describe() == g.describe()
