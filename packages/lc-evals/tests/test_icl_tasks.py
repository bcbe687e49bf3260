"""The nine formal ICL tasks: labels, determinism, and distribution shift."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lc_evals.icl import DELTAS, ICL_TASKS, check_label, generate_examples, make_icl_items
from lc_evals.icl import SHIFTED_STATS as SHIFTED_STAT
from lc_evals.icl.graphs import _find_cycle
from lc_evals.icl.strings import PATTERN, _kmp_automaton

deltas = st.one_of(st.sampled_from(DELTAS), st.floats(0.0, 0.9))


def test_the_nine_tasks_are_registered_in_paper_order() -> None:
    assert ICL_TASKS == (
        "parity",
        "pattern_matching",
        "reversal",
        "stack",
        "hamiltonian",
        "maze_complete",
        "maze_solve",
        "vending_machine",
        "vending_machine_sum",
    )
    assert set(SHIFTED_STAT) == set(ICL_TASKS)


@pytest.mark.parametrize("task", ICL_TASKS)
@settings(max_examples=15)
@given(seed=st.integers(0, 2**31 - 1), delta=deltas)
def test_labels_agree_with_the_independent_checker(task: str, seed: int, delta: float) -> None:
    for ex in generate_examples(task, 6, delta=delta, seed=seed):
        assert check_label(task, ex.input) == ex.label, ex.input


@pytest.mark.parametrize("task", [t for t in ICL_TASKS if t != "vending_machine_sum"])
@pytest.mark.parametrize("label", ["0", "1"])
def test_forced_labels_are_honoured_and_checked(task: str, label: str) -> None:
    for ex in generate_examples(task, 8, delta=0.65, seed=11, label=label):
        assert ex.label == label
        assert check_label(task, ex.input) == label


@pytest.mark.parametrize("task", ICL_TASKS)
@settings(max_examples=8)
@given(seed=st.integers(0, 2**31 - 1), delta=st.sampled_from(DELTAS))
def test_same_seed_gives_the_same_examples(task: str, seed: int, delta: float) -> None:
    a = generate_examples(task, 3, delta=delta, seed=seed)
    b = generate_examples(task, 3, delta=delta, seed=seed)
    assert a == b
    # every example depends on (seed, task, index) only: a longer run extends a shorter one
    assert generate_examples(task, 5, delta=delta, seed=seed)[:3] == a


@pytest.mark.parametrize("task", ICL_TASKS)
def test_different_seeds_give_different_examples(task: str) -> None:
    a = [e.input for e in generate_examples(task, 10, seed=1)]
    b = [e.input for e in generate_examples(task, 10, seed=2)]
    assert a != b


def _mean_and_se(values: list[float]) -> tuple[float, float]:
    arr = np.asarray(values)
    return float(arr.mean()), float(arr.std(ddof=1) / math.sqrt(len(arr)))


@pytest.mark.parametrize("task", ICL_TASKS)
def test_shift_moves_the_statistic_and_delta_zero_matches_training(task: str) -> None:
    stat, n = SHIFTED_STAT[task], 160
    train = [e.stats[stat] for e in generate_examples(task, n, delta=0.0, seed=101)]
    # the delta = 0 test queries come from other streams than the exemplars (seed 101)
    test0 = [it.metadata["stats"][stat] for it in make_icl_items(task, n, 0, delta=0.0, seed=7)]
    test85 = [e.stats[stat] for e in generate_examples(task, n, delta=0.85, seed=202)]
    (m_tr, se_tr), (m0, se0), (m85, se85) = map(_mean_and_se, (train, test0, test85))
    assert abs(m0 - m_tr) < 4 * math.hypot(se0, se_tr), (m0, m_tr)
    assert abs(m85 - m_tr) > 6 * math.hypot(se85, se_tr), (m85, m_tr)


@pytest.mark.parametrize("task", ["parity", "stack", "hamiltonian", "vending_machine"])
def test_shift_grows_monotonically_across_the_paper_deltas(task: str) -> None:
    stat = SHIFTED_STAT[task]
    means = [
        np.mean([e.stats[stat] for e in generate_examples(task, 150, delta=d, seed=5)])
        for d in DELTAS
    ]
    assert means[-1] - means[0] > 0
    assert np.corrcoef(DELTAS, means)[0, 1] > 0.9, means


def test_binary_labels_are_roughly_balanced() -> None:
    labels = [e.label for e in generate_examples("parity", 400, seed=3)]
    assert 0.4 < labels.count("1") / 400 < 0.6


# ---------------------------------------------------------------- checkers by hand


@pytest.mark.parametrize(
    ("task", "text", "label"),
    [
        ("parity", "1111", "1"),
        ("parity", "0101", "1"),
        ("parity", "0111", "0"),
        ("pattern_matching", "ccabcabbca", "1"),
        ("pattern_matching", "abcababcab", "0"),
        ("reversal", "ka % zu # zu % ka", "1"),
        ("reversal", "ka % zu # zu ka %", "0"),
        ("reversal", "ka % # % ka ka", "0"),
        ("stack", "stack: 01\nops: push 1, pop, pop\nresult: 0", "1"),
        ("stack", "stack: 01\nops: pop, pop\nresult: empty", "1"),
        ("stack", "stack: 01\nops: push 0\nresult: 001", "0"),
        ("hamiltonian", "vertices: 0-3\nedges: 0-1 1-2 2-3 0-3\npath: 0,1,2,3", "1"),
        ("hamiltonian", "vertices: 0-3\nedges: 0-1 1-2 2-3\npath: 0,1,2,3", "0"),
        ("hamiltonian", "vertices: 0-3\nedges: 0-1 1-2 2-3 0-3\npath: 0,1,2", "0"),
        ("vending_machine", "+10, +10, coffee, +10 = 15", "1"),
        ("vending_machine", "+10, +10, coffee, +10 = 5", "0"),
        ("vending_machine_sum", "+10, +5, +10, soda", "0"),
        ("maze_solve", "#####\n#S  #\n### #\n#  E#\n#####\nmoves: right, down", "1"),
        ("maze_solve", "#####\n#S  #\n### #\n#  E#\n#####\nmoves: down, right", "0"),
        ("maze_solve", "#####\n#S  #\n### #\n#  E#\n#####\nmoves: right", "0"),
        ("maze_complete", "#####\n#S??#\n###?#\n#  E#\n#####\nmissing moves: right, down", "1"),
        ("maze_complete", "#####\n#S??#\n###?#\n#  E#\n#####\nmissing moves: down, right", "0"),
    ],
)
def test_checkers_on_hand_made_inputs(task: str, text: str, label: str) -> None:
    assert check_label(task, text) == label


@pytest.mark.parametrize(
    ("task", "text"),
    [
        ("parity", "0120"),
        ("pattern_matching", "abd"),
        ("reversal", "ka % zu"),
        ("stack", "stack: 0\nops: pop, pop\nresult: empty"),
        ("vending_machine", "+5, soda = 0"),
        ("vending_machine_sum", "+5, tea"),
        ("hamiltonian", "edges: 0-1"),
        ("maze_solve", "#\nmoves: up"),
    ],
)
def test_checkers_reject_malformed_inputs(task: str, text: str) -> None:
    with pytest.raises(ValueError):
        check_label(task, text)


def test_unknown_task_and_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="unknown ICL task"):
        generate_examples("sudoku", 1)
    with pytest.raises(ValueError, match="unknown ICL task"):
        check_label("sudoku", "x")
    with pytest.raises(ValueError, match="delta"):
        generate_examples("parity", 1, delta=1.5)
    with pytest.raises(ValueError, match="label"):
        generate_examples("parity", 1, label="yes")
    with pytest.raises(ValueError, match="numeric"):
        generate_examples("vending_machine_sum", 1, label="1")
    with pytest.raises(ValueError, match="seed"):
        generate_examples("parity", 1, seed=-1)


# ------------------------------------------------------- generator internals vs brute force


def test_matching_automaton_agrees_with_substring_search() -> None:
    table = _kmp_automaton(PATTERN, "abc")
    rng = np.random.default_rng(0)
    for _ in range(500):
        text = "".join(rng.choice(list("abc"), size=int(rng.integers(1, 30))))
        state = 0
        for ch in text:
            state = table[state][ch]
        assert (state == len(PATTERN)) == (PATTERN in text)


def test_cycle_search_agrees_with_brute_force() -> None:
    from itertools import permutations

    rng = np.random.default_rng(1)
    for _ in range(60):
        n = int(rng.integers(3, 7))
        adj: list[set[int]] = [set() for _ in range(n)]
        for u in range(n):
            for v in range(u + 1, n):
                if rng.random() < 0.5:
                    adj[u].add(v)
                    adj[v].add(u)
        brute = any(
            all(c[(i + 1) % n] in adj[c[i]] for i in range(n))
            for c in ((0, *p) for p in permutations(range(1, n)))
        )
        assert (_find_cycle(n, adj, rng) is not None) == brute
