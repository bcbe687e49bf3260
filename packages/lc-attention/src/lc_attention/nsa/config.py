"""Configuration of Native Sparse Attention (NSA) layers."""

from __future__ import annotations

from dataclasses import dataclass

from lc_kernels.renames import renamed_fields, renamed_kwargs, spelled

#: spellings of lc-attention 0.14 and earlier, accepted with a DeprecationWarning until 0.17
RENAMED = {"kernel_stride": "stride", "top_k": "topk", "window_size": "window"}
REMOVAL = "lc-attention 0.17"


@renamed_fields(RENAMED, REMOVAL)
@dataclass(frozen=True)
class NSAConfig:
    """Shapes and sparsity pattern of a [NativeSparseAttention][lc_attention.nsa.layer.NativeSparseAttention] layer.

    Defaults are the NSA paper's (arXiv 2502.11089): compression blocks of 32 tokens at
    stride 16, selection blocks of 64 tokens, 16 selected blocks of which 1 initial and 2
    local are forced, and a sliding window of 512 tokens. [NSAConfig.small][lc_attention.nsa.config.NSAConfig.small]
    scales the pattern down by 4 for small models and short sequences.

    Attributes:
        hidden_size: model width.
        num_heads: query heads.
        num_kv_heads: key/value heads (GQA); ``num_heads`` must be a multiple.
        head_dim: dimension per head (even, for RoPE).
        kernel_size: tokens per compressed token (l).
        stride: stride between compressed spans (d); divides ``kernel_size`` and ``block_size``.
        block_size: tokens per selection block (l'); a power of two >= 16 (Triton kernels).
        topk: selected blocks per token (n), forced ones included.
        init_blocks: initial blocks always selected.
        local_blocks: most recent blocks always selected.
        window: sliding-window length (w).
        compress_hidden: hidden width of the compression MLP (default ``2 * head_dim``).
        rope_theta: RoPE base.
        kernel_order: ``"auto"`` (FSA order for <= 8 query heads per KV head, NSA order
            otherwise), ``"fsa"`` or ``"nsa"``; used when the Triton kernels run.

    ``kernel_stride``, ``top_k`` and ``window_size`` (the names until 0.15) still work as
    keywords and attributes, with a DeprecationWarning, until 0.17.
    """

    hidden_size: int = 1024
    num_heads: int = 16
    num_kv_heads: int = 4
    head_dim: int = 64
    kernel_size: int = 32
    stride: int = 16
    block_size: int = 64
    topk: int = 16
    init_blocks: int = 1
    local_blocks: int = 2
    window: int = 512
    compress_hidden: int | None = None
    rope_theta: float = 10000.0
    kernel_order: str = "auto"

    def __post_init__(self) -> None:
        for name in (
            "hidden_size",
            "num_heads",
            "num_kv_heads",
            "head_dim",
            "kernel_size",
            "stride",
            "block_size",
            "topk",
            "window",
        ):
            val = getattr(self, name)
            if not isinstance(val, int) or val < 1:
                raise ValueError(f"{spelled(name)}={val!r} is invalid; allowed: an int >= 1")
        for name in ("init_blocks", "local_blocks"):
            val = getattr(self, name)
            if not isinstance(val, int) or val < 0:
                raise ValueError(f"{name}={val!r} is invalid; allowed: an int >= 0")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads={self.num_heads} is invalid; allowed: a multiple of num_kv_heads={self.num_kv_heads}"
            )
        if self.head_dim % 2:
            raise ValueError(f"head_dim={self.head_dim} is invalid; allowed: an even int (RoPE)")
        stride = spelled("stride")
        if self.kernel_size % self.stride:
            raise ValueError(
                f"{stride}={self.stride} is invalid; allowed: a divisor of kernel_size={self.kernel_size}"
            )
        if self.block_size % self.stride:
            raise ValueError(
                f"block_size={self.block_size} is invalid; allowed: a multiple of {stride}={self.stride}"
            )
        if self.block_size < 16 or self.block_size & (self.block_size - 1):
            raise ValueError(
                f"block_size={self.block_size} is invalid; allowed: a power of two >= 16"
            )
        if self.init_blocks + self.local_blocks > self.topk:
            raise ValueError(
                f"{spelled('topk')}={self.topk} is invalid; allowed: >= init_blocks + local_blocks = {self.init_blocks + self.local_blocks}"
            )
        if self.compress_hidden is not None and self.compress_hidden < 1:
            raise ValueError(
                f"compress_hidden={self.compress_hidden} is invalid; allowed: None or an int >= 1"
            )
        if not self.rope_theta > 0:
            raise ValueError(f"rope_theta={self.rope_theta} is invalid; allowed: > 0")
        if self.kernel_order not in ("auto", "fsa", "nsa"):
            raise ValueError(
                f"kernel_order={self.kernel_order!r} is invalid; allowed: 'auto', 'fsa', 'nsa'"
            )

    @property
    def group_size(self) -> int:
        """Query heads per key/value head."""
        return self.num_heads // self.num_kv_heads

    @classmethod
    def small(
        cls, hidden_size: int = 128, num_heads: int = 4, num_kv_heads: int = 2, **overrides: object
    ) -> NSAConfig:
        """The paper's pattern divided by 4: compression 8/4, blocks of 16, top 4, window 128.

        Example:
            >>> NSAConfig.small().block_size
            16
        """
        base: dict[str, object] = {
            "hidden_size": hidden_size,
            "num_heads": num_heads,
            "num_kv_heads": num_kv_heads,
            "head_dim": hidden_size // num_heads,
            "kernel_size": 8,
            "stride": 4,
            "block_size": 16,
            "topk": 4,
            "init_blocks": 1,
            "local_blocks": 2,
            "window": 128,
        }
        base.update(renamed_kwargs("NSAConfig.small", RENAMED, REMOVAL, overrides))
        return cls(**base)  # type: ignore[arg-type]
