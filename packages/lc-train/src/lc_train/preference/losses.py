"""SoLoPO: short-context preference optimization plus short-to-long reward alignment.

Long-context preference optimization is split into two terms:

- a preference loss on **short** contexts (DPO, SimPO or ORPO), cheap to compute and
  sampled where the policy is reliable;
- **SoLo-RA**, which pulls the reward of a response under the **long** context (the
  short context padded with irrelevant text, same task-relevant information) towards
  its reward under the short context:
  ``alpha * |r(x_short, y) - r(x_long, y)|``, for the chosen response only
  (``chosen_only=True``, the cheap variant) or for chosen and rejected.

The reward ``r`` is the one implied by the base method: DPO
``beta * (log pi(y|x) - log pi_ref(y|x))``; SimPO ``beta / |y| * log pi(y|x)``; ORPO the
log-odds of the length-normalized likelihood. The alignment distance is the absolute
difference (``"abs"``) or its square (``"squared"``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F

Method = Literal["dpo", "simpo", "orpo"]


@dataclass(frozen=True)
class ResponseLogps:
    """Summed log-probabilities of responses and their lengths.

    Attributes:
        logps: ``[batch]`` sum over response tokens of ``log pi(y_t | x, y_<t)``.
        lengths: ``[batch]`` number of response tokens (> 0).
        ref_logps: ``[batch]`` the same under the frozen reference model (DPO only).
    """

    logps: torch.Tensor
    lengths: torch.Tensor
    ref_logps: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if self.logps.dim() != 1 or self.lengths.shape != self.logps.shape:
            raise ValueError(
                f"logps and lengths must be [batch], got {tuple(self.logps.shape)} and "
                f"{tuple(self.lengths.shape)}"
            )
        if bool((self.lengths <= 0).any()):
            raise ValueError("every response needs at least one token (found an empty response)")
        if self.ref_logps is not None and self.ref_logps.shape != self.logps.shape:
            raise ValueError(
                f"reference log-probs {tuple(self.ref_logps.shape)} do not match the policy's "
                f"{tuple(self.logps.shape)}"
            )


@dataclass(frozen=True)
class SoLoPOConfig:
    """Hyper-parameters of the base preference method and of SoLo-RA.

    Attributes:
        method: ``"dpo"``, ``"simpo"`` or ``"orpo"``.
        beta: reward scale (DPO, SimPO).
        simpo_gamma: SimPO target reward margin.
        orpo_lambda: weight of ORPO's odds-ratio term next to the chosen NLL.
        alignment_weight: ``alpha``, weight of SoLo-RA; 0 gives the base method exactly.
        chosen_only: align the chosen response only (else chosen and rejected).
        distance: ``"abs"`` or ``"squared"`` reward difference.
    """

    method: Method = "dpo"
    beta: float = 0.1
    simpo_gamma: float = 0.5
    orpo_lambda: float = 0.1
    alignment_weight: float = 1.0
    chosen_only: bool = True
    distance: Literal["abs", "squared"] = "abs"

    def __post_init__(self) -> None:
        if self.method not in ("dpo", "simpo", "orpo"):
            raise ValueError(
                f"SoLoPOConfig.method must be 'dpo', 'simpo' or 'orpo', got {self.method!r}"
            )
        for name in ("beta", "simpo_gamma", "orpo_lambda", "alignment_weight"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"SoLoPOConfig.{name} must be a finite number, got {value!r}")
        if self.beta <= 0:
            raise ValueError(f"SoLoPOConfig.beta must be > 0, got {self.beta}")
        if self.alignment_weight < 0:
            raise ValueError(
                f"SoLoPOConfig.alignment_weight must be >= 0, got {self.alignment_weight}"
            )
        if self.distance not in ("abs", "squared"):
            raise ValueError(
                f"SoLoPOConfig.distance must be 'abs' or 'squared', got {self.distance!r}"
            )


def reward(config: SoLoPOConfig, r: ResponseLogps) -> torch.Tensor:
    """``[batch]`` implicit reward of the responses under ``config.method``."""
    if config.method == "dpo":
        if r.ref_logps is None:
            raise ValueError("DPO rewards need ref_logps from the reference model")
        return config.beta * (r.logps - r.ref_logps.detach())
    mean_logp = r.logps / r.lengths
    if config.method == "simpo":
        return config.beta * mean_logp
    # ORPO: log odds of the length-normalized likelihood p = exp(m), m = mean log p <= 0
    return mean_logp - log1mexp(mean_logp)


def log1mexp(x: torch.Tensor) -> torch.Tensor:
    """``log(1 - exp(x))`` for ``x <= 0``, accurate near 0 and for very negative ``x``
    (Maechler's switch at ``-log 2``); ``x`` is capped just below 0 so that ``x = 0``
    (a probability of 1 in floating point) gives a large finite value, not ``-inf``."""
    x = x.clamp(max=-torch.finfo(x.dtype).tiny)
    near = torch.log(-torch.expm1(x.clamp(min=-math.log(2))))
    far = torch.log1p(-torch.exp(x.clamp(max=-math.log(2))))
    return torch.where(x > -math.log(2), near, far)


def preference_loss(
    config: SoLoPOConfig, chosen: ResponseLogps, rejected: ResponseLogps
) -> torch.Tensor:
    """``[batch]`` loss of the base method on one context."""
    margin = reward(config, chosen) - reward(config, rejected)
    if config.method == "dpo":
        return -F.logsigmoid(margin)
    if config.method == "simpo":
        return -F.logsigmoid(margin - config.simpo_gamma)
    nll = -chosen.logps / chosen.lengths
    return nll - config.orpo_lambda * F.logsigmoid(margin)


def _distance(config: SoLoPOConfig, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    diff = a - b
    return diff.abs() if config.distance == "abs" else diff.square()


def solopo_loss(
    config: SoLoPOConfig,
    short_chosen: ResponseLogps,
    short_rejected: ResponseLogps,
    long_chosen: ResponseLogps,
    long_rejected: ResponseLogps | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Mean SoLoPO loss over the batch and a few metrics.

    Args:
        config: base method and SoLo-RA settings.
        short_chosen: the chosen response under the short context.
        short_rejected: the rejected response under the short context.
        long_chosen: the chosen response under the long context.
        long_rejected: the rejected response under the long context (needed unless
            ``config.chosen_only``).

    Returns:
        ``(loss, metrics)`` with metrics ``preference``, ``alignment``,
        ``reward_margin`` (short context) and ``short_long_gap`` (chosen).
    """
    for name, r in (("short_rejected", short_rejected), ("long_chosen", long_chosen)):
        if r.logps.shape != short_chosen.logps.shape:
            raise ValueError(
                f"{name} has batch {tuple(r.logps.shape)}, short_chosen {tuple(short_chosen.logps.shape)}"
            )
    if not config.chosen_only and long_rejected is None:
        raise ValueError("chosen_only=False needs long_rejected")
    if long_rejected is not None and long_rejected.logps.shape != short_chosen.logps.shape:
        raise ValueError(
            f"long_rejected has batch {tuple(long_rejected.logps.shape)}, short_chosen "
            f"{tuple(short_chosen.logps.shape)}"
        )
    pref = preference_loss(config, short_chosen, short_rejected)
    r_sc, r_lc = reward(config, short_chosen), reward(config, long_chosen)
    align = _distance(config, r_sc, r_lc)
    if not config.chosen_only and long_rejected is not None:
        align = align + _distance(
            config, reward(config, short_rejected), reward(config, long_rejected)
        )
    loss = (pref + config.alignment_weight * align).mean()
    with torch.no_grad():
        metrics = {
            "preference": float(pref.mean()),
            "alignment": float(align.mean()),
            "reward_margin": float((r_sc - reward(config, short_rejected)).mean()),
            "short_long_gap": float((r_sc - r_lc).mean()),
        }
    return loss, metrics
