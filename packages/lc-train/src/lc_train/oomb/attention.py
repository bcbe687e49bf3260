"""The attention function that chunk-recurrent training installs into a transformers model.

While a :class:`ChunkState` is active, every attention layer of the model attends its
chunk's queries over the paged keys/values of all earlier chunks plus the chunk itself
(:func:`lc_kernels.paged.paged_chunk_attention`), and either stores the chunk's keys and
values into pages (first pass) or records them for the backward surrogate (second pass).
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field
from typing import Any, cast

import torch

from lc_kernels.paged import PagedKV, PageLayout, PagePool, paged_chunk_attention, paged_scatter

ATTN_NAME = "lc_chunk_recurrent"

_ACTIVE: contextvars.ContextVar[ChunkState | None] = contextvars.ContextVar(
    "lc_chunk_state", default=None
)


@dataclass
class ChunkState:
    """Paged KV / KV-gradient memory of one sequence and the position of the current chunk.

    One pool per role (keys, values, key grads, value grads) holds ``num_layers`` page
    tables of ``ceil(seq_len / page_size)`` pages each.
    """

    layout: PageLayout
    num_layers: int
    seq_len: int
    device: torch.device
    block_tokens: int
    pools: dict[str, PagePool] = field(init=False)
    tables: list[torch.Tensor] = field(init=False)
    start: int = 0
    record: bool = False
    recorded: dict[int, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        pages = -(-self.seq_len // self.layout.page_size)
        self.pools = {
            role: PagePool(self.layout, pages * self.num_layers, self.device)
            for role in ("k", "v", "gk", "gv")
        }
        self.tables = [
            torch.tensor(self.pools["k"].allocate(pages), device=self.device)
            for _ in range(self.num_layers)
        ]
        for role in ("v", "gk", "gv"):  # same page ids in every pool
            self.pools[role].allocate(pages * self.num_layers)

    @property
    def bytes(self) -> int:
        """Bytes held by the four page pools."""
        return sum(p.storage.numel() * p.storage.element_size() for p in self.pools.values())

    def past(self, layer: int) -> PagedKV:
        return PagedKV(
            self.pools["k"].storage,
            self.pools["v"].storage,
            self.tables[layer],
            self.start,
            self.pools["gk"].storage,
            self.pools["gv"].storage,
            block_tokens=self.block_tokens,
        )


def chunk_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers attention-interface function (``query [B, H, T, D]``, ``key/value
    [B, H_kv, T, D]``; returns ``[B, T, H, D]``)."""
    state = _ACTIVE.get()
    if state is None:
        raise RuntimeError(
            f"attention implementation {ATTN_NAME!r} used outside chunk-recurrent training"
        )
    if kwargs.get("sliding_window") is not None or kwargs.get("softcap") is not None:
        raise NotImplementedError(
            "chunk-recurrent training supports full causal attention layers only "
            "(this model uses sliding-window or soft-capped attention)"
        )
    if dropout:
        raise ValueError("attention dropout must be 0 for exact chunk-recurrent gradients")
    layer = cast(int, module.layer_idx)
    q, k, v = query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2)
    out = paged_chunk_attention(q, k, v, state.past(layer), scaling)
    if state.record:
        state.recorded[layer] = (k, v)
    else:
        table = state.tables[layer]
        for role, x in (("k", key), ("v", value)):
            storage = state.pools[role].storage
            paged_scatter(
                storage, table, state.start, x.detach().to(storage.device, non_blocking=True)
            )
    return out, None


def _no_mask(*args: Any, **kwargs: Any) -> None:
    """Masks are built inside :func:`chunk_attention_forward` (causal, no padding)."""
    return None


def register() -> None:
    """Register the attention function and its (empty) mask with transformers."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(ATTN_NAME, chunk_attention_forward)
    AttentionMaskInterface.register(ATTN_NAME, _no_mask)
