"""MemAgent: chunked reading with a bounded, rewritten memory (arXiv 2507.02259)."""

from __future__ import annotations

from lc_agents.memagent.agent import MemAgent, MemAgentResult, split_tokens
from lc_agents.memagent.checkpoint import Checkpoint, MemoryStep
from lc_agents.memagent.config import MemAgentConfig, MemAgentPrompts
from lc_agents.memagent.scoring import QuestionScorer

__all__ = [
    "Checkpoint",
    "MemAgent",
    "MemAgentConfig",
    "MemAgentPrompts",
    "MemAgentResult",
    "MemoryStep",
    "QuestionScorer",
    "split_tokens",
]
