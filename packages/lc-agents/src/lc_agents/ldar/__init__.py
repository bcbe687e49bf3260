"""LDAR: learning which retrieved passages to pass to the model, to avoid distraction.

A small torch head reads the similarity profile of the retrieved passages (sorted
similarities, gaps, ranks) and picks a band of the ranking: top-k, or a range that skips
near-miss passages out-scoring the gold one. It is trained offline against the
downstream model's correctness on every band (cached), with a token penalty.

Main objects: :class:`LdarRetriever` with :class:`LdarConfig`, :class:`Band` and
:func:`default_bands`, :func:`label_examples` (offline labels), :class:`QaReader`,
:func:`similarity_features`. Importing this module imports torch.
"""

from __future__ import annotations

from lc_agents.ldar.bands import Band, band_index, default_bands
from lc_agents.ldar.data import (
    LdarExample,
    QaQuestion,
    label_examples,
    load_examples,
    save_examples,
    similarities,
)
from lc_agents.ldar.features import (
    FEATURE_NAMES,
    N_FEATURES,
    similarity_features,
    sort_similarities,
)
from lc_agents.ldar.model import LdarHead, build_head
from lc_agents.ldar.qa import QaReader, first_answer_correct, qa_messages
from lc_agents.ldar.retriever import LdarConfig, LdarRetriever

__all__ = [
    "FEATURE_NAMES",
    "N_FEATURES",
    "Band",
    "LdarConfig",
    "LdarExample",
    "LdarHead",
    "LdarRetriever",
    "QaQuestion",
    "QaReader",
    "band_index",
    "build_head",
    "default_bands",
    "first_answer_correct",
    "label_examples",
    "load_examples",
    "qa_messages",
    "save_examples",
    "similarities",
    "similarity_features",
    "sort_similarities",
]
