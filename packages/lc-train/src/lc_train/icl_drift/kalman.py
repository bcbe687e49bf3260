"""Bayes-optimal prediction of the query label: a Kalman filter on the drifting weight.

The drift model is linear-Gaussian, so the posterior of ``w_{n+1}`` given the prompt is
Gaussian and the Kalman filter computes it exactly; its error is the floor no in-context
learner can beat. It serves as a reference line, not as a competitor.
"""

from __future__ import annotations

import torch

from lc_train.icl_drift.data import DriftBatch, DriftConfig

__all__ = ["kalman_predict"]


def kalman_predict(batch: DriftBatch, config: DriftConfig) -> torch.Tensor:
    """Posterior-mean prediction ``[B]`` of the query label of every prompt (fp64 inside).

    Example:
        >>> import torch
        >>> from lc_train.icl_drift.data import sample_prompts
        >>> cfg = DriftConfig(dim=2, n_context=50, rho=1.0, noise=0.0)
        >>> b = sample_prompts(cfg, 3, torch.Generator().manual_seed(0))
        >>> torch.allclose(kalman_predict(b, cfg), b.y[:, -1].double(), atol=1e-4)
        True
    """
    x, y = batch.x.double(), batch.y.double()
    bsz, t, d = x.shape
    q = (1.0 - config.rho**2) / d  # process noise variance per coordinate
    r = max(config.noise**2, 1e-12)
    mean = torch.zeros(bsz, d, dtype=torch.float64)
    cov = torch.eye(d, dtype=torch.float64).expand(bsz, d, d) / d
    for s in range(t - 1):
        xs = x[:, s]
        px = cov @ xs[..., None]  # [B, d, 1]
        denom = (xs[:, None, :] @ px)[..., 0, 0] + r
        gain = px[..., 0] / denom[:, None]
        mean = mean + gain * (y[:, s] - (xs * mean).sum(-1))[:, None]
        cov = cov - gain[..., :, None] * px[..., 0][:, None, :]
        # predict the next weight
        mean = config.rho * mean
        cov = config.rho**2 * cov + q * torch.eye(d, dtype=torch.float64)
    return (x[:, -1] * mean).sum(-1)
