"""Chunked LM-head cross-entropy: the loss of a chunk without its full logits.

For a vocabulary of ``V`` tokens the fp32 logits of ``n`` positions take ``4 n V`` bytes
(2.5 GB for 4096 positions of Qwen2.5's 152K vocabulary), and cross-entropy keeps about
as much again for its backward: at long context this is the largest single buffer of a
chunk-recurrent step. :func:`lm_head_loss_backward` cuts the positions into pieces of
``loss_chunk`` tokens, runs the LM head, the loss and its backward on one piece at a
time, and hands back the gradient with respect to the hidden states; the peak logits
buffer is then that of one piece. Pieces hold disjoint targets, so the loss and every
gradient are those of the whole chunk up to floating-point summation order.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def lm_head_loss_backward(
    head: torch.nn.Module,
    hidden: torch.Tensor,
    targets: torch.Tensor,
    normalizer: float,
    loss_chunk: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Back-propagate ``sum(cross_entropy(head(hidden), targets)) / normalizer`` piecewise.

    The head's parameters get their gradient (accumulated into ``param.grad``, so a head
    tied to the input embedding adds to the same tensor); the gradient with respect to
    ``hidden`` is returned for the caller to continue the backward into the model
    (``hidden.backward(grad_hidden)``). Logits are computed in the head's dtype and the
    loss in float32, as transformers' causal-LM loss does.

    Args:
        head: the output embedding (``model.get_output_embeddings()``), any module
            mapping ``[..., hidden]`` to ``[..., vocab]``.
        hidden: ``[batch, seq, hidden]`` final hidden states of the chunk (may require
            grad; it is not back-propagated through here).
        targets: ``[batch, seq]`` next-token ids, ``-100`` where ignored.
        normalizer: divisor of the summed loss (the number of target tokens of the whole
            sequence, for the mean over a sequence longer than this chunk).
        loss_chunk: positions (over ``batch * seq``) whose logits exist at once;
            ``None`` computes them all together. Pieces without a target are skipped.

    Returns:
        ``(loss, grad_hidden)``: the normalised loss of the chunk (detached float32 scalar)
        and ``d loss / d hidden`` (``hidden``'s shape and dtype).

    Example:
        >>> loss, grad = lm_head_loss_backward(model.lm_head, h, t, n, loss_chunk=512)
        >>> h.backward(grad)
    """
    if hidden.dim() != 3 or targets.shape != hidden.shape[:2]:
        raise ValueError(
            f"hidden must be [batch, seq, hidden] and targets [batch, seq], got "
            f"{tuple(hidden.shape)} and {tuple(targets.shape)}"
        )
    if loss_chunk is not None and (isinstance(loss_chunk, bool) or loss_chunk < 1):
        raise ValueError(f"loss_chunk must be None or a positive int, got {loss_chunk!r}")
    flat = hidden.detach().reshape(-1, hidden.shape[-1])
    flat_targets = targets.reshape(-1)
    rows = flat.shape[0]
    step = rows if loss_chunk is None else loss_chunk
    grad = torch.zeros_like(flat)
    total = torch.zeros((), dtype=torch.float32, device=hidden.device)
    for start in range(0, rows, step):
        piece_targets = flat_targets[start : start + step]
        if not bool((piece_targets != -100).any()):
            continue  # no target: zero loss and zero gradient
        piece = flat[start : start + step].detach().requires_grad_()
        logits = head(piece).float()
        loss = (
            F.cross_entropy(logits, piece_targets, ignore_index=-100, reduction="sum") / normalizer
        )
        del logits  # only the cross-entropy's saved buffer stays until the backward
        loss.backward()
        assert piece.grad is not None
        grad[start : start + step] = piece.grad
        total += loss.detach()
        del loss, piece
    return total, grad.view_as(hidden)
