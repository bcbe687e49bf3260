"""SWAX: sliding-window softmax attention layers (RoPE) interleaved 1:1 with mLSTM layers.

The attention window is an argument of ``forward``, so one model can be trained with a
window drawn at random each step ([StochasticWindow][lc_attention.linear.swax.StochasticWindow])
and run at inference with whichever window the user picks.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from torch import nn

from lc_attention.linear.layers import MLSTMConfig, MLSTMLayer
from lc_attention.rope import apply_rotary, rotary_tables
from lc_kernels.backend import Backend
from lc_kernels.sliding_window import sliding_window_attention as _lck_sliding_window

__all__ = [
    "SWAXConfig",
    "SWAXModel",
    "SlidingWindowAttention",
    "StochasticWindow",
    "sliding_window_attention",
]


def _check_window(window: object) -> None:
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be an int >= 1, got {window!r}")


def sliding_window_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int
) -> torch.Tensor:
    """Causal softmax attention where query ``t`` sees keys ``t - window < s <= t``.

    lc-kernels' [sliding_window_attention][lc_kernels.sliding_window.sliding_window_attention]
    (band by band, ``O(T * window)``) with SWAX's stricter checks: one head count for
    queries and keys, and a window no longer than the sequence.

    Args:
        q: ``[B, T, H, D]``.
        k: ``[B, T, H, D]``.
        v: ``[B, T, H, D]``.
        window: keys per query including itself, ``1 <= window <= T``.

    Returns:
        ``[B, T, H, D]``.

    Example:
        >>> import torch
        >>> q = k = v = torch.randn(1, 6, 2, 4)
        >>> sliding_window_attention(q, k, v, window=3).shape
        torch.Size([1, 6, 2, 4])
    """
    if q.dim() != 4 or k.shape != q.shape or v.shape != k.shape:
        raise ValueError(
            f"q, k, v must be [B, T, H, D] with matching shapes, got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    t = q.shape[1]
    _check_window(window)
    if window > t:
        raise ValueError(
            f"window ({window}) is larger than the sequence ({t}); use window <= seq length "
            "(SlidingWindowAttention and SWAXModel take any window: one of T or more is "
            "causal attention)"
        )
    return _lck_sliding_window(q.contiguous(), k.contiguous(), v.contiguous(), window)


@dataclass(frozen=True)
class StochasticWindow:
    """Training-time window schedule of SWAX.

    Each step the window is ``short`` with probability ``p_short`` and ``long`` otherwise;
    during the last ``final_fraction`` of training it is always ``long``, so the model ends
    training in the setting it is usually run in. ``p_short=1`` or ``0`` with
    ``final_fraction=0`` gives a fixed window.

    Example:
        >>> import random
        >>> s = StochasticWindow(short=8, long=64, p_short=0.5, final_fraction=0.1)
        >>> s.sample(step=95, total_steps=100, rng=random.Random(0))
        64
    """

    short: int = 128
    long: int = 2048
    p_short: float = 0.5
    final_fraction: float = 0.1

    def __post_init__(self) -> None:
        if not (isinstance(self.short, int) and self.short >= 1):
            raise ValueError(f"short must be an int >= 1, got {self.short!r}")
        if not (isinstance(self.long, int) and self.long >= self.short):
            raise ValueError(f"long must be an int >= short ({self.short}), got {self.long!r}")
        if not 0.0 <= self.p_short <= 1.0:
            raise ValueError(f"p_short must be in [0, 1], got {self.p_short}")
        if not 0.0 <= self.final_fraction <= 1.0:
            raise ValueError(f"final_fraction must be in [0, 1], got {self.final_fraction}")

    def sample(self, step: int, total_steps: int, rng: random.Random) -> int:
        """Window for training step ``step`` (0-based) of ``total_steps``."""
        if total_steps < 1 or not 0 <= step < total_steps:
            raise ValueError(f"need 0 <= step < total_steps, got step={step}, total={total_steps}")
        if step >= (1.0 - self.final_fraction) * total_steps:
            return self.long
        return self.short if rng.random() < self.p_short else self.long


@dataclass(frozen=True)
class SWAXConfig:
    """Configuration of [SWAXModel][lc_attention.linear.swax.SWAXModel].

    Attributes:
        vocab_size: tokens.
        d_model: hidden size.
        n_layers: mixer layers, alternating sliding-window attention (even index) and
            mLSTM (odd index); must be even (1:1 ratio as in SWAX).
        n_heads: heads of both layer kinds.
        window: default attention window at inference.
        mlp_ratio: width of the feed-forward block after every mixer.
        rope_theta: RoPE base.
        backend: mLSTM kernel backend.
    """

    vocab_size: int = 256
    d_model: int = 64
    n_layers: int = 4
    n_heads: int = 4
    window: int = 16
    mlp_ratio: int = 4
    rope_theta: float = 10000.0
    backend: Backend | str = "auto"

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "window", "mlp_ratio"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if self.n_layers % 2:
            raise ValueError(
                f"n_layers must be even (SWA and mLSTM alternate), got {self.n_layers}"
            )
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % 2:
            raise ValueError(
                f"d_model ({self.d_model}) / n_heads ({self.n_heads}) must be an even integer (RoPE)"
            )


class SlidingWindowAttention(nn.Module):
    """Sliding-window softmax attention with RoPE on ``[B, T, d_model]`` hidden states.

    Example:
        >>> import torch
        >>> layer = SlidingWindowAttention(d_model=32, n_heads=2)
        >>> layer(torch.randn(1, 12, 32), window=4).shape
        torch.Size([1, 12, 32])
    """

    def __init__(self, d_model: int, n_heads: int, rope_theta: float = 10000.0) -> None:
        super().__init__()
        self.n_heads, self.rope_theta = n_heads, rope_theta
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: torch.Tensor, window: int) -> torch.Tensor:
        """``x [B, T, d_model] -> [B, T, d_model]`` attending to the last ``window`` tokens.

        A window of ``T`` tokens or more is causal attention (every query sees all the
        tokens before it), so any ``window >= 1`` works on inputs of any length, e.g. a
        training window of 2048 on shorter sequences.
        """
        _check_window(window)
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.n_heads, -1).unbind(2)
        cos, sin = rotary_tables(t, q.shape[-1], self.rope_theta, x.device)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        w = min(window, max(t, 1))
        return self.out(sliding_window_attention(q, k, v, w).reshape(b, t, d))


class _Block(nn.Module):
    """Pre-norm residual mixer followed by a pre-norm residual GELU MLP."""

    def __init__(self, mixer: nn.Module, d_model: int, mlp_ratio: int) -> None:
        super().__init__()
        self.mixer = mixer
        self.norm1, self.norm2 = nn.RMSNorm(d_model, eps=1e-6), nn.RMSNorm(d_model, eps=1e-6)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, mlp_ratio * d_model),
            nn.GELU(),
            nn.Linear(mlp_ratio * d_model, d_model),
        )

    def forward(self, x: torch.Tensor, window: int) -> torch.Tensor:
        h = self.norm1(x)
        if isinstance(self.mixer, SlidingWindowAttention):
            x = x + self.mixer(h, window)
        else:
            x = x + self.mixer(h)[0]
        return x + self.mlp(self.norm2(x))


class SWAXModel(nn.Module):
    """A small SWAX language model: embedding, alternating SWA / mLSTM blocks, LM head.

    Example:
        >>> import torch
        >>> model = SWAXModel(SWAXConfig(vocab_size=50, d_model=32, n_layers=2, n_heads=2, window=4, backend="torch"))
        >>> tokens = torch.randint(0, 50, (2, 20))
        >>> model(tokens).shape, model(tokens, window=16).shape
        (torch.Size([2, 20, 50]), torch.Size([2, 20, 50]))
    """

    def __init__(self, config: SWAXConfig) -> None:
        super().__init__()
        self.config = c = config
        self.embed = nn.Embedding(c.vocab_size, c.d_model)
        blocks = []
        for idx in range(c.n_layers):
            mixer: nn.Module
            if idx % 2 == 0:
                mixer = SlidingWindowAttention(c.d_model, c.n_heads, c.rope_theta)
            else:
                mixer = MLSTMLayer(MLSTMConfig(c.d_model, c.n_heads, backend=c.backend))
            blocks.append(_Block(mixer, c.d_model, c.mlp_ratio))
        self.blocks = nn.ModuleList(blocks)
        self.norm = nn.RMSNorm(c.d_model, eps=1e-6)
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=False)

    def forward(self, tokens: torch.Tensor, window: int | None = None) -> torch.Tensor:
        """Logits ``[B, T, vocab]`` for ``tokens [B, T]``; ``window`` defaults to the config's.

        Any ``window >= 1`` works on any input length: on an input of ``T <= window``
        tokens the attention layers are causal attention over all of them (a sliding
        window over fewer tokens than it spans), in training and at inference.
        """
        if tokens.dim() != 2 or tokens.dtype not in (torch.int64, torch.int32):
            raise ValueError(
                f"tokens must be an integer [batch, seq] tensor, got {tuple(tokens.shape)} {tokens.dtype}"
            )
        if tokens.numel() and (tokens.min() < 0 or tokens.max() >= self.config.vocab_size):
            raise ValueError(f"token ids must lie in [0, {self.config.vocab_size})")
        w = self.config.window if window is None else window
        _check_window(w)
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, w)
        return self.head(self.norm(x))
