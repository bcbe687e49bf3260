"""Summed response log-probabilities of a causal LM."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from lc_train.preference.losses import ResponseLogps


def response_logps(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    response_mask: torch.Tensor,
    reference: torch.nn.Module | None = None,
) -> ResponseLogps:
    """Log-probability of the response tokens of each row.

    Args:
        model: the policy (a transformers causal LM).
        input_ids: ``[batch, seq]`` prompt + response tokens (right padded).
        response_mask: ``[batch, seq]`` 1 on response tokens, 0 on prompt and padding.
        reference: optional frozen reference model evaluated without gradients.

    Returns:
        :class:`ResponseLogps` with sums over response tokens (and reference sums).
    """
    if input_ids.shape != response_mask.shape:
        raise ValueError(
            f"response_mask {tuple(response_mask.shape)} must match input_ids {tuple(input_ids.shape)}"
        )

    def summed(m: torch.nn.Module) -> torch.Tensor:
        attention = torch.ones_like(input_ids)
        logits = m(input_ids=input_ids, attention_mask=attention).logits[:, :-1].float()
        token_logps = -F.cross_entropy(logits.transpose(1, 2), input_ids[:, 1:], reduction="none")
        return (token_logps * response_mask[:, 1:]).sum(dim=1)

    ref = None
    if reference is not None:
        with torch.no_grad():
            ref = summed(reference)
    return ResponseLogps(summed(model), response_mask[:, 1:].sum(dim=1), ref)
