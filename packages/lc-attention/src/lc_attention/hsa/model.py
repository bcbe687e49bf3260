"""A small decoder with hierarchical chunk sparse attention (HSA) over sliding windows.

Layout (the DRT/HSA family, arXiv 2510.17196):

1. ``lower_layers`` pre-norm blocks with causal sliding-window attention (RoPE inside the
   window) build contextual token states ``H``.
2. The **chunk encoder** splits ``H`` into chunks of ``S`` tokens, appends a learned CLS
   (landmark) token to each chunk and runs ``encoder_layers`` bidirectional transformer
   blocks over the ``S + 1`` tokens. The CLS output gives the chunk's retrieval key
   (landmark); the token outputs give the chunk's keys and values. Computed once, shared
   by all upper blocks.
3. ``upper_layers`` blocks, each: sliding-window attention, then top-k chunk retrieval and
   token-level attention into the retrieved chunks, merged through the **bypassing
   residual path** (see [HSABlock][lc_attention.hsa.model.HSABlock]), then the MLP.

Each of the paper's three principles has a switch in the config for ablations:
``chunk_encoder=False`` (linear keys/values and a mean-pooled landmark),
``bypass_residual=False`` (retrieval added to the residual stream) and
``sparse_training=False`` (every visible chunk read in training mode).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from lc_attention.bam.model import PreNormBlock, SeededLM, check_tokens
from lc_attention.hsa.attention import check_backend, hsa_attention
from lc_attention.hsa.retrieval import chunk_scores, select_chunks
from lc_attention.rope import apply_rotary, rotary_tables
from lc_kernels.renames import renamed_fields, spelled

#: spellings of lc-attention 0.14 and earlier, accepted with a DeprecationWarning until 0.17
RENAMED = {"top_k": "topk", "query_block": "query_chunk"}


@renamed_fields(RENAMED, "lc-attention 0.17")
@dataclass(frozen=True)
class HSATransformerConfig:
    """Shape of an [HSATransformer][lc_attention.hsa.model.HSATransformer].

    Attributes:
        vocab_size: token vocabulary, >= 2.
        dim: model width, a multiple of ``num_heads``.
        num_heads: query heads ``H`` of every attention.
        retrieval_heads: retrieval / chunk key-value heads ``G`` (divides ``num_heads``);
            the ``H / G`` query heads of a group share the chunks it selects.
        ffn_mult: MLP hidden width as a multiple of ``dim``.
        lower_layers: sliding-window blocks before the chunk encoder (>= 0).
        upper_layers: blocks with sliding-window attention plus chunk retrieval (>= 1).
        encoder_layers: bidirectional blocks of the chunk encoder (>= 1; the paper's first
            principle asks for a non-linear encoder).
        chunk_size: tokens per chunk ``S`` (the CLS token comes on top).
        topk: chunks each query reads, >= 1 and at most ``max_seq_len // chunk_size``.
        window: sliding-window length (query included), >= ``chunk_size`` so that every
            past token is reachable: tokens of the current, incomplete chunk lie in the window.
        chunk_encoder: build landmarks, keys and values with the chunk encoder and its CLS
            token (True, the paper's first principle) or, as the ablation (False), with
            linear projections of the normalized token states, the landmark being the
            projected mean of the chunk (no encoder blocks, no CLS token).
        bypass_residual: merge retrieval through the bypassing residual path (True) or add
            it to the residual stream like an ordinary sub-layer (False, the ablation).
        sparse_training: read exactly ``topk`` chunks in training mode too (True, the
            paper's third principle) or, as the ablation (False), read every visible chunk
            with softmax weights over all of them in training mode; evaluation always
            reads ``topk`` chunks.
        gumbel_noise: perturb the top-k choice with Gumbel noise in training mode.
        max_seq_len: longest accepted input, a multiple of ``chunk_size``.
        query_chunk: queries processed together in retrieval and chunk attention (a
            memory bound; the result does not depend on it).
        backend: chunk-attention path, ``"auto"``, ``"torch"`` or ``"triton"`` (see
            [hsa_attention][lc_attention.hsa.attention.hsa_attention]).
        rope_theta: RoPE base of the sliding-window attention.

    ``top_k`` and ``query_block`` (the names until 0.15; ``query_block`` means a group of
    queries sharing one selection in DSSA) still work, with a DeprecationWarning, until 0.17.
    """

    vocab_size: int
    dim: int = 64
    num_heads: int = 4
    retrieval_heads: int = 2
    ffn_mult: int = 4
    lower_layers: int = 1
    upper_layers: int = 1
    encoder_layers: int = 1
    chunk_size: int = 8
    topk: int = 2
    window: int = 16
    chunk_encoder: bool = True
    bypass_residual: bool = True
    sparse_training: bool = True
    gumbel_noise: bool = False
    max_seq_len: int = 65536
    query_chunk: int = 1024
    backend: str = "auto"
    rope_theta: float = 10000.0

    def __post_init__(self) -> None:
        if self.vocab_size < 2:
            raise ValueError(f"vocab_size must be >= 2, got {self.vocab_size}")
        if self.num_heads < 1 or self.dim % self.num_heads or (self.dim // self.num_heads) % 2:
            raise ValueError(
                f"dim ({self.dim}) must be a positive multiple of num_heads ({self.num_heads}) "
                "with an even head dimension"
            )
        if self.retrieval_heads < 1 or self.num_heads % self.retrieval_heads:
            raise ValueError(
                f"retrieval_heads must divide num_heads={self.num_heads}, got {self.retrieval_heads}"
            )
        for name in ("ffn_mult", "upper_layers", "encoder_layers", "chunk_size", "query_chunk"):
            if getattr(self, name) < 1:
                raise ValueError(f"{spelled(name)} must be >= 1, got {getattr(self, name)}")
        if self.lower_layers < 0:
            raise ValueError(f"lower_layers must be >= 0, got {self.lower_layers}")
        if self.max_seq_len < self.chunk_size or self.max_seq_len % self.chunk_size:
            raise ValueError(
                f"max_seq_len ({self.max_seq_len}) must be a positive multiple of "
                f"chunk_size ({self.chunk_size})"
            )
        max_chunks = self.max_seq_len // self.chunk_size
        if not 1 <= self.topk <= max_chunks:
            raise ValueError(
                f"{spelled('topk')} must lie in [1, max_seq_len // chunk_size = {max_chunks}], "
                f"got {self.topk}"
            )
        if self.window < self.chunk_size:
            raise ValueError(
                f"window ({self.window}) must be >= chunk_size ({self.chunk_size}); otherwise the "
                "start of the current, incomplete chunk is seen by neither path"
            )
        check_backend(self.backend, name="HSATransformerConfig.backend")
        if not self.rope_theta > 0:
            raise ValueError(f"rope_theta must be > 0, got {self.rope_theta}")

    @property
    def head_dim(self) -> int:
        """Per-head width ``D = dim / num_heads``."""
        return self.dim // self.num_heads


class ChunkMemory(NamedTuple):
    """Encoded chunks: ``keys``/``values [B, C, S, G, D]``, ``landmarks [B, C, G, d_r]``."""

    keys: torch.Tensor
    values: torch.Tensor
    landmarks: torch.Tensor


class ChunkSelection(NamedTuple):
    """Retrieval of one block: ``indices`` (``-1`` unused) and ``weights``, ``[B, T, G, k]``."""

    indices: torch.Tensor
    weights: torch.Tensor


class SlidingWindowSelfAttention(nn.Module):
    """Causal multi-head attention over the last ``window`` tokens, RoPE inside the window.

    Runs on ``lc_kernels.sliding_window_attention`` (banded SDPA, memory ``O(T window)``).

    Args:
        config: the model config.

    Example:
        >>> import torch
        >>> att = SlidingWindowSelfAttention(HSATransformerConfig(vocab_size=8, dim=32))
        >>> att(torch.randn(2, 24, 32)).shape
        torch.Size([2, 24, 32])
    """

    def __init__(self, config: HSATransformerConfig) -> None:
        super().__init__()
        self.config = config
        self.qkv = nn.Linear(config.dim, 3 * config.dim, bias=False)
        self.out = nn.Linear(config.dim, config.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x [B, T, dim] -> [B, T, dim]``."""
        from lc_kernels import sliding_window_attention

        cfg = self.config
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, cfg.num_heads, cfg.head_dim).unbind(2)
        cos, sin = rotary_tables(t, cfg.head_dim, cfg.rope_theta, x.device)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        o = sliding_window_attention(
            q.contiguous(), k.contiguous(), v.contiguous(), window=cfg.window
        )
        return self.out(o.reshape(b, t, -1))


class _BidirectionalAttention(nn.Module):
    """Full (non-causal) attention inside one chunk, ``[N, S+1, dim] -> [N, S+1, dim]``."""

    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, s, dim = x.shape
        q, k, v = self.qkv(x).view(n, s, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(q, k, v)
        return self.out(o.transpose(1, 2).reshape(n, s, dim))


class ChunkEncoder(nn.Module):
    """Non-linear chunk encoder with a dedicated CLS (landmark) token per chunk.

    Each chunk of ``S`` token states gets a learned CLS embedding appended, a learned
    position embedding over the ``S + 1`` slots, and ``encoder_layers`` bidirectional
    pre-norm blocks. The CLS output, projected, is the chunk's landmark (one retrieval key
    per retrieval head); the token outputs, projected, are its keys and values.

    Args:
        config: the model config.

    Example:
        >>> import torch
        >>> enc = ChunkEncoder(HSATransformerConfig(vocab_size=8, dim=32, chunk_size=4, window=4))
        >>> mem = enc(torch.randn(2, 12, 32))
        >>> mem.keys.shape, mem.landmarks.shape
        (torch.Size([2, 3, 4, 2, 8]), torch.Size([2, 3, 2, 16]))
    """

    def __init__(self, config: HSATransformerConfig) -> None:
        super().__init__()
        self.config = config
        dim, s = config.dim, config.chunk_size
        self.cls: nn.Parameter | None = None
        self.pos: nn.Parameter | None = None
        self.blocks = nn.ModuleList()
        if config.chunk_encoder:
            self.cls = nn.Parameter(torch.randn(dim) * 0.02)
            self.pos = nn.Parameter(torch.randn(s + 1, dim) * 0.02)
            self.blocks.extend(
                PreNormBlock(dim, config.ffn_mult, _BidirectionalAttention(dim, config.num_heads))
                for _ in range(config.encoder_layers)
            )
        self.norm = nn.RMSNorm(dim)
        kv_dim = config.retrieval_heads * config.head_dim
        self.k_proj = nn.Linear(dim, kv_dim, bias=False)
        self.v_proj = nn.Linear(dim, kv_dim, bias=False)
        self.landmark = nn.Linear(dim, dim, bias=False)

    def forward(self, hidden: torch.Tensor) -> ChunkMemory:
        """``hidden [B, T, dim]`` (``T`` a multiple of ``S``) ``->`` [ChunkMemory][lc_attention.hsa.model.ChunkMemory]."""
        cfg = self.config
        b, t, dim = hidden.shape
        s, g = cfg.chunk_size, cfg.retrieval_heads
        if t % s:
            raise ValueError(f"sequence length {t} is not a multiple of chunk_size {s}")
        c = t // s
        x = hidden.reshape(b * c, s, dim)
        if self.cls is None or self.pos is None:
            # Ablation of the first principle: linear keys/values, mean-pooled landmark.
            x = self.norm(x)
            landmarks = self.landmark(x.mean(dim=1)).view(b, c, g, dim // g)
        else:
            x = torch.cat([x, self.cls.expand(b * c, 1, dim)], dim=1) + self.pos
            for blk in self.blocks:
                x = blk(x)
            x = self.norm(x)
            landmarks = self.landmark(x[:, -1]).view(b, c, g, dim // g)
        keys = self.k_proj(x[:, :s]).view(b, c, s, g, cfg.head_dim)
        values = self.v_proj(x[:, :s]).view(b, c, s, g, cfg.head_dim)
        return ChunkMemory(keys, values, landmarks)


class ChunkSparseAttention(nn.Module):
    """Top-k chunk retrieval and token-level attention into the retrieved chunks.

    Args:
        config: the model config.

    Example:
        >>> import torch
        >>> cfg = HSATransformerConfig(vocab_size=8, dim=32, chunk_size=4, window=4)
        >>> h = torch.randn(1, 16, 32)
        >>> out, sel = ChunkSparseAttention(cfg)(h, ChunkEncoder(cfg)(h))
        >>> out.shape, sel.indices.shape
        (torch.Size([1, 16, 32]), torch.Size([1, 16, 2, 2]))
    """

    def __init__(self, config: HSATransformerConfig) -> None:
        super().__init__()
        self.config = config
        self.q_proj = nn.Linear(config.dim, config.dim, bias=False)
        self.retrieval_q = nn.Linear(config.dim, config.dim, bias=False)
        self.out = nn.Linear(config.dim, config.dim, bias=False)

    def select(
        self, h: torch.Tensor, memory: ChunkMemory, generator: torch.Generator | None = None
    ) -> ChunkSelection:
        """Chunk choice for every query of ``h [B, T, dim]``, in blocks of ``query_chunk``."""
        cfg = self.config
        b, t, dim = h.shape
        rq = self.retrieval_q(h).view(b, t, cfg.retrieval_heads, dim // cfg.retrieval_heads)
        # Ablation of the third principle: dense over the visible chunks in training.
        dense = self.training and not cfg.sparse_training
        topk = memory.landmarks.shape[1] if dense else cfg.topk
        idx, ws = [], []
        for a in range(0, t, cfg.query_chunk):
            scores = chunk_scores(
                rq[:, a : a + cfg.query_chunk], memory.landmarks, cfg.chunk_size, a
            )
            noise = None
            if cfg.gumbel_noise and self.training:
                e = torch.empty_like(scores).exponential_(generator=generator)
                noise = -e.log()
            i, w = select_chunks(scores, topk, noise)
            idx.append(i)
            ws.append(w)
        return ChunkSelection(torch.cat(idx, 1), torch.cat(ws, 1))

    def forward(
        self, h: torch.Tensor, memory: ChunkMemory, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, ChunkSelection]:
        """``h [B, T, dim]`` (normalized states) ``-> (out [B, T, dim], selection)``."""
        cfg = self.config
        b, t, _ = h.shape
        sel = self.select(h, memory, generator)
        q = self.q_proj(h).view(b, t, cfg.num_heads, cfg.head_dim)
        o = hsa_attention(
            q,
            memory.keys,
            memory.values,
            sel.indices,
            sel.weights,
            backend=cfg.backend,
            query_chunk=cfg.query_chunk,
        )
        return self.out(o.reshape(b, t, -1)), sel


class HSABlock(PreNormBlock):
    """Sliding-window attention plus chunk retrieval, merged by the bypassing residual path.

    With ``x`` the block input, ``r`` the retrieval branch and ``N`` RMSNorms:

        x1 = x + SWA(N1(x))
        r  = HSA(Nr(x1))
        y  = x1 + MLP(N2(x1 + r))          (bypass_residual=True)
        y  = (x1 + r) + MLP(N2(x1 + r))    (bypass_residual=False, ablation)

    With the bypass the retrieved information reaches the residual stream only through the
    MLP; the stream itself carries ``x1`` past the retrieval branch. With ``r = 0`` both
    forms reduce to an ordinary sliding-window block.

    Args:
        config: the model config.

    Example:
        >>> import torch
        >>> cfg = HSATransformerConfig(vocab_size=8, dim=32, chunk_size=4, window=4)
        >>> x = torch.randn(1, 16, 32)
        >>> y, sel = HSABlock(cfg)(x, ChunkEncoder(cfg)(x))
        >>> y.shape
        torch.Size([1, 16, 32])
    """

    def __init__(self, config: HSATransformerConfig) -> None:
        super().__init__(config.dim, config.ffn_mult, SlidingWindowSelfAttention(config))
        self.config = config
        self.norm_r = nn.RMSNorm(config.dim)
        self.hsa = ChunkSparseAttention(config)

    def forward(  # type: ignore[override]
        self,
        x: torch.Tensor,
        memory: ChunkMemory | None = None,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, ChunkSelection | None]:
        """``x [B, T, dim] -> (y [B, T, dim], selection)``; ``memory=None`` drops retrieval."""
        x1 = x + self.attn(self.norm1(x))
        if memory is None:
            return x1 + self.mlp(self.norm2(x1)), None
        r, sel = self.hsa(self.norm_r(x1), memory, generator)
        mixed = x1 + r
        base = x1 if self.config.bypass_residual else mixed
        return base + self.mlp(self.norm2(mixed)), sel


class HSATransformer(SeededLM):
    """Decoder-only LM: sliding-window blocks, chunk encoder, HSA blocks.

    Args:
        config: an [HSATransformerConfig][lc_attention.hsa.model.HSATransformerConfig].
        seed: seed of the parameter initialisation.

    Example:
        >>> import torch
        >>> cfg = HSATransformerConfig(vocab_size=16, dim=32, chunk_size=4, window=8)
        >>> model = HSATransformer(cfg)
        >>> logits, sel = model(torch.randint(0, 16, (2, 24)), return_selection=True)
        >>> logits.shape, sel[0].indices.shape
        (torch.Size([2, 24, 16]), torch.Size([2, 24, 2, 2]))
    """

    def __init__(self, config: HSATransformerConfig, seed: int = 0) -> None:
        def build() -> None:
            self.lower = nn.ModuleList(
                PreNormBlock(config.dim, config.ffn_mult, SlidingWindowSelfAttention(config))
                for _ in range(config.lower_layers)
            )
            self.encoder = ChunkEncoder(config)
            self.upper = nn.ModuleList(HSABlock(config) for _ in range(config.upper_layers))

        super().__init__(config.vocab_size, config.dim, seed, build)
        self.config = config

    def _check(self, tokens: torch.Tensor) -> None:
        cfg = self.config

        def chunks(t: int) -> None:
            if t % cfg.chunk_size:
                raise ValueError(
                    f"sequence length {t} must be a multiple of chunk_size={cfg.chunk_size}"
                )
            if t // cfg.chunk_size < cfg.topk:
                name = spelled("topk", cfg)
                raise ValueError(
                    f"{name}={cfg.topk} exceeds the {t // cfg.chunk_size} chunks of a {t}-token "
                    f"sequence; use at least {name} * chunk_size = "
                    f"{cfg.topk * cfg.chunk_size} tokens"
                )

        check_tokens(tokens, cfg.max_seq_len, cfg.vocab_size, chunks)

    def forward(
        self,
        tokens: torch.Tensor,
        *,
        retrieval: bool = True,
        return_selection: bool = False,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, list[ChunkSelection]]:
        """Logits of every position.

        Args:
            tokens: ``[B, T]`` int64, ``T`` a multiple of ``chunk_size`` and at least
                ``topk * chunk_size``.
            retrieval: False drops the retrieval branch (a pure sliding-window model).
            return_selection: also return the chunk selection of every HSA block.
            generator: source of the Gumbel noise (``gumbel_noise`` in training mode).

        Returns:
            ``logits [B, T, vocab_size]`` (fp32), and the list of
            [ChunkSelection][lc_attention.hsa.model.ChunkSelection] if requested.
        """
        self._check(tokens)
        x = self.embed(tokens)
        for blk in self.lower:
            x = blk(x)
        memory = self.encoder(x) if retrieval else None
        selections = []
        for up in self.upper:
            x, sel = up(x, memory, generator)
            if sel is not None:
                selections.append(sel)
        logits = self.logits(x)
        return (logits, selections) if return_selection else logits
