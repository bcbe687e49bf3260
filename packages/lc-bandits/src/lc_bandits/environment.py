"""Problem instances and the exogenous randomness that every policy shares.

An :class:`Environment` holds, for ``B`` runs, the true server parameters and every
random draw that does not depend on the policy: arrival indicators, arrival contexts and
the uniforms that decide departures. Simulating two policies on the same environment
couples them (same arrivals, same contexts, departure ``1[u_t < rate]`` with the same
``u_t``), which is the coupling under which queue-length regret is measured.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from lc_bandits.config import ProblemConfig

__all__ = ["Environment", "make_environment", "sample_parameters", "sigmoid"]

_NORM_TOL = 1e-9


def sigmoid(z: NDArray[np.float64]) -> NDArray[np.float64]:
    """Logistic function ``1 / (1 + exp(-z))``, elementwise and overflow-free.

    Example:
        >>> float(sigmoid(np.array(0.0)))
        0.5
    """
    out: NDArray[np.float64] = 0.5 * (1.0 + np.tanh(0.5 * np.asarray(z, dtype=np.float64)))
    return out


@dataclass(frozen=True)
class Environment:
    """Parameters and exogenous randomness of ``B`` simulated runs.

    Attributes:
        theta: true server parameters, shape ``[B, K, d]``.
        arrivals: arrival indicators ``A_t``, shape ``[B, T]`` (bool).
        contexts: context of the job arriving in round ``t``, shape ``[B, T, d]``,
            ``||x||_2 <= 1`` (rows where no job arrives are ignored).
        uniforms: departure uniforms ``u_t`` in ``[0, 1)``, shape ``[B, T]``; the served
            job departs iff ``u_t < sigmoid(x @ theta_k)``.
        instance: index of the parameter set of each run, shape ``[B]``.
        arrival_rate: the ``lambda`` the arrivals were drawn with.

    Raises:
        ValueError: on inconsistent shapes, context norms above 1 or uniforms outside
            ``[0, 1)``.

    Example:
        >>> env = make_environment(ProblemConfig(horizon=50, num_instances=2, runs_per_instance=3))
        >>> env.theta.shape, env.contexts.shape
        ((6, 5, 5), (6, 50, 5))
    """

    theta: NDArray[np.float64]
    arrivals: NDArray[np.bool_]
    contexts: NDArray[np.float64]
    uniforms: NDArray[np.float64]
    instance: NDArray[np.int64]
    arrival_rate: float

    def __post_init__(self) -> None:
        theta, arr, ctx, uni = self.theta, self.arrivals, self.contexts, self.uniforms
        if theta.ndim != 3:
            raise ValueError(f"theta must have shape [B, K, d], got {theta.shape}")
        b, _, d = theta.shape
        if arr.ndim != 2 or arr.shape[0] != b:
            raise ValueError(f"arrivals must have shape [B={b}, T], got {arr.shape}")
        t = arr.shape[1]
        if t < 1:
            raise ValueError("the horizon T (arrivals.shape[1]) must be positive")
        if ctx.shape != (b, t, d):
            raise ValueError(
                f"contexts must have shape [B, T, d] = {(b, t, d)} to match theta and "
                f"arrivals, got {ctx.shape} (dimension mismatch?)"
            )
        if uni.shape != (b, t):
            raise ValueError(f"uniforms must have shape {(b, t)}, got {uni.shape}")
        if self.instance.shape != (b,):
            raise ValueError(f"instance must have shape {(b,)}, got {self.instance.shape}")
        if not (np.all(uni >= 0.0) and np.all(uni < 1.0)):
            raise ValueError("uniforms must lie in [0, 1)")
        norms = np.linalg.norm(ctx, axis=-1)
        worst = float(norms[arr].max(initial=0.0))
        if worst > 1.0 + _NORM_TOL:
            raise ValueError(f"context norms must be <= 1; the largest arriving one is {worst:.4f}")
        if not 0.0 < self.arrival_rate < 1.0:
            raise ValueError(f"arrival_rate={self.arrival_rate} must lie in (0, 1)")
        capacity = self.capacity()
        if np.any(capacity <= self.arrival_rate):
            worst_cap = float(capacity.min())
            warnings.warn(
                f"arrival rate {self.arrival_rate:.3f} is at or above the service capacity "
                f"{worst_cap:.3f} of some run (mean best rate of its contexts): the queue is "
                "unstable and queue-length regret is not meaningful",
                RuntimeWarning,
                stacklevel=3,
            )

    @property
    def runs(self) -> int:
        """Number of runs ``B``."""
        return int(self.theta.shape[0])

    @property
    def horizon(self) -> int:
        """Number of rounds ``T``."""
        return int(self.arrivals.shape[1])

    @property
    def num_servers(self) -> int:
        """Number of servers ``K``."""
        return int(self.theta.shape[1])

    @property
    def dim(self) -> int:
        """Context dimension ``d``."""
        return int(self.theta.shape[2])

    def rates(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """Service rates of contexts on every server of their run.

        Args:
            x: contexts, shape ``[B, ..., d]``.

        Returns:
            ``sigmoid(x @ theta_k)``, shape ``[B, ..., K]``.
        """
        b = self.runs
        flat = x.reshape(b, -1, self.dim)
        z = np.matmul(flat, self.theta.transpose(0, 2, 1))
        return sigmoid(z).reshape(*x.shape[:-1], self.num_servers)

    def capacity(self) -> NDArray[np.float64]:
        """Mean over arriving contexts of the best service rate, per run, shape ``[B]``."""
        best = self.rates(self.contexts).max(axis=-1)
        counts = np.maximum(self.arrivals.sum(axis=1), 1)
        cap: NDArray[np.float64] = (best * self.arrivals).sum(axis=1) / counts
        return np.where(self.arrivals.any(axis=1), cap, 1.0)

    def prefix(self, horizon: int) -> Environment:
        """The same runs restricted to the first ``horizon`` rounds."""
        if not 1 <= horizon <= self.horizon:
            raise ValueError(f"horizon={horizon} must lie in [1, {self.horizon}]")
        return Environment(
            self.theta,
            self.arrivals[:, :horizon],
            self.contexts[:, :horizon],
            self.uniforms[:, :horizon],
            self.instance,
            self.arrival_rate,
        )


def sample_parameters(rng: np.random.Generator, num_servers: int, dim: int, norm: float) -> NDArray:
    """Server parameters drawn from ``Unif(-1, 1)^d`` and rescaled to ``||theta_k|| = norm``.

    Returns:
        Array of shape ``[K, d]``.
    """
    theta = rng.uniform(-1.0, 1.0, size=(num_servers, dim))
    lengths = np.linalg.norm(theta, axis=1, keepdims=True)
    out: NDArray[np.float64] = theta / np.maximum(lengths, 1e-12) * norm
    return out


def _ball(raw: NDArray[np.float64]) -> NDArray[np.float64]:
    """Project points onto the unit ball (points inside are kept)."""
    lengths = np.linalg.norm(raw, axis=-1, keepdims=True)
    out: NDArray[np.float64] = raw / np.maximum(lengths, 1.0)
    return out


#: Candidates drawn per rejection-sampling round. Fixed (never derived from the number of
#: contexts wanted), so the accepted sequence is one stream of which any horizon takes a
#: prefix.
_CHUNK = 1024


def _slack_contexts(
    rng: np.random.Generator, theta: NDArray, count: int, threshold: float
) -> NDArray[np.float64]:
    """``count`` contexts from ``Unif(-1,1)^d`` projected to the ball, conditioned on slack.

    A context is kept iff its best server's rate is at least ``threshold``. Candidates
    are drawn in chunks of fixed size, so the first ``n`` contexts do not depend on
    ``count`` (a longer horizon extends the sequence, it does not change it).
    """
    dim = theta.shape[1]
    kept: list[NDArray[np.float64]] = []
    have = 0
    tried = 0
    while have < count:
        cand = _ball(rng.uniform(-1.0, 1.0, size=(_CHUNK, dim)))
        ok = sigmoid(cand @ theta.T).max(axis=1) >= threshold
        kept.append(cand[ok])
        have += int(ok.sum())
        tried += _CHUNK
        if tried >= 200 * max(count, 1000) and have < count:
            raise ValueError(
                f"only {have} of {tried} sampled contexts have a server with rate >= "
                f"{threshold:.3f} (arrival_rate + slack); lower the slack or the arrival "
                "rate, or raise kappa"
            )
    if not kept:
        return np.empty((0, dim))
    return np.concatenate(kept)[:count]


def _adversarial_contexts(
    rng: np.random.Generator, anchors: NDArray, theta: NDArray, horizon: int, threshold: float
) -> NDArray[np.float64]:
    """Oblivious adversary: blocks of doubling length, each near one anchor context.

    Every block draws its full length of noise even when the horizon cuts it short, so
    a shorter horizon gives a prefix of a longer one.
    """
    out = np.empty((horizon, anchors.shape[1]))
    start, block, j = 0, 50, 0
    while start < horizon:
        stop = min(horizon, start + block)
        anchor = anchors[j % len(anchors)]
        noise = rng.standard_normal((block, anchors.shape[1]))[: stop - start]
        pts = _ball(anchor + 0.1 * noise)
        bad = sigmoid(pts @ theta.T).max(axis=1) < threshold
        pts[bad] = anchor
        out[start:stop] = pts
        start, block, j = stop, 2 * block, j + 1
    return out


def _anchors(rng: np.random.Generator, theta: NDArray, threshold: float, count: int) -> NDArray:
    """Slack-satisfying contexts whose best servers differ as much as possible."""
    pool = _slack_contexts(rng, theta, 64 * count, threshold)
    best = sigmoid(pool @ theta.T).argmax(axis=1)
    chosen: list[int] = []
    for k in rng.permutation(theta.shape[0]):
        idx = np.flatnonzero(best == k)
        if idx.size:
            chosen.append(int(rng.choice(idx)))
        if len(chosen) == count:
            break
    while len(chosen) < count:
        chosen.append(int(rng.integers(len(pool))))
    return pool[np.asarray(chosen)]


def make_environment(problem: ProblemConfig, horizon: int | None = None) -> Environment:
    """Draw ``problem.total_runs`` coupled runs of a problem family.

    Instance ``i`` (runs ``i * R ... (i + 1) * R - 1``) has parameters from seed
    ``(seed, 0, i)``; run ``r`` of it draws its arrivals from seed ``(seed, 1, i, r, 0)``,
    its departure uniforms from ``(seed, 1, i, r, 1)`` and its contexts from
    ``(seed, 1, i, r, 2)``, each stream consumed round by round. The same seed therefore
    gives the same environment, and the environment of a shorter horizon is exactly the
    prefix of a longer one: ``make_environment(p, horizon=t)`` equals
    ``make_environment(p).prefix(t)``, so runs at different horizons are coupled.

    Args:
        problem: the problem family.
        horizon: overrides ``problem.horizon`` when given.

    Returns:
        The environment, with ``B = num_instances * runs_per_instance`` runs.

    Example:
        >>> env = make_environment(ProblemConfig(horizon=20, num_instances=1, runs_per_instance=2))
        >>> bool((env.rates(env.contexts).max(-1)[env.arrivals] >= 0.8 - 1e-12).all())
        True
    """
    t = problem.horizon if horizon is None else horizon
    if isinstance(t, bool) or not isinstance(t, int) or t < 1:
        raise ValueError(f"horizon={t!r} is invalid; allowed: an integer >= 1")
    threshold = problem.arrival_rate + problem.slack
    norm = problem.param_norm
    k, d, reps = problem.num_servers, problem.dim, problem.runs_per_instance
    thetas, arrivals, contexts, uniforms, index = [], [], [], [], []
    for i in range(problem.num_instances):
        prng = np.random.default_rng([problem.seed, 0, i])
        theta = sample_parameters(prng, k, d, norm)
        anchors = _anchors(prng, theta, threshold, 4) if problem.contexts == "adversarial" else None
        for r in range(reps):
            # one stream per kind of draw, each consumed in round order, so that round
            # t's draws do not depend on the horizon
            arrivals.append(
                np.random.default_rng([problem.seed, 1, i, r, 0]).random(t) < problem.arrival_rate
            )
            uniforms.append(np.random.default_rng([problem.seed, 1, i, r, 1]).random(t))
            rng = np.random.default_rng([problem.seed, 1, i, r, 2])
            if anchors is None:
                contexts.append(_slack_contexts(rng, theta, t, threshold))
            else:
                contexts.append(_adversarial_contexts(rng, anchors, theta, t, threshold))
            thetas.append(theta)
            index.append(i)
    return Environment(
        theta=np.stack(thetas),
        arrivals=np.stack(arrivals),
        contexts=np.stack(contexts),
        uniforms=np.stack(uniforms),
        instance=np.asarray(index, dtype=np.int64),
        arrival_rate=float(problem.arrival_rate),
    )


def kappa_of(theta: NDArray[np.float64]) -> float:
    """Worst-case ``1 / sigmoid'(z)`` over ``|z| <= max_k ||theta_k||`` (contexts in the ball)."""
    s = float(np.linalg.norm(theta, axis=-1).max())
    p = 1.0 / (1.0 + math.exp(-s))
    return 1.0 / (p * (1.0 - p))
