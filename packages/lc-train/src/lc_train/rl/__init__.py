"""Reinforcement-learning objectives for long-context agents (DAPO, multi-conversation)."""

from __future__ import annotations

from lc_train.rl.dapo import (
    DAPOConfig,
    broadcast_to_turns,
    clipped_token_objective,
    group_advantages,
    informative_groups,
    overlong_penalty,
    sample_level_mean,
    token_level_mean,
)

__all__ = [
    "DAPOConfig",
    "broadcast_to_turns",
    "clipped_token_objective",
    "group_advantages",
    "informative_groups",
    "overlong_penalty",
    "sample_level_mean",
    "token_level_mean",
]
