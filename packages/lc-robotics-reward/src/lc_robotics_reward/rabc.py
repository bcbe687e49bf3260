r"""Reward-aligned behaviour cloning (RA-BC): sample weights from progress deltas.

For a sample at frame ``t`` of an episode with predicted normalised progress ``p``, the
reward is the progress made over the next action chunk of ``H`` frames,

.. math::  r_t = p_{\min(t + H,\, T - 1)} - p_t,

and with ``mu`` and ``sigma`` the mean and standard deviation of ``r`` over the whole
dataset the weight is

.. math::
    \tilde w = \mathrm{clip}\Big(\frac{r - (\mu - 2\sigma)}{4\sigma + \epsilon}, 0, 1\Big),\qquad
    w = \mathbb 1[r > \kappa] + \mathbb 1[0 \le r \le \kappa]\,\tilde w,

so a sample that makes clear progress counts fully, one that stalls counts a little and
one that undoes progress not at all. The policy loss is ``sum(w * l) / sum(w)``.
*Filtering* keeps only the samples with ``r > kappa`` (weight 1) and drops the rest;
:func:`episode_filter` drops whole episodes whose predicted progress ends low, and its
mask can be multiplied with the weights (filter episodes, then reweight samples).

Example:
    >>> import numpy as np
    >>> r = np.array([0.2, 0.0, -0.1, 0.005])
    >>> rabc_weights(r, kappa=0.01, mu=0.05, sigma=0.1).round(3).tolist()
    [1.0, 0.375, 0.0, 0.388]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

KAPPA = 0.01  # the paper's threshold of clear progress
EPSILON = 1e-6


def progress_deltas(progress: Sequence[np.ndarray] | np.ndarray, chunk: int) -> np.ndarray:
    """Progress made over the next ``chunk`` frames, per frame, for each episode.

    Args:
        progress: one array ``[T_e]`` of normalised progress per episode (or one array).
        chunk: look-ahead ``H`` in frames (the policy's action-chunk length); a frame
            closer than ``H`` to the end looks at the episode's last frame.

    Returns:
        ``[sum T_e]`` float64, episodes concatenated in order.
    """
    if chunk < 1:
        raise ValueError(f"chunk={chunk}; allowed: >= 1")
    episodes = [progress] if isinstance(progress, np.ndarray) and progress.ndim == 1 else progress
    out = []
    for i, p in enumerate(episodes):
        p = np.asarray(p, dtype=np.float64)
        if p.ndim != 1 or p.size == 0:
            raise ValueError(
                f"progress of episode {i} has shape {p.shape}; expected [T] with T >= 1"
            )
        ahead = np.minimum(np.arange(p.size) + chunk, p.size - 1)
        out.append(p[ahead] - p)
    return np.concatenate(out)


def rabc_weights(
    deltas: np.ndarray,
    kappa: float = KAPPA,
    mu: float | None = None,
    sigma: float | None = None,
    eps: float = EPSILON,
) -> np.ndarray:
    """RA-BC weights ``[N]`` in ``[0, 1]`` from progress deltas ``r [N]``.

    Args:
        deltas: progress deltas ``r`` (see :func:`progress_deltas`).
        kappa: threshold above which a sample gets weight 1 (paper: 0.01).
        mu: mean of ``r`` over the dataset; default: the mean of ``deltas``.
        sigma: standard deviation of ``r`` over the dataset; default: that of ``deltas``.
        eps: keeps the soft weight finite when ``sigma`` is 0.
    """
    r = np.asarray(deltas, dtype=np.float64)
    if r.ndim != 1 or not np.isfinite(r).all():
        raise ValueError(f"deltas must be a finite 1-D array; got shape {r.shape}")
    if kappa < 0:
        raise ValueError(f"kappa={kappa}; allowed: >= 0")
    mu = float(r.mean()) if mu is None else float(mu)
    sigma = float(r.std()) if sigma is None else float(sigma)
    if sigma < 0:
        raise ValueError(f"sigma={sigma}; allowed: >= 0")
    soft = np.clip((r - (mu - 2.0 * sigma)) / (4.0 * sigma + eps), 0.0, 1.0)
    return np.where(r > kappa, 1.0, np.where(r >= 0.0, soft, 0.0))


def rabc_filter(deltas: np.ndarray, kappa: float = KAPPA) -> np.ndarray:
    """Filtering mode: weight 1 where ``r > kappa``, else 0 (``[N]`` float64)."""
    r = np.asarray(deltas, dtype=np.float64)
    if r.ndim != 1:
        raise ValueError(f"deltas must be 1-D; got shape {r.shape}")
    return (r > kappa).astype(np.float64)


def episode_filter(
    progress: Sequence[np.ndarray], threshold: float = 0.9, tail: int = 3
) -> np.ndarray:
    """Episode-level filtering: keep episodes whose predicted progress ends high.

    Args:
        progress: normalised progress ``[T_e]`` per episode.
        threshold: keep an episode if the mean progress of its last ``tail`` frames is at
            least this.
        tail: frames averaged at the end of an episode.

    Returns:
        ``[sum T_e]`` float64: 1 for every frame of a kept episode, else 0 (multiply it
        with :func:`rabc_weights` to filter episodes and reweight samples).
    """
    if not 0.0 <= threshold <= 1.0 or tail < 1:
        raise ValueError(f"threshold={threshold} (allowed 0..1), tail={tail} (allowed >= 1)")
    out = []
    for p in progress:
        p = np.asarray(p, dtype=np.float64)
        out.append(np.full(p.size, float(p[-tail:].mean() >= threshold)))
    return np.concatenate(out)


def weighted_bc_loss(per_sample_loss: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``sum(w * l) / sum(w)`` over a batch; 0 (with gradient) if every weight is 0.

    Args:
        per_sample_loss: ``[B]`` losses of the policy, one per sample.
        weights: ``[B]`` non-negative weights (all ones: vanilla BC, the plain mean).

    Example:
        >>> import torch
        >>> weighted_bc_loss(torch.tensor([1.0, 3.0]), torch.tensor([1.0, 0.0])).item()
        1.0
    """
    if per_sample_loss.shape != weights.shape or per_sample_loss.ndim != 1:
        raise ValueError(
            f"per_sample_loss {tuple(per_sample_loss.shape)} and weights "
            f"{tuple(weights.shape)} must be the same 1-D shape"
        )
    total = weights.sum()
    return (weights * per_sample_loss).sum() / total.clamp_min(EPSILON)
