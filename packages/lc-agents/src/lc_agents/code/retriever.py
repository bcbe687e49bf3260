"""Retrieval-augmented code generation (RACG): the repository context for a query.

The pipeline of SwingArena's RACG module, in four stages:

1. **File-level BM25**: every readable Python/C++/Rust/Go file (its path and text) is a
   BM25 document; the ``n_files`` best files for the query are kept.
2. **Syntax-aware chunking**: those files are cut with tree-sitter into functions,
   methods, classes and top-level blocks (:func:`~lc_agents.code.chunk_source`).
3. **Dense rerank**: the chunks are embedded (default all-MiniLM-L6-v2) into a
   :class:`~lc_agents.retrieval.VectorStore` and ranked by cosine similarity to the
   query. Embeddings persist in ``index_dir`` and unchanged chunks are not re-embedded.
4. **Token budget**: chunks are taken best first while their rendered text
   (:meth:`CodeChunk.render`) fits in ``budget_tokens``; a chunk that does not fit is
   passed over and smaller ones further down may still be taken.

Tokens are counted with the tokenizer you pass (a callable returning a count, or any
object with ``encode`` such as a Hugging Face tokenizer); without one, a token is taken
to be 4 characters (``ceil(len / 4)``).

Examples:
    >>> import pathlib, tempfile
    >>> from lc_agents.code import CodeRetriever
    >>> from lc_agents.retrieval import HashingEmbedder
    >>> repo = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (repo / "io.py").write_text(
    ...     "def load_toml(path):\\n    return toml.load(open(path))\\n\\n"
    ...     "def save_json(obj, path):\\n    json.dump(obj, open(path, 'w'))\\n")
    >>> r = CodeRetriever(repo, embedder=HashingEmbedder(dim=256))
    >>> [c.name for c in r.retrieve("load a toml file", budget_tokens=30)]
    ['load_toml']
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lc_agents.code.bm25 import BM25Index
from lc_agents.code.chunking import CodeChunk, chunk_source
from lc_agents.code.corpus import DEFAULT_EXCLUDE_DIRS, ScanReport, SourceFile, scan_repository
from lc_agents.retrieval.errors import EmptyIndexError

if TYPE_CHECKING:
    from lc_agents.retrieval.embedders import Embedder
    from lc_agents.retrieval.store import VectorStore

__all__ = [
    "CodeRetriever",
    "RACGConfig",
    "RetrievalReport",
    "count_tokens",
    "racg_retriever",
    "rank_chunks_bm25",
]

RERANKERS = ("dense", "bm25", "none")
TokenCounter = Callable[[str], int] | Any


@dataclass(frozen=True)
class RACGConfig:
    """Settings of :class:`CodeRetriever` (defaults are ours; the paper gives no numbers).

    Attributes:
        n_files: files kept by the file-level BM25 stage.
        rerank: ``"dense"`` (embeddings, the paper's method), ``"bm25"`` (BM25 over the
            candidate chunks) or ``"none"`` (file rank, then position in the file).
        max_chunk_lines: longer definitions are split into windows of this many lines.
        max_file_bytes: larger files are skipped.
        embed_max_chars: characters of ``path name\\ncode`` given to the embedder per
            chunk (MiniLM reads at most 256 word pieces, about 1000 characters of code).
        max_chunks: at most this many chunks per answer (``None``: only the budget).
        exclude_dirs: directory names not scanned (hidden directories always skipped).
    """

    n_files: int = 10
    rerank: str = "dense"
    max_chunk_lines: int = 120
    max_file_bytes: int = 1_000_000
    embed_max_chars: int = 1500
    max_chunks: int | None = None
    exclude_dirs: frozenset[str] = DEFAULT_EXCLUDE_DIRS

    def __post_init__(self) -> None:
        for name in ("n_files", "max_chunk_lines", "max_file_bytes", "embed_max_chars"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if self.rerank not in RERANKERS:
            raise ValueError(f"rerank must be one of {RERANKERS}, got {self.rerank!r}")
        if self.max_chunks is not None and self.max_chunks < 1:
            raise ValueError(f"max_chunks must be >= 1 or None, got {self.max_chunks}")
        object.__setattr__(self, "exclude_dirs", frozenset(self.exclude_dirs))


@dataclass
class RetrievalReport:
    """What one retrieval did.

    Attributes:
        query: the query.
        scan: the repository scan (files indexed and skipped, with reasons).
        files: paths chosen by the BM25 stage, best first.
        candidates: chunks cut from those files.
        embedded: chunks whose embeddings were computed now (not found unchanged).
        selected: chunks returned.
        over_budget: ranked chunks passed over because they did not fit.
        tokens_used: tokens of the returned chunks' rendered text.
        budget_tokens: the budget.
        rerank: the reranker used.
    """

    query: str
    scan: ScanReport
    files: list[str] = field(default_factory=list)
    candidates: int = 0
    embedded: int = 0
    selected: int = 0
    over_budget: int = 0
    tokens_used: int = 0
    budget_tokens: int = 0
    rerank: str = "dense"


def count_tokens(text: str, tokenizer: TokenCounter | None = None) -> int:
    """Tokens in ``text``: ``tokenizer.encode`` length, ``tokenizer(text)``, or ``ceil(len/4)``.

    Examples:
        >>> count_tokens("abcdefghi"), count_tokens("a b c", str.split)
        (3, 3)
    """
    if tokenizer is None:
        return math.ceil(len(text) / 4)
    encode = getattr(tokenizer, "encode", None)
    if callable(encode):
        return len(encode(text))
    n = tokenizer(text)
    return n if isinstance(n, int) else len(n)


class CodeRetriever:
    """RACG over one repository: file BM25, tree-sitter chunks, dense rerank, token budget.

    The repository is scanned once when the retriever is made (call :meth:`refresh`
    after files change); files are chunked on first use and chunk embeddings are kept in
    a :class:`~lc_agents.retrieval.VectorStore`.

    Args:
        repo_path: repository directory.
        embedder: embedder of the dense stage (default: all-MiniLM-L6-v2, loaded when
            first needed; unused unless ``config.rerank == "dense"``).
        config: :class:`RACGConfig`.
        tokenizer: token counter for the budget (see :func:`count_tokens`).
        index_dir: directory of the persistent embedding store (default: a temporary
            directory removed with the retriever).

    Raises:
        FileNotFoundError: ``repo_path`` is not a directory.
        EmptyIndexError: no usable source file (the message gives the skip counts).
    """

    def __init__(
        self,
        repo_path: str | os.PathLike[str],
        *,
        embedder: Embedder | None = None,
        config: RACGConfig | None = None,
        tokenizer: TokenCounter | None = None,
        index_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.repo_path = os.fspath(repo_path)
        self.config = config or RACGConfig()
        self.tokenizer = tokenizer
        self._embedder = embedder
        self._index_dir = os.fspath(index_dir) if index_dir is not None else None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._store: VectorStore | None = None
        self._chunks: dict[str, list[CodeChunk]] = {}
        self.last_report: RetrievalReport | None = None
        self.refresh()

    # ------------------------------------------------------------------ corpus

    def refresh(self) -> ScanReport:
        """Re-scan the repository and rebuild the file-level BM25 index."""
        files, report = scan_repository(
            self.repo_path,
            max_file_bytes=self.config.max_file_bytes,
            exclude_dirs=self.config.exclude_dirs,
        )
        if not files:
            raise EmptyIndexError(
                f"no Python, C++, Rust or Go source file to retrieve from in "
                f"{self.repo_path} ({report.summary()})"
            )
        self.files: list[SourceFile] = files
        self.scan_report = report
        self._by_path = {f.path: f for f in files}
        self._bm25 = BM25Index([f"{f.path}\n{f.text}" for f in files])
        self._chunks = {}
        return report

    def chunks(self, path: str) -> list[CodeChunk]:
        """The chunks of one indexed file (cached)."""
        if path not in self._chunks:
            f = self._by_path.get(path)
            if f is None:
                raise KeyError(f"{path!r} is not an indexed file of {self.repo_path}")
            self._chunks[path] = chunk_source(
                f.text, f.language, f.path, max_lines=self.config.max_chunk_lines
            )
        return self._chunks[path]

    def all_chunks(self) -> list[CodeChunk]:
        """Chunks of every indexed file, in path order."""
        return [c for f in self.files for c in self.chunks(f.path)]

    # ------------------------------------------------------------------ ranking

    @property
    def embedder(self) -> Embedder:
        """The dense-stage embedder (loaded on first access)."""
        if self._embedder is None:
            from lc_agents.retrieval.embedders import MiniLMEmbedder

            self._embedder = MiniLMEmbedder()
        return self._embedder

    @property
    def store(self) -> VectorStore:
        """The chunk-embedding store (opened on first access)."""
        if self._store is None:
            from lc_agents.retrieval.store import VectorStore

            path = self._index_dir
            if path is None:
                self._tmp = tempfile.TemporaryDirectory(prefix="lc-racg-")
                path = self._tmp.name
            self._store = VectorStore.open(path, self.embedder, table="code_chunks")
        return self._store

    def embed_text(self, chunk: CodeChunk) -> str:
        """The text embedded for ``chunk``: ``path name`` line, then the code (truncated)."""
        return f"{chunk.path} {chunk.name}\n{chunk.text}"[: self.config.embed_max_chars]

    def _dense(self, query: str, cands: list[CodeChunk], report: RetrievalReport) -> list[float]:
        store = self.store
        ids = [c.id for c in cands]
        added = store.add(
            [self.embed_text(c) for c in cands],
            metadata=[
                {
                    "path": c.path,
                    "name": c.name,
                    "kind": c.kind,
                    "language": c.language,
                    "start_line": c.start_line,
                    "end_line": c.end_line,
                }
                for c in cands
            ],
            ids=ids,
        )
        report.embedded = added.added + added.updated
        where = {"path": sorted({c.path for c in cands})}
        hits = store.search(query, k=store.count(where), where=where)
        wanted = set(ids)
        stale = [h.id for h in hits if h.id not in wanted]
        if stale:  # chunks of an older version of these files
            store.delete(stale)
        score = {h.id: h.score for h in hits}
        return [score.get(i, -1.0) for i in ids]

    def rank(
        self, query: str, report: RetrievalReport | None = None
    ) -> list[tuple[CodeChunk, float]]:
        """All candidate chunks for ``query`` with their scores, best first (no budget).

        Returns an empty list when no file shares a word with the query.

        Raises:
            ValueError: an empty query.
        """
        if not isinstance(query, str) or not query.strip():
            raise ValueError("query must be a non-empty string")
        report = report or RetrievalReport(query=query, scan=self.scan_report)
        report.rerank = self.config.rerank
        file_hits = self._bm25.top(query, self.config.n_files)
        report.files = [self.files[i].path for i, _ in file_hits]
        cands = [c for p in report.files for c in self.chunks(p)]
        report.candidates = len(cands)
        if not cands:
            return []
        if self.config.rerank == "dense":
            scores = self._dense(query, cands, report)
        elif self.config.rerank == "bm25":
            scores = _bm25_scores(query, cands)
        else:
            file_score = dict(zip(report.files, (s for _, s in file_hits), strict=True))
            scores = [file_score[c.path] for c in cands]
        order = sorted(range(len(cands)), key=lambda i: (-scores[i], i))
        return [(cands[i], scores[i]) for i in order]

    # ------------------------------------------------------------------ budget

    def retrieve_with_report(
        self, query: str, budget_tokens: int = 4000
    ) -> tuple[list[CodeChunk], RetrievalReport]:
        """Best chunks for ``query`` within ``budget_tokens``, and the :class:`RetrievalReport`.

        Raises:
            ValueError: an empty query or ``budget_tokens < 1``.
        """
        if budget_tokens < 1:
            raise ValueError(f"budget_tokens must be >= 1, got {budget_tokens}")
        report = RetrievalReport(query=query, scan=self.scan_report, budget_tokens=budget_tokens)
        out: list[CodeChunk] = []
        for chunk, _ in self.rank(query, report):
            if self.config.max_chunks is not None and len(out) >= self.config.max_chunks:
                break
            t = count_tokens(chunk.render(), self.tokenizer)
            if report.tokens_used + t <= budget_tokens:
                out.append(chunk)
                report.tokens_used += t
            else:
                report.over_budget += 1
        report.selected = len(out)
        self.last_report = report
        return out, report

    def retrieve(self, query: str, budget_tokens: int = 4000) -> list[CodeChunk]:
        """Best chunks for ``query`` whose rendered text fits in ``budget_tokens``.

        The report of the call is kept in :attr:`last_report`.
        """
        return self.retrieve_with_report(query, budget_tokens)[0]

    def as_retriever(self, budget_tokens: int = 4000) -> Callable[[str], list[str]]:
        """A ``query -> [rendered chunk, ...]`` callable (the arena's ``Retriever`` type)."""

        def retrieve(query: str) -> list[str]:
            return [c.render() for c in self.retrieve(query, budget_tokens)]

        return retrieve

    def close(self) -> None:
        """Release the store and remove its temporary directory (if one was made)."""
        self._store = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def racg_retriever(
    repo_path: str | os.PathLike[str], budget_tokens: int = 4000, **kwargs: Any
) -> Callable[[str], list[str]]:
    """``query -> [rendered chunk, ...]`` over ``repo_path`` (see :class:`CodeRetriever`).

    Keyword arguments go to :class:`CodeRetriever`. Pass the result wherever a
    ``Callable[[str], Sequence[str]]`` retriever is taken (e.g. the lc-evals arena).
    """
    return CodeRetriever(repo_path, **kwargs).as_retriever(budget_tokens)


def _bm25_scores(query: str, chunks: Sequence[CodeChunk]) -> list[float]:
    idx = BM25Index([f"{c.path} {c.name}\n{c.text}" for c in chunks])
    return [float(x) for x in idx.scores(query)]


def rank_chunks_bm25(query: str, chunks: Sequence[CodeChunk]) -> list[tuple[CodeChunk, float]]:
    """Chunks ranked by BM25 over ``path name\\ncode`` (ties keep their order).

    The lexical baseline: no file stage and no dense model.
    """
    s = _bm25_scores(query, chunks)
    order = sorted(range(len(chunks)), key=lambda i: (-s[i], i))
    return [(chunks[i], s[i]) for i in order]
