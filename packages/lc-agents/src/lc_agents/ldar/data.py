"""Offline training data for LDAR: every band of every question, answered by the reader.

For each QA item the passages are embedded with the query, ranked by cosine similarity,
and the reader answers once per band of the action set (the passages of the band, in
rank order). Each :class:`LdarExample` keeps the sorted similarities, the correctness
and the token count of every band. Wrap the reader's model in
:class:`~lc_agents.contextnav.CachedChat` so that relabelling (another band set, more
epochs, a rerun) never calls the model twice for the same prompt.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from lc_agents.ldar.bands import Band
from lc_agents.ldar.features import sort_similarities
from lc_agents.ldar.qa import QaReader
from lc_agents.retrieval.embedders import cosine_similarities

if TYPE_CHECKING:
    from lc_agents.retrieval.embedders import Embedder

__all__ = [
    "LdarExample",
    "QaQuestion",
    "label_examples",
    "load_examples",
    "save_examples",
    "similarities",
]


@dataclass(frozen=True)
class QaQuestion:
    """A question over a list of passages with its accepted answers."""

    id: str
    question: str
    passages: tuple[str, ...]
    answers: tuple[str, ...]

    @classmethod
    def from_task_item(cls, item: Any) -> QaQuestion:
        """From an lc-evals ``TaskItem`` with ``metadata["passages"]`` (e.g. ``distractor_qa``)."""
        passages = item.metadata.get("passages")
        if not passages:
            raise ValueError(f"item {item.id!r} has no metadata['passages']")
        return cls(item.id, item.question, tuple(passages), tuple(item.answers))


@dataclass(frozen=True)
class LdarExample:
    """One question's similarity profile and the outcome of every band.

    Attributes:
        id: question id.
        similarities: ``[n]`` cosine similarities sorted best first.
        order: ``[n]`` passage index at each rank.
        correct: ``[len(bands)]`` 1.0/0.0, NaN for bands past ``n``.
        tokens: ``[len(bands)]`` passage tokens of each band (NaN past ``n``).
    """

    id: str
    similarities: np.ndarray
    order: np.ndarray
    correct: np.ndarray
    tokens: np.ndarray

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "similarities": self.similarities.tolist(),
            "order": self.order.tolist(),
            "correct": [None if np.isnan(x) else float(x) for x in self.correct],
            "tokens": [None if np.isnan(x) else float(x) for x in self.tokens],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LdarExample:
        def arr(xs: list[Any]) -> np.ndarray:
            return np.array([np.nan if x is None else x for x in xs], dtype=np.float64)

        return cls(
            d["id"],
            np.asarray(d["similarities"], dtype=np.float64),
            np.asarray(d["order"], dtype=np.int64),
            arr(d["correct"]),
            arr(d["tokens"]),
        )


def similarities(embedder: Embedder, question: str, passages: Sequence[str]) -> np.ndarray:
    """Cosine similarities ``[len(passages)]`` of the question to each passage.

    The embedder's rows are re-normalised in float64
    (:func:`~lc_agents.retrieval.cosine_similarities`), so an embedder that does not
    return unit rows still gives cosines; zero rows give 0.
    """
    v = np.asarray(embedder.embed_texts([question, *passages]))
    return cosine_similarities(v[0], v[1:], dtype=np.float64)


def label_examples(
    questions: Sequence[QaQuestion],
    embedder: Embedder,
    reader: QaReader,
    bands: Sequence[Band],
    *,
    progress: bool = False,
) -> list[LdarExample]:
    """Run ``reader`` on every band of every question (see the module docs).

    Args:
        questions: QA items.
        embedder: an :class:`~lc_agents.retrieval.Embedder` (e.g. MiniLM or hashing).
        reader: the downstream reader (wrap its model in a cache).
        bands: the action set.
        progress: show a progress bar.
    """
    out = []
    it: Any = questions
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(questions, desc="labelling bands")
    for q in it:
        sims, order = sort_similarities(similarities(embedder, q.question, q.passages))
        n = len(order)
        correct = np.full(len(bands), np.nan)
        tokens = np.full(len(bands), np.nan)
        for a, band in enumerate(bands):
            if not band.fits(n):
                continue
            chosen = [q.passages[int(order[r])] for r in band.ranks(n)]
            correct[a] = float(reader.correct(q.question, chosen, q.answers))
            tokens[a] = float(reader.passage_tokens(chosen))
        out.append(LdarExample(q.id, sims, order, correct, tokens))
    return out


def save_examples(examples: Sequence[LdarExample], path: str | os.PathLike[str]) -> None:
    """Write examples as JSON lines."""
    with open(path, "w", encoding="utf-8") as f:
        for e in examples:
            f.write(json.dumps(e.to_dict()) + "\n")


def load_examples(path: str | os.PathLike[str]) -> list[LdarExample]:
    """Read examples written by :func:`save_examples`."""
    with open(path, encoding="utf-8") as f:
        return [LdarExample.from_dict(json.loads(line)) for line in f if line.strip()]
