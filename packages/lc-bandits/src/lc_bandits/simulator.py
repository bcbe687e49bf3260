"""Vectorized simulation of a policy on a coupled environment.

Round ``t`` (0-based) of every run: the policy sees the queue, picks a job and a server;
the job departs iff ``u_t < sigmoid(x @ theta_k)``; then the round's arrival (if any)
joins the queue and becomes available from round ``t + 1``. So
``Q(t + 1) = Q(t) - D(t) + A(t)`` with ``Q(0) = 0``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from tqdm.auto import tqdm

from lc_bandits.environment import Environment, sigmoid
from lc_bandits.policies import Policy, PolicySpec
from lc_bandits.queue import QueueBatch

__all__ = ["SimulationResult", "simulate"]


@dataclass(frozen=True)
class SimulationResult:
    """Trajectories of one policy on one environment.

    Attributes:
        policy: the policy's name.
        lengths: queue length after each round, shape ``[B, T]``.
        departures: departure indicators ``D_t``, shape ``[B, T]`` (bool).
        servers: server used in each round (``-1`` when the queue was empty), ``[B, T]``.
        rates: true rate of the served pair (0 when idle), shape ``[B, T]``.
        seconds: wall time of the simulation.
    """

    policy: str
    lengths: NDArray[np.int64]
    departures: NDArray[np.bool_]
    servers: NDArray[np.int64]
    rates: NDArray[np.float64]
    seconds: float

    @property
    def steps_per_second(self) -> float:
        """Run-rounds simulated per second (``B * T / seconds``)."""
        return float(self.lengths.size / max(self.seconds, 1e-12))


def simulate(
    policy: Policy,
    env: Environment,
    slack: float,
    norm_bound: float,
    seed: int = 0,
    progress: bool = False,
) -> SimulationResult:
    """Run ``policy`` on every run of ``env``.

    Args:
        policy: the policy (it is reset first).
        env: the coupled environment.
        slack: traffic slack told to the policy.
        norm_bound: bound on ``||theta_k*||`` told to the policy.
        seed: seed of the policy's own randomness.
        progress: show a progress bar over rounds.

    Returns:
        The trajectories.

    Example:
        >>> from lc_bandits.config import ProblemConfig
        >>> from lc_bandits.environment import make_environment
        >>> from lc_bandits.policies import RandomPolicy
        >>> env = make_environment(ProblemConfig(horizon=30, num_instances=1, runs_per_instance=2))
        >>> res = simulate(RandomPolicy(), env, slack=0.1, norm_bound=2.06)
        >>> res.lengths.shape
        (2, 30)
    """
    b, t_max, k, d = env.runs, env.horizon, env.num_servers, env.dim
    policy.reset(PolicySpec(b, k, d, t_max, float(slack), float(norm_bound), seed))
    queue = QueueBatch(b, d)
    rows = np.arange(b)
    lengths = np.zeros((b, t_max), dtype=np.int64)
    departures = np.zeros((b, t_max), dtype=bool)
    servers_log = np.full((b, t_max), -1, dtype=np.int64)
    rates_log = np.zeros((b, t_max))
    start = time.perf_counter()
    for t in tqdm(range(t_max), desc=policy.name, disable=not progress, leave=False):
        active = queue.lengths > 0
        slots, servers = policy.select(t, queue)
        slots = np.asarray(slots, dtype=np.int64)
        servers = np.asarray(servers, dtype=np.int64)
        if np.any(active & ((slots < 0) | (slots >= queue.lengths))):
            raise RuntimeError(f"policy {policy.name!r} chose a job outside the queue in round {t}")
        if np.any(active & ((servers < 0) | (servers >= k))):
            raise RuntimeError(
                f"policy {policy.name!r} chose a server outside [0, {k}) in round {t}"
            )
        safe = np.where(active, slots, 0)
        ks = np.where(active, servers, 0)
        x = queue.contexts[rows, safe]
        rate = sigmoid(np.einsum("bd,bd->b", x, env.theta[rows, ks]))
        departed = active & (env.uniforms[:, t] < rate)
        policy.update(t, active, x, ks, departed)
        queue.remove(departed, safe)
        queue.push(env.arrivals[:, t], env.contexts[:, t], t)
        lengths[:, t] = queue.lengths
        departures[:, t] = departed
        servers_log[:, t] = np.where(active, ks, -1)
        rates_log[:, t] = np.where(active, rate, 0.0)
    seconds = time.perf_counter() - start
    return SimulationResult(policy.name, lengths, departures, servers_log, rates_log, seconds)
