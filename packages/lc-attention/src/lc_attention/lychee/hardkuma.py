"""The HardKuma distribution (stretched and rectified Kumaraswamy) and per-head gates.

A Kumaraswamy variable ``K ~ Kuma(a, b)`` on ``(0, 1)`` has CDF
``F(x) = 1 - (1 - x^a)^b`` and the inverse-CDF sample
``K = (1 - (1 - u)^(1/b))^(1/a)`` with ``u ~ U(0, 1)``: a differentiable function of
``(a, b)`` (the reparameterization trick). HardKuma stretches ``K`` to ``(l, r)`` with
``l < 0 < 1 < r`` and clips to ``[0, 1]``:

    T = l + (r - l) K,        Z = min(1, max(0, T)).

``Z`` puts point masses on exactly 0 and exactly 1, with closed forms

    P(Z = 0) = F(-l / (r - l)),       P(Z = 1) = 1 - F((1 - l) / (r - l)),

and a continuous density on ``(0, 1)`` between them. Training samples ``Z`` (gradients
reach ``a`` and ``b`` wherever ``0 < T < 1``); inference uses a hard 0/1 decision. The
expected number of non-zero gates, ``sum_i 1 - P(Z_i = 0)``, is the differentiable L0
count used by the sparsity constraint.

Example:
    >>> import torch
    >>> gates = HardKumaGates(num_layers=2, num_heads=3)
    >>> z = gates.sample(torch.Generator().manual_seed(0))
    >>> tuple(z.shape), bool(((z >= 0) & (z <= 1)).all())
    ((2, 3), True)
"""

from __future__ import annotations

import math

import torch
from torch import nn

STRETCH_LOW = -0.1
"""Default left end ``l`` of the stretched support (the paper's and Bastings et al.'s)."""
STRETCH_HIGH = 1.1
"""Default right end ``r`` of the stretched support."""
_EPS = 1e-6


def _check_support(low: float, high: float) -> None:
    if not (low < 0.0 and high > 1.0):
        raise ValueError(f"stretch support must satisfy low < 0 < 1 < high, got ({low}, {high})")


def kuma_cdf(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Kumaraswamy CDF ``F(x) = 1 - (1 - x^a)^b``, with ``x`` clamped to ``[0, 1]``.

    Args:
        x: points, any shape broadcastable with ``a`` and ``b``.
        a: shape parameter ``> 0``.
        b: shape parameter ``> 0``.

    Returns:
        ``F(x)`` in ``[0, 1]``.
    """
    x = x.clamp(0.0, 1.0)
    xa = torch.pow(x, a).clamp(max=1.0)
    # (1 - x^a)^b = exp(b * log1p(-x^a)); log1p keeps precision when x^a is tiny
    return 1.0 - torch.exp(b * torch.log1p(-xa.clamp(max=1.0 - 1e-12)))


def kuma_sample(u: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF sample ``(1 - (1 - u)^(1/b))^(1/a)``, differentiable in ``a`` and ``b``.

    Args:
        u: uniform noise in ``(0, 1)``.
        a: shape parameter ``> 0``.
        b: shape parameter ``> 0``.

    Returns:
        Samples in ``[0, 1]``, shape of the broadcast of ``u``, ``a``, ``b``.
    """
    u = u.clamp(_EPS, 1.0 - _EPS)
    # (1 - u)^(1/b) = exp(log1p(-u) / b)
    inner = (1.0 - torch.exp(torch.log1p(-u) / b)).clamp(_EPS, 1.0)
    return torch.exp(torch.log(inner) / a).clamp(0.0, 1.0)


def hardkuma_sample(
    u: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    low: float = STRETCH_LOW,
    high: float = STRETCH_HIGH,
) -> torch.Tensor:
    """HardKuma sample ``clip(l + (r - l) K, 0, 1)`` with ``K = kuma_sample(u, a, b)``.

    Args:
        u: uniform noise in ``(0, 1)``.
        a: shape parameter ``> 0``.
        b: shape parameter ``> 0``.
        low: stretch ``l < 0``.
        high: stretch ``r > 1``.

    Returns:
        Samples in ``[0, 1]`` with point masses at exactly 0 and 1.
    """
    _check_support(low, high)
    t = low + (high - low) * kuma_sample(u, a, b)
    return t.clamp(0.0, 1.0)


def hardkuma_p0(
    a: torch.Tensor, b: torch.Tensor, low: float = STRETCH_LOW, high: float = STRETCH_HIGH
) -> torch.Tensor:
    """Closed-form ``P(Z = 0) = F(-l / (r - l))``."""
    _check_support(low, high)
    x0 = torch.full_like(a, -low / (high - low))
    return kuma_cdf(x0, a, b)


def hardkuma_p1(
    a: torch.Tensor, b: torch.Tensor, low: float = STRETCH_LOW, high: float = STRETCH_HIGH
) -> torch.Tensor:
    """Closed-form ``P(Z = 1) = 1 - F((1 - l) / (r - l))``."""
    _check_support(low, high)
    x1 = torch.full_like(a, (1.0 - low) / (high - low))
    return 1.0 - kuma_cdf(x1, a, b)


def hardkuma_median(
    a: torch.Tensor, b: torch.Tensor, low: float = STRETCH_LOW, high: float = STRETCH_HIGH
) -> torch.Tensor:
    """Median of ``Z``: the HardKuma sample at ``u = 1/2`` (clipping is monotone)."""
    return hardkuma_sample(torch.full_like(a, 0.5), a, b, low, high)


class HardKumaGates(nn.Module):
    """One HardKuma gate per attention head: ``Z[l, h] = 1`` means retrieval head.

    Parameters are ``log a`` and ``log b`` per head (``[num_layers, num_heads]``). Heads
    listed in ``fixed`` are pinned to 1 (retrieval) and take no part in the L0 count:
    the first hybrid layer has no earlier token set, so its heads must be retrieval heads.

    Args:
        num_layers: layers ``L``.
        num_heads: query heads per layer ``H``.
        init_log_a: initial ``log a`` (0 with ``init_log_b = 0`` is the uniform Kuma).
        init_log_b: initial ``log b``.
        low: stretch ``l``.
        high: stretch ``r``.
        fixed: ``[L, H]`` bool tensor of heads pinned to retrieval (default: layer 0).

    Example:
        >>> g = HardKumaGates(2, 4)
        >>> round(float(g.expected_l0()), 3)  # 4 pinned + 4 free gates, each 1 - P(0)
        7.667
    """

    def __init__(
        self,
        num_layers: int,
        num_heads: int,
        *,
        init_log_a: float = 0.0,
        init_log_b: float = 0.0,
        low: float = STRETCH_LOW,
        high: float = STRETCH_HIGH,
        fixed: torch.Tensor | None = None,
    ) -> None:
        super().__init__()
        if num_layers < 1 or num_heads < 1:
            raise ValueError(
                f"num_layers and num_heads must be >= 1, got {num_layers}, {num_heads}"
            )
        _check_support(low, high)
        self.low, self.high = float(low), float(high)
        shape = (num_layers, num_heads)
        self.log_a = nn.Parameter(torch.full(shape, float(init_log_a)))
        self.log_b = nn.Parameter(torch.full(shape, float(init_log_b)))
        if fixed is None:
            fixed = torch.zeros(shape, dtype=torch.bool)
            fixed[0] = True
        if tuple(fixed.shape) != shape or fixed.dtype != torch.bool:
            raise ValueError(f"fixed must be a bool tensor of shape {shape}, got {fixed.shape}")
        self.fixed: torch.Tensor
        self.register_buffer("fixed", fixed.clone(), persistent=True)

    @property
    def a(self) -> torch.Tensor:
        """Shape ``a = exp(log a)``, ``[L, H]``."""
        return self.log_a.exp()

    @property
    def b(self) -> torch.Tensor:
        """Shape ``b = exp(log b)``, ``[L, H]``."""
        return self.log_b.exp()

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """Reparameterized sample ``[L, H]`` in ``[0, 1]`` (fixed heads are exactly 1)."""
        u = torch.rand(self.log_a.shape, generator=generator, device=self.log_a.device)
        z = hardkuma_sample(u, self.a, self.b, self.low, self.high)
        return torch.where(self.fixed, torch.ones_like(z), z)

    def p0(self) -> torch.Tensor:
        """``P(Z = 0)`` per head, ``[L, H]`` (0 for fixed heads)."""
        p = hardkuma_p0(self.a, self.b, self.low, self.high)
        return torch.where(self.fixed, torch.zeros_like(p), p)

    def p1(self) -> torch.Tensor:
        """``P(Z = 1)`` per head, ``[L, H]`` (1 for fixed heads)."""
        p = hardkuma_p1(self.a, self.b, self.low, self.high)
        return torch.where(self.fixed, torch.ones_like(p), p)

    def expected_l0(self) -> torch.Tensor:
        """Expected number of retrieval heads ``sum 1 - P(Z = 0)`` (differentiable)."""
        return (1.0 - self.p0()).sum()

    def retrieval_score(self) -> torch.Tensor:
        """Deterministic ranking score ``P(Z = 1) - P(Z = 0)`` per head, ``[L, H]``
        (``+inf`` for fixed heads)."""
        s = self.p1() - self.p0()
        return torch.where(self.fixed, torch.full_like(s, math.inf), s)

    def hard(self, num_retrieval: int | None = None) -> torch.Tensor:
        """Hard 0/1 roles ``[L, H]`` (bool, True = retrieval) for inference.

        Args:
            num_retrieval: ``None`` keeps each head whose median gate is above 1/2
                (``P(Z > 1/2) > 1/2``); an integer keeps exactly that many heads, the
                highest [retrieval_score][lc_attention.lychee.hardkuma.HardKumaGates.retrieval_score]
                first (fixed heads always count).

        Raises:
            ValueError: ``num_retrieval`` below the number of fixed heads or above all heads.
        """
        with torch.no_grad():
            if num_retrieval is None:
                return (hardkuma_median(self.a, self.b, self.low, self.high) > 0.5) | self.fixed
            n_fixed, total = int(self.fixed.sum()), self.fixed.numel()
            if not (n_fixed <= num_retrieval <= total):
                raise ValueError(
                    f"num_retrieval must be in [{n_fixed}, {total}] (fixed heads count), "
                    f"got {num_retrieval}"
                )
            score = self.retrieval_score().flatten()
            keep = torch.zeros(total, dtype=torch.bool, device=score.device)
            keep[torch.argsort(score, descending=True, stable=True)[:num_retrieval]] = True
            return keep.view_as(self.fixed)
