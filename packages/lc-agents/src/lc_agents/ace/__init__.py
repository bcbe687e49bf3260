"""ACE (Agentic Context Engineering): a context playbook that evolves by delta updates.

The pieces:

* :class:`PlaybookStore`: itemized bullets with helpful/harmful counters in SQLite,
  changed only by atomic batches of :class:`Delta` operations (ADD / UPDATE / MERGE /
  DELETE); budgeted rendering into a prompt; Markdown/JSON export.
* :class:`Generator`, :class:`Reflector`, :class:`Curator`: the three roles around any
  chat model (``chat(messages, **options) -> str``).
* :func:`deduplicate` with :class:`MiniLMEmbedder`: grow-and-refine merging of
  near-duplicate bullets that name the same numbers and identifiers
  (:func:`salient_tokens`; the default embedder needs ``lc-agents[embeddings]``). It takes any
  :class:`~lc_agents.retrieval.Embedder`; ``Embedder`` here is an alias of that protocol.
* :class:`Ace`: offline (labelled, multi-epoch) and online (feedback-only) adaptation,
  resumable from the store; :class:`RewriteMemory`: the rewrite-everything baseline.

Examples:
    >>> from lc_agents.ace import Delta, PlaybookStore
    >>> store = PlaybookStore()
    >>> ids = store.apply([Delta.add("units", "Report money in cents.")]).results
    >>> store.render()
    '## units\\n- [units-00001] (+0/-0) Report money in cents.'
"""

from __future__ import annotations

from lc_agents.ace.adapt import (
    Ace,
    AceConfig,
    AceItem,
    AdaptReport,
    Feedback,
    StepRecord,
    exact_match,
)
from lc_agents.ace.baseline import RewriteMemory
from lc_agents.ace.dedup import (
    Embedder,
    MiniLMEmbedder,
    deduplicate,
    find_duplicates,
    minilm_model_dir,
    salient_tokens,
)
from lc_agents.ace.deltas import OPS, TAGS, Delta, normalize_tag
from lc_agents.ace.errors import CuratorOutputError, DeltaError, UnknownBulletError
from lc_agents.ace.parsing import cited_ids, extract_answer, extract_json
from lc_agents.ace.prompts import DEFAULT_PROMPTS, AcePrompts
from lc_agents.ace.roles import Curation, Curator, Generation, Generator, Reflection, Reflector
from lc_agents.ace.store import ApplyReport, Bullet, PlaybookStore, bullet_id_pattern

__all__ = [
    "DEFAULT_PROMPTS",
    "OPS",
    "TAGS",
    "Ace",
    "AceConfig",
    "AceItem",
    "AcePrompts",
    "AdaptReport",
    "ApplyReport",
    "Bullet",
    "Curation",
    "Curator",
    "CuratorOutputError",
    "Delta",
    "DeltaError",
    "Embedder",
    "Feedback",
    "Generation",
    "Generator",
    "MiniLMEmbedder",
    "PlaybookStore",
    "Reflection",
    "Reflector",
    "RewriteMemory",
    "StepRecord",
    "UnknownBulletError",
    "bullet_id_pattern",
    "cited_ids",
    "deduplicate",
    "exact_match",
    "extract_answer",
    "extract_json",
    "find_duplicates",
    "minilm_model_dir",
    "normalize_tag",
    "salient_tokens",
]
