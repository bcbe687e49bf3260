"""Per-server regularized logistic maximum likelihood and its confidence sets.

For server ``k`` with observations ``(x_s, y_s)`` (context served, departed or not) the
estimate minimizes

    L_k(theta) = sum_s [log(1 + exp(x_s @ theta)) - y_s * x_s @ theta] + reg / 2 * ||theta||^2,

solved by Newton's method (iteratively reweighted least squares) warm-started from the
previous estimate. The confidence set is the ellipsoid
``{theta : ||theta - theta_hat||_{V_k} <= beta_k}`` around the estimate, with the design
matrix ``V_k = reg * I + sum_s x_s x_s^T`` and the self-normalized radius

    gamma_k(delta) = sqrt(reg) * S + 1/2 * sqrt(2 log(1/delta) + d log(1 + n_k / (d reg))),

(Bernoulli noise is 1/2-sub-Gaussian); policies scale it by ``beta_scale`` to bound the
rate error ``|sigmoid(x @ theta_hat) - sigmoid(x @ theta*)| <= beta_k * ||x||_{V_k^{-1}}``.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from lc_bandits.environment import sigmoid

__all__ = ["LogisticMLE", "newton_logistic"]


def newton_logistic(
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    weight: NDArray[np.float64] | None = None,
    reg: float = 1.0,
    theta0: NDArray[np.float64] | None = None,
    steps: int = 25,
    tol: float = 1e-10,
) -> NDArray[np.float64]:
    """Regularized logistic MLE by Newton's method, batched over leading axes.

    Args:
        x: features, shape ``[..., N, d]``.
        y: labels in ``{0, 1}`` (or ``[0, 1]``), shape ``[..., N]``.
        weight: per-observation weights (0 masks padding), shape ``[..., N]``.
        reg: ridge weight (> 0, makes the problem strictly convex).
        theta0: warm start, shape ``[..., d]``; zeros when ``None``.
        steps: maximum Newton iterations.
        tol: stop when every Newton step is below this in the max norm.

    Returns:
        The estimates, shape ``[..., d]``.

    Example:
        >>> rng = np.random.default_rng(0)
        >>> x = rng.normal(size=(20000, 2))
        >>> y = (rng.random(20000) < sigmoid(x @ np.array([1.0, -2.0]))).astype(float)
        >>> est = newton_logistic(x, y, reg=1e-3)
        >>> bool(np.abs(est - [1.0, -2.0]).max() < 0.1)
        True
    """
    if reg <= 0:
        raise ValueError(f"reg={reg} must be > 0")
    if x.shape[:-1] != y.shape:
        raise ValueError(f"x {x.shape} and y {y.shape} disagree on [..., N]")
    d = x.shape[-1]
    w = np.ones_like(y) if weight is None else weight
    theta = np.zeros((*x.shape[:-2], d)) if theta0 is None else np.array(theta0, dtype=np.float64)
    eye = np.eye(d)
    for _ in range(steps):
        p = sigmoid(np.matmul(x, theta[..., None])[..., 0])
        grad = np.matmul((w * (p - y))[..., None, :], x)[..., 0, :] + reg * theta
        xw = x * (w * p * (1.0 - p))[..., None]
        hess = np.matmul(np.swapaxes(xw, -1, -2), x) + reg * eye
        step = np.linalg.solve(hess, grad[..., None])[..., 0]
        theta = theta - step
        if float(np.abs(step).max(initial=0.0)) < tol:
            break
    return theta


class LogisticMLE:
    """Per-run, per-server logistic MLE with design matrices, for ``B`` runs at once.

    Args:
        runs: ``B``.
        num_servers: ``K``.
        dim: ``d``.
        reg: ridge weight ``lambda_reg`` of the loss and of ``V_k``.
        norm_bound: the known bound ``S >= ||theta_k*||`` used in the radius.
        newton_steps: Newton iterations per :meth:`fit` (warm-started).
        max_samples: most observations one server can receive (e.g. the horizon); the
            sample buffers are then allocated once instead of grown.

    Attributes:
        theta: current estimates, shape ``[B, K, d]``.
        v_inv: inverses of the design matrices, shape ``[B, K, d, d]`` (kept exact by
            Sherman-Morrison updates).
        counts: observations per server, shape ``[B, K]``.

    Example:
        >>> mle = LogisticMLE(runs=1, num_servers=2, dim=2)
        >>> mle.add(np.array([True]), np.array([[1.0, 0.0]]), np.array([1]), np.array([1.0]))
        >>> mle.counts.tolist()
        [[0, 1]]
    """

    def __init__(
        self,
        runs: int,
        num_servers: int,
        dim: int,
        reg: float = 1.0,
        norm_bound: float = 1.0,
        newton_steps: int = 2,
        max_samples: int | None = None,
    ) -> None:
        if reg <= 0:
            raise ValueError(f"reg={reg} must be > 0")
        self.reg = float(reg)
        self.norm_bound = float(norm_bound)
        self.newton_steps = int(newton_steps)
        self.theta: NDArray[np.float64] = np.zeros((runs, num_servers, dim))
        self.v_inv: NDArray[np.float64] = np.broadcast_to(
            np.eye(dim) / reg, (runs, num_servers, dim, dim)
        ).copy()
        self.counts: NDArray[np.int64] = np.zeros((runs, num_servers), dtype=np.int64)
        self._fitted: NDArray[np.int64] = np.zeros((runs, num_servers), dtype=np.int64)
        # observations, stored in float32 to halve memory traffic (estimates are float64)
        # (np.zeros maps untouched pages lazily, so a full-size buffer costs only what is used)
        cap = 16 if max_samples is None else max(int(max_samples), 1)
        self._x: NDArray[np.float32] = np.zeros((runs, num_servers, cap, dim), np.float32)
        self._y: NDArray[np.float32] = np.zeros((runs, num_servers, cap), np.float32)
        self.max_samples = max_samples
        self._rows = np.arange(runs)

    @property
    def dim(self) -> int:
        """Context dimension ``d``."""
        return int(self.theta.shape[-1])

    def add(
        self,
        active: NDArray[np.bool_],
        x: NDArray[np.float64],
        server: NDArray[np.int64],
        y: NDArray[np.float64],
    ) -> None:
        """Record one observation per active run and update ``V_k^{-1}``.

        Args:
            active: runs that served a job this round, shape ``[B]``.
            x: served contexts, shape ``[B, d]``.
            server: servers used, shape ``[B]``.
            y: departure indicators, shape ``[B]``.
        """
        rows = self._rows[active]
        if rows.size == 0:
            return
        ks = server[rows]
        slots = self.counts[rows, ks]
        need = int(slots.max()) + 1
        if need > self._x.shape[2]:
            cap = self._x.shape[2]
            while cap < need:
                cap *= 2
            pad = cap - self._x.shape[2]
            b, k, _, d = self._x.shape
            self._x = np.concatenate([self._x, np.zeros((b, k, pad, d), np.float32)], axis=2)
            self._y = np.concatenate([self._y, np.zeros((b, k, pad), np.float32)], axis=2)
        xs = x[rows]
        # flat indices: numpy's multi-axis fancy assignment is slow on large arrays
        b, k, cap, d = self._x.shape
        flat = (rows * k + ks) * cap + slots
        self._x.reshape(-1, d)[flat] = xs.astype(np.float32)
        self._y.reshape(-1)[flat] = y[rows]
        self.counts[rows, ks] += 1
        vinv = self.v_inv[rows, ks]
        vx = np.einsum("bij,bj->bi", vinv, xs)
        denom = 1.0 + np.einsum("bi,bi->b", xs, vx)
        self.v_inv[rows, ks] = vinv - vx[:, :, None] * vx[:, None, :] / denom[:, None, None]

    def fit(self, min_growth: float = 0.0, dense: int = 0) -> int:
        """Refit estimates with warm-started Newton steps on all their data.

        A server's estimate is refit when its sample count ``n`` has grown since its last
        fit ``n_0`` and either ``n <= dense`` or ``n >= (1 + min_growth) * n_0``; with the
        defaults every estimate with new data is refit. A geometric schedule keeps the
        total cost at ``O(n / min_growth)`` passes over the data of each server.

        Returns:
            The number of (run, server) estimates refit.
        """
        due = (self.counts > self._fitted) & (
            (self.counts <= dense) | (self.counts >= (1.0 + min_growth) * self._fitted)
        )
        bs, ks = np.nonzero(due)
        if bs.size == 0:
            return 0
        n = int(self.counts[bs, ks].max())
        x = self._x[bs, ks, :n].astype(np.float64)
        y = self._y[bs, ks, :n].astype(np.float64)
        w = (np.arange(n)[None, :] < self.counts[bs, ks][:, None]).astype(np.float64)
        self.theta[bs, ks] = newton_logistic(
            x, y, w, reg=self.reg, theta0=self.theta[bs, ks], steps=self.newton_steps, tol=1e-8
        )
        self._fitted[bs, ks] = self.counts[bs, ks]
        return int(bs.size)

    def radius(self, delta: float) -> NDArray[np.float64]:
        """Self-normalized confidence radius ``gamma_k(delta)``, shape ``[B, K]``."""
        if not 0.0 < delta < 1.0:
            raise ValueError(f"delta={delta} must lie in (0, 1)")
        d = self.dim
        inner = 2.0 * math.log(1.0 / delta) + d * np.log1p(self.counts / (d * self.reg))
        out: NDArray[np.float64] = math.sqrt(self.reg) * self.norm_bound + 0.5 * np.sqrt(inner)
        return out

    def mean_rates(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """Estimated rates ``sigmoid(x @ theta_hat_k)``; ``x`` ``[B, Q, d]`` -> ``[B, Q, K]``."""
        return sigmoid(np.matmul(x, self.theta.transpose(0, 2, 1)))

    def widths(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """Ellipsoidal norms ``||x||_{V_k^{-1}}``; ``x`` ``[B, Q, d]`` -> ``[B, Q, K]``."""
        vx = np.matmul(x[:, None, :, :], self.v_inv)  # [B, K, Q, d]
        quad = np.einsum("bkqd,bqd->bqk", vx, x)
        out: NDArray[np.float64] = np.sqrt(np.maximum(quad, 0.0))
        return out
