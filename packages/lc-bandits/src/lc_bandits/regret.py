"""Queue-length regret and the fits used to compare it with the theory.

With coupled runs (same arrivals, contexts and departure uniforms), the queue-length
regret at horizon ``T`` is estimated by the mean over runs of ``Q_pi(T) - Q_*(T)``;
coupling makes the paired differences far less noisy than two independent means.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "CurveStats",
    "LinearFit",
    "curve_stats",
    "fit_against",
    "fit_loglog",
    "queue_length_regret",
]


@dataclass(frozen=True)
class CurveStats:
    """Mean of per-run curves with a normal-approximation confidence band.

    Attributes:
        mean: mean over runs, shape ``[T]``.
        low: lower band, shape ``[T]``.
        high: upper band, shape ``[T]``.
        stderr: standard error of the mean, shape ``[T]``.
    """

    mean: NDArray[np.float64]
    low: NDArray[np.float64]
    high: NDArray[np.float64]
    stderr: NDArray[np.float64]


def queue_length_regret(lengths: NDArray, oracle_lengths: NDArray) -> NDArray[np.float64]:
    """Per-run regret curves ``Q_pi(t) - Q_*(t)`` of coupled runs.

    Args:
        lengths: the policy's queue lengths, shape ``[B, T]``.
        oracle_lengths: the oracle's on the same environment, shape ``[B, T]``.

    Returns:
        Shape ``[B, T]``; its mean over runs estimates the regret at every horizon.

    Example:
        >>> queue_length_regret(np.array([[3, 2]]), np.array([[1, 2]])).tolist()
        [[2.0, 0.0]]
    """
    a = np.asarray(lengths, dtype=np.float64)
    b = np.asarray(oracle_lengths, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"policy {a.shape} and oracle {b.shape} curves must match")
    return a - b


def curve_stats(curves: NDArray, level: float = 0.95, groups: NDArray | None = None) -> CurveStats:
    """Mean and confidence band of curves over runs.

    Args:
        curves: shape ``[B, T]``.
        level: confidence level of the band.
        groups: optional instance index per run, shape ``[B]``; the band is then computed
            from the per-instance means (runs of one instance are not independent draws
            of the instance).

    Returns:
        The statistics.

    Example:
        >>> s = curve_stats(np.array([[0.0, 1.0], [2.0, 3.0]]))
        >>> s.mean.tolist()
        [1.0, 2.0]
    """
    c = np.asarray(curves, dtype=np.float64)
    if c.ndim != 2 or c.shape[0] < 1:
        raise ValueError(f"curves must have shape [B, T] with B >= 1, got {c.shape}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level={level} must lie in (0, 1)")
    if groups is not None:
        g = np.asarray(groups)
        c = np.stack([c[g == i].mean(axis=0) for i in np.unique(g)])
    mean = c.mean(axis=0)
    n = c.shape[0]
    stderr = c.std(axis=0, ddof=1) / math.sqrt(n) if n > 1 else np.zeros_like(mean)
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    return CurveStats(mean, mean - z * stderr, mean + z * stderr, stderr)


@dataclass(frozen=True)
class LinearFit:
    """Least-squares line ``y = intercept + slope * x``.

    Attributes:
        slope: fitted slope.
        intercept: fitted intercept.
        slope_stderr: standard error of the slope.
        r2: coefficient of determination.
        points: number of points used.
    """

    slope: float
    intercept: float
    slope_stderr: float
    r2: float
    points: int


def fit_against(x: NDArray, y: NDArray) -> LinearFit:
    """Ordinary least squares of ``y`` on ``x`` (at least 3 points).

    Example:
        >>> round(fit_against(np.array([1.0, 2, 3]), np.array([1.0, 3, 5])).slope, 6)
        2.0
    """
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    if xs.shape != ys.shape or xs.ndim != 1 or xs.size < 3:
        raise ValueError(f"need two 1-d arrays of equal length >= 3, got {xs.shape}, {ys.shape}")
    xc, yc = xs - xs.mean(), ys - ys.mean()
    sxx = float(xc @ xc)
    if sxx == 0.0:
        raise ValueError("x must not be constant")
    slope = float(xc @ yc) / sxx
    intercept = float(ys.mean() - slope * xs.mean())
    resid = yc - slope * xc
    sse, syy = float(resid @ resid), float(yc @ yc)
    stderr = math.sqrt(sse / (xs.size - 2) / sxx)
    r2 = 1.0 - sse / syy if syy > 0 else 1.0
    return LinearFit(slope, intercept, stderr, r2, int(xs.size))


def fit_loglog(horizons: NDArray, regrets: NDArray) -> LinearFit:
    """Fit ``log R_T = a + b log T``; ``b`` is the empirical decay exponent.

    Only positive regrets can be fitted; non-positive ones are dropped.

    Raises:
        ValueError: if fewer than 3 positive points remain.

    Example:
        >>> t = np.array([100.0, 400, 1600])
        >>> round(fit_loglog(t, 3 * t**-0.25).slope, 6)
        -0.25
    """
    t = np.asarray(horizons, dtype=np.float64)
    r = np.asarray(regrets, dtype=np.float64)
    keep = (r > 0) & (t > 0)
    if keep.sum() < 3:
        raise ValueError(f"a log-log fit needs >= 3 positive regrets, got {int(keep.sum())}")
    return fit_against(np.log(t[keep]), np.log(r[keep]))
