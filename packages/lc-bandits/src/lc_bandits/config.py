"""Frozen, validated configurations of problems, learners and experiments.

Defaults are the settings of the contextual queueing bandit experiments (arrival rate
0.7, traffic slack 0.1, five servers, five-dimensional contexts, horizon 5000, ten
instances, worst-case logistic curvature ``kappa`` = 10).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Literal

ContextKind = Literal["stochastic", "adversarial"]
CONTEXT_KINDS: tuple[str, ...] = ("stochastic", "adversarial")


def _fail(name: str, value: object, allowed: str) -> ValueError:
    return ValueError(f"{name}={value!r} is invalid; allowed: {allowed}")


def _check_int(name: str, value: object, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise _fail(name, value, f"an integer >= {low}")


def _check_float(name: str, value: object, low: float, high: float, *, closed: bool) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _fail(name, value, f"a finite number in ({low}, {high}{']' if closed else ')'}")
    ok = low < value <= high if closed else low < value < high
    if not ok:
        raise _fail(name, value, f"a number in ({low}, {high}{']' if closed else ')'}")


@dataclass(frozen=True)
class ProblemConfig:
    """A family of contextual queueing bandit instances.

    One queue, ``num_servers`` servers; in each round a job arrives with probability
    ``arrival_rate`` carrying a context ``x`` with ``||x||_2 <= 1``; serving job ``x`` on
    server ``k`` completes it with probability ``sigmoid(x @ theta_k)``. Contexts are
    drawn so that every job has a server with rate at least ``arrival_rate + slack``
    (the traffic-slack condition), and every ``||theta_k||_2`` equals the radius ``S``
    at which ``1 / sigmoid'(S) = kappa``.

    Attributes:
        arrival_rate: Bernoulli arrival probability ``lambda`` per round, in (0, 1).
        slack: traffic slack ``epsilon``; ``arrival_rate + slack`` must be below 1.
        num_servers: number of servers ``K``.
        dim: context dimension ``d``.
        horizon: number of rounds ``T``.
        kappa: worst-case inverse logistic slope; sets the parameter norm ``S``.
        contexts: ``"stochastic"`` (i.i.d. contexts) or ``"adversarial"`` (an oblivious
            adversary that switches between a few context regions in blocks of growing
            length).
        num_instances: number of independently drawn parameter sets ``theta``.
        runs_per_instance: independent replications of each instance (arrivals,
            contexts and departures redrawn).
        seed: root seed; every random stream is derived from it.

    Example:
        >>> ProblemConfig(horizon=200, num_instances=2).total_runs
        40
    """

    arrival_rate: float = 0.7
    slack: float = 0.1
    num_servers: int = 5
    dim: int = 5
    horizon: int = 5000
    kappa: float = 10.0
    contexts: ContextKind = "stochastic"
    num_instances: int = 10
    runs_per_instance: int = 20
    seed: int = 0

    def __post_init__(self) -> None:
        _check_float("arrival_rate", self.arrival_rate, 0.0, 1.0, closed=False)
        _check_float("slack", self.slack, 0.0, 1.0, closed=False)
        if self.arrival_rate + self.slack >= 1.0:
            raise _fail(
                "slack",
                self.slack,
                f"arrival_rate + slack < 1 (got {self.arrival_rate + self.slack:.3f}); "
                "no logistic rate reaches 1",
            )
        _check_int("num_servers", self.num_servers, 1)
        _check_int("dim", self.dim, 1)
        _check_int("horizon", self.horizon, 1)
        if isinstance(self.kappa, bool) or not isinstance(self.kappa, int | float):
            raise _fail("kappa", self.kappa, "a number > 4")
        if not self.kappa > 4.0 or not math.isfinite(self.kappa):
            raise _fail("kappa", self.kappa, "a finite number > 4 (4 is the slope at 0)")
        if self.contexts not in CONTEXT_KINDS:
            raise _fail("contexts", self.contexts, " | ".join(CONTEXT_KINDS))
        _check_int("num_instances", self.num_instances, 1)
        _check_int("runs_per_instance", self.runs_per_instance, 1)
        _check_int("seed", self.seed, 0)

    @property
    def total_runs(self) -> int:
        """Number of simulated runs, ``num_instances * runs_per_instance``."""
        return self.num_instances * self.runs_per_instance

    @property
    def param_norm(self) -> float:
        """Radius ``S`` with ``1 / sigmoid'(S) = kappa`` (S = 2.063 for kappa = 10)."""
        p = 0.5 * (1.0 + math.sqrt(1.0 - 4.0 / self.kappa))
        return math.log(p / (1.0 - p))


@dataclass(frozen=True)
class LearnerConfig:
    """Hyper-parameters shared by the learning policies.

    Attributes:
        reg: ridge weight ``lambda_reg`` of the regularized logistic MLE and of the design
            matrix ``V_k = reg * I + sum x x^T``.
        beta_scale: multiplies the self-normalized radius in the optimistic bonus
            ``beta_k * ||x||_{V_k^{-1}}``. The worst-case theory corresponds to
            ``kappa / 4`` (2.5 for kappa = 10); the default is a tuned, less conservative
            value.
        delta: confidence level of the radius; ``None`` means ``1 / horizon``.
        tau_scale: CQB-epsilon explores purely for
            ``tau = ceil(tau_scale * d * log(T) / slack**2)`` rounds (capped at ``T``).
        explore_prob: probability of a uniformly random job-server pair after ``tau``;
            ``None`` means ``T ** -0.5``.
        newton_steps: warm-started Newton iterations per refit of the MLE.
        refit_ratio: a server's MLE is refit once its sample count has grown by this
            fraction since its last fit, so the total refit cost is
            ``O(n / refit_ratio)`` passes over its ``n`` samples.
        dense_refits: below this many samples a server's MLE is refit after every one.

    Example:
        >>> LearnerConfig().tau(horizon=5000, dim=5, slack=0.1)
        426
    """

    reg: float = 1.0
    beta_scale: float = 0.25
    delta: float | None = None
    tau_scale: float = 0.1
    explore_prob: float | None = None
    newton_steps: int = 2
    refit_ratio: float = 0.1
    dense_refits: int = 30

    def __post_init__(self) -> None:
        _check_float("reg", self.reg, 0.0, math.inf, closed=False)
        _check_float("beta_scale", self.beta_scale, -1e-300, math.inf, closed=False)
        if self.delta is not None:
            _check_float("delta", self.delta, 0.0, 1.0, closed=False)
        _check_float("tau_scale", self.tau_scale, -1e-300, math.inf, closed=False)
        if self.explore_prob is not None:
            _check_float("explore_prob", self.explore_prob, -1e-300, 1.0, closed=True)
        _check_int("newton_steps", self.newton_steps, 1)
        _check_float("refit_ratio", self.refit_ratio, 0.0, 1.0, closed=True)
        _check_int("dense_refits", self.dense_refits, 0)

    def tau(self, horizon: int, dim: int, slack: float) -> int:
        """Length of CQB-epsilon's pure-exploration phase, in rounds."""
        raw = self.tau_scale * dim * math.log(max(horizon, 2)) / slack**2
        return int(min(horizon, math.ceil(raw)))

    def exploration(self, horizon: int) -> float:
        """Random-exploration probability of CQB-epsilon after ``tau``."""
        return self.explore_prob if self.explore_prob is not None else horizon**-0.5

    def confidence(self, horizon: int) -> float:
        """Confidence level ``delta`` of the optimistic radius."""
        return self.delta if self.delta is not None else 1.0 / max(horizon, 2)


POLICY_NAMES: tuple[str, ...] = ("oracle", "cqb_eps", "cqb_opt", "greedy", "fifo_ucb", "random")


@dataclass(frozen=True)
class ExperimentConfig:
    """A comparison of policies on one problem family, with its outputs.

    Attributes:
        problem: the instances to simulate.
        learner: hyper-parameters of the learning policies.
        policies: names from ``POLICY_NAMES``; the oracle is always simulated (it is the
            reference of the regret) whether listed or not.
        name: stem of the written ``<name>.json`` and ``<name>.png``.
        output_dir: folder of the outputs; ``None`` writes nothing.
        record_every: keep the queue length every this many rounds in the JSON.

    Example:
        >>> ExperimentConfig(policies=("cqb_eps", "random")).policies
        ('cqb_eps', 'random')
    """

    problem: ProblemConfig = field(default_factory=ProblemConfig)
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    policies: tuple[str, ...] = ("cqb_eps", "cqb_opt", "greedy", "fifo_ucb", "random")
    name: str = "experiment"
    output_dir: str | None = None
    record_every: int = 10

    def __post_init__(self) -> None:
        if isinstance(self.policies, str) or not self.policies:
            raise _fail("policies", self.policies, f"a non-empty tuple of {POLICY_NAMES}")
        object.__setattr__(self, "policies", tuple(self.policies))
        bad = [p for p in self.policies if p not in POLICY_NAMES]
        if bad:
            raise _fail("policies", bad, " | ".join(POLICY_NAMES))
        if not self.name or any(c in self.name for c in "/\\"):
            raise _fail("name", self.name, "a non-empty file stem without slashes")
        _check_int("record_every", self.record_every, 1)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExperimentConfig:
        """Build from a nested mapping (as read from a JSON or TOML file).

        Unknown keys raise ``ValueError`` naming them. ``policies`` may be a list of
        names or one string (``"cqb_eps"``, or ``"cqb_eps, random"``).

        Example:
            >>> ExperimentConfig.from_dict({"problem": {"horizon": 100}}).problem.horizon
            100
        """
        if not isinstance(data, dict):
            raise ValueError(f"config must be a mapping, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown config keys {sorted(unknown)}; allowed: {sorted(known)}")
        kwargs: dict[str, Any] = dict(data)
        for key, sub in (("problem", ProblemConfig), ("learner", LearnerConfig)):
            if key in kwargs:
                section = kwargs[key]
                if not isinstance(section, dict):
                    raise ValueError(f"config section {key!r} must be a mapping")
                allowed = {f.name for f in fields(sub)}
                extra = set(section) - allowed
                if extra:
                    raise ValueError(
                        f"unknown keys {sorted(extra)} in section {key!r}; "
                        f"allowed: {sorted(allowed)}"
                    )
                kwargs[key] = sub(**section)
        if "policies" in kwargs:
            pol = kwargs["policies"]
            if isinstance(pol, str):  # one name, or names separated by commas
                pol = [n.strip() for n in pol.split(",") if n.strip()]
            elif not isinstance(pol, list | tuple):
                raise ValueError(
                    f"policies must be a list of names (or one name), got {type(pol).__name__}"
                )
            kwargs["policies"] = tuple(pol)
        return cls(**kwargs)
