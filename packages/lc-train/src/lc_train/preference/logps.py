"""Summed response log-probabilities of a causal LM."""

from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F

from lc_train.preference.losses import ResponseLogps


def _accepts_logits_to_keep(model: torch.nn.Module) -> bool:
    """Whether ``model``'s forward takes ``logits_to_keep`` (by name or through
    ``**kwargs``, as adapter wrappers pass it on). A model that takes but ignores it
    returns every position, which the caller's slice from the end still handles."""
    forward = getattr(model, "forward", None)
    try:
        params = inspect.signature(forward).parameters.values()  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return any(p.name == "logits_to_keep" or p.kind is p.VAR_KEYWORD for p in params)


def response_logps(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    response_mask: torch.Tensor,
    reference: torch.nn.Module | None = None,
    *,
    inputs_embeds: torch.Tensor | None = None,
) -> ResponseLogps:
    """Log-probability of the response tokens of each row.

    Only the positions from the earliest response token on go through the LM head (for
    models whose forward takes ``logits_to_keep``), so a long prompt costs no
    ``[seq, vocab]`` logits buffer.

    Args:
        model: the policy (a transformers causal LM).
        input_ids: ``[batch, seq]`` prompt + response tokens (right padded); the targets.
        response_mask: ``[batch, seq]`` 1 on response tokens, 0 on prompt and padding.
        reference: optional frozen reference model evaluated without gradients.
        inputs_embeds: ``[batch, seq, hidden]`` fed to the models instead of
            ``input_ids`` (e.g. the cached states entering the top layers, see
            :func:`lc_train.top_layers.split_top_layers`).

    Returns:
        :class:`ResponseLogps` with sums over response tokens (and reference sums).
    """
    if input_ids.shape != response_mask.shape:
        raise ValueError(
            f"response_mask {tuple(response_mask.shape)} must match input_ids {tuple(input_ids.shape)}"
        )
    if inputs_embeds is not None and inputs_embeds.shape[:2] != input_ids.shape:
        raise ValueError(
            f"inputs_embeds {tuple(inputs_embeds.shape)} must be [batch, seq, hidden] for "
            f"input_ids {tuple(input_ids.shape)}"
        )
    seq = input_ids.shape[1]
    hits = response_mask[:, 1:].bool().any(dim=0).nonzero()
    first = int(hits[0]) if len(hits) else seq - 1  # earliest target index - 1
    keep = seq - first  # logits for positions first .. seq-1
    targets = input_ids[:, first + 1 :]
    mask = response_mask[:, first + 1 :]

    def summed(m: torch.nn.Module) -> torch.Tensor:
        inputs = (
            {"input_ids": input_ids} if inputs_embeds is None else {"inputs_embeds": inputs_embeds}
        )
        kwargs = {"logits_to_keep": keep} if _accepts_logits_to_keep(m) else {}
        logits = m(**inputs, attention_mask=torch.ones_like(input_ids), **kwargs).logits
        logits = logits[:, -keep:-1].float()
        token_logps = -F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
        return (token_logps * mask).sum(dim=1)

    ref = None
    if reference is not None:
        with torch.no_grad():
            ref = summed(reference)
    return ResponseLogps(summed(model), response_mask[:, 1:].sum(dim=1), ref)
