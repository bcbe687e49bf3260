"""A tiny decoder-only transformer whose attention layers are NSA layers."""

from __future__ import annotations

import torch
from torch import nn

from lc_attention.nsa.config import NSAConfig
from lc_attention.nsa.layer import NativeSparseAttention


class _Block(nn.Module):
    def __init__(self, config: NSAConfig, mlp_ratio: int) -> None:
        super().__init__()
        d = config.hidden_size
        self.norm1 = nn.RMSNorm(d)
        self.attn = NativeSparseAttention(config)
        self.norm2 = nn.RMSNorm(d)
        self.mlp = nn.Sequential(
            nn.Linear(d, mlp_ratio * d), nn.SiLU(), nn.Linear(mlp_ratio * d, d)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class NSATransformer(nn.Module):
    """Token embedding, ``num_layers`` pre-norm blocks of NSA + MLP, and a tied LM head.

    Args:
        vocab_size: number of token ids.
        config: the attention configuration, shared by all layers.
        num_layers: number of blocks.
        mlp_ratio: MLP width as a multiple of ``hidden_size``.
        seed: seed of the parameter initialisation.

    Example:
        >>> import torch
        >>> model = NSATransformer(32, NSAConfig.small(hidden_size=64), num_layers=1)
        >>> model(torch.randint(0, 32, (2, 20))).shape
        torch.Size([2, 20, 32])
    """

    def __init__(
        self,
        vocab_size: int,
        config: NSAConfig,
        num_layers: int = 2,
        mlp_ratio: int = 4,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if vocab_size < 1 or num_layers < 1 or mlp_ratio < 1:
            raise ValueError(
                f"vocab_size, num_layers, mlp_ratio must be >= 1, got {vocab_size}, {num_layers}, {mlp_ratio}"
            )
        self.config = config
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.embed = nn.Embedding(vocab_size, config.hidden_size)
            nn.init.normal_(self.embed.weight, std=0.02)
            self.blocks = nn.ModuleList(_Block(config, mlp_ratio) for _ in range(num_layers))
            self.norm = nn.RMSNorm(config.hidden_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """``tokens [B, T]`` int -> logits ``[B, T, vocab_size]``."""
        x = self.embed(tokens)
        for blk in self.blocks:
            x = blk(x)
        return self.norm(x) @ self.embed.weight.T
