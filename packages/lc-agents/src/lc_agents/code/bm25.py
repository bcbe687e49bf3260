"""Lexical ranking with BM25 (``bm25s``) and a tokenizer for source code.

:func:`code_tokens` lower-cases, keeps each identifier whole *and* split at ``snake_case``
and ``camelCase`` boundaries (so the query "parse config" meets ``parseConfig`` and
``parse_config``), drops one-character tokens and a short list of English stop words.
:class:`BM25Index` ranks any list of documents (whole files for the first RACG stage,
chunks for the BM25 baseline) with Okapi BM25 in Lucene's form (bm25s' default;
``k1 = 1.5``, ``b = 0.75``)::

    score(q, d) = sum_{t in q} log(1 + (N - df_t + 0.5) / (df_t + 0.5))
                  * tf_td / (tf_td + k1 * (1 - b + b * |d| / avgdl))

Examples:
    >>> code_tokens("def parseConfig(path): return load_toml(path)")
    ['def', 'parseconfig', 'parse', 'config', 'path', 'return', 'load_toml', 'load', 'toml', 'path']
    >>> idx = BM25Index(["def load_toml(path): ...", "def sum_prices(items): ..."])
    >>> [i for i, _ in idx.top("toml loading", k=2)]
    [0]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from lc_agents.retrieval.errors import EmptyIndexError, RetrievalError

__all__ = ["BM25Index", "code_tokens"]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+")
_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "have",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "were",
        "will",
        "with",
        "which",
        "when",
        "what",
        "how",
        "does",
        "do",
        "not",
        "no",
    ]
)


def code_tokens(text: str) -> list[str]:
    """Lower-case word tokens of ``text``: identifiers whole and split into their parts."""
    out: list[str] = []
    for ident in _IDENT.findall(text):
        low = ident.lower()
        if len(low) > 1 and low not in STOP_WORDS:
            out.append(low)
        parts = [p.lower() for p in _PARTS.findall(ident)]
        if len(parts) > 1:
            out.extend(p for p in parts if len(p) > 1 and p not in STOP_WORDS)
    return out


class BM25Index:
    """Okapi BM25 over a fixed list of documents (strings or pre-tokenized lists).

    Args:
        documents: the corpus; strings are tokenized with :func:`code_tokens`.
        k1: term-frequency saturation.
        b: length normalisation.

    Raises:
        EmptyIndexError: no documents, or no document has a single token.
    """

    def __init__(
        self, documents: Sequence[str | Sequence[str]], *, k1: float = 1.5, b: float = 0.75
    ) -> None:
        if not documents:
            raise EmptyIndexError("BM25 needs at least one document; the corpus is empty")
        try:
            import bm25s
        except ImportError as err:
            raise RetrievalError(
                f"BM25 ranking needs bm25s ({err}); pip install 'lc-agents[retrieval]'"
            ) from None
        tokens = [code_tokens(d) if isinstance(d, str) else list(d) for d in documents]
        if not any(tokens):
            raise EmptyIndexError("BM25 corpus has no word tokens (every document is empty)")
        self._n = len(tokens)
        self._bm25: Any = bm25s.BM25(k1=k1, b=b)
        self._bm25.index(tokens, show_progress=False)
        self._vocab = set(self._bm25.vocab_dict)

    def __len__(self) -> int:
        return self._n

    def scores(self, query: str | Sequence[str]) -> Any:
        """BM25 score of every document, float ``[len(self)]`` (zeros without a match)."""
        import numpy as np

        q = code_tokens(query) if isinstance(query, str) else list(query)
        q = [t for t in q if t in self._vocab]
        if not q:
            return np.zeros(self._n, dtype=np.float32)
        return np.asarray(self._bm25.get_scores(q), dtype=np.float32)

    def top(self, query: str | Sequence[str], k: int | None = None) -> list[tuple[int, float]]:
        """``(document index, score)`` of the best ``k`` documents with a positive score.

        Ties are broken by document order, so results are deterministic.
        """
        import numpy as np

        if k is not None and k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        s = self.scores(query)
        order = np.lexsort((np.arange(self._n), -s))
        hits = [(int(i), float(s[i])) for i in order if s[i] > 0]
        return hits if k is None else hits[:k]
