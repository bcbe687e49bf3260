"""MemAgent: chunked reading with a bounded, rewritten memory (arXiv 2507.02259)."""

from __future__ import annotations

from lc_agents.memagent.agent import MemAgent, MemAgentResult, split_tokens
from lc_agents.memagent.checkpoint import Checkpoint, MemoryStep
from lc_agents.memagent.config import (
    ABSTAIN_ANSWER,
    MEMAGENT_PRESETS,
    MemAgentConfig,
    MemAgentPrompts,
    default_preset,
)
from lc_agents.memagent.scoring import QuestionScorer

__all__ = [
    "ABSTAIN_ANSWER",
    "MEMAGENT_PRESETS",
    "Checkpoint",
    "MemAgent",
    "MemAgentConfig",
    "MemAgentPrompts",
    "MemAgentResult",
    "MemoryStep",
    "QuestionScorer",
    "default_preset",
    "split_tokens",
]
