"""Chunk-recurrent loss and exact gradients for a causal LM over a long sequence.

Pass 1 runs the chunks in order without autograd and fills paged key/value memory.
Pass 2 walks the chunks in reverse: it recomputes a chunk's forward with autograd,
attending over the paged past, and back-propagates ``loss_chunk``; each attention layer's
backward adds to the chunk's key and value gradients ``dL/dK_chunk`` and ``dL/dV_chunk``
that the later chunks attending to them accumulated into gradient pages. The extra
gradient enters inside the attention's own backward, not through a surrogate term, so it
reaches the parameters also when the layers run under activation checkpointing
(reentrant or not). The gradients that reach the
parameters are therefore exactly those of ordinary full-sequence back-propagation, while
activations are kept for one chunk at a time. The LM head and the cross-entropy of a
chunk run over pieces of ``loss_chunk_size`` positions (:mod:`lc_train.oomb.loss`), so the
chunk's full ``[chunk, vocab]`` logits never exist at once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from lc_kernels.paged import PageLayout
from lc_train.oomb.attention import _ACTIVE, ATTN_NAME, ChunkState, register
from lc_train.oomb.checks import check_run
from lc_train.oomb.config import ChunkRecurrentConfig
from lc_train.oomb.loss import lm_head_loss_backward
from lc_train.oomb.offload import StagerStats

if TYPE_CHECKING:
    from transformers import PreTrainedModel


@dataclass(frozen=True)
class ChunkRecurrentResult:
    """Outcome of one chunk-recurrent forward/backward.

    Attributes:
        loss: mean next-token cross-entropy over all target tokens (a detached scalar).
        num_targets: number of target tokens the mean is taken over.
        kv_bytes: bytes of the paged key/value and key/value-gradient memory.
        device_kv_bytes: bytes of page memory on the compute device: equal to
            ``kv_bytes`` without offload, the staging slots with it.
        offload_stats: with offload, counters of the page stager (attention calls,
            calls served by a prefetch, pages copied to and from the device).
        page_selections: with a page budget, ``{(layer, chunk_start): past page ids}`` of
            the pages each chunk attended to (ascending); ``None`` for exact training.
    """

    loss: torch.Tensor
    num_targets: int
    kv_bytes: int
    device_kv_bytes: int = 0
    offload_stats: StagerStats | None = None
    page_selections: dict[tuple[int, int], list[int]] | None = None


@contextlib.contextmanager
def _attention_swapped(model: PreTrainedModel) -> Iterator[None]:
    register()
    config = model.config
    previous = config._attn_implementation
    model.set_attn_implementation(ATTN_NAME)
    try:
        yield
    finally:
        model.set_attn_implementation(previous)


def _targets(input_ids: torch.Tensor, labels: torch.Tensor | None) -> torch.Tensor:
    """Next-token targets aligned with positions (last position: ignored)."""
    labels = input_ids if labels is None else labels
    shifted = torch.full_like(labels, -100)
    shifted[:, :-1] = labels[:, 1:]
    return shifted


def _unwrap(model: torch.nn.Module) -> tuple[PreTrainedModel, Any, Any]:
    """The causal LM inside a ``DistributedDataParallel`` wrapper and the wrapper's
    process group (``None`` for a plain model), and the root FSDP2 module of a
    ``fully_shard``-ed model (``None`` otherwise). FSDP1 and models whose root is not
    sharded are refused up front."""
    from torch.nn.parallel import DistributedDataParallel

    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # pragma: no cover - torch without FSDP2
        FSDPModule = ()  # type: ignore[assignment,misc]
    if isinstance(model, DistributedDataParallel):
        return model.module, model.process_group, None
    if type(model).__name__ == "FullyShardedDataParallel":
        raise ValueError(
            "chunk-recurrent training does not support FSDP1 (FullyShardedDataParallel) "
            "wrappers; shard with FSDP2's fully_shard (layers, then the model itself)"
        )
    if isinstance(model, FSDPModule):
        if not hasattr(model, "finalize_backward"):
            raise ValueError(
                "chunk-recurrent training of an FSDP2 model needs FSDPModule."
                "finalize_backward (manual gradient-reduction), which this torch "
                f"{torch.__version__} lacks; use DistributedDataParallel or a newer torch"
            )
        return model, None, model  # type: ignore[return-value]
    if any(isinstance(m, FSDPModule) for m in model.modules()):
        raise ValueError(
            "chunk-recurrent training of an FSDP2 model needs the model itself sharded "
            "too: call fully_shard(model) after sharding its layers, so the embedding, "
            "final norm and LM head belong to the root"
        )
    return model, None, None  # type: ignore[return-value]


def _decoder(
    model: PreTrainedModel, base: torch.nn.Module, fsdp: Any
) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """``(input_ids, position_ids) -> last hidden state`` of one chunk. A plain model
    runs its decoder directly; an FSDP2 model runs its root forward (which gathers the
    root's parameters and leaves them gathered until the backward is finalized), with
    logits for the last position only, and the decoder's output is taken by a hook."""
    if fsdp is None:
        return lambda ids, pos: (
            base(input_ids=ids, position_ids=pos, use_cache=False).last_hidden_state
        )

    def run(ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        out: list[torch.Tensor] = []
        handle = base.register_forward_hook(
            lambda module, args, output: out.append(output.last_hidden_state)
        )
        try:
            model(input_ids=ids, position_ids=pos, use_cache=False, logits_to_keep=1)
        finally:
            handle.remove()
        return out[0]

    return run


def _average_gradients(model: torch.nn.Module, group: Any) -> None:
    """Mean of ``param.grad`` over the ranks of ``group`` (what DDP's reducer does after
    the last backward of an accumulation), one all-reduce per dtype and device."""
    import torch.distributed as dist

    world = dist.get_world_size(group)
    grads = [p.grad for p in model.parameters() if p.requires_grad and p.grad is not None]
    buckets: dict[tuple[torch.dtype, torch.device], list[torch.Tensor]] = {}
    for g in grads:
        buckets.setdefault((g.dtype, g.device), []).append(g)
    for bucket in buckets.values():
        flat = torch.cat([g.reshape(-1) for g in bucket])
        dist.all_reduce(flat, group=group)
        flat /= world
        offset = 0
        for g in bucket:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()


def chunk_recurrent_backward(
    model: PreTrainedModel | torch.nn.Module,
    input_ids: torch.Tensor,
    labels: torch.Tensor | None = None,
    config: ChunkRecurrentConfig | None = None,
) -> ChunkRecurrentResult:
    """Accumulate into ``param.grad`` the exact gradient of the mean causal-LM loss.

    Equivalent to ``model(input_ids, labels=labels).loss.backward()`` (same loss, same
    gradients up to floating-point rounding) with activation memory of one chunk.

    Args:
        model: a transformers causal LM of a family in
            ``lc_train.oomb.SUPPORTED_MODEL_TYPES`` (Llama, Mistral, Qwen2,
            Qwen3) with full causal attention layers, in training or eval mode, no dropout;
            or such a model wrapped in ``DistributedDataParallel``: each rank passes its
            own part of the batch and the gradients are then averaged over the ranks, as
            DDP does (equal to the full-batch gradient when every rank has the same
            number of target tokens); or such a model sharded with FSDP2's
            ``fully_shard`` (its decoder layers, then the model itself): the gradients
            of all chunks accumulate unreduced and are reduce-scattered once at the end
            (mean over the ranks), so ``param.grad`` holds this rank's shard of the
            averaged gradient. FSDP1 wrappers and models whose root is not sharded are
            refused.
        input_ids: ``[batch, seq]`` token ids (no padding).
        labels: ``[batch, seq]`` like ``input_ids`` with ``-100`` for ignored positions;
            defaults to ``input_ids`` (standard LM training).
        config: chunk and page sizes.

    With ``config.page_budget`` set, each chunk attends to a budget of its past pages
    (page-level sparse attention): the loss and gradients are then those of that sparse
    model, no longer of full attention.

    Raises:
        ValueError: before any computation, for an unsupported model family or a
            sliding-window model, an FSDP1 model or an FSDP2 model without a sharded
            root, a sequence shorter than one
            chunk, bad shapes, or paged
            KV memory larger than ``config.memory_limit_bytes`` (default: what is
            available where the pages live).

    Returns:
        The loss (detached; this rank's under DDP), the number of target tokens and the
        KV memory used.

    Example:
        >>> model.zero_grad()
        >>> result = chunk_recurrent_backward(model, ids, config=ChunkRecurrentConfig(chunk_size=512))
        >>> optimizer.step()
    """
    config = config or ChunkRecurrentConfig()
    model, group, fsdp = _unwrap(model)
    if input_ids.dim() != 2 or input_ids.dtype not in (torch.long, torch.int):
        raise ValueError(
            f"input_ids must be a [batch, seq] integer tensor, got {tuple(input_ids.shape)}"
        )
    if labels is not None and labels.shape != input_ids.shape:
        raise ValueError(
            f"labels {tuple(labels.shape)} must match input_ids {tuple(input_ids.shape)}"
        )
    check_run(model, input_ids, config)
    targets = _targets(input_ids, labels)
    num_targets = int((targets != -100).sum())
    if num_targets == 0:
        raise ValueError("no target tokens: the sequence needs at least 2 tokens with labels")

    text = model.config.get_text_config(decoder=True)
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    base = getattr(model, model.base_model_prefix)
    device = input_ids.device
    dtype = next(model.parameters()).dtype
    batch, seq_len = input_ids.shape
    state = ChunkState(
        layout=PageLayout(batch, text.num_key_value_heads, config.page_size, head_dim, dtype),
        num_layers=text.num_hidden_layers,
        seq_len=seq_len,
        device=torch.device("cpu") if config.offload else device,
        block_tokens=config.block_tokens,
        page_budget=config.page_budget,
        sink_pages=config.sink_pages,
        local_pages=config.local_pages,
        compute_device=device,
        resident_layers=config.resident_layers if config.offload else None,
        backend=config.attention_backend,
    )
    chunks = [
        (s, min(s + config.chunk_size, seq_len)) for s in range(0, seq_len, config.chunk_size)
    ]
    positions = torch.arange(seq_len, device=device).unsqueeze(0).expand(batch, -1)
    head = model.get_output_embeddings()
    decode = _decoder(model, base, fsdp)
    if fsdp is not None:  # accumulate unreduced over the chunks, reduce once at the end
        fsdp.set_manual_backward_finalization(True)
        fsdp.set_requires_gradient_sync(False)

    total = torch.zeros((), dtype=torch.float32, device=device)
    token = _ACTIVE.set(state)
    try:
        with _attention_swapped(model):
            with torch.no_grad():  # pass 1: fill the KV pages
                for i, (start, end) in enumerate(chunks):
                    state.start = start
                    # the chunk after this one (pass 2 starts again with the last chunk)
                    state.next_start = chunks[i + 1][0] if i + 1 < len(chunks) else start
                    decode(input_ids[:, start:end], positions[:, start:end])
            state.record = True
            for i, (start, end) in reversed(list(enumerate(chunks))):  # pass 2: recompute
                state.start = start  # and back-propagate, last chunk first
                state.next_start = chunks[i - 1][0] if i > 0 else None
                hidden = decode(input_ids[:, start:end], positions[:, start:end])
                # LM head and loss piece by piece (config.loss_chunk_size positions of
                # logits at a time); their backward stops at the hidden states
                loss, grad_hidden = lm_head_loss_backward(
                    head,
                    hidden,
                    targets[:, start:end],
                    num_targets,
                    config.loss_chunk_size,
                )
                state.sync()  # gradient pages written back by the later chunks
                if hidden.requires_grad:  # the attention backward adds those pages
                    hidden.backward(grad_hidden)
                total += loss
                del hidden, grad_hidden, loss
    finally:
        _ACTIVE.reset(token)
    if group is not None:
        _average_gradients(model, group)
    if fsdp is not None:  # reduce-scatter the accumulated gradients (mean over ranks)
        fsdp.set_requires_gradient_sync(True)
        fsdp.finalize_backward()
        fsdp.set_manual_backward_finalization(False)
    selections = None
    if config.page_budget is not None:
        selections = {key: ids.tolist() for key, ids in sorted(state.selections.items())}
    return ChunkRecurrentResult(
        loss=total,
        num_targets=num_targets,
        kv_bytes=state.bytes,
        device_kv_bytes=state.device_bytes,
        offload_stats=state.stager.stats if state.stager is not None else None,
        page_selections=selections,
    )
