"""A SwingArena-style arena: a submitter model patches an issue, a reviewer model writes
tests, and the repository's own test command judges both, in a sandbox.

Models are any :class:`~lc_evals.types.ChatModel`; context comes from any retriever
callable ``query -> list of snippets``.

Examples:
    >>> from lc_evals.arena import ScriptedModel, pairings
    >>> pairings(["a", "b"])
    [('a', 'b'), ('b', 'a')]
"""

from __future__ import annotations

from lc_evals.arena.arena import ArenaStore, pairings, run_arena
from lc_evals.arena.battle import BattleConfig, Verdict, baseline_runs, battle_id, judge, run_battle
from lc_evals.arena.issue import Issue, load_issue
from lc_evals.arena.leaderboard import Standing, expected_score, format_leaderboard, leaderboard
from lc_evals.arena.patch import (
    PatchError,
    apply_patch,
    check_review,
    check_submission,
    extract_diff,
    make_diff,
    parse_patch,
    protected_reason,
)
from lc_evals.arena.prompts import Retriever, whole_file_context
from lc_evals.arena.sandbox import (
    ContainmentEvent,
    IsolationUnavailable,
    RunResult,
    SandboxLimits,
    isolation_status,
    require_isolation,
    run_sandboxed,
)
from lc_evals.arena.scripted import ScriptedModel

__all__ = [
    "ArenaStore",
    "BattleConfig",
    "ContainmentEvent",
    "IsolationUnavailable",
    "Issue",
    "PatchError",
    "Retriever",
    "RunResult",
    "SandboxLimits",
    "ScriptedModel",
    "Standing",
    "Verdict",
    "apply_patch",
    "baseline_runs",
    "battle_id",
    "check_review",
    "check_submission",
    "expected_score",
    "extract_diff",
    "format_leaderboard",
    "isolation_status",
    "judge",
    "leaderboard",
    "load_issue",
    "make_diff",
    "pairings",
    "parse_patch",
    "protected_reason",
    "require_isolation",
    "run_arena",
    "run_battle",
    "run_sandboxed",
    "whole_file_context",
]
