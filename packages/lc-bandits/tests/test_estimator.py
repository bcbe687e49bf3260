"""Logistic MLE: recovery of theta, agreement with a generic optimizer, design matrices."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from lc_bandits import LogisticMLE, newton_logistic, sigmoid


def _data(n: int, theta: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=(n, theta.size))
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1.0)
    y = (rng.random(n) < sigmoid(x @ theta)).astype(float)
    return x, y


def test_mle_recovers_theta_on_synthetic_data() -> None:
    theta = np.array([1.5, -1.0, 0.5, 0.0, -0.8])
    x, y = _data(40_000, theta, seed=0)
    est = newton_logistic(x, y, reg=1.0)
    # sampling error of each coordinate is about 0.03 here
    np.testing.assert_allclose(est, theta, atol=0.12)
    assert np.linalg.norm(est - theta) < np.linalg.norm(theta) * 0.1


def test_newton_matches_a_generic_optimizer() -> None:
    theta = np.array([0.7, -1.2, 0.3])
    x, y = _data(300, theta, seed=1)
    reg = 2.0

    def loss(th: np.ndarray) -> float:
        z = x @ th
        return float(np.sum(np.logaddexp(0.0, z) - y * z) + reg / 2 * th @ th)

    ref = minimize(loss, np.zeros(3), method="BFGS", options={"gtol": 1e-10}).x
    np.testing.assert_allclose(newton_logistic(x, y, reg=reg), ref, atol=1e-5)


def test_batched_mle_equals_per_server_fits() -> None:
    rng = np.random.default_rng(2)
    b, k, d = 3, 2, 3
    theta = rng.normal(size=(b, k, d))
    mle = LogisticMLE(b, k, d, reg=1.0, norm_bound=2.0, newton_steps=30)
    xs: dict[tuple[int, int], list] = {}
    ys: dict[tuple[int, int], list] = {}
    for _ in range(400):
        x = rng.uniform(-0.6, 0.6, size=(b, d))
        srv = rng.integers(k, size=b)
        active = rng.random(b) < 0.9
        y = (rng.random(b) < sigmoid(np.einsum("bd,bd->b", x, theta[np.arange(b), srv]))).astype(
            float
        )
        mle.add(active, x, srv, y)
        for i in np.flatnonzero(active):
            xs.setdefault((i, srv[i]), []).append(x[i].astype(np.float32))
            ys.setdefault((i, srv[i]), []).append(y[i])
    mle.fit()
    for (i, j), rows in xs.items():
        data = np.array(rows, dtype=np.float64)
        ref = newton_logistic(data, np.array(ys[(i, j)]), reg=1.0)
        np.testing.assert_allclose(mle.theta[i, j], ref, atol=1e-6)
        v = np.eye(d) + data.T @ data
        np.testing.assert_allclose(mle.v_inv[i, j], np.linalg.inv(v), atol=1e-5)
        assert mle.counts[i, j] == len(rows)


def test_geometric_refit_schedule_and_widths() -> None:
    mle = LogisticMLE(1, 1, 2, reg=1.0, norm_bound=1.0)
    x = np.array([[0.6, 0.0]])
    one = np.array([True])
    assert mle.fit() == 0  # nothing to fit yet
    mle.add(one, x, np.array([0]), np.array([1.0]))
    assert mle.fit(min_growth=0.5) == 1
    mle.add(one, x, np.array([0]), np.array([1.0]))
    assert mle.fit(min_growth=1.5) == 0  # 2 < 2.5 * 1
    assert mle.fit(min_growth=0.5, dense=5) == 1
    w = mle.widths(np.array([[[1.0, 0.0], [0.0, 1.0]]]))[0, :, 0]
    np.testing.assert_allclose(w, [np.sqrt(1 / (1 + 2 * 0.36)), 1.0])
    r = mle.radius(0.01)
    expected = 1.0 + 0.5 * np.sqrt(2 * np.log(100) + 2 * np.log1p(2 / 2))
    np.testing.assert_allclose(r, [[expected]])
    with pytest.raises(ValueError, match="delta"):
        mle.radius(1.0)


def test_estimator_input_errors() -> None:
    with pytest.raises(ValueError, match="reg"):
        newton_logistic(np.zeros((3, 2)), np.zeros(3), reg=0.0)
    with pytest.raises(ValueError, match="disagree"):
        newton_logistic(np.zeros((3, 2)), np.zeros(4))
