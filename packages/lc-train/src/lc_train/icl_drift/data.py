r"""Linear-regression prompts whose task weight drifts as a first-order autoregressive process.

For one prompt of ``n`` examples plus a query (``n + 1`` positions ``t = 1..n+1``):

.. math::

    w_1 \sim \mathcal N(0, I_d / d), \quad
    w_{t+1} = \rho\, w_t + \sqrt{1 - \rho^2}\, \xi_t,\ \xi_t \sim \mathcal N(0, I_d / d), \\
    x_t \sim \mathcal N(0, I_d), \quad y_t = x_t^\top w_t + \sigma \varepsilon_t .

The scaling keeps every ``w_t`` at the same marginal law, so ``rho`` changes only how fast
the task moves, not how large it is; ``1 - rho`` is the drift rate (0: stationary).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["DriftBatch", "DriftConfig", "sample_prompts"]


@dataclass(frozen=True)
class DriftConfig:
    """A family of drifting in-context regression tasks.

    Attributes:
        dim: input dimension ``d``.
        n_context: labelled examples before the query.
        rho: AR(1) coefficient in ``[0, 1]``; ``1`` is the stationary task.
        noise: label noise standard deviation ``sigma``.
    """

    dim: int = 5
    n_context: int = 30
    rho: float = 1.0
    noise: float = 0.1

    def __post_init__(self) -> None:
        if not isinstance(self.dim, int) or self.dim < 1:
            raise ValueError(f"dim must be an int >= 1, got {self.dim!r}")
        if not isinstance(self.n_context, int) or self.n_context < 1:
            raise ValueError(f"n_context must be an int >= 1, got {self.n_context!r}")
        if not 0.0 <= self.rho <= 1.0:
            raise ValueError(f"rho must be in [0, 1], got {self.rho}")
        if not self.noise >= 0.0:
            raise ValueError(f"noise must be >= 0, got {self.noise}")

    @property
    def drift(self) -> float:
        """Drift rate ``1 - rho``."""
        return 1.0 - self.rho


@dataclass(frozen=True)
class DriftBatch:
    """A batch of prompts.

    Attributes:
        x: inputs ``[B, n+1, d]`` (the last row is the query).
        y: labels ``[B, n+1]`` (the last entry is the query's target).
        w: task weights ``[B, n+1, d]`` in force at each position.
    """

    x: torch.Tensor
    y: torch.Tensor
    w: torch.Tensor

    def tokens(self) -> torch.Tensor:
        """Prompt tokens ``z_t = [x_t, y_t]`` ``[B, n+1, d+1]`` with the query's label zeroed."""
        y = self.y.clone()
        y[:, -1] = 0.0
        return torch.cat([self.x, y[..., None]], -1)


def sample_prompts(
    config: DriftConfig, batch: int, generator: torch.Generator, dtype: torch.dtype = torch.float32
) -> DriftBatch:
    """Draw ``batch`` independent prompts of ``config``.

    Example:
        >>> import torch
        >>> b = sample_prompts(DriftConfig(dim=3, n_context=4, rho=0.9), 2, torch.Generator().manual_seed(0))
        >>> b.x.shape, b.y.shape, b.tokens().shape
        (torch.Size([2, 5, 3]), torch.Size([2, 5]), torch.Size([2, 5, 4]))
    """
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    d, t = config.dim, config.n_context + 1
    std = d**-0.5
    w = torch.empty(batch, t, d, dtype=dtype)
    w[:, 0] = torch.randn(batch, d, generator=generator, dtype=dtype) * std
    kick = (1.0 - config.rho**2) ** 0.5
    for s in range(1, t):
        xi = torch.randn(batch, d, generator=generator, dtype=dtype) * std
        w[:, s] = config.rho * w[:, s - 1] + kick * xi
    x = torch.randn(batch, t, d, generator=generator, dtype=dtype)
    y = (x * w).sum(-1) + config.noise * torch.randn(batch, t, generator=generator, dtype=dtype)
    return DriftBatch(x=x, y=y, w=w)
