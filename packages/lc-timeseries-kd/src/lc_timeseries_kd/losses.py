"""Distillation losses of the baselines: logit KD (Hinton) and FitNet hints."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["FitNetHint", "logit_kd_loss"]


def logit_kd_loss(
    student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float = 2.0
) -> torch.Tensor:
    """Hinton KD: ``T^2 * KL(softmax(t / T) || softmax(s / T))``, mean over the batch.

    Args:
        student_logits: ``[batch, classes]``.
        teacher_logits: ``[batch, classes]`` (treated as constants).
        temperature: softmax temperature ``T``.

    Example:
        >>> z = torch.randn(4, 3)
        >>> float(logit_kd_loss(z, z)) == 0.0
        True
    """
    if student_logits.shape != teacher_logits.shape:
        raise ValueError(
            f"logit shapes differ: student {tuple(student_logits.shape)}, "
            f"teacher {tuple(teacher_logits.shape)}"
        )
    t = temperature
    log_p_s = F.log_softmax(student_logits / t, dim=-1)
    log_p_t = F.log_softmax(teacher_logits.detach() / t, dim=-1)
    kl = (log_p_t.exp() * (log_p_t - log_p_s)).sum(-1).mean()
    return kl * t * t


class FitNetHint(nn.Module):
    """FitNet hint loss: ``||W s - t||^2`` with a learned linear regressor ``W``.

    As in the paper's code, ``W`` has no bias and starts near zero (uniform in
    ``[-0.005, 0.005]``).

    Args:
        student_dim: student feature size.
        teacher_dim: teacher feature size.

    Example:
        >>> hint = FitNetHint(4, 6)
        >>> hint(torch.randn(3, 4), torch.randn(3, 6)).ndim
        0
    """

    def __init__(self, student_dim: int, teacher_dim: int):
        super().__init__()
        self.regressor = nn.Linear(student_dim, teacher_dim, bias=False)
        nn.init.uniform_(self.regressor.weight, -0.005, 0.005)

    def forward(self, student_feat: torch.Tensor, teacher_feat: torch.Tensor) -> torch.Tensor:
        """Mean squared error between regressed student and teacher features."""
        return F.mse_loss(self.regressor(student_feat), teacher_feat.detach())
