"""Experiment runner: simulate policies on one coupled environment, summarize, save.

Example:
    >>> from lc_bandits.config import ExperimentConfig, ProblemConfig
    >>> cfg = ExperimentConfig(
    ...     problem=ProblemConfig(horizon=60, num_instances=1, runs_per_instance=4),
    ...     policies=("random",),
    ... )
    >>> result = run_experiment(cfg, progress=False)
    >>> sorted(result.policies)
    ['oracle', 'random']
"""

from __future__ import annotations

import json
import pathlib
import platform
import tempfile
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lc_bandits.config import ExperimentConfig
from lc_bandits.environment import Environment, make_environment
from lc_bandits.policies import make_policy
from lc_bandits.regret import curve_stats, queue_length_regret
from lc_bandits.simulator import SimulationResult, simulate

__all__ = [
    "ExperimentResult",
    "PolicySummary",
    "check_output_dir",
    "run_experiment",
    "save_result",
    "summarize",
]


@dataclass(frozen=True)
class PolicySummary:
    """Summary curves of one policy (sampled every ``record_every`` rounds).

    Attributes:
        queue_mean: mean queue length, shape ``[P]``.
        queue_low: lower 95% band, shape ``[P]``.
        queue_high: upper 95% band, shape ``[P]``.
        regret_mean: mean of ``Q_pi(t) - Q_*(t)``, shape ``[P]``.
        regret_low: lower 95% band, shape ``[P]``.
        regret_high: upper 95% band, shape ``[P]``.
        final_regret: regret at the horizon.
        final_regret_stderr: its standard error over runs.
        seconds: simulation wall time.
        steps_per_second: run-rounds per second.
    """

    queue_mean: list[float]
    queue_low: list[float]
    queue_high: list[float]
    regret_mean: list[float]
    regret_low: list[float]
    regret_high: list[float]
    final_regret: float
    final_regret_stderr: float
    seconds: float
    steps_per_second: float


@dataclass(frozen=True)
class ExperimentResult:
    """Everything an experiment reports.

    Attributes:
        config: the configuration.
        rounds: 1-based rounds at which the curves are sampled.
        policies: summary per policy name (the oracle included).
        raw: the full simulation results per policy (not serialized).
        environment_seconds: time to draw the environment.
    """

    config: ExperimentConfig
    rounds: list[int]
    policies: dict[str, PolicySummary]
    raw: dict[str, SimulationResult]
    environment_seconds: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (curves, final regrets, timings, configuration)."""
        return {
            "config": asdict(self.config),
            "rounds": self.rounds,
            "environment_seconds": self.environment_seconds,
            "machine": f"{platform.machine()} / {platform.python_implementation()} "
            f"{platform.python_version()}",
            "policies": {k: asdict(v) for k, v in self.policies.items()},
        }


def _rounded(a: NDArray[np.float64]) -> list[float]:
    return [round(float(v), 5) for v in a]


def summarize(
    results: dict[str, SimulationResult], record_every: int = 10
) -> tuple[list[int], dict[str, PolicySummary]]:
    """Queue-length and regret summaries of coupled simulations (needs ``"oracle"``).

    Returns:
        ``(rounds, summaries)`` with curves sampled every ``record_every`` rounds (the
        last round always included).
    """
    if "oracle" not in results:
        raise ValueError("summaries need the oracle's simulation as the regret reference")
    oracle = results["oracle"].lengths
    t = oracle.shape[1]
    idx = np.unique(np.r_[np.arange(record_every - 1, t, record_every), t - 1])
    out: dict[str, PolicySummary] = {}
    for name, res in results.items():
        q = curve_stats(res.lengths[:, idx])
        reg = queue_length_regret(res.lengths, oracle)
        r = curve_stats(reg[:, idx])
        fin = curve_stats(reg[:, -1:])
        out[name] = PolicySummary(
            _rounded(q.mean),
            _rounded(q.low),
            _rounded(q.high),
            _rounded(r.mean),
            _rounded(r.low),
            _rounded(r.high),
            float(fin.mean[0]),
            float(fin.stderr[0]),
            round(res.seconds, 3),
            round(res.steps_per_second, 1),
        )
    return [int(i) + 1 for i in idx], out


def simulate_policies(
    config: ExperimentConfig, env: Environment, progress: bool = True
) -> dict[str, SimulationResult]:
    """Simulate the oracle and every configured policy on ``env``."""
    p = config.problem
    names = ["oracle", *[n for n in config.policies if n != "oracle"]]
    results: dict[str, SimulationResult] = {}
    for i, name in enumerate(names):
        policy = make_policy(name, env.theta, config.learner)
        results[name] = simulate(
            policy, env, p.slack, p.param_norm, seed=p.seed * 1000 + i, progress=progress
        )
    return results


def run_experiment(config: ExperimentConfig, progress: bool = True) -> ExperimentResult:
    """Draw the environment, simulate every policy on it and summarize.

    Args:
        config: the experiment.
        progress: show progress bars.

    Returns:
        The result; also written to ``config.output_dir`` when that is set.

    Raises:
        OSError: ``config.output_dir`` cannot be created or written (checked before
            anything is simulated).
    """
    if config.output_dir is not None:
        check_output_dir(config.output_dir)  # before the simulation, not after it
    start = time.perf_counter()
    env = make_environment(config.problem)
    env_seconds = time.perf_counter() - start
    raw = simulate_policies(config, env, progress)
    rounds, summaries = summarize(raw, config.record_every)
    result = ExperimentResult(config, rounds, summaries, raw, round(env_seconds, 3))
    if config.output_dir is not None:
        save_result(result, config.output_dir)
    return result


def check_output_dir(output_dir: str | pathlib.Path) -> pathlib.Path:
    """Create ``output_dir`` if needed and make sure files can be written in it.

    Raises:
        OSError: the path exists but is not a directory, cannot be created, or a file
            cannot be created in it (the message names the path).

    Example:
        >>> import tempfile
        >>> check_output_dir(tempfile.mkdtemp()).is_dir()
        True
    """
    out = pathlib.Path(output_dir)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"output_dir {str(out)!r} exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".lc-bandits-write-check-"):
            pass
    except OSError as err:
        raise OSError(f"output_dir {str(out)!r} is not writable ({err.strerror or err})") from err
    return out


def save_result(
    result: ExperimentResult, output_dir: str | pathlib.Path
) -> tuple[pathlib.Path, pathlib.Path]:
    """Write ``<name>.json`` and ``<name>.png`` (queue length and regret curves).

    Returns:
        The paths of the JSON and PNG files.
    """
    from lc_bandits.plotting import plot_experiment

    out = pathlib.Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / f"{result.config.name}.json"
    json_path.write_text(json.dumps(result.to_dict(), indent=1) + "\n", encoding="utf-8")
    png_path = out / f"{result.config.name}.png"
    plot_experiment(result.rounds, result.policies, png_path, title=result.config.name)
    return json_path, png_path
