"""VectorStore on a real embedded LanceDB: persistence, upserts, filters, errors."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from lc_agents.retrieval import (
    AddReport,
    EmbedderMismatchError,
    EmptyIndexError,
    HashingEmbedder,
    RetrievalError,
    VectorStore,
    plan_index,
)

DOCS = {
    "toml": ("Parse a TOML configuration file into a dict.", {"lang": "py", "line": 3}),
    "sum": ("Sum the prices of every item in the basket.", {"lang": "rs", "line": 10}),
    "http": ("Send an HTTP request and retry on timeouts.", {"lang": "go", "line": 7}),
    "sort": ("Sort the list of users by their last login date.", {"lang": "py", "line": 42}),
}


def fill(store: VectorStore) -> AddReport:
    ids = list(DOCS)
    return store.add([DOCS[i][0] for i in ids], metadata=[DOCS[i][1] for i in ids], ids=ids)


@pytest.fixture
def store(tmp_path) -> VectorStore:
    s = VectorStore.open(tmp_path / "db", HashingEmbedder(dim=128))
    fill(s)
    return s


def test_search_returns_the_exact_cosine_ranking(store):
    emb = store.embedder
    query = "parse toml config"
    hits = store.search(query, k=4)
    vecs = emb.embed_texts([DOCS[i][0] for i in DOCS])
    q = emb.embed_texts([query])[0]
    expected = [list(DOCS)[j] for j in np.argsort(-(vecs @ q))]
    assert [h.id for h in hits] == expected
    np.testing.assert_allclose([h.score for h in hits], np.sort(vecs @ q)[::-1], atol=1e-5)
    assert hits[0].text == DOCS["toml"][0]
    assert hits[0].metadata == {"lang": "py", "line": 3}


def test_dict_and_sql_filters_restrict_results(store):
    assert {h.id for h in store.search("anything at all", k=10, where={"lang": "py"})} == {
        "toml",
        "sort",
    }
    assert {h.id for h in store.search("x y", k=10, where={"lang": ["go", "rs"]})} == {
        "sum",
        "http",
    }
    assert [h.id for h in store.search("parse", k=10, where="line > 8 AND lang = 'py'")] == ["sort"]
    assert store.count(where={"lang": "py"}) == 2
    with pytest.raises(ValueError, match="not a metadata column"):
        store.search("parse", where={"language": "py"})


def test_upsert_skips_unchanged_and_updates_changed_rows(store):
    assert fill(store) == AddReport(added=0, updated=0, unchanged=4)
    calls = []
    real = store.embedder.embed_texts
    store.embedder.embed_texts = lambda texts: calls.append(list(texts)) or real(texts)
    report = store.add(
        ["Parse a YAML file into a dict.", "Sum the prices of every item in the basket.", "new"],
        metadata=[{"lang": "py"}, {"lang": "rs", "line": 11}, {"lang": "c"}],
        ids=["toml", "sum", "new"],
    )
    assert report == AddReport(added=1, updated=2, unchanged=0)
    assert calls == [
        ["Parse a YAML file into a dict.", "Sum the prices of every item in the basket.", "new"]
    ]
    assert store.count() == 5
    (toml,) = store.get(["toml"])
    assert toml.text == "Parse a YAML file into a dict."
    assert toml.metadata == {"lang": "py"}
    assert store.search("yaml", k=1)[0].id == "toml"


def test_delete_by_id_and_by_filter(store):
    assert store.delete(["toml", "missing"]) == 1
    assert store.delete(where={"lang": "rs"}) == 1
    assert sorted(store.ids()) == ["http", "sort"]
    with pytest.raises(ValueError, match="refusing"):
        store.delete()


def test_default_ids_are_content_addresses(tmp_path):
    s = VectorStore.open(tmp_path, HashingEmbedder(dim=32))
    assert s.add(["a b c", "d e f"]).added == 2
    assert s.add(["a b c"]).unchanged == 1
    assert len(s) == 2


def test_new_metadata_keys_become_columns_and_types_are_enforced(store):
    store.add(["Read a CSV file."], metadata=[{"lang": "py", "tested": True}], ids=["csv"])
    assert store.metadata_columns["tested"] == "bool"
    assert [h.id for h in store.search("file", k=5, where={"tested": True})] == ["csv"]
    with pytest.raises(ValueError, match="holds string values"):
        store.add(["x"], metadata=[{"lang": 3}], ids=["bad"])
    with pytest.raises(ValueError, match="identifier"):
        store.add(["x"], metadata=[{"vector": 1}], ids=["bad"])


def test_bad_inputs_raise_clear_errors(tmp_path):
    s = VectorStore.open(tmp_path, HashingEmbedder(dim=32))
    with pytest.raises(EmptyIndexError, match="empty"):
        s.search("anything")
    with pytest.raises(EmptyIndexError):
        s.build_index()
    with pytest.raises(ValueError, match="corpus to index is empty"):
        s.add([])
    with pytest.raises(ValueError, match="non-empty string"):
        s.add(["ok", "  "])
    with pytest.raises(ValueError, match="duplicate id"):
        s.add(["a", "b"], ids=["x", "x"])
    with pytest.raises(ValueError, match="2 entries for 1"):
        s.add(["a"], ids=["x", "y"])


def test_a_wrong_shaped_embedder_is_caught(tmp_path):
    class Broken:
        name, dim = "broken", 8

        def embed_texts(self, texts):
            return np.zeros((len(texts), 4), np.float32)

    s = VectorStore.open(tmp_path, Broken())
    with pytest.raises(RetrievalError, match=r"expected \(1, 8\)"):
        s.add(["x"])


def test_reopening_with_another_embedder_is_refused(tmp_path):
    VectorStore.open(tmp_path, HashingEmbedder(dim=64)).add(["hello world"])
    with pytest.raises(EmbedderMismatchError, match=r"'hashing-64-tri' \(dim 64\).*dim 32"):
        VectorStore.open(tmp_path, HashingEmbedder(dim=32))
    with pytest.raises(EmbedderMismatchError, match="hashing-64'"):
        VectorStore.open(tmp_path, HashingEmbedder(dim=64, trigrams=False))
    assert VectorStore.open(tmp_path, HashingEmbedder(dim=64)).count() == 1


def test_precomputed_vectors_are_stored_as_given(tmp_path):
    s = VectorStore.open(tmp_path, HashingEmbedder(dim=16))
    v = np.eye(16, dtype=np.float32)[:3]
    s.add(["img0.png", "img1.png", "img2.png"], vectors=v, ids=["0", "1", "2"])
    assert [h.id for h in s.search_vector(v[2], k=1)] == ["2"]
    with pytest.raises(RetrievalError, match="shape"):
        s.add(["x"], vectors=np.ones((1, 3)))


CHILD = textwrap.dedent(
    """
    import json, sys
    from lc_agents.retrieval import HashingEmbedder, VectorStore
    path, action = sys.argv[1], sys.argv[2]
    s = VectorStore.open(path, HashingEmbedder(dim=128))
    if action == "write":
        r = s.add(["Parse a TOML configuration file.", "Sum the prices."],
                  metadata=[{"lang": "py"}, {"lang": "rs"}], ids=["toml", "sum"])
        print(json.dumps([r.added, r.updated, r.unchanged]))
    else:
        hits = s.search("toml config", k=2)
        again = s.add(["Parse a TOML configuration file."], metadata=[{"lang": "py"}], ids=["toml"])
        print(json.dumps([[[h.id, h.metadata, round(h.score, 5)] for h in hits], again.unchanged]))
    """
)


def _child(path, action):
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), action],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_index_persists_across_processes(tmp_path):
    path = tmp_path / "db"
    assert _child(path, "write") == [2, 0, 0]
    read, unchanged = _child(path, "read")
    assert unchanged == 1  # the second process sees the first one's content hashes
    assert [r[0] for r in read] == ["toml", "sum"]
    assert read[0][1] == {"lang": "py"}
    here = VectorStore.open(path, HashingEmbedder(dim=128)).search("toml config", k=2)
    assert [[h.id, round(h.score, 5)] for h in here] == [[r[0], r[2]] for r in read]


def test_ivf_pq_index_is_built_when_the_plan_asks_for_it(tmp_path):
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((600, 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    s = VectorStore.open(tmp_path, HashingEmbedder(dim=16))
    s.add([f"row {i}" for i in range(600)], vectors=vecs, ids=[str(i) for i in range(600)])
    assert s.index_type() == "flat"
    plan = plan_index(600, 16, available_bytes=2**30, flat_max_rows=500)
    assert plan.index_type == "ivf_pq"
    assert plan.num_sub_vectors == 2
    s.build_index(plan)
    assert s.index_type() == "ivf_pq"
    # approximate, but the query's own row is still the best hit for most queries
    found = sum(s.search_vector(vecs[i], k=1)[0].id == str(i) for i in range(0, 600, 30))
    assert found >= 16


# --------------------------------------------------------------------------- maintenance
def _fragments(s: VectorStore) -> int:
    return int(s._table.stats()["fragment_stats"]["num_fragments"])


def test_many_small_upserts_are_compacted(tmp_path):
    s = VectorStore.open(tmp_path, HashingEmbedder(dim=16))
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((300, 16)).astype(np.float32)
    for i in range(300):  # every third write updates the row written before it
        row = i - 1 if i % 3 == 2 else i
        s.add([f"row {row} v{i}"], ids=[str(row)], vectors=vecs[i : i + 1])
        assert _fragments(s) <= 32
    assert _fragments(s) <= 16
    assert s.count() == 200
    assert s.get(["1"])[0].text == "row 1 v2"
    assert [h.id for h in s.search_vector(vecs[299], k=1)] == ["298"]
    s.delete(ids=[str(i) for i in range(0, 300, 2) if i % 3 != 2])
    assert _fragments(s) <= 16
    assert s.compact() == _fragments(s) <= 2


def test_non_finite_and_zero_vectors_are_refused(tmp_path):
    s = VectorStore.open(tmp_path, HashingEmbedder(dim=8))
    good = np.eye(8, dtype=np.float32)[:2]
    s.add(["a", "b"], ids=["a", "b"], vectors=good)
    for bad in (np.nan, np.inf, -np.inf):
        q = good[0].copy()
        q[3] = bad
        with pytest.raises(ValueError, match="non-finite"):
            s.search_vector(q)
        v = good.copy()
        v[1, 0] = bad
        with pytest.raises(RetrievalError, match=r"non-finite.*first row 1"):
            s.add(["c", "d"], ids=["c", "d"], vectors=v)
    with pytest.raises(ValueError, match="zero"):
        s.search_vector(np.zeros(8))
    with pytest.raises(RetrievalError, match=r"zero vector.*first row 1"):
        s.add(["c", "d"], ids=["c", "d"], vectors=np.stack([good[0], np.zeros(8)]))
    with pytest.raises(RetrievalError, match="zero vector"):  # no words to hash
        s.add(["!!! ???"], ids=["e"])
    with pytest.raises(RetrievalError, match="zero vector"):
        s.search("!!!")
    assert sorted(s.ids()) == ["a", "b"]


def test_ann_settings_reach_the_documented_recall_on_random_vectors(tmp_path):
    rng = np.random.default_rng(1)
    n, dim = 2000, 32
    vecs = rng.standard_normal((n, dim)).astype(np.float32)
    s = VectorStore.open(tmp_path, HashingEmbedder(dim=dim))
    s.add([f"r{i}" for i in range(n)], ids=[str(i) for i in range(n)], vectors=vecs)
    plan = s.build_index(plan_index(n, dim, available_bytes=2**30, flat_max_rows=500))
    assert s.index_type() == "ivf_pq"
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    queries = rng.standard_normal((20, dim)).astype(np.float32)
    truth = [{str(j) for j in np.argsort(-(unit @ q))[:10]} for q in queries]

    def recall(**settings):
        found = [{h.id for h in s.search_vector(q, 10, **settings)} for q in queries]
        return float(np.mean([len(f & t) / 10 for f, t in zip(found, truth, strict=True)]))

    assert recall(nprobes=plan.num_partitions, refine_factor=100) >= 0.95
    assert recall(nprobes=1) < 0.95  # the settings matter: one probe misses neighbours
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="nprobes"):
            s.search_vector(queries[0], nprobes=bad)
    with pytest.raises(ValueError, match="refine_factor"):
        s.search_vector(queries[0], refine_factor=0)


def test_the_in_memory_flat_scan_matches_lancedb_and_follows_writes(tmp_path):
    rng = np.random.default_rng(2)
    vecs = rng.standard_normal((500, 16)).astype(np.float32)
    fast = VectorStore.open(tmp_path, HashingEmbedder(dim=16))
    meta = [{"g": i % 3} for i in range(500)]
    fast.add([f"r{i}" for i in range(500)], meta, ids=[str(i) for i in range(500)], vectors=vecs)
    queries = rng.standard_normal((5, 16)).astype(np.float32)

    def same(q, **kw):
        lance = VectorStore.open(tmp_path, HashingEmbedder(dim=16), flat_cache_bytes=0)
        a = [(h.id, h.text, h.metadata) for h in fast.search_vector(q, 7, **kw)]
        b = [(h.id, h.text, h.metadata) for h in lance.search_vector(q, 7, **kw)]
        assert a == b
        sa = [h.score for h in fast.search_vector(q, 7, **kw)]
        sb = [h.score for h in lance.search_vector(q, 7, **kw)]
        np.testing.assert_allclose(sa, sb, atol=1e-5)
        return a

    for q in queries:
        same(q)
        same(q, where={"g": 1})
    assert fast._flat_cache is not None  # the numpy path was taken
    top = same(queries[0])[0][0]
    fast.delete([top])  # a write invalidates the cached matrix
    assert same(queries[0])[0][0] != top
    fast.add(["moved"], ids=["0"], vectors=queries[1:2])  # an update too
    assert same(queries[1])[0][:2] == ("0", "moved")
    assert len(fast.search_vector(queries[1], 1000)) == 499  # k larger than the table
