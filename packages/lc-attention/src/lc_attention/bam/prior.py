"""The BAM generalized-Gaussian positional log-prior.

For head ``h``, query position ``i`` and key position ``j`` the log-prior added to the
attention logits is

    b_hij = -exp(theta_a[h]) * (|(j - i) - mu[h]| + eps) ** theta_b[h],
    mu[h] = exp(theta_m[h]) - exp(-theta_m[h])   (= 2 sinh theta_m)

``exp(theta_a)`` is the scale (initialised from the ALiBi slopes), ``theta_b`` the shape
(1 gives a Laplace prior, i.e. ALiBi; 2 a Gaussian; values near 0 flatten the prior
towards NoPE) and ``mu`` the location.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

__all__ = ["BAMPrior", "BAMPriorConfig", "alibi_slopes", "bam_bias", "initial_shapes"]

_SCALE_INITS = ("alibi",)
_SHAPE_INITS = ("linear",)


def initial_shapes(shape_init: float | str, num_heads: int) -> torch.Tensor:
    """``[H]`` initial prior shapes ``theta_b``.

    Args:
        shape_init: a float > 0 used for every head, or ``"linear"``: shapes evenly spaced
            from 0 (a flat prior, i.e. a NoPE head) to 1 (a Laplace prior, i.e. an ALiBi
            head) across the heads, as in the BAM reference code.
        num_heads: number of heads, >= 1.

    Returns:
        ``[num_heads]`` float32 shapes.

    Example:
        >>> initial_shapes("linear", 3).tolist()
        [0.0, 0.5, 1.0]
    """
    if shape_init == "linear":
        return torch.linspace(0.0, 1.0, num_heads) if num_heads > 1 else torch.ones(1)
    return torch.full((num_heads,), float(shape_init))


def check_shape_init(shape_init: float | str) -> None:
    """Raise ValueError unless ``shape_init`` is a float > 0 or ``"linear"``."""
    if isinstance(shape_init, str):
        if shape_init not in _SHAPE_INITS:
            raise ValueError(
                f"shape_init must be a float > 0 or one of {_SHAPE_INITS}, got {shape_init!r}"
            )
    elif not (shape_init > 0 and math.isfinite(shape_init)):
        raise ValueError(f"shape_init must be a finite float > 0 or 'linear', got {shape_init}")


def alibi_slopes(num_heads: int) -> list[float]:
    """The ALiBi head slopes (geometric sequence; interleaved for non-powers of two).

    Args:
        num_heads: number of attention heads, >= 1.

    Returns:
        ``num_heads`` positive slopes, largest first for a power of two.

    Example:
        >>> alibi_slopes(4)
        [0.25, 0.0625, 0.015625, 0.00390625]
    """
    if num_heads < 1:
        raise ValueError(f"num_heads must be >= 1, got {num_heads}")

    def power_of_two(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    if math.log2(num_heads).is_integer():
        return power_of_two(num_heads)
    low = 2 ** math.floor(math.log2(num_heads))
    return power_of_two(low) + power_of_two(2 * low)[0::2][: num_heads - low]


def bam_bias(
    theta_a: torch.Tensor,
    theta_b: torch.Tensor,
    theta_m: torch.Tensor,
    q_pos: torch.Tensor,
    k_pos: torch.Tensor,
    eps: float = 1e-5,
) -> torch.Tensor:
    """The BAM log-prior for a block of query and key positions.

    Args:
        theta_a: ``[H]`` log-scale (scale ``alpha = exp(theta_a)``).
        theta_b: ``[H]`` shape (> 0 for a proper prior).
        theta_m: ``[H]`` location parameter (``mu = 2 sinh theta_m``).
        q_pos: ``[Tq]`` integer or float query positions.
        k_pos: ``[Tk]`` key positions.
        eps: offset inside the power; keeps the shape gradient finite at ``j - i = mu``.

    Returns:
        ``[H, Tq, Tk]`` float32 bias (always <= 0).

    Example:
        >>> import torch
        >>> z = torch.zeros(2)
        >>> pos = torch.arange(3)
        >>> bam_bias(z, torch.ones(2), z, pos, pos, eps=0.0)[0, 2]
        tensor([-2., -1., -0.])
    """
    mu = torch.exp(theta_m.float()) - torch.exp(-theta_m.float())
    rel = (k_pos.float()[None, :] - q_pos.float()[:, None])[None]  # [1, Tq, Tk]
    dist = (rel - mu[:, None, None]).abs() + eps
    return -torch.exp(theta_a.float())[:, None, None] * dist.pow(theta_b.float()[:, None, None])


@dataclass(frozen=True)
class BAMPriorConfig:
    """Settings of a per-head BAM prior.

    Attributes:
        num_heads: number of heads, >= 1.
        scale_init: ``"alibi"`` (ALiBi slopes) or a positive float used for every head.
        shape_init: initial shape ``theta_b``: a float > 0 (1.0 starts exactly at ALiBi) or
            ``"linear"`` (shapes spread over the heads from 0, a flat NoPE-like prior, to 1).
        loc_init: initial location ``mu`` (any real; stored as ``asinh(mu / 2)``).
        train_scale: whether ``theta_a`` is trained.
        train_shape: whether ``theta_b`` is trained.
        train_loc: whether ``theta_m`` is trained.
        eps: offset inside the power, >= 0.
        scalable_softmax: scale content logits by a learned ``s * log(n)`` per head.
        ssmax_init: initial ``s`` (> 0) when ``scalable_softmax`` is on.
    """

    num_heads: int
    scale_init: str | float = "alibi"
    shape_init: float | str = 1.0
    loc_init: float = 0.0
    train_scale: bool = True
    train_shape: bool = True
    train_loc: bool = True
    eps: float = 1e-5
    scalable_softmax: bool = False
    ssmax_init: float = 1.0

    def __post_init__(self) -> None:
        if self.num_heads < 1:
            raise ValueError(f"num_heads must be >= 1, got {self.num_heads}")
        if isinstance(self.scale_init, str):
            if self.scale_init not in _SCALE_INITS:
                raise ValueError(
                    f"scale_init must be one of {_SCALE_INITS} or a float > 0, got {self.scale_init!r}"
                )
        elif not (self.scale_init > 0 and math.isfinite(self.scale_init)):
            raise ValueError(f"scale_init must be a finite float > 0, got {self.scale_init}")
        check_shape_init(self.shape_init)
        if not math.isfinite(self.loc_init):
            raise ValueError(f"loc_init must be finite, got {self.loc_init}")
        if not self.eps >= 0:
            raise ValueError(f"eps must be >= 0, got {self.eps}")
        if not self.ssmax_init > 0:
            raise ValueError(f"ssmax_init must be > 0, got {self.ssmax_init}")


class BAMPrior(nn.Module):
    """Trainable per-head BAM prior (scale, shape, location; optional scalable softmax).

    Args:
        config: a [BAMPriorConfig][lc_attention.bam.prior.BAMPriorConfig].

    Example:
        >>> import torch
        >>> prior = BAMPrior(BAMPriorConfig(num_heads=4))
        >>> prior(torch.arange(5), torch.arange(5)).shape
        torch.Size([4, 5, 5])
    """

    def __init__(self, config: BAMPriorConfig) -> None:
        super().__init__()
        self.config = config
        h = config.num_heads
        if config.scale_init == "alibi":
            scale = torch.tensor(alibi_slopes(h), dtype=torch.float32)
        else:
            scale = torch.full((h,), float(config.scale_init))
        self.theta_a = nn.Parameter(scale.log(), requires_grad=config.train_scale)
        self.theta_b = nn.Parameter(
            initial_shapes(config.shape_init, h), requires_grad=config.train_shape
        )
        self.theta_m = nn.Parameter(
            torch.full((h,), math.asinh(config.loc_init / 2.0)), requires_grad=config.train_loc
        )
        self.ssmax_s: nn.Parameter | None = None
        if config.scalable_softmax:
            self.ssmax_s = nn.Parameter(torch.full((h,), float(config.ssmax_init)))

    @property
    def scale(self) -> torch.Tensor:
        """``[H]`` prior scale ``alpha = exp(theta_a)``."""
        return self.theta_a.exp()

    @property
    def loc(self) -> torch.Tensor:
        """``[H]`` prior location ``mu = exp(theta_m) - exp(-theta_m)``."""
        return self.theta_m.exp() - (-self.theta_m).exp()

    def forward(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        """``[H, Tq, Tk]`` log-prior for the given positions."""
        return bam_bias(self.theta_a, self.theta_b, self.theta_m, q_pos, k_pos, self.config.eps)

    def extra_repr(self) -> str:
        return f"num_heads={self.config.num_heads}, scalable_softmax={self.config.scalable_softmax}"
