"""Configuration of DSSA (dense-sparse switchable attention, InfLLM-v2)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from lc_kernels.backend import KERNEL_BACKENDS, Backend, parse_backend
from lc_kernels.renames import renamed_fields, renamed_kwargs, spelled

BACKENDS = KERNEL_BACKENDS
BLOCK_SCORES = ("mean", "meanvar", "bound")
#: spellings of lc-attention 0.14 and earlier, accepted with a DeprecationWarning until 0.17
RENAMED = {"window_size": "window"}
REMOVAL = "lc-attention 0.17"


@renamed_fields(RENAMED, REMOVAL)
@dataclass(frozen=True)
class DSSAConfig:
    """Hyper-parameters of DSSA; the defaults are MiniCPM4's.

    Attention is dense while the key length is below ``dense_len`` and block-sparse
    from there on. In sparse mode every query attends to ``topk`` blocks of
    ``block_size`` keys: the first ``init_blocks`` blocks, the ``window //
    block_size`` most recent blocks, and the best-scoring remaining blocks, where a
    block's score is the max-pooled, group-summed attention of the query to mean-pooled
    keys (spans of ``kernel_size`` tokens every ``stride`` tokens).

    Args:
        kernel_size: tokens averaged into one compressed key (32).
        stride: distance between compressed spans (16); ``<= kernel_size``.
        init_blocks: leading blocks always attended (1).
        block_size: tokens per selection block (64); a multiple of ``stride``.
        window: local window in tokens (2048); a multiple of ``block_size``. The
            local blocks count inside ``topk``. (``window_size`` until 0.15: warns, and
            is removed in 0.17.)
        topk: blocks attended per query and KV head (64); at least the forced blocks.
        topk_fraction: budget that grows with the context (0.0: off). With ``r > 0`` a
            query whose own block is block ``n - 1`` attends to ``max(topk, ceil(r *
            n))`` blocks: the fraction ``r`` of the blocks it can see, never fewer than
            ``topk``. Every query, in a prefill, a chunked prefill or a decode step, gets
            the same budget for the same position. With ``query_block > 1`` a group's
            budget is that of its last position. In ``[0, 1]``.
        dense_len: key lengths below this use dense attention (8192).
        backend: kernel backend of the block-sparse attention, a
            [Backend][lc_kernels.backend.Backend] or its string: ``"auto"`` (Triton on
            CUDA, PyTorch elsewhere), ``"triton"`` or ``"torch"``.
        query_block: queries that share one selection (1). With 1 every query picks its
            own blocks (the paper's rule); with ``m > 1`` the queries at positions
            ``[i * m, (i + 1) * m)`` sum their block scores and share the top-k, so a
            tile of queries attends to exactly ``topk`` blocks (faster CPU prefill).
            Must divide ``block_size``.
        block_score: how blocks are scored. ``"mean"`` (the paper's): attention to
            mean-pooled keys, max-pooled onto blocks. ``"meanvar"`` (training-free
            option): each span also keeps the per-channel variance ``v`` of its keys
            and its logit becomes ``scale * q . mean + scale^2 / 2 * sum_d q_d^2 v_d``
            (the log of the mean of ``exp(logit)`` over the span if the channels were
            independent Gaussians), so a span with one strong key is not averaged
            away. ``"bound"`` (training-free option): each complete block keeps the per-channel maximum and minimum of
            its keys, and its logit is the upper bound ``scale * sum_d max(q_d *
            kmax_d, q_d * kmin_d)`` of every logit in the block (as in Quest); the
            bounds go through the same softmax, group sum and top-k. A block is scored
            once all its keys precede the query; the query's own block is reached
            through the local window.
        dense_layers: the first ``dense_layers`` decoder layers stay dense at every
            length (0). Read by callers that know the layer index (``layer_idx`` of
            [dssa_attention][lc_attention.dssa.attention.dssa_attention]).

    Example:
        >>> DSSAConfig().local_blocks
        32
        >>> DSSAConfig.small().dense_len
        1024
    """

    kernel_size: int = 32
    stride: int = 16
    init_blocks: int = 1
    block_size: int = 64
    window: int = 2048
    topk: int = 64
    dense_len: int = 8192
    backend: Backend | str = Backend.AUTO
    query_block: int = 1
    block_score: str = "mean"
    dense_layers: int = 0
    topk_fraction: float = 0.0

    def __post_init__(self) -> None:
        for name, lo in (
            ("kernel_size", 1),
            ("stride", 1),
            ("init_blocks", 0),
            ("block_size", 1),
            ("window", 0),
            ("topk", 1),
            ("dense_len", 0),
            ("query_block", 1),
            ("dense_layers", 0),
        ):
            val = getattr(self, name)
            if isinstance(val, bool) or not isinstance(val, int) or val < lo:
                raise ValueError(f"DSSAConfig.{spelled(name)} must be an int >= {lo}, got {val!r}")
        r = self.topk_fraction
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0.0 <= r <= 1.0:
            raise ValueError(f"DSSAConfig.topk_fraction must be a number in [0, 1], got {r!r}")
        if self.stride > self.kernel_size:
            raise ValueError(
                f"DSSAConfig.stride={self.stride} must be <= kernel_size={self.kernel_size} "
                "(larger strides leave keys out of every compressed span)"
            )
        if self.block_size % self.stride:
            raise ValueError(
                f"DSSAConfig.block_size={self.block_size} must be a multiple of "
                f"stride={self.stride}"
            )
        if self.window % self.block_size:
            raise ValueError(
                f"DSSAConfig.{spelled('window')}={self.window} must be a multiple of "
                f"block_size={self.block_size}"
            )
        forced = self.init_blocks + self.local_blocks
        if self.topk < forced:
            raise ValueError(
                f"DSSAConfig.topk={self.topk} must be >= init_blocks + window // "
                f"block_size = {forced} (the forced blocks count inside the top-k)"
            )
        if self.block_size % self.query_block:
            raise ValueError(
                f"DSSAConfig.query_block={self.query_block} must divide "
                f"block_size={self.block_size}"
            )
        backend = parse_backend(self.backend, BACKENDS, name="DSSAConfig.backend")
        object.__setattr__(self, "backend", backend)
        if self.block_score not in BLOCK_SCORES:
            raise ValueError(
                f"DSSAConfig.block_score={self.block_score!r} is not one of {BLOCK_SCORES}"
            )

    @property
    def local_blocks(self) -> int:
        """Number of most recent blocks always attended (``window // block_size``)."""
        return self.window // self.block_size

    def budget(self, n_blocks: int) -> int:
        """Blocks attended by a query that sees ``n_blocks`` blocks (its own included).

        ``topk``, or ``max(topk, ceil(topk_fraction * n_blocks))`` with a fraction.

        Example:
            >>> DSSAConfig.small(topk_fraction=0.25).budget(512)
            128
        """
        if not self.topk_fraction:
            return self.topk
        return max(self.topk, math.ceil(round(self.topk_fraction * n_blocks, 9)))

    def sparse_in_layer(self, layer_idx: int | None) -> bool:
        """Whether layer ``layer_idx`` may run sparse (``None``: unknown layer, yes).

        Example:
            >>> DSSAConfig(dense_layers=2).sparse_in_layer(1)
            False
        """
        return layer_idx is None or layer_idx >= self.dense_layers

    @classmethod
    def small(cls, **overrides: object) -> DSSAConfig:
        """Preset for small models with 8K-32K context (e.g. SmolLM2-135M, Gemma-3-270M).

        MiniCPM4 attends to 64 blocks (4096 tokens) once the context exceeds 8192 tokens,
        for contexts of up to 128K. Scaled to a 8K-32K context: sparse from 1024 keys,
        16 blocks of 64 (1024 tokens: 1 initial, a 256-token window, 11 chosen).

        Args:
            **overrides: fields to change from the preset.

        Returns:
            The preset config.
        """
        base: dict[str, object] = {
            "kernel_size": 32,
            "stride": 16,
            "init_blocks": 1,
            "block_size": 64,
            "window": 256,
            "topk": 16,
            "dense_len": 1024,
        }
        base.update(renamed_kwargs("DSSAConfig.small", RENAMED, REMOVAL, overrides))
        return cls(**base)  # type: ignore[arg-type]

    @classmethod
    def training_free(cls, **overrides: object) -> DSSAConfig:
        """Preset for a pretrained model that never saw sparse attention (8K-32K context).

        [small][lc_attention.dssa.DSSAConfig.small] (16 blocks of 64, every query
        selecting its own blocks, as in the paper) with blocks scored through 4-token
        spans (``kernel_size=4, stride=4``) instead of 32-token spans every 16. A long
        span's mean dilutes a single relevant key; short spans keep it.

        Recommended setting: the preset as it is up to 4K tokens; from 8K on give each
        query about a quarter of the context (``training_free(topk=32)`` at 8K,
        ``topk=64`` at 16K, ``topk=128`` at 32K), or let the budget grow with the
        position with ``topk_fraction=0.25``. Stage 1 scores 4x as many spans as
        ``small()``, so the CPU prefill is slower than with a selection shared by 64
        queries (``query_block=64``), which is faster but loses retrieval from 8K on.
        Measurements: ``docs/benchmarks/lc-attention-dssa-trainingfree.md``.

        Args:
            **overrides: fields to change from the preset.

        Returns:
            The preset config.

        Example:
            >>> cfg = DSSAConfig.training_free()
            >>> (cfg.kernel_size, cfg.stride, cfg.topk, cfg.query_block)
            (4, 4, 16, 1)
        """
        over = renamed_kwargs("DSSAConfig.training_free", RENAMED, REMOVAL, overrides)
        return cls.small(**{"kernel_size": 4, "stride": 4, **over})
