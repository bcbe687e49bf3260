"""A small causal transformer whose attention carries a BAM prior (or a baseline PE).

``position`` picks the positional encoding of every layer:

- ``"bam"``: generalized-Gaussian prior, scale/shape/location trained (shape starts at
  ``shape_init``, scale at the ALiBi slopes, location at 0);
- ``"alibi"``: the same prior frozen at shape 1, location 0, ALiBi slopes;
- ``"nope"``: no positional signal at all;
- ``"rope"``: rotary embeddings (for comparison).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from lc_attention.bam.attention import bam_attention
from lc_attention.bam.prior import BAMPrior, BAMPriorConfig, check_shape_init
from lc_attention.rope import apply_rotary, rotary_tables

__all__ = ["BAMAttention", "BAMTransformer", "BAMTransformerConfig", "PreNormBlock"]

POSITIONS = ("bam", "alibi", "nope", "rope")


@dataclass(frozen=True)
class BAMTransformerConfig:
    """Shape of a [BAMTransformer][lc_attention.bam.model.BAMTransformer].

    Attributes:
        vocab_size: token vocabulary, >= 2.
        dim: model width, a multiple of ``num_heads``.
        num_layers: transformer blocks, >= 1.
        num_heads: attention heads per block.
        ffn_mult: MLP hidden width as a multiple of ``dim``.
        position: one of ``"bam"``, ``"alibi"``, ``"nope"``, ``"rope"``.
        shape_init: initial prior shape for ``"bam"``: a float > 0 or ``"linear"`` (0 to 1
            across the heads, the BAM reference code's option).
        train_scale: train the prior scale of ``"bam"``.
        train_loc: train the prior location of ``"bam"``.
        scalable_softmax: multiply content logits by a learned ``s * log(n)``.
        max_seq_len: longest accepted input (tokens), >= 1.
        method: attention path, ``"auto"``, ``"sdpa"`` or ``"blockwise"``.
        block_size: block length of the blockwise path.
        rope_theta: RoPE base for ``"rope"``.
    """

    vocab_size: int
    dim: int = 64
    num_layers: int = 2
    num_heads: int = 4
    ffn_mult: int = 4
    position: str = "bam"
    shape_init: float | str = 1.0
    train_scale: bool = True
    train_loc: bool = True
    scalable_softmax: bool = False
    max_seq_len: int = 65536
    method: str = "auto"
    block_size: int = 256
    rope_theta: float = 10000.0

    def __post_init__(self) -> None:
        if self.vocab_size < 2:
            raise ValueError(f"vocab_size must be >= 2, got {self.vocab_size}")
        if self.num_heads < 1 or self.dim % self.num_heads:
            raise ValueError(
                f"dim ({self.dim}) must be a positive multiple of num_heads ({self.num_heads})"
            )
        if self.num_layers < 1 or self.ffn_mult < 1:
            raise ValueError(
                f"num_layers and ffn_mult must be >= 1, got {self.num_layers}, {self.ffn_mult}"
            )
        if self.position not in POSITIONS:
            raise ValueError(f"position must be one of {POSITIONS}, got {self.position!r}")
        check_shape_init(self.shape_init)
        if self.max_seq_len < 1:
            raise ValueError(f"max_seq_len must be >= 1, got {self.max_seq_len}")
        if self.method not in ("auto", "sdpa", "blockwise"):
            raise ValueError(f"method must be 'auto', 'sdpa' or 'blockwise', got {self.method!r}")
        if self.block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {self.block_size}")


class BAMAttention(nn.Module):
    """Causal multi-head self-attention with the configured positional encoding.

    Args:
        config: the model config.

    Example:
        >>> import torch
        >>> att = BAMAttention(BAMTransformerConfig(vocab_size=10, dim=32, num_heads=4))
        >>> att(torch.randn(2, 7, 32)).shape
        torch.Size([2, 7, 32])
    """

    def __init__(self, config: BAMTransformerConfig) -> None:
        super().__init__()
        self.config = config
        self.head_dim = config.dim // config.num_heads
        self.qkv = nn.Linear(config.dim, 3 * config.dim, bias=False)
        self.out = nn.Linear(config.dim, config.dim, bias=False)
        self.prior: BAMPrior | None = None
        if config.position in ("bam", "alibi"):
            trainable = config.position == "bam"
            self.prior = BAMPrior(
                BAMPriorConfig(
                    num_heads=config.num_heads,
                    shape_init=config.shape_init if trainable else 1.0,
                    train_scale=trainable and config.train_scale,
                    train_shape=trainable,
                    train_loc=trainable and config.train_loc,
                    scalable_softmax=config.scalable_softmax,
                )
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x [B, T, dim] -> [B, T, dim]``."""
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.config.num_heads, self.head_dim).unbind(2)
        if self.config.position == "rope":
            cos, sin = rotary_tables(t, self.head_dim, self.config.rope_theta, x.device)
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        p = self.prior
        theta = (p.theta_a, p.theta_b, p.theta_m) if p is not None else (None, None, None)
        ssmax = p.ssmax_s if p is not None else None
        o = bam_attention(
            q,
            k,
            v,
            *theta,
            ssmax_s=ssmax,
            method=self.config.method,
            block_size=self.config.block_size,
        )
        return self.out(o.reshape(b, t, -1))


class PreNormBlock(nn.Module):
    """Pre-norm transformer block ``x + attn(norm(x))`` then ``+ mlp(norm(.))`` (GELU MLP).

    Shared by the BAM and the hierarchical-sparse-attention models; subclasses change how
    extra branches enter the block.

    Args:
        dim: model width.
        ffn_mult: MLP hidden width as a multiple of ``dim``.
        attn: a module mapping ``[B, T, dim] -> [B, T, dim]``.

    Example:
        >>> import torch
        >>> blk = PreNormBlock(16, 2, torch.nn.Identity())
        >>> blk(torch.randn(1, 3, 16)).shape
        torch.Size([1, 3, 16])
    """

    def __init__(self, dim: int, ffn_mult: int, attn: nn.Module) -> None:
        super().__init__()
        self.norm1 = nn.RMSNorm(dim)
        self.attn = attn
        self.norm2 = nn.RMSNorm(dim)
        hidden = ffn_mult * dim
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x [B, T, dim] -> [B, T, dim]``."""
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


def check_tokens(
    tokens: torch.Tensor,
    max_seq_len: int,
    vocab_size: int,
    length_check: Callable[[int], None] | None = None,
) -> None:
    """Raise ``ValueError`` unless ``tokens`` is a ``[B, T]`` int64 tensor with ``T <=
    max_seq_len`` (then ``length_check(T)``, a model's own length rule) and ids in
    ``[0, vocab_size)``."""
    if tokens.ndim != 2 or tokens.dtype != torch.long:
        raise ValueError(
            f"tokens must be a [B, T] int64 tensor, got {tuple(tokens.shape)} {tokens.dtype}"
        )
    t = tokens.shape[1]
    if t > max_seq_len:
        raise ValueError(f"sequence length {t} exceeds max_seq_len={max_seq_len}")
    if length_check is not None:
        length_check(t)
    if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= vocab_size):
        raise ValueError(f"token ids must lie in [0, {vocab_size})")


class SeededLM(nn.Module):
    """Token embedding, a body, final RMSNorm and LM head, built from one seed.

    The parameters are drawn from ``seed`` in the order embedding, body (``build``, which
    registers the subclass's modules), norm, head, without touching the caller's global
    RNG stream. Shared by the BAM and the hierarchical-sparse-attention models.

    Args:
        vocab_size: tokens in the vocabulary.
        dim: model width.
        seed: seed of the parameter initialisation.
        build: registers the body's modules on ``self``.
    """

    def __init__(self, vocab_size: int, dim: int, seed: int, build: Callable[[], None]) -> None:
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.embed = nn.Embedding(vocab_size, dim)
            build()
            self.norm = nn.RMSNorm(dim)
            self.head = nn.Linear(dim, vocab_size, bias=False)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """``x [B, T, dim] -> [B, T, vocab_size]`` fp32 (final norm and LM head)."""
        return self.head(self.norm(x)).float()


class BAMTransformer(SeededLM):
    """Pre-norm decoder-only language model with BAM (or baseline) attention.

    Args:
        config: a [BAMTransformerConfig][lc_attention.bam.model.BAMTransformerConfig].
        seed: seed of the parameter initialisation.

    Example:
        >>> import torch
        >>> model = BAMTransformer(BAMTransformerConfig(vocab_size=16, dim=32, num_heads=4))
        >>> model(torch.randint(0, 16, (2, 9))).shape
        torch.Size([2, 9, 16])
    """

    def __init__(self, config: BAMTransformerConfig, seed: int = 0) -> None:
        def build() -> None:
            self.blocks = nn.ModuleList(
                PreNormBlock(config.dim, config.ffn_mult, BAMAttention(config))
                for _ in range(config.num_layers)
            )

        super().__init__(config.vocab_size, config.dim, seed, build)
        self.config = config

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """``tokens [B, T]`` (int64) ``-> logits [B, T, vocab_size]`` (fp32)."""
        check_tokens(tokens, self.config.max_seq_len, self.config.vocab_size)
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.logits(x)

    def priors(self) -> list[BAMPrior]:
        """The per-layer priors (empty for ``"nope"`` and ``"rope"``)."""
        return [
            m.prior for m in self.modules() if isinstance(m, BAMAttention) and m.prior is not None
        ]
