"""Configuration of chunk-recurrent training."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChunkRecurrentConfig:
    """How a long sequence is cut and where its key/value pages live.

    Attributes:
        chunk_size: tokens per chunk; activation memory scales with this, not with the
            sequence length (paper default 4096). Must be a multiple of ``page_size`` so
            every chunk starts on a page boundary.
        page_size: tokens per KV page (paper default 128).
        block_tokens: past tokens attended per block inside a chunk; bounds the
            ``chunk x block`` score matrix (a multiple of ``page_size``).
        offload: keep KV and KV-gradient pages in host memory (pinned when CUDA is present)
            and stage the past pages of ``resident_layers`` layers on the compute device,
            prefetching the next attention call's pages on a side CUDA stream while the
            current one computes (:mod:`lc_train.oomb.offload`). On a CPU-only machine
            the same staging runs with synchronous copies and gives identical results.
        resident_layers: with ``offload``, how many layers' past pages are on the device
            at once (paper: 2, one computing while the next loads); at least 2.
        attention_backend: kernel of the attention over the paged past: ``"auto"``
            (Triton on CUDA when the pages are on the GPU, which ``offload`` arranges by
            staging; the PyTorch reference otherwise), ``"triton"`` or ``"torch"``.
        page_budget: page-level sparse attention: each chunk attends to at most this many
            pages of its past (plus itself), chosen per layer by page-summary scores.
            ``None`` (default) attends to the whole past: exact training. The paper's
            sparse setting uses 64.
        sink_pages: with ``page_budget``, the first pages of the sequence always kept.
        local_pages: with ``page_budget``, the most recent past pages always kept.
        loss_chunk_size: positions whose LM-head logits exist at once: the head and the
            cross-entropy of a chunk run over pieces of this many tokens (over
            ``batch * chunk_size`` positions), so the float32 logits buffer is
            ``loss_chunk_size x vocab`` instead of ``batch x chunk_size x vocab`` (1/8 of it
            at the default chunk of 4096), at the same loss and gradients. ``None``
            computes the logits of the whole chunk at once.
        memory_limit_bytes: refuse to start (``ValueError``) when the paged KV memory
            would exceed this many bytes; ``None`` uses the memory available where the
            pages live (host ``MemAvailable`` for CPU/offloaded pages, free CUDA memory
            otherwise).
    """

    chunk_size: int = 4096
    page_size: int = 128
    block_tokens: int = 1024
    offload: bool = False
    resident_layers: int = 2
    attention_backend: str = "auto"
    page_budget: int | None = None
    sink_pages: int = 1
    local_pages: int = 2
    loss_chunk_size: int | None = 512
    memory_limit_bytes: int | None = None

    def __post_init__(self) -> None:
        for name in ("chunk_size", "page_size", "block_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(
                    f"ChunkRecurrentConfig.{name} must be a positive int, got {value!r}"
                )
        if self.block_tokens % self.page_size:
            raise ValueError(
                f"ChunkRecurrentConfig.block_tokens ({self.block_tokens}) must be a multiple of "
                f"page_size ({self.page_size})"
            )
        if self.chunk_size % self.page_size:
            raise ValueError(
                f"ChunkRecurrentConfig.chunk_size ({self.chunk_size}) must be a multiple of "
                f"page_size ({self.page_size}) so that chunks start on page boundaries"
            )
        if (
            not isinstance(self.resident_layers, int)
            or isinstance(self.resident_layers, bool)
            or self.resident_layers < 2
        ):
            raise ValueError(
                f"ChunkRecurrentConfig.resident_layers must be an int >= 2, got "
                f"{self.resident_layers!r}"
            )
        if self.attention_backend not in ("auto", "triton", "torch"):
            raise ValueError(
                f"ChunkRecurrentConfig.attention_backend must be 'auto', 'triton' or 'torch', "
                f"got {self.attention_backend!r}"
            )
        for name in ("sink_pages", "local_pages"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(
                    f"ChunkRecurrentConfig.{name} must be a non-negative int, got {value!r}"
                )
        if self.page_budget is not None:
            forced = self.sink_pages + self.local_pages
            if (
                not isinstance(self.page_budget, int)
                or isinstance(self.page_budget, bool)
                or self.page_budget < max(forced, 1)
            ):
                raise ValueError(
                    f"ChunkRecurrentConfig.page_budget must be None or an int >= "
                    f"sink_pages + local_pages ({forced}) and >= 1, got {self.page_budget!r}"
                )
        if self.loss_chunk_size is not None and (
            not isinstance(self.loss_chunk_size, int)
            or isinstance(self.loss_chunk_size, bool)
            or self.loss_chunk_size < 1
        ):
            raise ValueError(
                "ChunkRecurrentConfig.loss_chunk_size must be None or a positive int, "
                f"got {self.loss_chunk_size!r}"
            )
        if self.memory_limit_bytes is not None and (
            not isinstance(self.memory_limit_bytes, int) or self.memory_limit_bytes < 1
        ):
            raise ValueError(
                "ChunkRecurrentConfig.memory_limit_bytes must be None or a positive int, "
                f"got {self.memory_limit_bytes!r}"
            )
