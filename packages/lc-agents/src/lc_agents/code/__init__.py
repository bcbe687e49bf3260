"""Code retrieval for long-context code generation (SwingArena's RACG pipeline).

* :func:`scan_repository`: readable Python, C++, Rust and Go files of a repository, with
  a :class:`ScanReport` counting what was skipped and why.
* :func:`chunk_source`: tree-sitter chunking into functions, methods, classes and blocks
  (:class:`CodeChunk`: path, line span, qualified name).
* :class:`BM25Index`, :func:`code_tokens`: lexical ranking with a code-aware tokenizer.
* :class:`CodeRetriever`: file-level BM25 -> chunks -> dense rerank -> token budget;
  :meth:`CodeRetriever.as_retriever` and :func:`racg_retriever` give the
  ``query -> list[str]`` callable an arena takes.

Heavy dependencies (tree-sitter, bm25s, LanceDB, sentence-transformers) are imported on
first use. Install with ``pip install 'lc-agents[retrieval]'``.
"""

from __future__ import annotations

from lc_agents.code.bm25 import BM25Index, code_tokens
from lc_agents.code.chunking import LANGUAGES, CodeChunk, chunk_source, language_for_path
from lc_agents.code.corpus import ScanReport, SourceFile, scan_repository
from lc_agents.code.retriever import (
    CodeRetriever,
    RACGConfig,
    RetrievalReport,
    count_tokens,
    racg_retriever,
    rank_chunks_bm25,
)

__all__ = [
    "LANGUAGES",
    "BM25Index",
    "CodeChunk",
    "CodeRetriever",
    "RACGConfig",
    "RetrievalReport",
    "ScanReport",
    "SourceFile",
    "chunk_source",
    "code_tokens",
    "count_tokens",
    "language_for_path",
    "racg_retriever",
    "rank_chunks_bm25",
    "scan_repository",
]
