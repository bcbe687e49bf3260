"""Recall of the right function: RACG (file BM25 -> tree-sitter chunks -> dense rerank)
against BM25 alone, on this project's own source code.

Queries are made offline from docstrings. Every Python function or method of
``packages/`` whose docstring has a first line of at least five words is a candidate
target; ``--queries`` of them are sampled with ``--seed``. The query is that first line.
So that the answer is not found by string matching, the targets' docstrings are cut out
of the indexed code: the repository is copied to a temporary directory and, in each
target function, the lines of the docstring statement are deleted (targets whose body
would then be empty, or whose docstring shares a line with other code, are not used).
The right answer is the chunk of the copied file with the target's qualified name.

Methods (each ranks chunks; recall@k counts a hit when the target is in the top k):

* ``racg``: file-level BM25 (top ``--files`` files), chunks of those files, dense
  rerank with all-MiniLM-L6-v2 (the SwingArena RACG pipeline);
* ``racg_bm25_rerank``: the same file stage, chunks reranked by BM25 (isolates the dense
  rerank);
* ``bm25``: BM25 over every chunk of the repository (no file stage, no model);
* ``dense``: MiniLM over every chunk (no BM25 stage).

Writes ``docs/benchmarks/lc-agents-retrieval/racg_recall.json`` and ``.png``.

Run:
    uv run python packages/lc-agents/benchmarks/racg_recall.py --queries 200
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import random
import shutil
import subprocess
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[3]
OUT = ROOT / "docs" / "benchmarks" / "lc-agents-retrieval"
KS = (1, 5, 10)


def docstring_targets(files, min_words: int = 5):
    """(path, qualified name, docstring rows, first line) of usable Python functions."""
    import tree_sitter
    import tree_sitter_python

    from lc_agents.code import chunk_source

    parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_python.language()))
    out = []
    for f in files:
        if f.language != "python":
            continue
        chunks = [
            c
            for c in chunk_source(f.text, "python", f.path)
            if c.kind in ("function", "method") and c.part == 0
        ]
        counts: dict[str, int] = {}
        for c in chunks:
            counts[c.name] = counts.get(c.name, 0) + 1
        stack = [parser.parse(f.text.encode()).root_node]
        while stack:
            node = stack.pop()
            stack.extend(node.named_children)
            if node.type != "function_definition":
                continue
            found = docstring_of(node, min_words)
            if found is None:
                continue
            row = node.start_point[0] + 1
            short = node.child_by_field_name("name").text.decode()
            names = [
                c.name
                for c in chunks
                if c.start_line <= row <= c.end_line and c.name.split(".")[-1] == short
            ]
            # one chunk per name: skip overloads, property setters and nested defs
            if len(names) == 1 and counts[names[0]] == 1:
                out.append((f.path, names[0], *found))
    out.sort()
    return out


def docstring_of(def_node, min_words: int):
    """(first row, last row, first line) of a function's docstring, if it is usable."""
    body = def_node.child_by_field_name("body")
    stmts = [s for s in (body.named_children if body is not None else []) if s.type != "comment"]
    if len(stmts) < 2 or stmts[0].type != "expression_statement":
        return None  # no docstring, or nothing left once it is removed
    doc = stmts[0].named_children[0] if stmts[0].named_children else None
    if doc is None or doc.type != "string":
        return None
    first_row, last_row = stmts[0].start_point[0], stmts[0].end_point[0]
    if def_node.start_point[0] == first_row or stmts[1].start_point[0] == last_row:
        return None  # the docstring shares a line with other code
    content = doc.text.decode("utf-8", "replace").lstrip("rRbBuU").strip("\"'").strip()
    first = content.splitlines()[0].strip() if content else ""
    if len(first.split()) < min_words or ">>>" in first:
        return None
    return first_row, last_row, first


def build_copy(src_root: pathlib.Path, dst: pathlib.Path, targets) -> None:
    """Copy the repository and delete the targets' docstring lines in the copy."""
    shutil.copytree(
        src_root,
        dst,
        ignore=shutil.ignore_patterns(".*", "__pycache__", "*.pyc", "node_modules"),
        symlinks=True,
    )
    by_file: dict[str, list[tuple[int, int]]] = {}
    for path, _, s, e, _ in targets:
        by_file.setdefault(path, []).append((s, e))
    for path, spans in by_file.items():
        p = dst / path
        lines = p.read_text(encoding="utf-8").splitlines(keepends=True)
        drop = {r for s, e in spans for r in range(s, e + 1)}
        p.write_text("".join(line for i, line in enumerate(lines) if i not in drop))


def rank_of(ranked, path, name):
    for i, c in enumerate(ranked):
        if c.path == path and c.name == name:
            return i + 1
    return None


def recall(ranks, k):
    return sum(1 for r in ranks if r is not None and r <= k) / len(ranks)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repo", default=str(ROOT / "packages"))
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--files", type=int, default=10, help="files kept by the BM25 stage")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-dense-all", action="store_true", help="skip the dense-only method")
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()

    import torch
    from tqdm import tqdm

    from lc_agents.code import (
        CodeRetriever,
        RACGConfig,
        RetrievalReport,
        rank_chunks_bm25,
        scan_repository,
    )
    from lc_agents.retrieval import MiniLMEmbedder

    torch.set_num_threads(os.cpu_count() or 1)
    repo = pathlib.Path(args.repo)
    files, _ = scan_repository(repo)
    pool = docstring_targets(files)
    rng = random.Random(args.seed)
    targets = rng.sample(pool, min(args.queries, len(pool)))
    print(f"{len(pool)} candidate targets, {len(targets)} sampled")

    results: dict[str, list] = {m: [] for m in ("racg", "racg_bm25_rerank", "bm25", "dense")}
    timings: dict[str, float] = {m: 0.0 for m in results}
    with tempfile.TemporaryDirectory(prefix="racg-bench-") as tmp:
        copy = pathlib.Path(tmp) / "repo"
        build_copy(repo, copy, targets)
        embedder = MiniLMEmbedder(batch_size=32)
        racg = CodeRetriever(
            copy,
            embedder=embedder,
            config=RACGConfig(n_files=args.files),
            index_dir=pathlib.Path(tmp) / "index",
        )
        racg_bm25 = CodeRetriever(copy, config=RACGConfig(n_files=args.files, rerank="bm25"))
        chunks = racg.all_chunks()
        scan = racg.scan_report
        print(f"corpus: {scan.summary()}; {len(chunks)} chunks")
        if not args.no_dense_all:
            t0 = time.perf_counter()
            racg.store.add(
                [racg.embed_text(c) for c in chunks],
                metadata=[{"path": c.path} for c in chunks],
                ids=[c.id for c in chunks],
                progress=True,
            )
            timings["dense_index_s"] = time.perf_counter() - t0
        by_id = {c.id: c for c in chunks}
        file_stage: list[bool] = []
        for path, name, _, _, query in tqdm(targets, desc="queries"):
            t0 = time.perf_counter()
            rep = RetrievalReport(query=query, scan=racg.scan_report)
            ranked = [c for c, _ in racg.rank(query, rep)]
            timings["racg"] += time.perf_counter() - t0
            results["racg"].append(rank_of(ranked, path, name))
            file_stage.append(path in rep.files)
            t0 = time.perf_counter()
            ranked = [c for c, _ in racg_bm25.rank(query)]
            timings["racg_bm25_rerank"] += time.perf_counter() - t0
            results["racg_bm25_rerank"].append(rank_of(ranked, path, name))
            t0 = time.perf_counter()
            ranked = [c for c, _ in rank_chunks_bm25(query, chunks)]
            timings["bm25"] += time.perf_counter() - t0
            results["bm25"].append(rank_of(ranked, path, name))
            if not args.no_dense_all:
                t0 = time.perf_counter()
                hits = racg.store.search(query, k=10)
                timings["dense"] += time.perf_counter() - t0
                results["dense"].append(
                    rank_of([by_id[h.id] for h in hits if h.id in by_id], path, name)
                )
    if args.no_dense_all:
        results.pop("dense")
    n = len(targets)
    table = {
        m: {
            **{f"recall@{k}": round(recall(r, k), 4) for k in KS},
            "mrr@10": round(sum(1 / x for x in r if x is not None and x <= 10) / n, 4),
            "ms_per_query": round(1000 * timings[m] / n, 1),
        }
        for m, r in results.items()
    }
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    report = {
        "benchmark": "racg_recall",
        "command": (
            "uv run python packages/lc-agents/benchmarks/racg_recall.py "
            f"--repo {os.path.relpath(repo, ROOT)} --queries {args.queries} --files {args.files}"
        ),
        "machine": f"2-core CPU ({platform.processor() or platform.machine()})",
        "repo": os.path.relpath(repo, ROOT),
        "commit": commit,
        "queries": n,
        "candidate_targets": len(pool),
        "seed": args.seed,
        "files_kept_by_bm25": args.files,
        "embedder": embedder.name,
        "corpus": {"files": scan.indexed, "skipped": scan.skipped, "chunks": len(chunks)},
        "file_stage_recall": round(sum(file_stage) / n, 4),
        "dense_index_seconds": round(timings.get("dense_index_s", 0.0), 1),
        "results": table,
        "examples": [{"query": q, "target": f"{p}::{nm}"} for p, nm, _, _, q in targets[:5]],
    }
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "racg_recall.json").write_text(json.dumps(report, indent=2) + "\n")
    plot(table, report, out / "racg_recall.png")
    print(json.dumps(table, indent=2))
    print(f"file stage recall@{args.files}: {report['file_stage_recall']}")


LABELS = {
    "racg": "RACG (file BM25 + MiniLM rerank)",
    "racg_bm25_rerank": "file BM25 + BM25 rerank",
    "bm25": "BM25 over all chunks",
    "dense": "MiniLM over all chunks",
}


def plot(table, report, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = list(table)
    width = 0.8 / len(methods)
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, m in enumerate(methods):
        vals = [table[m][f"recall@{k}"] for k in KS]
        xs = [j + (i - (len(methods) - 1) / 2) * width for j in range(len(KS))]
        bars = ax.bar(xs, vals, width, label=LABELS[m])
        ax.bar_label(bars, fmt="%.2f", fontsize=7)
    ax.set_xticks(range(len(KS)), [f"recall@{k}" for k in KS])
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of queries")
    ax.set_title(
        f"Right function from its docstring's first line ({report['queries']} queries, "
        f"{report['corpus']['chunks']} chunks)",
        fontsize=9,
    )
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
