"""ACE (Agentic Context Engineering): a context playbook that evolves by delta updates.

The pieces:

* :class:`PlaybookStore`: itemized bullets with helpful/harmful counters in SQLite,
  changed only by atomic batches of :class:`Delta` operations (ADD / UPDATE / MERGE /
  DELETE); budgeted rendering into a prompt; Markdown/JSON export.
* :class:`Generator`, :class:`Reflector`, :class:`Curator`: the three roles around any
  chat model (``chat(messages, **options) -> str``).
* :func:`deduplicate`: grow-and-refine merging of near-duplicate bullets that name the
  same numbers and identifiers (:func:`salient_tokens`). It takes any
  :class:`~lc_agents.retrieval.Embedder`, e.g. :class:`~lc_agents.retrieval.MiniLMEmbedder`
  (the default, needs ``lc-agents[embeddings]``). Import ``Embedder``,
  ``MiniLMEmbedder`` and ``minilm_model_dir`` from :mod:`lc_agents.retrieval`; their
  former aliases here were removed in lc-agents 0.11.
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

from typing import NoReturn

from lc_agents._removed import removed_attribute
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
from lc_agents.ace.dedup import _REMOVED, deduplicate, find_duplicates, salient_tokens
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
    "Feedback",
    "Generation",
    "Generator",
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
    "normalize_tag",
    "salient_tokens",
]


def __getattr__(name: str) -> NoReturn:
    # the embedding names ACE used to export (removed; see lc_agents.ace.dedup)
    raise removed_attribute(__name__, name, _REMOVED)
