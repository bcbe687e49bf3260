"""The attention function that chunk-recurrent training installs into a transformers model.

While a :class:`ChunkState` is active, every attention layer of the model attends its
chunk's queries over the paged keys/values of all earlier chunks plus the chunk itself
(:func:`lc_kernels.paged.paged_chunk_attention`), and stores the chunk's keys and values
into pages (first pass). In the second pass its backward adds to the chunk's own key and
value gradients the gradient pages the later chunks accumulated for them, so the exact
gradient flows through whatever autograd runs the layer (plain, or activation
checkpointing with either reentrant setting).
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass, field
from typing import Any, cast

import torch

from lc_kernels.paged import (
    PagedKV,
    PageLayout,
    PagePool,
    paged_chunk_attention_backward,
    paged_chunk_attention_forward,
    paged_gather,
    paged_scatter,
)
from lc_train.oomb.offload import PageStager

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
    page_budget: int | None = None
    sink_pages: int = 1
    local_pages: int = 2
    summaries: dict[int, torch.Tensor] = field(default_factory=dict)
    selections: dict[tuple[int, int], torch.Tensor] = field(default_factory=dict)
    compute_device: torch.device | None = None
    resident_layers: int | None = None
    backend: str = "auto"
    next_start: int | None = None
    stager: PageStager | None = field(init=False, default=None)

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
        if self.resident_layers is not None:
            capacity = pages if self.page_budget is None else min(pages, self.page_budget)
            self.stager = PageStager(
                self.pools,
                self.compute_device or self.device,
                capacity,
                self.resident_layers,
            )

    @property
    def bytes(self) -> int:
        """Bytes held by the four page pools."""
        return sum(p.storage.numel() * p.storage.element_size() for p in self.pools.values())

    @property
    def device_bytes(self) -> int:
        """Bytes of page memory on the compute device: the stager's slots with offload,
        else the pools themselves."""
        return self.stager.bytes if self.stager is not None else self.bytes

    def past_pages(self, layer: int, query: torch.Tensor | None = None) -> torch.Tensor | None:
        """Physical page ids of the current chunk's past for ``layer`` (all past pages, or
        with a page budget the ones :meth:`select_pages` keeps; ``query [B, H, T, D]``
        scores them, ``None`` when the choice is not made yet)."""
        n_past = self.start // self.layout.page_size
        table = self.tables[layer][:n_past]
        if self.page_budget is None:
            return table
        chosen = self.selections.get((layer, self.start))
        if chosen is None:
            if query is None:
                return None
            chosen = self.select_pages(layer, query)
        return table[chosen]

    def past(
        self, layer: int, query: torch.Tensor | None = None, grads: bool = False
    ) -> PagedKV | None:
        """The paged past of the current chunk for ``layer`` (``None`` for the first
        chunk), staged on the compute device when pages are offloaded."""
        pages = self.past_pages(layer, query)
        if pages is None or pages.numel() == 0:
            return None
        length = int(pages.numel()) * self.layout.page_size
        if self.stager is not None:
            return self.stager.acquire(layer, pages, length, grads)
        return PagedKV(
            self.pools["k"].storage,
            self.pools["v"].storage,
            pages,
            length,
            self.pools["gk"].storage,
            self.pools["gv"].storage,
            block_tokens=self.block_tokens,
        )

    def done(self, layer: int, backward: bool) -> None:
        """An attention call finished queuing its work: release the slot and prefetch
        what the next call will need (next layer forward, previous layer backward)."""
        if self.stager is None:
            return
        self.stager.release(grads_written=backward)
        if backward:
            target: tuple[int, bool] | None = (layer - 1, True) if layer > 0 else None
            if layer == 0 and self.next_start is not None and self.page_budget is None:
                # the recompute pass continues with layer 0 of the previous chunk
                n_past = self.next_start // self.layout.page_size
                if n_past:
                    self.stager.prefetch(0, self.tables[0][:n_past], False)
        elif layer + 1 < self.num_layers:
            target = (layer + 1, False)
        elif self.record:
            target = (layer, True)  # the backward starts with the last layer
        else:
            target = None
            if self.next_start is not None and self.page_budget is None:
                n_past = self.next_start // self.layout.page_size
                self.stager.prefetch(0, self.tables[0][:n_past], False)
        if target is not None:
            pages = self.past_pages(target[0])
            if pages is not None:
                self.stager.prefetch(target[0], pages, target[1])

    def chunk_grads(
        self, layer: int, start: int, end: int, device: torch.device
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Key and value gradients ``[B, H_kv, end - start, D]`` that later chunks
        accumulated for tokens ``[start, end)`` of ``layer`` (call :meth:`sync` first)."""
        table = self.tables[layer]
        gk = paged_gather(self.pools["gk"].storage, table, start, end)
        gv = paged_gather(self.pools["gv"].storage, table, start, end)
        return gk.to(device), gv.to(device)

    def sync(self) -> None:
        """Wait for gradient pages to be back in host memory (before reading them)."""
        if self.stager is not None:
            self.stager.synchronize()

    def store_summaries(self, layer: int, key: torch.Tensor) -> None:
        """Mean-pooled key of every page the chunk ``key [B, H_kv, T, D]`` fills."""
        b, h, t, d = key.shape
        page = self.layout.page_size
        n = -(-t // page)
        padded = torch.nn.functional.pad(key.detach().float(), (0, 0, 0, n * page - t))
        sums = padded.view(b, h, n, page, d).sum(3)
        counts = torch.clamp(t - torch.arange(n, device=key.device) * page, max=page)
        means = (sums / counts.view(1, 1, n, 1)).permute(2, 0, 1, 3)  # [n, B, H_kv, D]
        total = -(-self.seq_len // page)
        if layer not in self.summaries:
            self.summaries[layer] = torch.zeros(total, b, h, d, device=key.device)
        first = self.start // page
        self.summaries[layer][first : first + n] = means

    def select_pages(self, layer: int, query: torch.Tensor) -> torch.Tensor:
        """Ids (into the layer's page table, ascending) of the past pages this chunk keeps.

        The first ``sink_pages`` and last ``local_pages`` past pages are always kept; the
        rest of the ``page_budget`` goes to the pages with the largest score
        ``mean_queries(q) . mean_page(k)``, summed over batch and KV heads (the chunk's
        queries averaged over tokens and over the query heads of each KV group). The
        choice is made once per (layer, chunk) in the first pass and reused in the second,
        so both passes see the same sparse attention.
        """
        key = (layer, self.start)
        if key in self.selections:
            return self.selections[key]
        n_past = self.start // self.layout.page_size
        budget = self.page_budget if self.page_budget is not None else n_past
        device = self.tables[layer].device
        if n_past <= budget:
            chosen = torch.arange(n_past, device=device)
        else:
            b, hq, _, d = query.shape
            hkv = self.layout.kv_heads
            qbar = query.detach().float().mean(2).view(b, hkv, hq // hkv, d).mean(2)
            summ = self.summaries[layer][:n_past].to(qbar.device)
            score = torch.einsum("bhd,pbhd->p", qbar, summ)
            forced = torch.zeros(n_past, dtype=torch.bool, device=score.device)
            forced[: self.sink_pages] = True
            if self.local_pages:
                forced[n_past - self.local_pages :] = True
            score = score.masked_fill(forced, float("inf"))
            chosen = torch.topk(score, budget).indices.sort().values.to(device)
        self.selections[key] = chosen
        return chosen


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
    out = _PagedAttention.apply(q, k, v, state, layer, scaling)
    if not state.record:
        if state.page_budget is not None:
            state.store_summaries(layer, key)
        table = state.tables[layer]
        for role, x in (("k", key), ("v", value)):
            storage = state.pools[role].storage
            # a blocking copy: the pages must hold the values before anything reads them
            paged_scatter(storage, table, state.start, x.detach().to(storage.device))
    # after the chunk's pages are written: a prefetch may read them (next chunk, layer 0)
    state.done(layer, backward=False)
    return out, None


class _PagedAttention(torch.autograd.Function):
    """Attention of one layer over the current chunk and its paged past.

    The past is fetched from :class:`ChunkState` in the forward *and again* in the
    backward (with gradient pages), so offloaded pages need not stay on the device
    between the two. The backward returns for the chunk's own keys and values the sum of
    their gradient through this chunk's attention and the gradient pages of the later
    chunks (complete by then: the chunks are back-propagated last first).
    """

    @staticmethod
    def forward(
        ctx: Any,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        state: ChunkState,
        layer: int,
        scale: float | None,
    ) -> torch.Tensor:
        past = state.past(layer, q.transpose(1, 2))
        out, lse = paged_chunk_attention_forward(q, k, v, past, scale, state.backend)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.state, ctx.layer, ctx.scale, ctx.start = state, layer, scale, state.start
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        q, k, v, out, lse = ctx.saved_tensors
        state: ChunkState = ctx.state
        past = state.past(ctx.layer, grads=True)
        dq, dk, dv = paged_chunk_attention_backward(
            q, k, v, out, lse, grad_out, past, ctx.scale, state.backend
        )
        state.done(ctx.layer, backward=True)
        gk, gv = state.chunk_grads(ctx.layer, ctx.start, ctx.start + k.shape[1], dk.device)
        dk = dk + gk.transpose(1, 2).to(dk.dtype)
        dv = dv + gv.transpose(1, 2).to(dv.dtype)
        return dq, dk, dv, None, None, None


def _no_mask(*args: Any, **kwargs: Any) -> None:
    """Masks are built inside :func:`chunk_attention_forward` (causal, no padding)."""
    return None


def register() -> None:
    """Register the attention function and its (empty) mask with transformers."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(ATTN_NAME, chunk_attention_forward)
    AttentionMaskInterface.register(ATTN_NAME, _no_mask)
