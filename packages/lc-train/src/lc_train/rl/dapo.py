"""DAPO's four pieces as small composable functions, plus group advantages.

DAPO (Decoupled clip and Dynamic sAmpling Policy Optimization) modifies GRPO with:

- **clip-higher**: the PPO ratio is clipped to ``[1 - eps_low, 1 + eps_high]`` with
  ``eps_high > eps_low`` (0.2 / 0.28), so unlikely tokens can still gain probability;
- **dynamic sampling**: groups whose rewards are all equal carry no gradient signal
  (their normalized advantages are zero) and are dropped, and sampling continues until
  the batch is full;
- **token-level loss**: the loss is averaged over all tokens of the batch, not first
  per sample then over samples, so long responses weigh in proportion to their length;
- **overlong reward shaping**: a length penalty that ramps linearly from 0 to -1 over
  the last ``cache`` tokens before the maximum length.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DAPOConfig:
    """DAPO hyper-parameters (defaults from the paper).

    Attributes:
        eps_low: lower clip range of the importance ratio.
        eps_high: upper clip range (clip-higher: larger than ``eps_low``).
        max_length: maximum response length in tokens.
        overlong_cache: length of the soft-penalty ramp before ``max_length``.
        std_eps: added to the group standard deviation when normalizing advantages.
    """

    eps_low: float = 0.2
    eps_high: float = 0.28
    max_length: int = 20480
    overlong_cache: int = 4096
    std_eps: float = 1e-6

    def __post_init__(self) -> None:
        if not 0 < self.eps_low < 1:
            raise ValueError(f"DAPOConfig.eps_low must be in (0, 1), got {self.eps_low}")
        if self.eps_high <= 0:
            raise ValueError(f"DAPOConfig.eps_high must be > 0, got {self.eps_high}")
        if not 0 <= self.overlong_cache < self.max_length:
            raise ValueError(
                f"DAPOConfig.overlong_cache must be in [0, max_length={self.max_length}), "
                f"got {self.overlong_cache}"
            )


def group_advantages(rewards: torch.Tensor, std_eps: float = 1e-6) -> torch.Tensor:
    """Group-normalized advantages ``(r - mean) / (std + eps)`` per group.

    Args:
        rewards: ``[groups, group_size]`` scalar rewards of the samples of each prompt.

    Returns:
        ``[groups, group_size]`` advantages (zero for a group whose rewards are all equal).
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be [groups, group_size], got {tuple(rewards.shape)}")
    if rewards.shape[1] < 2:
        raise ValueError("group_size must be >= 2: a group of one sample has no baseline")
    _check_finite(rewards)
    mean = rewards.mean(dim=1, keepdim=True)
    std = rewards.std(dim=1, keepdim=True, unbiased=False)
    return (rewards - mean) / (std + std_eps)


def informative_groups(rewards: torch.Tensor) -> torch.Tensor:
    """Dynamic sampling's filter: ``[groups]`` bool, True where rewards are not all equal."""
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be [groups, group_size], got {tuple(rewards.shape)}")
    _check_finite(rewards)
    return (rewards != rewards[:, :1]).any(dim=1)


def _check_finite(rewards: torch.Tensor) -> None:
    bad = ~torch.isfinite(rewards)
    if bool(bad.any()):
        groups = sorted({int(g) for g in bad.nonzero()[:, 0]})
        raise ValueError(
            f"rewards must be finite; groups {groups[:10]} hold NaN or infinite rewards "
            "(a scorer failed?)"
        )


def overlong_penalty(lengths: torch.Tensor, max_length: int, cache: int) -> torch.Tensor:
    """Soft overlong punishment added to the reward.

    ``0`` up to ``max_length - cache`` tokens, then a linear ramp to ``-1`` at
    ``max_length``, and ``-1`` beyond it.
    """
    lengths = lengths.to(torch.float32)
    if cache == 0:
        return torch.where(lengths > max_length, -1.0, 0.0)
    start = max_length - cache
    ramp = (start - lengths) / cache
    return torch.where(lengths <= start, 0.0, torch.where(lengths <= max_length, ramp, -1.0))


def clipped_token_objective(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
) -> torch.Tensor:
    """Per-token clipped surrogate loss ``-min(rho * A, clip(rho, 1-eps_low, 1+eps_high) * A)``.

    Args:
        logprobs: ``[batch, tokens]`` log-probabilities under the current policy.
        old_logprobs: ``[batch, tokens]`` under the policy that sampled the tokens.
        advantages: ``[batch, tokens]`` (or ``[batch, 1]``, broadcast over tokens).

    Returns:
        ``[batch, tokens]`` per-token losses (to be reduced with :func:`token_level_mean`).
    """
    ratio = torch.exp(logprobs - old_logprobs.detach())
    clipped = ratio.clamp(1 - eps_low, 1 + eps_high)
    return -torch.minimum(ratio * advantages, clipped * advantages)


def token_level_mean(per_token: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over every unmasked token of the batch (DAPO), not a mean of sample means."""
    if per_token.shape != mask.shape:
        raise ValueError(f"mask {tuple(mask.shape)} must match losses {tuple(per_token.shape)}")
    count = mask.sum()
    if count == 0:
        raise ValueError("mask selects no tokens")
    return (per_token * mask).sum() / count


def sample_level_mean(per_token: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """GRPO's reduction: mean over each sample's tokens, then over samples (for comparison)."""
    per_sample = (per_token * mask).sum(dim=1) / mask.sum(dim=1).clamp_min(1)
    return per_sample.mean()


def broadcast_to_turns(advantages: torch.Tensor, turns_per_sample: Sequence[int]) -> torch.Tensor:
    """Multi-conversation RL: give every turn of a sample that sample's advantage.

    A memory-agent sample is several independent training sequences (each memory update
    and the final answer); only the final answer is rewarded, and its group-normalized
    advantage is used for the tokens of all of the sample's turns.

    Args:
        advantages: ``[samples]`` one advantage per sample (flattened groups).
        turns_per_sample: number of turns (sequences) of each sample.

    Returns:
        ``[sum(turns_per_sample)]`` advantages, turns in sample order.
    """
    if advantages.dim() != 1 or advantages.shape[0] != len(turns_per_sample):
        raise ValueError(
            f"need one advantage per sample: {tuple(advantages.shape)} vs {len(turns_per_sample)} samples"
        )
    if any(n < 1 for n in turns_per_sample):
        raise ValueError("every sample needs at least one turn (its final answer)")
    counts = torch.as_tensor(list(turns_per_sample), device=advantages.device)
    return advantages.repeat_interleave(counts)
