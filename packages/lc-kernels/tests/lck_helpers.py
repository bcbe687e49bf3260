"""Shared helpers of the lc-kernels tests."""

from __future__ import annotations

import torch


def rel_rms(a: torch.Tensor, b: torch.Tensor) -> float:
    """Relative RMS error of ``a`` against the reference ``b`` (fp64 arithmetic)."""
    a64, b64 = a.detach().double(), b.detach().double()
    return float((a64 - b64).pow(2).mean().sqrt() / b64.pow(2).mean().sqrt().clamp_min(1e-30))


def random_selection(
    gen: torch.Generator,
    b: int,
    t: int,
    h: int,
    s: int,
    block_size: int,
    cu: list[int] | None = None,
    p_unused: float = 0.2,
) -> torch.Tensor:
    """Random causal block ids ``[b, t, h, s]`` with repeats and ``-1`` slots."""
    pos = torch.arange(t)
    if cu is not None:
        starts = torch.tensor(cu[:-1])
        pos = pos - starts[torch.searchsorted(torch.tensor(cu[1:]), pos, right=True)]
    own = (pos // block_size).view(1, t, 1, 1)
    idx = (torch.rand(b, t, h, s, generator=gen) * (own + 1)).long()
    unused = torch.rand(b, t, h, s, generator=gen) < p_unused
    return torch.where(unused, torch.full_like(idx, -1), idx)
