"""ContextNav-style context construction for in-context learning.

Agentic retrieval of candidate examples from a vector-store pool, structural alignment
(drop examples whose sentence structure or label space differs from the query's),
noise-robust selection (neighbour label agreement, de-duplication) and an Operational
Grammar Graph that plans the toolchain and refines it from downstream feedback.

Main objects: :class:`ContextItem` (text + optional image path + label),
:class:`ExamplePool` (LanceDB-backed, needs ``lc-agents[retrieval]``),
:class:`ContextNav` with :class:`ContextNavConfig`, :class:`OperationalGrammarGraph`,
:class:`IclAnswerer` (the downstream learner) and :class:`CachedChat` (disk cache of
replies). See the guide page "ContextNav and LDAR".
"""

from __future__ import annotations

from typing import NoReturn

from lc_agents._removed import removed_attribute
from lc_agents.contextnav.alignment import (
    Signature,
    filter_label_space,
    filter_structure,
    infer_label_space,
    signature,
)
from lc_agents.contextnav.cache import CachedChat
from lc_agents.contextnav.graph import END, START, EdgeStats, OperationalGrammarGraph, RefineStep
from lc_agents.contextnav.items import Candidate, ContextItem
from lc_agents.contextnav.navigator import (
    ContextNav,
    ContextNavConfig,
    ContextResult,
    IclAnswerer,
    NavState,
    Tool,
    default_grammar,
    default_tools,
    random_shots,
    similarity_shots,
)
from lc_agents.contextnav.pool import _REMOVED, ExamplePool, ItemEncoder
from lc_agents.contextnav.selection import (
    deduplicate,
    filter_consistent,
    label_consistency,
    select_balanced,
    select_top,
)

__all__ = [
    "END",
    "START",
    "CachedChat",
    "Candidate",
    "ContextItem",
    "ContextNav",
    "ContextNavConfig",
    "ContextResult",
    "EdgeStats",
    "ExamplePool",
    "IclAnswerer",
    "ItemEncoder",
    "NavState",
    "OperationalGrammarGraph",
    "RefineStep",
    "Signature",
    "Tool",
    "deduplicate",
    "default_grammar",
    "default_tools",
    "filter_consistent",
    "filter_label_space",
    "filter_structure",
    "infer_label_space",
    "label_consistency",
    "random_shots",
    "select_balanced",
    "select_top",
    "signature",
    "similarity_shots",
]


def __getattr__(name: str) -> NoReturn:
    # ``ImageEncoder`` used to be exported here (removed; see lc_agents.contextnav.pool)
    raise removed_attribute(__name__, name, _REMOVED)
