"""Boundary checks shared by the linear-attention and mLSTM operators."""

from __future__ import annotations

import torch


def check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[int, int, int, int, int]:
    """Validate ``q, k [B, T, H, K]`` and ``v [B, T, H, V]``; return ``(B, T, H, K, V)``."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() != 4:
            raise ValueError(
                f"{name} must have 4 dims [batch, seq, heads, head_dim], got shape {tuple(x.shape)}"
            )
        if not x.is_floating_point():
            raise TypeError(f"{name} must be a floating tensor, got {x.dtype}")
    if q.shape != k.shape:
        raise ValueError(
            f"q and k must have the same shape [B, T, H, K] (matching head dims), "
            f"got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    if v.shape[:3] != q.shape[:3]:
        raise ValueError(
            f"v must share batch, seq and heads with q: q {tuple(q.shape)}, v {tuple(v.shape)}"
        )
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"q, k, v must share a dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(f"q, k, v must be on one device, got {q.device}, {k.device}, {v.device}")
    b, t, h, dk = q.shape
    return b, t, h, dk, v.shape[-1]


def check_log_decay(g: torch.Tensor, like: torch.Tensor) -> None:
    """``g`` must match ``like`` in shape and hold finite log-decays ``<= 0``."""
    if g.shape != like.shape:
        raise ValueError(
            f"g (log-decay gates) must have the shape of k {tuple(like.shape)}, got {tuple(g.shape)}"
        )
    if not torch.isfinite(g).all():
        raise ValueError("g (log-decay gates) must be finite")
    if (g > 0).any():
        raise ValueError(
            f"g holds log-decays and must be <= 0 (decay exp(g) in (0, 1]); "
            f"got max {g.max().item():.4g}"
        )


def check_state(
    state: torch.Tensor | None, shape: tuple[int, ...], name: str = "initial_state"
) -> None:
    """``state`` is None or a tensor of exactly ``shape``."""
    if state is not None and tuple(state.shape) != shape:
        raise ValueError(f"{name} must have shape {shape}, got {tuple(state.shape)}")
