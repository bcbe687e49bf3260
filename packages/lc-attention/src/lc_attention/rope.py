"""Rotary position embedding (RoPE) for ``[batch, seq, heads, head_dim]`` tensors."""

from __future__ import annotations

import torch


def rotary_tables(
    seq_len: int, head_dim: int, theta: float, device: torch.device, offset: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """``cos, sin [seq_len, head_dim // 2]`` (fp32) for positions ``offset .. offset + seq_len - 1``."""
    if head_dim % 2:
        raise ValueError(f"RoPE needs an even head_dim, got {head_dim}")
    inv = 1.0 / (
        theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    )
    pos = torch.arange(offset, offset + seq_len, device=device, dtype=torch.float32)
    ang = torch.outer(pos, inv)
    return ang.cos(), ang.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs ``(x[..., :D/2], x[..., D/2:])`` of ``x [B, T, H, D]`` by the position angles.

    Example:
        >>> import torch
        >>> cos, sin = rotary_tables(5, 8, 10000.0, torch.device("cpu"))
        >>> apply_rotary(torch.randn(1, 5, 2, 8), cos, sin).shape
        torch.Size([1, 5, 2, 8])
    """
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    return torch.cat([x1 * c - x2 * s, x1 * s + x2 * c], -1).to(x.dtype)
