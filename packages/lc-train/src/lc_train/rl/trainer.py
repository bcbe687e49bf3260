"""A small multi-conversation DAPO trainer over recorded :class:`~lc_train.rl.memagent.Turn` s.

One optimizer step:

1. groups of episodes (``G`` items x ``S`` samples) -> rewards ``[G, S]``;
2. dynamic sampling: keep groups whose rewards are not all equal
   (:func:`~lc_train.rl.dapo.informative_groups`);
3. group-normalized advantages (:func:`~lc_train.rl.dapo.group_advantages`), broadcast
   to every turn of each sample (:func:`~lc_train.rl.dapo.broadcast_to_turns`);
4. clipped (clip-higher) per-token surrogate on each turn's completion tokens, reduced
   with the token-level mean over ALL completion tokens of all turns in the step
   (micro-batches accumulate gradients so the sum equals the full-batch token mean).

The same packing and micro-batching serves supervised fine-tuning on oracle turns
(:func:`sft_step`: token-level cross-entropy on completion tokens).

Data parallelism (``torchrun``): wrap the model in ``DistributedDataParallel`` and give
each rank its own turns (e.g. its own groups of episodes). Both steps then take the
token-level mean over the completion tokens of ALL ranks (the token count is
all-reduced), synchronise the gradients once per step (``no_sync`` for the other
micro-batches) and report global statistics, so every rank takes the step one process
would take on the union of the turns. :func:`save_checkpoint` writes from rank 0 only,
with the unwrapped parameter names.

Example:
    >>> batch = build_turn_batch(groups)  # doctest: +SKIP
    >>> if batch is not None:  # doctest: +SKIP
    ...     stats = dapo_step(model, optimizer, batch.turns, batch.advantages, DAPOConfig())
"""

from __future__ import annotations

import math
import os
import pathlib
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from lc_train.rl.dapo import (
    DAPOConfig,
    broadcast_to_turns,
    clipped_token_objective,
    group_advantages,
    informative_groups,
    overlong_penalty,
)
from lc_train.rl.memagent import Episode, Turn

__all__ = [
    "TurnBatch",
    "build_turn_batch",
    "completion_logps",
    "dapo_step",
    "load_checkpoint",
    "pack_turns",
    "save_checkpoint",
    "sft_step",
]


@dataclass(frozen=True)
class TurnBatch:
    """The turns of one DAPO step with their broadcast advantages.

    Attributes:
        turns: every turn of every kept sample (sample order, turns in call order).
        advantages: ``[len(turns)]`` the advantage of each turn's sample.
        rewards: ``[groups, group_size]`` rewards of all groups before filtering.
        kept_groups: ``[groups]`` bool, the groups dynamic sampling kept.
    """

    turns: list[Turn]
    advantages: torch.Tensor
    rewards: torch.Tensor
    kept_groups: torch.Tensor


def build_turn_batch(
    groups: Sequence[Sequence[Episode]],
    std_eps: float = 1e-6,
    *,
    overlong: DAPOConfig | None = None,
) -> TurnBatch | None:
    """Rewards -> overlong shaping -> dynamic sampling -> group advantages -> per-turn
    advantages.

    Args:
        groups: ``G`` groups of ``S`` episodes each (same item within a group).
        std_eps: added to the group standard deviation.
        overlong: with a config, DAPO's soft overlong punishment
            (:func:`~lc_train.rl.dapo.overlong_penalty` with ``max_length`` and
            ``overlong_cache``) is added to each episode's reward, by the length of its
            longest completion (each memory update and the answer is one response);
            ``rewards`` of the result are the shaped ones.

    Raises:
        ValueError: for unequal group sizes, an episode without turns, or a reward that
            is NaN or infinite (naming the item).

    Returns:
        The :class:`TurnBatch`, or ``None`` when no group is informative (all rewards of
        every group equal: nothing to learn from; sample more).
    """
    if not groups:
        raise ValueError("need at least one group of episodes")
    sizes = {len(g) for g in groups}
    if len(sizes) != 1:
        raise ValueError(f"all groups must have the same size, got sizes {sorted(sizes)}")
    for g in groups:
        for e in g:
            if not math.isfinite(e.reward):
                raise ValueError(f"episode of item {e.item_id!r} has reward {e.reward!r}")
    rewards = torch.tensor([[e.reward for e in g] for g in groups], dtype=torch.float32)
    if overlong is not None:
        lengths = torch.tensor(
            [[max((len(t.completion_ids) for t in e.turns), default=0) for e in g] for g in groups]
        )
        rewards = rewards + overlong_penalty(lengths, overlong.max_length, overlong.overlong_cache)
    keep = informative_groups(rewards)
    if not bool(keep.any()):
        return None
    adv = group_advantages(rewards[keep], std_eps=std_eps).reshape(-1)
    kept = [e for g, k in zip(groups, keep.tolist()) if k for e in g]
    for e in kept:
        if not e.turns:
            raise ValueError(f"episode of item {e.item_id!r} has no turns")
    per_turn = broadcast_to_turns(adv, [len(e.turns) for e in kept])
    turns = [t for e in kept for t in e.turns]
    return TurnBatch(turns=turns, advantages=per_turn, rewards=rewards, kept_groups=keep)


def pack_turns(
    turns: Sequence[Turn], pad_id: int = 0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-pad turns into one batch.

    Returns:
        ``input_ids`` ``[N, L]`` (prompt + completion), ``attention_mask`` ``[N, L]``,
        ``target_mask`` ``[N, L-1]`` (True where position ``t+1`` is a completion token,
        i.e. aligned with next-token logits), ``old_logps`` ``[N, L-1]`` (the recorded
        sampling logps at those positions, 0 elsewhere or when not recorded).
    """
    if not turns:
        raise ValueError("need at least one turn")
    lengths = [len(t.prompt_ids) + len(t.completion_ids) for t in turns]
    n, width = len(turns), max(lengths)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    attn = torch.zeros((n, width), dtype=torch.long)
    target = torch.zeros((n, width - 1), dtype=torch.bool)
    old = torch.zeros((n, width - 1), dtype=torch.float32)
    for i, t in enumerate(turns):
        p, c = len(t.prompt_ids), len(t.completion_ids)
        ids[i, : p + c] = torch.tensor(t.prompt_ids + t.completion_ids)
        attn[i, : p + c] = 1
        target[i, p - 1 : p + c - 1] = True
        if t.logps is not None and c:
            old[i, p - 1 : p + c - 1] = torch.tensor(t.logps)
    return ids, attn, target, old


def completion_logps(
    model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """``[N, L-1]`` log-probability of each next token ``input_ids[:, 1:]`` under ``model``.

    ``temperature`` scales the logits as during sampling (> 0).
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits[:, :-1].float()
    logp = torch.log_softmax(logits / temperature, dim=-1)
    return logp.gather(-1, input_ids[:, 1:, None]).squeeze(-1)


def _ddp(model: Any) -> tuple[Any, Any]:
    """``(inner module, process group)`` of a ``DistributedDataParallel`` model;
    ``(model, None)`` for any other model."""
    from torch.nn.parallel import DistributedDataParallel

    if isinstance(model, DistributedDataParallel):
        return model.module, model.process_group
    return model, None


def _global_counts(
    turns: Sequence[Turn], group: Any, device: torch.device, error: str | None = None
) -> tuple[int, int]:
    """``(completion tokens, world size)`` over the ranks of ``group`` (``None``: this
    process). A bad input on any rank (``error``, or no completion tokens) raises on
    every rank, so none is left waiting in a collective."""
    local = sum(len(t.completion_ids) for t in turns)
    if group is None:
        if error is not None:
            raise ValueError(error)
        if local == 0:
            raise ValueError("the turns hold no completion tokens (or there are no turns)")
        return local, 1
    import torch.distributed as dist

    flags = [local, int(local == 0), int(error is not None)]
    counts = torch.tensor(flags, dtype=torch.float64, device=device)
    dist.all_reduce(counts, group=group)
    if error is not None:
        raise ValueError(error)
    if counts[2] > 0:
        raise ValueError(f"{int(counts[2])} other rank(s) got invalid input for this step")
    if counts[1] > 0:
        raise ValueError(
            f"{int(counts[1])} rank(s) hold no completion tokens; under "
            "DistributedDataParallel every rank needs turns with completion tokens"
        )
    return int(counts[0]), dist.get_world_size(group)


def _sum_over_ranks(values: list[float], group: Any, device: torch.device) -> list[float]:
    if group is None:
        return values
    import torch.distributed as dist

    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t, group=group)
    return t.tolist()


def _sync_context(model: Any, group: Any, last: bool) -> Any:
    """DDP all-reduces the gradients on the last micro-batch's backward only."""
    import contextlib

    return model.no_sync() if group is not None and not last else contextlib.nullcontext()


def _micro_batches(n: int, size: int) -> list[slice]:
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"micro_batch must be an int >= 1, got {size!r}")
    return [slice(start, min(n, start + size)) for start in range(0, n, size)]


def _optimizer_step(
    model: Any, optimizer: torch.optim.Optimizer, max_grad_norm: float | None
) -> float:
    """Clip the trainable parameters' gradient norm to ``max_grad_norm`` (``None``: no
    clipping), step ``optimizer`` and clear the gradients; returns the norm before
    clipping (``0.0`` without clipping)."""
    grad_norm = 0.0
    if max_grad_norm is not None:
        params = [p for p in model.parameters() if p.requires_grad]
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, max_grad_norm))
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return grad_norm


def dapo_step(
    model: Any,
    optimizer: torch.optim.Optimizer | None,
    turns: Sequence[Turn],
    advantages: torch.Tensor,
    config: DAPOConfig,
    *,
    micro_batch: int = 4,
    temperature: float = 1.0,
    max_grad_norm: float | None = 1.0,
    pad_id: int = 0,
) -> dict[str, float]:
    """One DAPO policy-gradient step over recorded turns (token-level loss, clip-higher).

    Turns with recorded ``logps`` use them as the old policy; turns without use the
    current policy's (detached) logps, i.e. ratio 1 (on-policy). Gradients of the
    micro-batches accumulate so the total is the gradient of the token-level mean over
    every completion token of ``turns``.

    Args:
        model: the policy (trainable parameters require grad), or the policy wrapped in
            ``DistributedDataParallel``: then ``turns`` are this rank's and the loss,
            gradients and statistics are those of the union of all ranks' turns.
        optimizer: stepped once at the end (``None``: only accumulate gradients).
        turns: the turns of the step.
        advantages: ``[len(turns)]`` advantage of each turn.
        config: clip ranges.
        micro_batch: turns per forward/backward.
        temperature: the sampling temperature (logits are scaled by it).
        max_grad_norm: clip the gradient norm (``None``: no clipping).
        pad_id: padding token id.

    Returns:
        ``loss`` (token-level mean), ``clip_frac`` (fraction of tokens where the clip is
        active: ratio below ``1 - eps_low`` with a negative advantage or above
        ``1 + eps_high`` with a positive one, as TRL's ``clip_ratio/region_mean``),
        ``tokens`` and ``grad_norm`` (over all ranks under DDP).

    Raises:
        ValueError: ``advantages`` of the wrong shape, or no completion tokens (on any
            rank under DDP: every rank raises).
    """
    slices = _micro_batches(len(turns), micro_batch)
    inner, group = _ddp(model)
    device = next(inner.parameters()).device
    error = None
    if advantages.shape != (len(turns),):
        error = f"advantages must be [{len(turns)}], got {tuple(advantages.shape)}"
    total, world = _global_counts(turns, group, device, error)
    # DDP averages the ranks' gradients: scale so the mean is the sum over all tokens
    scale = world / total
    model.train()
    loss_sum, clipped, grad_norm = 0.0, 0.0, 0.0
    for k, sl in enumerate(slices):
        chunk = list(turns[sl])
        ids, attn, target, old = pack_turns(chunk, pad_id)
        ids, attn, target, old = ids.to(device), attn.to(device), target.to(device), old.to(device)
        with _sync_context(model, group, last=k == len(slices) - 1):
            logp = completion_logps(model, ids, attn, temperature)
            has_old = torch.tensor([t.logps is not None for t in chunk], device=device)[:, None]
            old = torch.where(has_old, old, logp.detach())
            adv = advantages[sl].to(device, torch.float32)[:, None].expand_as(logp)
            per_token = clipped_token_objective(logp, old, adv, config.eps_low, config.eps_high)
            loss = (per_token * target).sum() * scale
            if loss.requires_grad:
                loss.backward()
        loss_sum += float(loss.detach()) / world
        ratio = torch.exp(logp.detach() - old)
        # the clipped term is the active one (TRL's clip_ratio/region_mean)
        low = (ratio < 1 - config.eps_low) & (adv < 0)
        high = (ratio > 1 + config.eps_high) & (adv > 0)
        clipped += float(((low | high) & target).sum())
    loss_sum, clipped = _sum_over_ranks([loss_sum, clipped], group, device)
    if optimizer is not None:
        grad_norm = _optimizer_step(model, optimizer, max_grad_norm)
    return {
        "loss": loss_sum,
        "clip_frac": clipped / total,
        "tokens": float(total),
        "grad_norm": grad_norm,
    }


def sft_step(
    model: Any,
    optimizer: torch.optim.Optimizer | None,
    turns: Sequence[Turn],
    *,
    micro_batch: int = 4,
    max_grad_norm: float | None = 1.0,
    pad_id: int = 0,
) -> dict[str, float]:
    """One supervised step: token-level mean cross-entropy of the turns' completions.

    ``model`` may be wrapped in ``DistributedDataParallel``: ``turns`` are then this
    rank's, and the loss, gradients and statistics those of all ranks' turns together
    (see :func:`dapo_step`).

    Returns:
        ``loss`` (mean negative log-likelihood per completion token), ``tokens``,
        ``grad_norm``.

    Raises:
        ValueError: no completion tokens (on any rank under DDP: every rank raises).
    """
    slices = _micro_batches(len(turns), micro_batch)  # validated before any collective
    inner, group = _ddp(model)
    device = next(inner.parameters()).device
    total, world = _global_counts(turns, group, device)
    scale = world / total
    model.train()
    loss_sum, grad_norm = 0.0, 0.0
    for k, sl in enumerate(slices):
        ids, attn, target, _ = pack_turns(list(turns[sl]), pad_id)
        ids, attn, target = ids.to(device), attn.to(device), target.to(device)
        with _sync_context(model, group, last=k == len(slices) - 1):
            logp = completion_logps(model, ids, attn)
            loss = -(logp * target).sum() * scale
            loss.backward()
        loss_sum += float(loss.detach()) / world
    (loss_sum,) = _sum_over_ranks([loss_sum], group, device)
    if optimizer is not None:
        grad_norm = _optimizer_step(model, optimizer, max_grad_norm)
    return {"loss": loss_sum, "tokens": float(total), "grad_norm": grad_norm}


def trainable_state(model: Any) -> dict[str, torch.Tensor]:
    """The parameters that require grad (e.g. the LoRA weights), by name, detached on CPU
    (a ``DistributedDataParallel`` model: by the names inside the wrapper)."""
    inner, _ = _ddp(model)
    return {n: p.detach().cpu().clone() for n, p in inner.named_parameters() if p.requires_grad}


def save_checkpoint(
    path: str | os.PathLike[str],
    model: Any,
    optimizer: torch.optim.Optimizer | None,
    *,
    step: int,
    extra: dict[str, Any] | None = None,
) -> None:
    """Write trainable weights, optimizer state, step and ``extra`` to ``path`` atomically.

    The file is written to a temporary name in the same directory and renamed, so an
    interrupted save never leaves a half-written checkpoint. Under ``torch.distributed``
    only rank 0 writes (the ranks hold the same weights after a DDP step); call it on
    every rank.
    """
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_rank() != 0:
        return
    target = pathlib.Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "step": int(step),
        "trainable": trainable_state(model),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "extra": extra or {},
    }
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}-", dir=target.parent)
    os.close(fd)
    try:
        torch.save(payload, tmp)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def load_checkpoint(
    path: str | os.PathLike[str], model: Any, optimizer: torch.optim.Optimizer | None = None
) -> dict[str, Any]:
    """Restore what :func:`save_checkpoint` wrote; returns ``{"step": ..., "extra": ...}``.

    Raises:
        ValueError: the checkpoint's trainable parameter names differ from the model's.
    """
    payload = torch.load(path, map_location="cpu", weights_only=False)
    inner, _ = _ddp(model)
    named = {n: p for n, p in inner.named_parameters() if p.requires_grad}
    saved = payload["trainable"]
    if set(saved) != set(named):
        missing, unexpected = sorted(set(named) - set(saved)), sorted(set(saved) - set(named))
        raise ValueError(
            f"checkpoint {str(path)!r} does not match the model's trainable parameters: "
            f"missing {missing[:3]}, unexpected {unexpected[:3]}"
        )
    with torch.no_grad():
        for n, p in named.items():
            p.copy_(saved[n].to(p.device, p.dtype))
    if optimizer is not None and payload.get("optimizer") is not None:
        optimizer.load_state_dict(payload["optimizer"])
    return {"step": int(payload["step"]), "extra": payload.get("extra", {})}
