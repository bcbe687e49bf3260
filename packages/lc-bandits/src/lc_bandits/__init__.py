"""Contextual queueing bandits: simulator, policies and queue-length regret.

Example:
    >>> from lc_bandits import ExperimentConfig, ProblemConfig, run_experiment
    >>> cfg = ExperimentConfig(
    ...     problem=ProblemConfig(horizon=100, num_instances=1, runs_per_instance=4),
    ...     policies=("cqb_opt",),
    ... )
    >>> res = run_experiment(cfg, progress=False)
    >>> sorted(res.policies)
    ['cqb_opt', 'oracle']
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from lc_bandits.config import POLICY_NAMES, ExperimentConfig, LearnerConfig, ProblemConfig
from lc_bandits.environment import Environment, make_environment, sigmoid
from lc_bandits.estimator import LogisticMLE, newton_logistic
from lc_bandits.experiment import ExperimentResult, PolicySummary, run_experiment, save_result
from lc_bandits.policies import (
    CQBEpsilon,
    CQBOpt,
    FifoUCB,
    GreedyMLE,
    OraclePolicy,
    Policy,
    PolicySpec,
    RandomPolicy,
    make_policy,
)
from lc_bandits.queue import QueueBatch
from lc_bandits.regret import (
    CurveStats,
    LinearFit,
    curve_stats,
    fit_against,
    fit_loglog,
    queue_length_regret,
)
from lc_bandits.simulator import SimulationResult, simulate

try:
    __version__: str = version("lc-bandits")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = [
    "POLICY_NAMES",
    "CQBEpsilon",
    "CQBOpt",
    "CurveStats",
    "Environment",
    "ExperimentConfig",
    "ExperimentResult",
    "FifoUCB",
    "GreedyMLE",
    "LearnerConfig",
    "LinearFit",
    "LogisticMLE",
    "OraclePolicy",
    "Policy",
    "PolicySpec",
    "PolicySummary",
    "ProblemConfig",
    "QueueBatch",
    "RandomPolicy",
    "SimulationResult",
    "__version__",
    "curve_stats",
    "fit_against",
    "fit_loglog",
    "make_environment",
    "make_policy",
    "newton_logistic",
    "queue_length_regret",
    "run_experiment",
    "save_result",
    "sigmoid",
    "simulate",
]
