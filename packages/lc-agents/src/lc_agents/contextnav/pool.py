"""The retrievable example pool: items embedded into a persistent vector store.

:class:`ItemEncoder` turns a :class:`~lc_agents.contextnav.ContextItem` into one vector:
its text embedding, or, when the item has an ``image_path`` and the encoder an image
embedder in the same space (e.g. a local CLIP model,
:class:`~lc_agents.retrieval.ClipEmbedder`), the normalised mix
``(1 - w) * text + w * image``. Without an image embedder images are ignored and the
text path alone is used, which is what runs here (no image model ships with lc).

:class:`ExamplePool` stores the vectors and the items' labels and scalar metadata in a
:class:`~lc_agents.retrieval.VectorStore` (LanceDB on disk), so a pool is built once and
reopened; :meth:`ExamplePool.search` returns :class:`~lc_agents.contextnav.Candidate`\\ s
with their vectors, which the noise-robust selection needs. Embedding runs in batches
sized by :func:`~lc_agents.retrieval.plan_index` for the memory available.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from lc_agents._removed import removed_attribute
from lc_agents.contextnav.items import Candidate, ContextItem
from lc_agents.retrieval import embedders as _embedders
from lc_agents.retrieval.embedders import normalize_rows

if TYPE_CHECKING:
    from lc_agents.retrieval import AddReport, Embedder, ImageEncoder, VectorStore

__all__ = ["ExamplePool", "ItemEncoder"]

# a former home of ``ImageEncoder``, removed in 0.11 (it lives in lc_agents.retrieval)
_REMOVED = {"ImageEncoder": "lc_agents.retrieval"}


def __getattr__(name: str) -> NoReturn:
    raise removed_attribute(__name__, name, _REMOVED)


_RESERVED = {"label", "image_path"}


class ItemEncoder:
    """Text (+ optional image) embedding of items, in the text embedder's space.

    Args:
        text_embedder: an :class:`~lc_agents.retrieval.Embedder` (``embed_texts``,
            ``name``, ``dim``).
        image_embedder: optional :class:`~lc_agents.retrieval.ImageEncoder` whose vectors share ``dim`` and
            space with ``text_embedder``.
        image_weight: ``w`` in ``(1 - w) * text + w * image``, in [0, 1].

    Examples:
        >>> from lc_agents.retrieval import HashingEmbedder
        >>> enc = ItemEncoder(HashingEmbedder(dim=64))
        >>> enc.encode([ContextItem("a", "hello there")]).shape
        (1, 64)
    """

    def __init__(
        self,
        text_embedder: Embedder,
        image_embedder: ImageEncoder | None = None,
        *,
        image_weight: float = 0.5,
    ) -> None:
        if not 0.0 <= image_weight <= 1.0:
            raise ValueError(f"image_weight must lie in [0, 1], got {image_weight}")
        if image_embedder is not None and not isinstance(image_embedder, _embedders.ImageEncoder):
            raise TypeError("image_embedder must have an embed_images(images) method")
        self.text_embedder = text_embedder
        self.image_embedder = image_embedder
        self.image_weight = image_weight

    @property
    def dim(self) -> int:
        return int(self.text_embedder.dim)

    def encode(self, items: Sequence[ContextItem], batch_size: int = 256) -> np.ndarray:
        """Unit-norm vectors ``[len(items), dim]`` (float32)."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        texts = [it.text for it in items]
        parts = [
            np.asarray(self.text_embedder.embed_texts(texts[i : i + batch_size]), dtype=np.float32)
            for i in range(0, len(texts), batch_size)
        ]
        out = np.concatenate(parts) if parts else np.zeros((0, self.dim), np.float32)
        if out.shape != (len(items), self.dim):
            raise ValueError(
                f"text embedder returned {out.shape}, expected {(len(items), self.dim)}"
            )
        with_image = [i for i, it in enumerate(items) if it.image_path]
        if self.image_embedder is not None and with_image:
            img = np.asarray(
                self.image_embedder.embed_images([items[i].image_path for i in with_image]),
                dtype=np.float32,
            )
            if img.shape != (len(with_image), self.dim):
                raise ValueError(
                    f"image embedder returned {img.shape}, expected {(len(with_image), self.dim)}: "
                    "it must share the text embedder's space"
                )
            w = self.image_weight
            out[with_image] = (1.0 - w) * out[with_image] + w * normalize_rows(img)
        return normalize_rows(out)


def _metadata(item: ContextItem) -> dict[str, Any]:
    meta: dict[str, Any] = {"label": item.label, "image_path": item.image_path}
    for k, v in item.metadata.items():
        if k in _RESERVED:
            raise ValueError(f"item {item.id!r}: metadata key {k!r} is reserved")
        if isinstance(v, str | int | float | bool) or v is None:
            meta[k] = v
    return meta


class ExamplePool:
    """Labelled examples in a vector store, searchable by item.

    Open with :meth:`open` (or wrap an open :class:`~lc_agents.retrieval.VectorStore`).

    Examples:
        >>> import tempfile
        >>> from lc_agents.retrieval import HashingEmbedder
        >>> pool = ExamplePool.open(tempfile.mkdtemp(), HashingEmbedder(dim=64))
        >>> _ = pool.add([ContextItem("1", "my parcel is late", "shipping"),
        ...               ContextItem("2", "my card was charged twice", "billing")])
        >>> pool.search(ContextItem("q", "the parcel came late"), k=1)[0].item.label
        'shipping'
    """

    def __init__(self, store: VectorStore, encoder: ItemEncoder | None = None) -> None:
        self.store = store
        self.encoder = encoder or ItemEncoder(store.embedder)
        if self.encoder.dim != int(store.embedder.dim):
            raise ValueError(
                f"encoder dim {self.encoder.dim} differs from the store's {store.embedder.dim}"
            )
        self._vectors: dict[str, np.ndarray] = {}
        self._items: dict[str, ContextItem] = {}

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        text_embedder: Embedder | None = None,
        *,
        image_embedder: ImageEncoder | None = None,
        table: str = "examples",
    ) -> ExamplePool:
        """Open (or create) a pool in directory ``path`` (default embedder: MiniLM)."""
        from lc_agents.retrieval import VectorStore

        store = VectorStore.open(path, text_embedder, table=table)
        return cls(store, ItemEncoder(store.embedder, image_embedder))

    def __len__(self) -> int:
        return len(self.store)

    def add(self, items: Sequence[ContextItem]) -> AddReport:
        """Embed and upsert ``items`` (ids must be unique)."""
        from lc_agents.retrieval import plan_index

        ids = [it.id for it in items]
        if len(set(ids)) != len(ids):
            raise ValueError("item ids must be unique")
        if not items:
            raise ValueError("no items to add")
        batch = plan_index(len(items) + len(self), self.encoder.dim).batch_size
        vectors = self.encoder.encode(items, batch_size=batch)
        report = self.store.add(
            [it.text for it in items], [_metadata(it) for it in items], ids, vectors=vectors
        )
        for it, v in zip(items, vectors, strict=True):
            self._vectors[it.id] = v
            self._items[it.id] = it
        return report

    def _item(self, hit: Any) -> ContextItem:
        if hit.id in self._items:
            return self._items[hit.id]
        meta = dict(hit.metadata)
        label, image = meta.pop("label", None), meta.pop("image_path", None)
        return ContextItem(hit.id, hit.text, label, image, meta)

    def search(
        self,
        query: ContextItem | np.ndarray,
        k: int,
        where: str | Mapping[str, Any] | None = None,
    ) -> list[Candidate]:
        """The ``k`` examples closest to ``query`` (an item or a vector ``[dim]``), best
        first, as candidates carrying their vectors."""
        if isinstance(query, ContextItem):
            vector = self.encoder.encode([query])[0]
        else:
            vector = np.asarray(query, dtype=np.float32).reshape(-1)
        hits = self.store.search_vector(vector, k, where)
        items = [self._item(h) for h in hits]
        missing = [it for it in items if it.id not in self._vectors]
        if missing:
            for it, v in zip(missing, self.encoder.encode(missing), strict=True):
                self._vectors[it.id] = v
        return [
            Candidate(it, float(h.score), self._vectors[it.id])
            for it, h in zip(items, hits, strict=True)
        ]
