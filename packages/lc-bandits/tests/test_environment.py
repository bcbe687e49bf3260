"""The environment: contexts, slack, seeds, and departure frequencies vs logistic rates."""

from __future__ import annotations

import numpy as np
import pytest

from lc_bandits import (
    Environment,
    ProblemConfig,
    RandomPolicy,
    make_environment,
    sigmoid,
    simulate,
)

SMALL = ProblemConfig(horizon=400, num_instances=2, runs_per_instance=3, seed=3)


def test_contexts_respect_norm_and_slack() -> None:
    for kind in ("stochastic", "adversarial"):
        env = make_environment(
            ProblemConfig(horizon=300, num_instances=3, runs_per_instance=2, contexts=kind)
        )
        assert np.linalg.norm(env.contexts, axis=-1).max() <= 1.0 + 1e-12
        best = env.rates(env.contexts).max(axis=-1)
        assert best.min() >= 0.8 - 1e-12
        norms = np.linalg.norm(env.theta, axis=-1)
        np.testing.assert_allclose(norms, ProblemConfig().param_norm)


def test_same_seed_same_environment_and_horizon_prefix() -> None:
    a = make_environment(SMALL)
    b = make_environment(SMALL)
    np.testing.assert_array_equal(a.contexts, b.contexts)
    np.testing.assert_array_equal(a.arrivals, b.arrivals)
    short = make_environment(SMALL, horizon=100)
    np.testing.assert_array_equal(short.arrivals, a.arrivals[:, :100])
    np.testing.assert_array_equal(short.theta, a.theta)
    other = make_environment(
        ProblemConfig(horizon=400, num_instances=2, runs_per_instance=3, seed=4)
    )
    assert not np.array_equal(other.theta, a.theta)
    # runs of one instance share theta, instances differ
    assert np.array_equal(a.theta[0], a.theta[2])
    assert not np.array_equal(a.theta[0], a.theta[3])


@pytest.mark.parametrize("kind", ["stochastic", "adversarial"])
def test_shorter_horizon_is_an_exact_prefix(kind: str) -> None:
    # every per-round draw (arrival, context, departure uniform) must not depend on T,
    # so that runs at different horizons are coupled
    p = ProblemConfig(horizon=700, num_instances=2, runs_per_instance=2, seed=5, contexts=kind)
    long = make_environment(p)
    for t in (1, 37, 149, 150, 333, 699):
        short = make_environment(p, horizon=t)
        ref = long.prefix(t)
        np.testing.assert_array_equal(short.theta, ref.theta)
        np.testing.assert_array_equal(short.arrivals, ref.arrivals)
        np.testing.assert_array_equal(short.uniforms, ref.uniforms)
        np.testing.assert_array_equal(short.contexts, ref.contexts)


def test_oracle_on_a_shorter_horizon_follows_the_longer_run() -> None:
    from lc_bandits import OraclePolicy

    p = ProblemConfig(horizon=300, num_instances=1, runs_per_instance=4, seed=2)
    long_env, short_env = make_environment(p), make_environment(p, horizon=120)
    q_long = simulate(OraclePolicy(long_env.theta), long_env, p.slack, p.param_norm, seed=0)
    q_short = simulate(OraclePolicy(short_env.theta), short_env, p.slack, p.param_norm, seed=0)
    np.testing.assert_array_equal(q_short.lengths, q_long.lengths[:, :120])


def test_arrival_frequency_matches_lambda() -> None:
    env = make_environment(
        ProblemConfig(horizon=4000, num_instances=2, runs_per_instance=5, seed=1)
    )
    n = env.arrivals.size
    # binomial: 5 standard deviations
    assert abs(env.arrivals.mean() - 0.7) < 5 * np.sqrt(0.7 * 0.3 / n)


def test_departure_frequencies_match_logistic_rates() -> None:
    env = make_environment(
        ProblemConfig(horizon=3000, num_instances=2, runs_per_instance=5, seed=2)
    )
    res = simulate(RandomPolicy(), env, slack=0.1, norm_bound=2.1, seed=0)
    served = res.servers >= 0
    p = res.rates[served]
    d = res.departures[served].astype(float)
    assert p.size > 10_000
    # overall: sum of Bernoulli(p) within 5 standard deviations of its mean
    assert abs(d.sum() - p.sum()) < 5 * np.sqrt((p * (1 - p)).sum())
    # calibration per rate bin
    bins = np.quantile(p, np.linspace(0, 1, 6))
    which = np.clip(np.searchsorted(bins, p, side="right") - 1, 0, 4)
    for j in range(5):
        sel = which == j
        var = (p[sel] * (1 - p[sel])).sum()
        assert abs(d[sel].sum() - p[sel].sum()) < 5 * np.sqrt(var), j


def test_bad_environment_inputs_raise() -> None:
    env = make_environment(SMALL)
    with pytest.raises(ValueError, match="dimension mismatch"):
        Environment(env.theta, env.arrivals, env.contexts[..., :3], env.uniforms, env.instance, 0.7)
    big = env.contexts * 2.0
    with pytest.raises(ValueError, match="context norms must be <= 1"):
        Environment(env.theta, env.arrivals, big, env.uniforms, env.instance, 0.7)
    with pytest.raises(ValueError, match="horizon"):
        make_environment(SMALL, horizon=0)
    with pytest.raises(ValueError, match="uniforms"):
        Environment(env.theta, env.arrivals, env.contexts, env.uniforms + 1.0, env.instance, 0.7)


def test_unstable_arrival_rate_warns() -> None:
    env = make_environment(SMALL)
    weak = -env.theta  # rates below 1/2 on every slack context
    with pytest.warns(RuntimeWarning, match="unstable"):
        Environment(weak, env.arrivals, env.contexts, env.uniforms, env.instance, 0.7)


def test_infeasible_slack_raises() -> None:
    # kappa = 4.5 gives ||theta|| = 0.69: no rate reaches 0.7 + 0.2
    with pytest.raises(ValueError, match="lower the slack"):
        make_environment(
            ProblemConfig(horizon=20, num_instances=1, runs_per_instance=1, slack=0.2, kappa=4.5)
        )


def test_sigmoid_is_stable() -> None:
    z = np.array([-1000.0, 0.0, 1000.0])
    np.testing.assert_allclose(sigmoid(z), [0.0, 0.5, 1.0])
