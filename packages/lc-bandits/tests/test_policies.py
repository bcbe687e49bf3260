"""Policies: the oracle's argmax, CQB-epsilon's phases, FIFO order, coupling."""

from __future__ import annotations

import numpy as np
import pytest

from lc_bandits import (
    CQBEpsilon,
    LearnerConfig,
    OraclePolicy,
    PolicySpec,
    ProblemConfig,
    QueueBatch,
    RandomPolicy,
    make_environment,
    make_policy,
    sigmoid,
    simulate,
)


def _queue(rng: np.random.Generator, runs: int, dim: int) -> QueueBatch:
    q = QueueBatch(runs, dim)
    for t in range(12):
        arrive = rng.random(runs) < 0.7
        x = rng.uniform(-1, 1, size=(runs, dim)) / np.sqrt(dim)
        q.push(arrive, x, t)
    return q


def test_oracle_choice_is_the_argmax_rate() -> None:
    rng = np.random.default_rng(0)
    b, k, d = 6, 4, 3
    theta = rng.normal(size=(b, k, d))
    q = _queue(rng, b, d)
    pol = OraclePolicy(theta)
    pol.reset(PolicySpec(b, k, d, 10, 0.1, 2.0))
    slots, servers = pol.select(0, q)
    for i in range(b):
        n = q.lengths[i]
        if n == 0:
            continue
        rates = sigmoid(q.contexts[i, :n] @ theta[i].T)
        assert rates[slots[i], servers[i]] == pytest.approx(rates.max())
        assert slots[i] < n


def test_oracle_rejects_wrong_theta_shape() -> None:
    pol = OraclePolicy(np.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match="oracle theta"):
        pol.reset(PolicySpec(2, 3, 5, 10, 0.1, 1.0))


def test_cqb_epsilon_phases() -> None:
    rng = np.random.default_rng(1)
    b, k, d = 50, 3, 2
    cfg = LearnerConfig(tau_scale=0.01, explore_prob=0.0)
    pol = CQBEpsilon(cfg)
    pol.reset(PolicySpec(b, k, d, 1000, 0.1, 2.0))
    assert pol.tau == cfg.tau(1000, d, 0.1) == 14
    q = _queue(rng, b, d)
    for t in range(pol.tau):
        _, servers = pol.select(t, q)
        assert np.all(servers == t % k)  # round robin
    # after tau, with no random exploration, CQB-epsilon acts like the optimistic rule
    opt = make_policy("cqb_opt", config=cfg)
    opt.reset(PolicySpec(b, k, d, 1000, 0.1, 2.0))
    s1, k1 = pol.select(pol.tau, q)
    s2, k2 = opt.select(pol.tau, q)
    active = q.lengths > 0
    np.testing.assert_array_equal(s1[active], s2[active])
    np.testing.assert_array_equal(k1[active], k2[active])


def test_fifo_ucb_serves_the_oldest_job() -> None:
    rng = np.random.default_rng(2)
    b, k, d = 8, 2, 2
    q = _queue(rng, b, d)
    q.remove(q.lengths > 1, np.zeros(b, dtype=np.int64))  # shuffles slots
    pol = make_policy("fifo_ucb")
    pol.reset(PolicySpec(b, k, d, 100, 0.1, 2.0))
    slots, _ = pol.select(0, q)
    for i in range(b):
        n = q.lengths[i]
        if n:
            assert q.arrival[i, slots[i]] == q.arrival[i, :n].min()


def test_random_policy_stays_in_range() -> None:
    rng = np.random.default_rng(3)
    q = _queue(rng, 40, 2)
    pol = RandomPolicy()
    pol.reset(PolicySpec(40, 3, 2, 10, 0.1, 1.0, seed=4))
    for _ in range(20):
        slots, servers = pol.select(0, q)
        active = q.lengths > 0
        assert np.all(slots[active] < q.lengths[active])
        assert np.all((0 <= servers) & (servers < 3))


def test_make_policy_errors() -> None:
    with pytest.raises(ValueError, match="needs theta"):
        make_policy("oracle")
    with pytest.raises(ValueError, match="unknown"):
        make_policy("exp3")


def test_simulation_is_coupled_and_reproducible() -> None:
    p = ProblemConfig(horizon=300, num_instances=1, runs_per_instance=4, seed=9)
    env = make_environment(p)
    a = simulate(make_policy("cqb_eps"), env, p.slack, p.param_norm, seed=1)
    b = simulate(make_policy("cqb_eps"), env, p.slack, p.param_norm, seed=1)
    np.testing.assert_array_equal(a.lengths, b.lengths)
    # the policy's own seed changes its choices, never the environment's arrivals
    c = simulate(make_policy("cqb_eps"), env, p.slack, p.param_norm, seed=2)
    arrivals = np.cumsum(env.arrivals, axis=1)
    for res in (a, c):
        np.testing.assert_array_equal(res.lengths + np.cumsum(res.departures, axis=1), arrivals)
