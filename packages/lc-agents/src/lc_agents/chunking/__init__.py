"""Multi-agent chunking and its noise-model planner (arXiv 2506.16411).

- :class:`ChunkAndAggregate` splits a document (tokens or characters, with overlap), asks
  worker models about every chunk concurrently and merges the replies with a manager
  model, a majority vote or a custom function.
- :func:`fit_noise_model` fits model noise (growing with input length) and aggregator
  noise to pilot accuracies; :func:`recommend_chunking` turns the fit into a chunk size,
  or the advice not to chunk.
"""

from __future__ import annotations

from lc_agents.chunking.aggregate import (
    MajorityVote,
    ManagerAggregator,
    majority_vote,
    normalise_answer,
)
from lc_agents.chunking.pilot import PilotRecord, contains_answer, run_pilot
from lc_agents.chunking.planner import (
    ChunkingRecommendation,
    NoiseFit,
    NoiseModel,
    PilotResult,
    fit_noise_model,
    recommend_chunking,
)
from lc_agents.chunking.runner import (
    ChunkAndAggregate,
    ChunkingConfig,
    ChunkingResult,
    WorkerResult,
    chunk_and_aggregate,
)
from lc_agents.chunking.split import Chunk, chunk_spans, count_units, split_document

__all__ = [
    "Chunk",
    "ChunkAndAggregate",
    "ChunkingConfig",
    "ChunkingRecommendation",
    "ChunkingResult",
    "MajorityVote",
    "ManagerAggregator",
    "NoiseFit",
    "NoiseModel",
    "PilotRecord",
    "PilotResult",
    "WorkerResult",
    "chunk_and_aggregate",
    "chunk_spans",
    "contains_answer",
    "count_units",
    "fit_noise_model",
    "majority_vote",
    "normalise_answer",
    "recommend_chunking",
    "run_pilot",
    "split_document",
]
