"""Queue dynamics: non-negativity, conservation of jobs, first-in-first-out bookkeeping."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lc_bandits import ProblemConfig, QueueBatch, make_environment, make_policy, simulate


@settings(max_examples=30)
@given(
    st.lists(st.tuples(st.booleans(), st.integers(0, 50), st.booleans()), min_size=1, max_size=80)
)
def test_queue_batch_matches_a_list_model(ops: list[tuple[bool, int, bool]]) -> None:
    q = QueueBatch(runs=1, dim=2, capacity=1)
    model: list[tuple[float, int]] = []
    for t, (arrive, pick, depart) in enumerate(ops):
        if depart and model:
            slot = pick % len(model)
            q.remove(np.array([True]), np.array([slot]))
            model[slot] = model[-1]
            model.pop()
        if arrive:
            q.push(np.array([True]), np.array([[float(t), 0.0]]), round_index=t)
            model.append((float(t), t))
        n = int(q.lengths[0])
        assert n == len(model) >= 0
        assert sorted(q.contexts[0, :n, 0].tolist()) == sorted(m[0] for m in model)
        assert sorted(q.arrival[0, :n].tolist()) == sorted(m[1] for m in model)


def test_conservation_and_nonnegativity_for_every_policy() -> None:
    p = ProblemConfig(horizon=600, num_instances=2, runs_per_instance=3, seed=5)
    env = make_environment(p)
    for name in ("oracle", "random", "cqb_eps", "cqb_opt", "greedy", "fifo_ucb"):
        res = simulate(make_policy(name, env.theta), env, p.slack, p.param_norm, seed=1)
        assert res.lengths.min() >= 0
        expected = np.cumsum(env.arrivals, axis=1) - np.cumsum(res.departures, axis=1)
        np.testing.assert_array_equal(res.lengths, expected, err_msg=name)
        prev = np.concatenate([np.zeros((env.runs, 1), int), res.lengths[:, :-1]], axis=1)
        # a job departs only from a non-empty queue, and only one per round
        assert not np.any(res.departures & (prev == 0)), name
        assert np.all((res.servers >= 0) == (prev > 0)), name


def test_arrivals_wait_one_round() -> None:
    q = QueueBatch(runs=2, dim=1)
    assert q.lengths.tolist() == [0, 0]
    q.push(np.array([True, True]), np.array([[0.1], [0.2]]), round_index=0)
    q.push(np.array([False, True]), np.array([[9.0], [0.3]]), round_index=1)
    assert q.lengths.tolist() == [1, 2]
    assert q.arrival[1, :2].tolist() == [0, 1]


@settings(max_examples=8)
@given(
    lam=st.floats(0.2, 0.75),
    servers=st.integers(1, 4),
    dim=st.integers(1, 4),
    kind=st.sampled_from(["stochastic", "adversarial"]),
    policy=st.sampled_from(["oracle", "random", "cqb_eps", "cqb_opt", "greedy", "fifo_ucb"]),
    seed=st.integers(0, 1000),
)
def test_simulation_invariants_over_problems(
    lam: float, servers: int, dim: int, kind: str, policy: str, seed: int
) -> None:
    p = ProblemConfig(
        arrival_rate=lam,
        slack=0.05,
        num_servers=servers,
        dim=dim,
        horizon=120,
        contexts=kind,  # type: ignore[arg-type]
        num_instances=2,
        runs_per_instance=2,
        seed=seed,
    )
    env = make_environment(p)
    res = simulate(make_policy(policy, env.theta), env, p.slack, p.param_norm, seed=seed)
    assert res.lengths.min() >= 0
    expected = np.cumsum(env.arrivals, axis=1) - np.cumsum(res.departures, axis=1)
    np.testing.assert_array_equal(res.lengths, expected)
    assert np.all(res.servers < servers)
