"""Grow-and-refine de-duplication with the real embedded all-MiniLM-L6-v2 model."""

from __future__ import annotations

import builtins
import os

import numpy as np
import pytest

from lc_agents.ace import Delta, PlaybookStore, deduplicate, find_duplicates
from lc_agents.errors import ModelLoadError
from lc_agents.retrieval import MiniLMEmbedder, minilm_model_dir

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
    v = minilm.embed_texts(["a cat sat", "a cat sat", "stock prices fell"])
    assert v.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(v[0], v[1])
    assert float(v[0] @ v[2]) < 0.5
    assert minilm.embed_texts([]).shape == (0, 384)


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
    store.apply([Delta.add("n", DISTINCT[2]), Delta.add("n", PARAPHRASES[1][0])])
    # same template, other vault and code: never duplicates, whatever the threshold
    assert find_duplicates(store, minilm, threshold=0.5) == []
    store = PlaybookStore()
    store.apply(
        [
            Delta.add("n", "The access code of the Cobalt vault is stored in the safe."),
            Delta.add("n", "The Amber vault opens with the access code stored in the safe."),
        ]
    )  # cosine 0.76
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
        MiniLMEmbedder().embed_texts(["x"])


def test_a_bad_model_directory_is_reported(tmp_path):
    with pytest.raises(ModelLoadError, match="cannot load"):
        MiniLMEmbedder(str(tmp_path)).embed_texts(["x"])


def test_embedders_share_one_loaded_model(minilm):
    other = MiniLMEmbedder()
    assert other._load() is minilm._load()
    np.testing.assert_allclose(
        other.embed_texts(["a cat sat"]), minilm.embed_texts(["a cat sat"]), rtol=0, atol=1e-6
    )


# --------------------------------------------------------------------------- rules that differ
RULES = [
    "Refund requests under $50 go to queue R3.",
    "Refund requests over $50 go to queue R7.",
]


def test_rules_that_differ_in_numbers_or_identifiers_are_never_merged(minilm):
    v = minilm.embed_texts(RULES)
    assert float(v[0] @ v[1]) >= 0.9  # close enough in embedding space to be merged
    store = PlaybookStore()
    store.apply([Delta.add("routing", r) for r in RULES])
    assert find_duplicates(store, minilm, threshold=0.9) == []
    assert deduplicate(store, minilm, threshold=0.9) == []
    assert [b.content for b in store.bullets()] == RULES
    # the same rule said twice (same numbers and queue) is still merged
    store.apply([Delta.add("routing", "Refund requests under $50 are routed to queue R3.")])
    assert find_duplicates(store, minilm, threshold=0.9) == [["routing-00001", "routing-00003"]]


class TableEmbedder:
    """Vectors from a fixed table (to place bullets at chosen cosines; not a model)."""

    name, dim = "table", 2

    def __init__(self, table: dict[str, tuple[float, float]]) -> None:
        self.table = table

    def embed_texts(self, texts: list[str]) -> np.ndarray:
        return np.array([self.table[t] for t in texts], dtype=np.float64)


def _at(degrees: float) -> tuple[float, float]:
    return (float(np.cos(np.radians(degrees))), float(np.sin(np.radians(degrees))))


def test_a_chain_of_neighbours_does_not_merge_its_ends():
    # a ~ b (cos 20deg = 0.94) and b ~ c, but a and c are 40deg apart (0.77)
    table = {"a": _at(0), "b": _at(20), "c": _at(40)}
    store = PlaybookStore()
    store.apply([Delta.add("n", t) for t in table])
    groups = find_duplicates(store, TableEmbedder(table), threshold=0.9)
    assert groups == [["n-00001", "n-00002"]]
    deduplicate(store, TableEmbedder(table), threshold=0.9)
    assert [b.content for b in store.bullets()] == ["a", "c"]
    # every pair inside every group is above the threshold
    table = {f"t{i}": _at(7 * i) for i in range(8)}
    store = PlaybookStore()
    store.apply([Delta.add("n", t) for t in table])
    emb = TableEmbedder(table)
    for group in find_duplicates(store, emb, threshold=0.97):
        vecs = emb.embed_texts([store.get(i).content for i in group])
        assert (vecs @ vecs.T).min() >= 0.97 - 1e-9


class SlowHashing:
    """The hashing embedder, slowed down so that two de-duplications overlap."""

    def __init__(self) -> None:
        from lc_agents.retrieval import HashingEmbedder

        self.inner = HashingEmbedder(dim=128)
        self.name, self.dim = self.inner.name, self.inner.dim

    def embed_texts(self, texts: list[str]) -> np.ndarray:
        import time

        time.sleep(0.05)
        return self.inner.embed_texts(texts)


def _dedup_worker(path: str, worker: int, rounds: int, barrier, errors) -> None:
    store = PlaybookStore(path)
    emb = SlowHashing()
    for r in range(rounds):
        barrier.wait(30)
        try:
            deduplicate(store, emb, threshold=0.95)
        except Exception as err:  # reported to the parent
            errors.put(f"worker {worker} round {r}: {type(err).__name__}: {err}")
        barrier.wait(30)
        if worker == 0 and r < rounds - 1:  # new duplicates for the next round
            store.apply([Delta.add("n", f"rule {r} says x{r}")] * 2)


def test_two_processes_deduplicating_one_store_at_once_do_not_conflict(tmp_path):
    import multiprocessing

    path = str(tmp_path / "pb.sqlite")
    store = PlaybookStore(path)
    store.apply([Delta.add("n", f"keep {i} apart k{i}") for i in range(6)])
    store.apply([Delta.add("n", "rule start says s0")] * 3)
    ctx = multiprocessing.get_context("fork")
    rounds = 6
    barrier, errors = ctx.Barrier(2), ctx.Queue()
    procs = [
        ctx.Process(target=_dedup_worker, args=(path, w, rounds, barrier, errors)) for w in range(2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    for p in procs:
        if p.is_alive():
            p.kill()
    found = []
    while not errors.empty():
        found.append(errors.get(timeout=5))
    assert found == []
    assert [p.exitcode for p in procs] == [0, 0]
    contents = [b.content for b in store.bullets()]
    assert len(contents) == len(set(contents))  # every duplicate merged exactly once
    assert len(contents) == 6 + 1 + (rounds - 1)
