"""Configuration of chunk-recurrent training."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChunkRecurrentConfig:
    """How a long sequence is cut and where its key/value pages live.

    Attributes:
        chunk_size: tokens per chunk; activation memory scales with this, not with the
            sequence length (paper default 4096).
        page_size: tokens per KV page (paper default 128).
        block_tokens: past tokens attended per block inside a chunk; bounds the
            ``chunk x block`` score matrix (a multiple of ``page_size``).
        offload: keep KV and KV-gradient pages in host memory (pinned when CUDA is present)
            and stream blocks to the device; on a CPU-only machine this changes nothing.
    """

    chunk_size: int = 4096
    page_size: int = 128
    block_tokens: int = 1024
    offload: bool = False

    def __post_init__(self) -> None:
        for name in ("chunk_size", "page_size", "block_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"ChunkRecurrentConfig.{name} must be a positive int, got {value!r}"
                )
        if self.block_tokens % self.page_size:
            raise ValueError(
                f"ChunkRecurrentConfig.block_tokens ({self.block_tokens}) must be a multiple of "
                f"page_size ({self.page_size})"
            )
