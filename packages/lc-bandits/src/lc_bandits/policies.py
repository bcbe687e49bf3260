"""Scheduling policies: pick one (job, server) pair per run and round, learn from it.

Every policy implements the same two calls, batched over ``B`` runs:

* ``select(t, queue) -> (slots, servers)``: the job slot in each run's queue and the
  server to serve it on (ignored for runs whose queue is empty);
* ``update(t, active, x, servers, departed)``: the outcome of the round.

Policies draw their own randomness from the seed given to :meth:`Policy.reset`, never
from the environment's streams, so all policies on one environment stay coupled.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from lc_bandits.config import LearnerConfig
from lc_bandits.environment import sigmoid
from lc_bandits.estimator import LogisticMLE
from lc_bandits.queue import QueueBatch

__all__ = [
    "CQBEpsilon",
    "CQBOpt",
    "FifoUCB",
    "GreedyMLE",
    "OraclePolicy",
    "Policy",
    "PolicySpec",
    "RandomPolicy",
    "make_policy",
]


@dataclass(frozen=True)
class PolicySpec:
    """What a policy is told before a simulation.

    Attributes:
        runs: ``B``.
        num_servers: ``K``.
        dim: ``d``.
        horizon: ``T`` (CQB-epsilon's schedule and the confidence level depend on it).
        slack: the traffic slack ``epsilon`` (CQB-epsilon's exploration length).
        norm_bound: the bound ``S`` on ``||theta_k*||``.
        seed: seed of the policy's own randomness.
    """

    runs: int
    num_servers: int
    dim: int
    horizon: int
    slack: float
    norm_bound: float
    seed: int = 0


def _masked_argmax(scores: NDArray[np.float64], mask: NDArray[np.bool_]) -> tuple[NDArray, NDArray]:
    """Argmax over valid jobs and all servers; ``scores`` ``[B, Q, K]``, ``mask`` ``[B, Q]``."""
    b, q, k = scores.shape
    s = np.where(mask[:, :, None], scores, -np.inf).reshape(b, q * k)
    flat = s.argmax(axis=1)
    return flat // k, flat % k


class Policy(ABC):
    """Base class of scheduling policies (see the module docstring for the protocol)."""

    name: str = "policy"

    def reset(self, spec: PolicySpec) -> None:
        """Prepare for a new batch of runs."""
        self.spec = spec
        self.rng = np.random.default_rng([spec.seed, 7])

    @abstractmethod
    def select(self, t: int, queue: QueueBatch) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Choose a job slot and a server per run for round ``t`` (0-based).

        Args:
            t: round index, ``0 <= t < T``.
            queue: the queues before this round's arrivals.

        Returns:
            ``(slots, servers)``, each of shape ``[B]``.
        """

    def update(
        self,
        t: int,
        active: NDArray[np.bool_],
        x: NDArray[np.float64],
        servers: NDArray[np.int64],
        departed: NDArray[np.bool_],
    ) -> None:
        """Observe the outcome of round ``t`` (runs with ``active`` served ``x`` on ``servers``)."""
        return  # non-learning policies ignore feedback

    # shared helpers -------------------------------------------------------------------
    def _random_slots(self, queue: QueueBatch) -> NDArray[np.int64]:
        u = self.rng.random(queue.lengths.shape[0])
        out: NDArray[np.int64] = np.minimum(
            (u * queue.lengths).astype(np.int64), np.maximum(queue.lengths - 1, 0)
        )
        return out

    def _random_servers(self) -> NDArray[np.int64]:
        return self.rng.integers(self.spec.num_servers, size=self.spec.runs)


class OraclePolicy(Policy):
    """Knows ``theta*``: serves the job-server pair of maximal true rate.

    Args:
        theta: true parameters, shape ``[B, K, d]``.
    """

    name = "oracle"

    def __init__(self, theta: NDArray[np.float64]) -> None:
        self.theta = np.asarray(theta, dtype=np.float64)

    def reset(self, spec: PolicySpec) -> None:
        if self.theta.shape != (spec.runs, spec.num_servers, spec.dim):
            raise ValueError(
                f"oracle theta has shape {self.theta.shape}, the environment needs "
                f"{(spec.runs, spec.num_servers, spec.dim)}"
            )
        super().reset(spec)

    def select(self, t: int, queue: QueueBatch) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        width = max(int(queue.lengths.max(initial=0)), 1)
        x = queue.contexts[:, :width]
        scores = sigmoid(np.matmul(x, self.theta.transpose(0, 2, 1)))
        return _masked_argmax(scores, queue.mask[:, :width])


class RandomPolicy(Policy):
    """A uniformly random job on a uniformly random server."""

    name = "random"

    def select(self, t: int, queue: QueueBatch) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        return self._random_slots(queue), self._random_servers()


class _Learner(Policy):
    """A policy holding a per-server logistic MLE, refit on a geometric schedule per server."""

    def __init__(self, config: LearnerConfig | None = None) -> None:
        self.config = config or LearnerConfig()

    def reset(self, spec: PolicySpec) -> None:
        super().reset(spec)
        c = self.config
        self.mle = LogisticMLE(
            spec.runs,
            spec.num_servers,
            spec.dim,
            c.reg,
            spec.norm_bound,
            c.newton_steps,
            max_samples=spec.horizon,
        )
        self.delta = c.confidence(spec.horizon)

    def update(
        self,
        t: int,
        active: NDArray[np.bool_],
        x: NDArray[np.float64],
        servers: NDArray[np.int64],
        departed: NDArray[np.bool_],
    ) -> None:
        self.mle.add(active, x, servers, departed.astype(np.float64))
        self.mle.fit(self.config.refit_ratio, self.config.dense_refits)

    def _ucb_scores(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        bonus = (
            self.config.beta_scale * self.mle.radius(self.delta)[:, None, :] * self.mle.widths(x)
        )
        return self.mle.mean_rates(x) + bonus

    @staticmethod
    def _window(queue: QueueBatch) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
        width = max(int(queue.lengths.max(initial=0)), 1)
        return queue.contexts[:, :width], queue.mask[:, :width]


class GreedyMLE(_Learner):
    """Plug-in greedy: the pair with the largest estimated rate, no exploration."""

    name = "greedy"

    def select(self, t: int, queue: QueueBatch) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        x, mask = self._window(queue)
        return _masked_argmax(self.mle.mean_rates(x), mask)


class CQBOpt(_Learner):
    """CQB-Opt: the optimistic pair ``argmax sigmoid(x @ theta_hat_k) + beta_k ||x||_{V_k^-1}``.

    Needs no stochastic assumption on the contexts (designed for adversarial ones).
    """

    name = "cqb_opt"

    def select(self, t: int, queue: QueueBatch) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        x, mask = self._window(queue)
        return _masked_argmax(self._ucb_scores(x), mask)


class CQBEpsilon(_Learner):
    """CQB-epsilon: pure exploration, then epsilon-exploration around the optimistic rule.

    Rounds ``t < tau`` serve a uniformly random queued job on server ``t mod K`` (round
    robin), with ``tau = ceil(tau_scale * d * log T / slack^2)``. Afterwards each round
    is, with probability ``explore_prob`` (default ``T^-1/2``), a uniformly random job on
    a uniformly random server, and otherwise the optimistic choice of :class:`CQBOpt`.
    """

    name = "cqb_eps"

    def reset(self, spec: PolicySpec) -> None:
        super().reset(spec)
        self.tau = self.config.tau(spec.horizon, spec.dim, spec.slack)
        self.explore_prob = self.config.exploration(spec.horizon)

    def select(self, t: int, queue: QueueBatch) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        slots = self._random_slots(queue)
        if t < self.tau:
            return slots, np.full(self.spec.runs, t % self.spec.num_servers, dtype=np.int64)
        servers = self._random_servers()
        explore = self.rng.random(self.spec.runs) < self.explore_prob
        x, mask = self._window(queue)
        g_slots, g_servers = _masked_argmax(self._ucb_scores(x), mask)
        return np.where(explore, slots, g_slots), np.where(explore, servers, g_servers)


class FifoUCB(_Learner):
    """Queue-ignoring contextual bandit: the oldest job, server by logistic UCB.

    A standard logistic UCB bandit that sees one context per round (the head of the
    queue) and never looks at the other waiting jobs.
    """

    name = "fifo_ucb"

    def select(self, t: int, queue: QueueBatch) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        width = max(int(queue.lengths.max(initial=0)), 1)
        arrival = np.where(queue.mask[:, :width], queue.arrival[:, :width], np.iinfo(np.int64).max)
        slots = arrival.argmin(axis=1)
        x = queue.contexts[np.arange(self.spec.runs), slots][:, None, :]
        servers = self._ucb_scores(x)[:, 0, :].argmax(axis=1)
        return slots, servers


def make_policy(
    name: str, theta: NDArray[np.float64] | None = None, config: LearnerConfig | None = None
) -> Policy:
    """Build a policy by name (``oracle`` needs ``theta``, ``[B, K, d]``).

    Example:
        >>> make_policy("cqb_eps").name
        'cqb_eps'
    """
    learners: dict[str, type[_Learner]] = {
        "cqb_eps": CQBEpsilon,
        "cqb_opt": CQBOpt,
        "greedy": GreedyMLE,
        "fifo_ucb": FifoUCB,
    }
    if name == "oracle":
        if theta is None:
            raise ValueError("the oracle policy needs theta")
        return OraclePolicy(theta)
    if name == "random":
        return RandomPolicy()
    if name in learners:
        return learners[name](config)
    allowed = ["oracle", "random", *learners]
    raise ValueError(f"policy name {name!r} is unknown; allowed: {allowed}")
