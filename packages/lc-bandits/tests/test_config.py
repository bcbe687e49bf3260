"""Validation of the configurations and of the derived constants."""

from __future__ import annotations

import math

import pytest

from lc_bandits import ExperimentConfig, LearnerConfig, ProblemConfig


def test_defaults_are_the_paper_setting() -> None:
    p = ProblemConfig()
    assert (p.arrival_rate, p.slack, p.num_servers, p.dim, p.horizon) == (0.7, 0.1, 5, 5, 5000)
    assert (p.num_instances, p.kappa) == (10, 10.0)


def test_param_norm_matches_kappa() -> None:
    s = ProblemConfig(kappa=10.0).param_norm
    p = 1.0 / (1.0 + math.exp(-s))
    assert 1.0 / (p * (1.0 - p)) == pytest.approx(10.0, rel=1e-12)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("arrival_rate", 0.0),
        ("arrival_rate", 1.0),
        ("slack", -0.1),
        ("horizon", 0),
        ("horizon", -5),
        ("num_servers", 0),
        ("dim", 0),
        ("kappa", 3.0),
        ("contexts", "bursty"),
        ("seed", -1),
    ],
)
def test_bad_problem_fields_are_named(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        ProblemConfig(**{field: value})  # type: ignore[arg-type]


def test_slack_must_leave_room_below_one() -> None:
    with pytest.raises(ValueError, match="arrival_rate \\+ slack < 1"):
        ProblemConfig(arrival_rate=0.9, slack=0.1)


def test_learner_schedule_constants() -> None:
    c = LearnerConfig()
    # tau = ceil(0.1 * 5 * log(5000) / 0.1^2)
    assert c.tau(5000, 5, 0.1) == math.ceil(0.1 * 5 * math.log(5000) / 0.01) == 426
    assert c.tau(100, 5, 0.05) == 100  # capped at the horizon
    assert c.exploration(2500) == pytest.approx(0.02)
    assert c.confidence(1000) == pytest.approx(1e-3)
    with pytest.raises(ValueError, match="reg"):
        LearnerConfig(reg=0.0)
    with pytest.raises(ValueError, match="explore_prob"):
        LearnerConfig(explore_prob=1.5)


def test_experiment_from_dict_rejects_unknown_keys() -> None:
    cfg = ExperimentConfig.from_dict(
        {"problem": {"horizon": 50}, "learner": {"beta_scale": 0.5}, "policies": ["random"]}
    )
    assert cfg.problem.horizon == 50
    assert cfg.learner.beta_scale == 0.5
    assert cfg.policies == ("random",)
    with pytest.raises(ValueError, match="unknown config keys"):
        ExperimentConfig.from_dict({"horizon": 50})
    with pytest.raises(ValueError, match="in section 'problem'"):
        ExperimentConfig.from_dict({"problem": {"T": 50}})
    with pytest.raises(ValueError, match="policies"):
        ExperimentConfig(policies=("thompson",))


def test_policies_given_as_one_string_are_names_not_characters() -> None:
    assert ExperimentConfig.from_dict({"policies": "cqb_eps"}).policies == ("cqb_eps",)
    both = ExperimentConfig.from_dict({"policies": "cqb_eps, random"})
    assert both.policies == ("cqb_eps", "random")
    with pytest.raises(ValueError, match="policies"):
        ExperimentConfig.from_dict({"policies": 3})
