"""Grow-and-refine de-duplication with the real embedded all-MiniLM-L6-v2 model."""

from __future__ import annotations

import builtins
import os

import numpy as np
import pytest

from lc_agents.ace import (
    Delta,
    MiniLMEmbedder,
    PlaybookStore,
    deduplicate,
    find_duplicates,
    minilm_model_dir,
)
from lc_agents.errors import ModelLoadError

PARAPHRASES = [
    ("Always give dates in ISO format.", "Always answer dates in ISO format."),
    ("The access code of the Amber vault is 4417.", "The Amber vault opens with access code 4417."),
]
DISTINCT = [
    "Tickets about refunds go to queue R4.",
    "The Zorvex unit converts at 3 plonks per glim.",
    "The access code of the Cobalt vault is 9120.",
    "Quote every price in cents, never in dollars.",
]


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


def test_the_embedder_loads_offline_and_returns_unit_vectors(minilm):
    assert os.path.isfile(os.path.join(minilm_model_dir(), "model.safetensors"))
    v = minilm.encode(["a cat sat", "a cat sat", "stock prices fell"])
    assert v.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(v[0], v[1])
    assert float(v[0] @ v[2]) < 0.5
    assert minilm.encode([]).shape == (0, 384)


def test_dedup_merges_near_duplicates_and_keeps_distinct_bullets(minilm):
    store = PlaybookStore()
    store.apply(
        [Delta.add("notes", a) for a, _ in PARAPHRASES] + [Delta.add("notes", d) for d in DISTINCT]
    )
    dup_ids = store.apply([Delta.add("more", b) for _, b in PARAPHRASES]).results
    # the later paraphrase has proven more useful: it survives and keeps its text
    store.apply(tags={dup_ids[1]: "helpful"})
    merges = deduplicate(store, minilm, threshold=0.9)
    assert [d.ids for d in merges] == [("notes-00001", dup_ids[0]), (dup_ids[1], "notes-00002")]
    assert len(store) == len(PARAPHRASES) + len(DISTINCT)
    contents = [b.content for b in store.bullets()]
    assert all(d in contents for d in DISTINCT)
    assert PARAPHRASES[1][1] in contents
    assert PARAPHRASES[1][0] not in contents
    survivor = store.get(dup_ids[1])
    assert (survivor.helpful, survivor.harmful) == (1, 0)
    assert survivor.provenance["merged_from"] == ["notes-00002"]
    # nothing left to merge: a second pass is a no-op
    assert deduplicate(store, minilm, threshold=0.9) == []


def test_the_threshold_is_configurable(minilm):
    store = PlaybookStore()
    store.apply(
        [Delta.add("n", DISTINCT[2]), Delta.add("n", PARAPHRASES[1][0])]
    )  # same template, other vault
    assert find_duplicates(store, minilm, threshold=0.9) == []
    assert find_duplicates(store, minilm, threshold=0.5) == [["n-00001", "n-00002"]]
    assert find_duplicates(store, minilm, threshold=0.5, same_section=False) != []
    store.apply([Delta.update("n-00002", section="m")])
    assert find_duplicates(store, minilm, threshold=0.5, same_section=True) == []
    with pytest.raises(ValueError, match="threshold"):
        find_duplicates(store, minilm, threshold=0.0)


def test_a_missing_embeddings_extra_is_named_in_the_error(monkeypatch):
    real_import = builtins.__import__

    def no_sentence_transformers(name, *args, **kwargs):
        if name.startswith("sentence_transformers"):
            raise ImportError("No module named 'sentence_transformers'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_sentence_transformers)
    with pytest.raises(ModelLoadError, match=r"lc-agents\[embeddings\]"):
        MiniLMEmbedder().encode(["x"])


def test_a_bad_model_directory_is_reported(tmp_path):
    with pytest.raises(ModelLoadError, match="cannot load"):
        MiniLMEmbedder(str(tmp_path)).encode(["x"])


def test_embedders_share_one_loaded_model(minilm):
    other = MiniLMEmbedder()
    assert other._load() is minilm._load()
    np.testing.assert_allclose(other.encode(["a cat sat"]), minilm.encode(["a cat sat"]))
