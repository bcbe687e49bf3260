"""The vector store against raw LanceDB and a numpy flat scan, side by side in one run.

Random float32 vectors (``--rows`` x ``--dim``, seed ``--seed``) stand in for
embeddings, so no model runs and every method sees the same data. Measured:

* **add**: ``VectorStore.add(texts, ids=..., vectors=...)`` into a fresh store against
  ``lancedb`` ``create_table`` + ``add`` of the same columns (id, text, content hash,
  vector); median of ``--repeats`` fresh builds.
* **flat query** (top 10 by cosine, no index): the store's ``search_vector`` (its
  in-memory numpy scan, the default, and with ``flat_cache_bytes=0``, LanceDB's scan)
  against raw LanceDB's ``search(...).distance_type("cosine")`` and a numpy scan over
  the L2-normalised matrix (``argpartition`` + sort); median over ``--queries``
  queries, plus the store's first query (which loads the vectors).
* **small upserts**: ``--upserts`` one-row adds into a small store with automatic
  compaction (the default ``max_fragments=16``) and with it off (``max_fragments=0``,
  the previous behaviour): fragments left and median flat query time afterwards.
* **ANN recall@10**: an IVF-PQ index on the first ``--ann-rows`` rows (the plan of
  ``plan_index`` with ``flat_max_rows=1``); recall@10 against the exact top 10 at
  LanceDB's defaults and at the documented settings (``nprobes`` = all partitions,
  ``refine_factor=100``), with the median query time of each.

Writes ``docs/benchmarks/lc-agents-retrieval/store.json``.

Run (about 1 minute here):
    uv run python packages/lc-agents/benchmarks/retrieval_store.py
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import platform
import statistics
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[3]
OUT = ROOT / "docs" / "benchmarks" / "lc-agents-retrieval"


class RandomVectors:
    """The store's embedder stand-in: vectors are always passed in, never embedded."""

    def __init__(self, dim: int) -> None:
        self.name, self.dim = f"random-{dim}", dim

    def embed_texts(self, texts: list[str]) -> np.ndarray:
        raise RuntimeError("this benchmark passes precomputed vectors")


def _raw_table(db, name: str, ids, texts, vecs):
    import pyarrow as pa

    hashes = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
    table = pa.table(
        {
            "id": pa.array(ids, pa.string()),
            "text": pa.array(texts, pa.string()),
            "content_hash": pa.array(hashes, pa.string()),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vecs.reshape(-1)), vecs.shape[1]),
        }
    )
    tbl = db.create_table(name, schema=table.schema)
    tbl.add(table)
    return tbl


def _median_ms(fn, items) -> float:
    times = []
    for x in items:
        t = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--upserts", type=int, default=300)
    ap.add_argument("--ann-rows", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=pathlib.Path, default=OUT / "store.json")
    args = ap.parse_args()

    import lancedb

    from lc_agents.retrieval import VectorStore, plan_index

    start = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    n, dim = args.rows, args.dim
    vecs = rng.standard_normal((n, dim)).astype(np.float32)
    ids = [f"row{i}" for i in range(n)]
    texts = [f"text of row {i}" for i in range(n)]
    queries = rng.standard_normal((args.queries, dim)).astype(np.float32)
    tmp = tempfile.mkdtemp(prefix="lc-store-bench-")

    # ---------------------------------------------------------------- add
    store_add, raw_add = [], []
    store = raw = None
    for r in range(args.repeats):
        t = time.perf_counter()
        store = VectorStore.open(os.path.join(tmp, f"store{r}"), RandomVectors(dim))
        store.add(texts, ids=ids, vectors=vecs)
        store_add.append(time.perf_counter() - t)
        t = time.perf_counter()
        raw = _raw_table(lancedb.connect(os.path.join(tmp, f"raw{r}")), "t", ids, texts, vecs)
        raw_add.append(time.perf_counter() - t)
    assert store is not None
    assert raw is not None
    t = time.perf_counter()
    again = store.add(texts, ids=ids, vectors=vecs)
    readd_s = time.perf_counter() - t
    assert again.unchanged == n

    # ---------------------------------------------------------------- flat query
    unit = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)

    def numpy_top10(q: np.ndarray) -> list[int]:
        scores = unit @ (q / np.linalg.norm(q))
        top = np.argpartition(-scores, 10)[:10]
        return top[np.argsort(-scores[top])].tolist()

    truth = [numpy_top10(q) for q in queries]
    t = time.perf_counter()
    store.search_vector(queries[0], 10)  # loads the in-memory copy of the vectors
    first_ms = 1000 * (time.perf_counter() - t)
    scan = VectorStore.open(store.path, RandomVectors(dim), flat_cache_bytes=0)
    store_ids = [[h.id for h in store.search_vector(q, 10)] for q in queries]
    agree = np.mean([s == [ids[j] for j in t] for s, t in zip(store_ids, truth, strict=True)])
    flat = {
        "store_ms": _median_ms(lambda q: store.search_vector(q, 10), queries),
        "store_first_query_ms": first_ms,
        "store_lancedb_scan_ms": _median_ms(lambda q: scan.search_vector(q, 10), queries),
        "raw_lancedb_ms": _median_ms(
            lambda q: raw.search(q).distance_type("cosine").limit(10).to_arrow(), queries
        ),
        "numpy_ms": _median_ms(numpy_top10, queries),
        "store_top10_equals_numpy": float(agree),
    }

    # ---------------------------------------------------------------- small upserts
    upserts = {}
    small = vecs[: args.upserts]
    for label, max_fragments in (("auto_compaction", 16), ("no_compaction", 0)):
        s = VectorStore.open(
            os.path.join(tmp, f"ups-{label}"),
            RandomVectors(dim),
            max_fragments=max_fragments,
            flat_cache_bytes=0,  # the LanceDB scan, which visits every fragment
        )
        t = time.perf_counter()
        for i in range(args.upserts):
            s.add([texts[i]], ids=[ids[i]], vectors=small[i : i + 1])
        total = time.perf_counter() - t
        upserts[label] = {
            "fragments": s.fragments(),
            "ms_per_upsert": 1000 * total / args.upserts,
            "query_ms": _median_ms(lambda q, s=s: s.search_vector(q, 10), queries),
        }

    # ---------------------------------------------------------------- ANN recall
    m = min(args.ann_rows, n)
    ann = VectorStore.open(os.path.join(tmp, "ann"), RandomVectors(dim))
    ann.add(texts[:m], ids=ids[:m], vectors=vecs[:m])
    plan = plan_index(m, dim, available_bytes=2**34, flat_max_rows=1)
    t = time.perf_counter()
    ann.build_index(plan)
    build_s = time.perf_counter() - t
    sub = unit[:m]
    ann_truth = [
        {ids[j] for j in np.argsort(-(sub @ (q / np.linalg.norm(q))))[:10]} for q in queries
    ]

    def recall(**settings) -> dict[str, float]:
        found = [{h.id for h in ann.search_vector(q, 10, **settings)} for q in queries]
        rec = float(np.mean([len(f & t) / 10 for f, t in zip(found, ann_truth, strict=True)]))
        ms = _median_ms(lambda q: ann.search_vector(q, 10, **settings), queries)
        return {"recall_at_10": rec, "query_ms": ms}

    documented = {"nprobes": plan.num_partitions, "refine_factor": 100}
    ann_result = {
        "rows": m,
        "num_partitions": plan.num_partitions,
        "num_sub_vectors": plan.num_sub_vectors,
        "build_s": build_s,
        "defaults": recall(),
        "documented": {**documented, **recall(**documented)},
    }

    result = {
        "benchmark": "retrieval_store",
        "machine": f"{os.cpu_count()}-core CPU ({platform.processor() or platform.machine()}), "
        f"shared; lancedb {lancedb.__version__}",
        "args": {k: (str(v) if isinstance(v, pathlib.Path) else v) for k, v in vars(args).items()},
        "add": {
            "rows": n,
            "dim": dim,
            "store_s": statistics.median(store_add),
            "raw_lancedb_s": statistics.median(raw_add),
            "ratio_store_over_raw": statistics.median(store_add) / statistics.median(raw_add),
            "store_readd_unchanged_s": readd_s,
        },
        "flat_query": {
            **flat,
            "ratio_store_over_numpy": flat["store_ms"] / flat["numpy_ms"],
            "ratio_store_over_raw_lancedb": flat["store_ms"] / flat["raw_lancedb_ms"],
        },
        "upserts": {"count": args.upserts, **upserts},
        "ann": ann_result,
        "wall_s": time.perf_counter() - start,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, allow_nan=False) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
