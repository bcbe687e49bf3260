"""LLM backends and long-document agents.

The main entry points:

* :class:`LocalBackend` (a transformers model, by default the embedded
  SmolLM2-135M-Instruct) and :class:`OpenAICompatibleBackend` (any OpenAI-compatible
  server), both :class:`ChatBackend`\\ s and ``lc_evals.ChatModel``\\ s;
* :class:`MemAgent` with :class:`MemAgentConfig`: answer a question over a document of
  any length with a bounded memory rewritten after every chunk;
* :class:`ChunkAndAggregate` and :func:`recommend_chunking`: multi-agent chunking and
  its noise-model planner (:mod:`lc_agents.chunking`); ACE in :mod:`lc_agents.ace`;
* retrieval: :class:`VectorStore` on LanceDB with pluggable embedders
  (:mod:`lc_agents.retrieval`), RACG code retrieval (:class:`CodeRetriever`),
  ContextNav example selection (:class:`ContextNav`) and the LDAR passage selector
  (:class:`LdarRetriever`);
* :func:`load_model`: the offline model loader (SmolLM2-135M-Instruct, Gemma-3-270M);
* the ``lc-agents`` command line (``lc-agents ask --demo``).

Heavy modules (torch, transformers, httpx, FastAPI) load on first use.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from lc_agents.errors import (
    AgentError,
    BackendError,
    BackendHTTPError,
    BackendUnreachableError,
    CheckpointError,
    EmptyReplyError,
    InputError,
    ModelLoadError,
)

if TYPE_CHECKING:
    from lc_agents.backends.base import ChatBackend
    from lc_agents.backends.local import LocalBackend
    from lc_agents.backends.openai_http import OpenAICompatibleBackend
    from lc_agents.chunking import (
        ChunkAndAggregate,
        ChunkingConfig,
        fit_noise_model,
        recommend_chunking,
    )
    from lc_agents.code import CodeRetriever, RACGConfig, racg_retriever
    from lc_agents.constrained import SpanCopyConstraint
    from lc_agents.contextnav import ContextNav
    from lc_agents.ldar import LdarRetriever
    from lc_agents.memagent import (
        MemAgent,
        MemAgentConfig,
        MemAgentPrompts,
        MemAgentResult,
        MemoryStep,
        QuestionScorer,
    )
    from lc_agents.models import load_model, load_tokenizer
    from lc_agents.retrieval import HashingEmbedder, MiniLMEmbedder, VectorStore

try:
    __version__: str = version("lc-agents")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

_LAZY = {
    "ChatBackend": "lc_agents.backends.base",
    "LocalBackend": "lc_agents.backends.local",
    "OpenAICompatibleBackend": "lc_agents.backends.openai_http",
    "SpanCopyConstraint": "lc_agents.constrained",
    "MemAgent": "lc_agents.memagent",
    "MemAgentConfig": "lc_agents.memagent",
    "MemAgentPrompts": "lc_agents.memagent",
    "MemAgentResult": "lc_agents.memagent",
    "MemoryStep": "lc_agents.memagent",
    "QuestionScorer": "lc_agents.memagent",
    "ChunkAndAggregate": "lc_agents.chunking",
    "ChunkingConfig": "lc_agents.chunking",
    "recommend_chunking": "lc_agents.chunking",
    "fit_noise_model": "lc_agents.chunking",
    "load_model": "lc_agents.models",
    "load_tokenizer": "lc_agents.models",
    "VectorStore": "lc_agents.retrieval",
    "HashingEmbedder": "lc_agents.retrieval",
    "MiniLMEmbedder": "lc_agents.retrieval",
    "CodeRetriever": "lc_agents.code",
    "RACGConfig": "lc_agents.code",
    "racg_retriever": "lc_agents.code",
    "ContextNav": "lc_agents.contextnav",
    "LdarRetriever": "lc_agents.ldar",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'lc_agents' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "AgentError",
    "BackendError",
    "BackendHTTPError",
    "BackendUnreachableError",
    "ChatBackend",
    "CheckpointError",
    "ChunkAndAggregate",
    "ChunkingConfig",
    "CodeRetriever",
    "ContextNav",
    "EmptyReplyError",
    "HashingEmbedder",
    "InputError",
    "LdarRetriever",
    "LocalBackend",
    "MemAgent",
    "MemAgentConfig",
    "MemAgentPrompts",
    "MemAgentResult",
    "MemoryStep",
    "MiniLMEmbedder",
    "ModelLoadError",
    "OpenAICompatibleBackend",
    "QuestionScorer",
    "RACGConfig",
    "SpanCopyConstraint",
    "VectorStore",
    "__version__",
    "fit_noise_model",
    "load_model",
    "load_tokenizer",
    "racg_retriever",
    "recommend_chunking",
]
