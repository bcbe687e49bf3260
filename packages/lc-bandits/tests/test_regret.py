"""Regret statistics, fits, and the qualitative claims on a small problem."""

from __future__ import annotations

import numpy as np
import pytest

from lc_bandits import (
    ExperimentConfig,
    ProblemConfig,
    curve_stats,
    fit_against,
    fit_loglog,
    queue_length_regret,
    run_experiment,
)


def test_fit_loglog_recovers_the_exponent() -> None:
    t = np.array([500.0, 1000, 2000, 5000])
    fit = fit_loglog(t, 7.0 * t**-0.25)
    assert fit.slope == pytest.approx(-0.25)
    assert fit.r2 == pytest.approx(1.0)
    with pytest.raises(ValueError, match="positive"):
        fit_loglog(t, np.array([1.0, -1.0, 0.0, 2.0]))
    lin = fit_against(np.log(t) ** 2, 3 + 0.5 * np.log(t) ** 2)
    assert lin.slope == pytest.approx(0.5)
    assert lin.intercept == pytest.approx(3.0)


def test_curve_stats_band_and_groups() -> None:
    rng = np.random.default_rng(0)
    c = rng.normal(1.0, 2.0, size=(400, 3))
    s = curve_stats(c)
    assert np.all(s.low < s.mean)
    assert np.all(s.mean < s.high)
    np.testing.assert_allclose(s.stderr, c.std(axis=0, ddof=1) / 20)
    g = curve_stats(c, groups=np.repeat(np.arange(4), 100))
    np.testing.assert_allclose(g.mean, s.mean)
    with pytest.raises(ValueError, match="must match"):
        queue_length_regret(np.zeros((2, 3)), np.zeros((2, 4)))


def test_learners_beat_random_and_approach_the_oracle() -> None:
    cfg = ExperimentConfig(
        problem=ProblemConfig(horizon=1500, num_instances=4, runs_per_instance=5, seed=11),
        policies=("cqb_eps", "cqb_opt", "random"),
    )
    res = run_experiment(cfg, progress=False)
    pol = res.policies
    assert pol["oracle"].final_regret == 0.0
    # random serves at mean rate ~0.5 < 0.7: its queue grows linearly
    assert pol["random"].final_regret > 100
    for name in ("cqb_eps", "cqb_opt"):
        assert pol[name].final_regret < 0.05 * pol["random"].final_regret, name
        # late regret is small: within 2 jobs of the oracle at the horizon
        assert pol[name].final_regret < 2.0, name
    # CQB-epsilon pays for its exploration phase: its queue peaks early, then drains
    q = np.asarray(pol["cqb_eps"].queue_mean)
    assert q.max() > 5 * q[-1]
