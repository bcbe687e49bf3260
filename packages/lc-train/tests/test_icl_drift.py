"""Drifting in-context regression: data law, the Kalman reference, the regressors, training."""

from __future__ import annotations

import pytest
import torch

from lc_attention.linear import gla_chunk
from lc_train.icl_drift import (
    DriftConfig,
    ICLRegressor,
    TrainConfig,
    kalman_predict,
    run_sweep,
    sample_prompts,
)


def test_ar1_drift_keeps_the_marginal_and_sets_the_correlation():
    cfg = DriftConfig(dim=4, n_context=20, rho=0.6, noise=0.0)
    b = sample_prompts(cfg, 20000, torch.Generator().manual_seed(0), dtype=torch.float64)
    var = b.w.pow(2).mean((0, 2))  # per position, expected 1/d = 0.25
    assert torch.allclose(var, torch.full_like(var, 0.25), atol=0.01)
    corr = (b.w[:, 1:] * b.w[:, :-1]).mean() / b.w.pow(2).mean()
    assert abs(float(corr) - 0.6) < 0.01
    torch.testing.assert_close(b.y, (b.x * b.w).sum(-1))  # noise 0: exact labels
    still = sample_prompts(
        DriftConfig(dim=3, n_context=5, rho=1.0), 4, torch.Generator().manual_seed(1)
    )
    torch.testing.assert_close(still.w, still.w[:, :1].expand_as(still.w))
    assert (still.tokens()[:, -1, -1] == 0).all()


def test_kalman_filter_equals_gaussian_conditioning():
    cfg = DriftConfig(dim=3, n_context=7, rho=0.8, noise=0.3)
    b = sample_prompts(cfg, 5, torch.Generator().manual_seed(2), dtype=torch.float64)
    n, d = cfg.n_context, cfg.dim
    idx = torch.arange(n + 1, dtype=torch.float64)
    lag = (idx[:, None] - idx[None, :]).abs()
    for j in range(5):
        x, y = b.x[j], b.y[j]
        cov_y = (x[:n] @ x[:n].T) * cfg.rho ** lag[:n, :n] / d + cfg.noise**2 * torch.eye(
            n, dtype=torch.float64
        )
        cov_wy = (cfg.rho ** lag[n, :n])[None, :] * x[:n].T / d  # Cov(w_{n+1}, y_1..n)  [d, n]
        w_post = cov_wy @ torch.linalg.solve(cov_y, y[:n])
        torch.testing.assert_close(kalman_predict(b, cfg)[j], x[n] @ w_post, rtol=1e-9, atol=1e-9)


def test_regressor_state_equals_the_gla_operator():
    torch.manual_seed(0)
    model = ICLRegressor("gla", dim=3, n_heads=2, n_context=9, init_decay=0.7, seed=3).double()
    tokens = torch.randn(4, 10, 4, dtype=torch.float64)
    b, t, h, e = 4, 10, 2, model.head_dim
    q = (tokens @ model.w_q).view(b, t, h, e)
    k = (tokens @ model.w_k).view(b, t, h, e)
    v = (tokens @ model.w_v).view(b, t, h, e)
    g = model.log_decay().view(1, 1, h, 1).expand(b, t, h, e)
    o, _ = gla_chunk(q, k, v, g, scale=1.0 / 9, chunk_size=4)
    expect = (o[:, -1].reshape(b, h * e) @ model.readout)[:, 0]
    torch.testing.assert_close(model(tokens), expect)
    # with the gate removed it is linear attention
    lin = ICLRegressor("linear", dim=3, n_heads=2, n_context=9, seed=3).double()
    o_lin, _ = gla_chunk(q, k, v, None, scale=1.0 / 9)
    torch.testing.assert_close(lin(tokens), (o_lin[:, -1].reshape(b, h * e) @ lin.readout)[:, 0])
    assert torch.allclose(lin.decay(), torch.ones(2))


def _gd_regressor(dim: int, n: int, lam: float) -> ICLRegressor:
    """GLA regressor set by hand to one step of gradient descent with forgetting:
    prediction = (1/n) sum_s lam^(n+1-s) (x_q . x_s) y_s."""
    model = ICLRegressor("gla", dim=dim, n_context=n, init_decay=lam).double()
    with torch.no_grad():
        eye = torch.zeros(dim + 1, dim + 1, dtype=torch.float64)
        eye[:dim, :dim] = torch.eye(dim)
        model.w_q.copy_(eye)
        model.w_k.copy_(eye)
        model.w_v.zero_()
        model.w_v[dim, dim] = 1.0
        model.readout.zero_()
        model.readout[dim, 0] = 1.0
    return model


def _best_decay(rho: float) -> float:
    """Forgetting factor on a grid with the least error (output scale fitted per factor)."""
    cfg = DriftConfig(dim=3, n_context=30, rho=rho, noise=0.1)
    data = sample_prompts(cfg, 2000, torch.Generator().manual_seed(4), dtype=torch.float64)
    target = data.y[:, -1]
    errors = {}
    for lam in (0.5, 0.7, 0.8, 0.9, 0.95, 0.999):
        with torch.no_grad():
            f = _gd_regressor(3, 30, lam)(data.tokens())
        c = (f * target).sum() / (f * f).sum()
        errors[lam] = float((c * f - target).pow(2).mean())
    return min(errors, key=errors.__getitem__)


def test_recency_bias_helps_exactly_when_the_task_drifts():
    assert _best_decay(1.0) == 0.999  # stationary: keep every example
    assert _best_decay(0.6) <= 0.8  # strong drift: forget fast


def test_sweep_reports_every_run_and_bad_configs_raise():
    out = run_sweep(
        [1.0, 0.5],
        kinds=("linear", "gla"),
        task=DriftConfig(dim=2, n_context=5),
        train=TrainConfig(steps=3, batch=8, eval_batch=32),
        progress=False,
    )
    assert len(out["runs"]) == 4
    assert set(out["kalman_test_error"]) == {"1.0", "0.5"}
    with pytest.raises(ValueError, match="rho"):
        DriftConfig(rho=1.5)
    with pytest.raises(ValueError, match="kind"):
        ICLRegressor("mamba", dim=2)
    with pytest.raises(ValueError, match="tokens must be"):
        ICLRegressor("linear", dim=2)(torch.randn(2, 4, 5))
    with pytest.raises(ValueError, match="steps"):
        TrainConfig(steps=0)
