"""Diffusion prior over feature vectors: noise schedule, noise predictor, DDIM sampler.

Features are vectors ``[batch, dim]``. The forward process is the DDPM one,
``x_t = sqrt(abar_t) x_0 + sqrt(1 - abar_t) eps`` with a linear beta schedule; the
network predicts ``eps``. Sampling uses deterministic DDIM (``eta = 0``) over a few
evenly spaced timesteps that end at ``t = 0``; the step after ``t = 0`` lands on the
clean sample (``abar = 1``). The default grid is the second half of a ``2 n``-step DDIM
grid over ``[0, T)``: for ``T = 1000`` and ``n = 5`` the noise predictor is evaluated at
``400, 300, 200, 100, 0``.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from lc_timeseries_kd.config import default_start

__all__ = [
    "NoisePredictor",
    "NoiseSchedule",
    "ddim_sample",
    "ddim_step",
    "ddim_timesteps",
    "diffusion_loss",
    "timestep_embedding",
]


class NoiseSchedule(nn.Module):
    """Linear beta schedule and its cumulative products ``abar_t``.

    Args:
        num_train_timesteps: number of diffusion steps ``T`` (paper/anchor: 1000).
        beta_start: first beta (default 1e-4).
        beta_end: last beta (default 0.02).

    Example:
        >>> s = NoiseSchedule(1000)
        >>> float(s.alphas_cumprod[0]) > float(s.alphas_cumprod[-1])
        True
    """

    alphas_cumprod: torch.Tensor

    def __init__(
        self, num_train_timesteps: int = 1000, beta_start: float = 1e-4, beta_end: float = 0.02
    ):
        super().__init__()
        if num_train_timesteps < 1:
            raise ValueError(f"num_train_timesteps must be >= 1, got {num_train_timesteps}")
        if not 0.0 < beta_start <= beta_end < 1.0:
            raise ValueError(
                f"need 0 < beta_start <= beta_end < 1, got beta_start={beta_start}, "
                f"beta_end={beta_end}"
            )
        self.num_train_timesteps = num_train_timesteps
        betas = torch.linspace(beta_start, beta_end, num_train_timesteps, dtype=torch.float64)
        self.register_buffer(
            "alphas_cumprod", torch.cumprod(1.0 - betas, 0).float(), persistent=False
        )

    def abar(self, t: torch.Tensor) -> torch.Tensor:
        """``abar_t`` for integer timesteps ``t`` (``t = -1`` means clean: 1.0)."""
        t = t.long()
        one = torch.ones_like(t, dtype=self.alphas_cumprod.dtype)
        return torch.where(t >= 0, self.alphas_cumprod[t.clamp(min=0)], one)

    def add_noise(self, x0: torch.Tensor, noise: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Forward process ``q(x_t | x_0)`` for features ``[batch, dim]``, ``t`` ``[batch]``."""
        a = self.abar(t).to(x0.dtype).unsqueeze(-1)
        return a.sqrt() * x0 + (1.0 - a).sqrt() * noise


def timestep_embedding(t: torch.Tensor, dim: int, max_period: float = 10_000.0) -> torch.Tensor:
    """Sinusoidal embedding ``[batch, dim]`` of (integer or real) timesteps ``[batch]``."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, device=t.device) / half)
    args = t.float().unsqueeze(-1) * freqs
    emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
    if dim % 2:
        emb = torch.cat([emb, torch.zeros_like(emb[:, :1])], dim=-1)
    return emb


class NoisePredictor(nn.Module):
    """``eps_theta(x_t, t)``: an MLP with a sinusoidal timestep embedding.

    Args:
        dim: feature dimension.
        hidden: width of the hidden layers.
        time_dim: size of the timestep embedding.
        depth: number of hidden blocks.

    Example:
        >>> net = NoisePredictor(6, hidden=16)
        >>> net(torch.zeros(3, 6), torch.tensor([0, 10, 999])).shape
        torch.Size([3, 6])
    """

    def __init__(self, dim: int, hidden: int = 256, time_dim: int = 64, depth: int = 2):
        super().__init__()
        self.time_dim = time_dim
        self.time = nn.Sequential(nn.Linear(time_dim, hidden), nn.SiLU(), nn.Linear(hidden, hidden))
        self.inp = nn.Linear(dim, hidden)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(hidden), nn.SiLU(), nn.Linear(hidden, hidden))
            for _ in range(depth)
        )
        self.out = nn.Sequential(nn.LayerNorm(hidden), nn.SiLU(), nn.Linear(hidden, dim))

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Predicted noise ``[batch, dim]`` for ``x`` ``[batch, dim]`` at timesteps ``t``."""
        if t.ndim == 0:
            t = t.expand(x.shape[0])
        h = self.inp(x) + self.time(timestep_embedding(t, self.time_dim))
        for block in self.blocks:
            h = h + block(h)
        return self.out(h)


def diffusion_loss(
    model: nn.Module,
    schedule: NoiseSchedule,
    x0: torch.Tensor,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Denoising loss ``E_{t, eps} ||eps - eps_theta(x_t, t)||^2`` (mean over elements).

    Example:
        >>> s, net = NoiseSchedule(100), NoisePredictor(4, hidden=8)
        >>> diffusion_loss(net, s, torch.randn(5, 4)).ndim
        0
    """
    t = torch.randint(
        0, schedule.num_train_timesteps, (x0.shape[0],), device=x0.device, generator=generator
    )
    noise = torch.randn(x0.shape, device=x0.device, dtype=x0.dtype, generator=generator)
    return torch.mean((model(schedule.add_noise(x0, noise, t), t) - noise) ** 2)


def ddim_timesteps(num_steps: int, start: int) -> list[int]:
    """Evenly spaced decreasing timesteps from ``start`` down to ``0`` (``num_steps`` of them).

    ``[start, start - d, ..., d, 0]`` with ``d = start / (num_steps - 1)`` (rounded); the
    step after ``0`` lands on the clean sample. One step gives ``[start]``, zero steps
    ``[]``.

    Example:
        >>> ddim_timesteps(5, 400)
        [400, 300, 200, 100, 0]
    """
    if num_steps < 0:
        raise ValueError(f"num_steps must be >= 0, got {num_steps}")
    if num_steps == 0:
        return []
    if start < num_steps - 1:
        raise ValueError(f"start ({start}) must be >= num_steps - 1 ({num_steps - 1})")
    if num_steps == 1:
        return [start]
    return [round(start * (num_steps - 1 - i) / (num_steps - 1)) for i in range(num_steps)]


def ddim_step(
    schedule: NoiseSchedule,
    x_t: torch.Tensor,
    eps: torch.Tensor,
    t: int,
    t_prev: int,
) -> torch.Tensor:
    """One deterministic DDIM update ``x_t -> x_{t_prev}`` (``t_prev = -1``: clean).

    ``x0_hat = (x_t - sqrt(1 - abar_t) eps) / sqrt(abar_t)`` and
    ``x_prev = sqrt(abar_prev) x0_hat + sqrt(1 - abar_prev) eps``.
    """
    device = x_t.device
    a_t = schedule.abar(torch.tensor([t], device=device)).to(x_t.dtype)
    a_prev = schedule.abar(torch.tensor([t_prev], device=device)).to(x_t.dtype)
    x0_hat = (x_t - (1.0 - a_t).sqrt() * eps) / a_t.sqrt()
    return a_prev.sqrt() * x0_hat + (1.0 - a_prev).sqrt() * eps


def ddim_sample(
    model: nn.Module,
    schedule: NoiseSchedule,
    x_start: torch.Tensor,
    num_steps: int,
    start: int | None = None,
) -> torch.Tensor:
    """Run ``num_steps`` deterministic DDIM steps from ``x_start`` at timestep ``start``.

    Gradients flow through the sampler (the distillation loss back-propagates through
    it into the student features). With ``num_steps = 0`` it returns ``x_start``.

    Args:
        model: noise predictor ``eps_theta(x, t)``.
        schedule: the noise schedule the model was trained with.
        x_start: ``[batch, dim]`` start point (e.g. a noised student feature).
        num_steps: number of DDIM steps (paper: 5).
        start: timestep of ``x_start``, the first one the noise predictor sees
            (default: ``config.default_start``, 400 for ``T = 1000`` and 5 steps).

    Returns:
        ``[batch, dim]`` denoised features.

    Example:
        >>> s, net = NoiseSchedule(1000), NoisePredictor(4, hidden=8)
        >>> x = torch.randn(2, 4)
        >>> torch.equal(ddim_sample(net, s, x, num_steps=0), x)
        True
    """
    if start is None:
        start = default_start(schedule.num_train_timesteps, num_steps)
    if not 0 <= start < schedule.num_train_timesteps:
        raise ValueError(f"start must lie in [0, {schedule.num_train_timesteps - 1}], got {start}")
    steps = ddim_timesteps(num_steps, start)
    x = x_start
    for i, t in enumerate(steps):
        t_prev = steps[i + 1] if i + 1 < len(steps) else -1
        eps = model(x, torch.full((x.shape[0],), t, device=x.device, dtype=torch.long))
        x = ddim_step(schedule, x, eps, t, t_prev)
    return x
