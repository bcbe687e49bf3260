"""ICL example selection from a pool with planted noise: ContextNav vs similarity top-k vs random.

Pool: ``lc_evals.icl.make_icl_pool`` (customer messages routed to four topics; a share of
the examples carry a wrong label, others are yes/no questions or sentiment-labelled:
structurally misaligned). Queries are new clean messages. Every method gives the same
downstream model (the embedded SmolLM2-135M-Instruct, greedy) ``--shots`` examples:

* ``contextnav``: the Operational Grammar Graph's plan after refining it from feedback on
  ``--val`` validation queries (``--budget`` chains), run by :class:`ContextNav`;
* ``similarity``: the ``--shots`` nearest examples (MiniLM, LanceDB);
* ``random``: ``--shots`` examples drawn uniformly from the pool.

Also reported, without the model, over ``--audit`` queries: the share of chosen shots
that are mislabelled or misaligned. Model replies are cached (``--cache``), so reruns are
cheap.

Run (2-core CPU):
    nice uv run python packages/lc-agents/benchmarks/contextnav_icl.py
Writes docs/benchmarks/lc-agents-contextnav/contextnav_icl.json and .png.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from lc_agents.contextnav import (
    CachedChat,
    ContextItem,
    ContextNav,
    ContextNavConfig,
    ExamplePool,
    IclAnswerer,
    random_shots,
    similarity_shots,
)
from lc_agents.models import cache_dir
from lc_agents.retrieval import HashingEmbedder, MiniLMEmbedder
from lc_evals.icl import POOL_LABELS, make_icl_pool, make_pool_queries
from lc_evals.icl.pool import INSTRUCTION

ROOT = Path(__file__).resolve().parents[3]
OUT = ROOT / "docs" / "benchmarks" / "lc-agents-contextnav"
BAD = ("noisy", "misaligned_format", "misaligned_labels")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pool", type=int, default=200)
    ap.add_argument("--noise", type=float, default=0.25)
    ap.add_argument("--misaligned", type=float, default=0.2)
    ap.add_argument("--shots", type=int, default=4)
    ap.add_argument("--queries", type=int, default=12, help="test queries answered by the model")
    ap.add_argument("--val", type=int, default=6, help="validation queries for graph refinement")
    ap.add_argument("--budget", type=int, default=3, help="chains evaluated during refinement")
    ap.add_argument("--audit", type=int, default=100, help="queries for the model-free shot audit")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--embedder", choices=["minilm", "hashing"], default="minilm")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=8, help="reply cap of the learner")
    ap.add_argument("--cache", default=str(cache_dir() / "bench" / "contextnav_icl.jsonl"))
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    t0 = time.time()

    data = make_icl_pool(
        args.pool, noise_rate=args.noise, misaligned_rate=args.misaligned, seed=args.seed
    )
    kinds = {e.id: e.kind for e in data.examples}
    items = [ContextItem(e.id, e.text, e.label, metadata={"kind": e.kind}) for e in data.examples]
    embedder = MiniLMEmbedder() if args.embedder == "minilm" else HashingEmbedder(dim=256)
    pool = ExamplePool.open(tempfile.mkdtemp(prefix="cn-pool-"), embedder)
    pool.add(items)
    n_all = args.val + args.queries + args.audit
    queries = [
        ContextItem(q.id, q.text, q.label)
        for q in make_pool_queries(data, n_all, seed=args.seed + 1)
    ]
    val, test, audit = queries[: args.val], queries[args.val : args.val + args.queries], queries
    config = ContextNavConfig(shots=args.shots, refine_budget=args.budget)
    nav = ContextNav(pool, config)

    # Model-free audit of the shots each method picks (default plan, before feedback).
    plan0 = nav.graph.plan()
    audit_counts: dict[str, dict[str, int]] = {
        m: dict.fromkeys(("clean", *BAD), 0) for m in ("contextnav", "similarity", "random")
    }
    for q in audit:
        picks = {
            "contextnav": nav.build(q, POOL_LABELS).examples,
            "similarity": similarity_shots(pool, q, args.shots),
            "random": random_shots(items, args.shots, seed=args.seed, query_id=q.id),
        }
        for m, shots in picks.items():
            for s in shots:
                audit_counts[m][kinds[s.id]] += 1
    print("shot audit:", json.dumps(audit_counts), flush=True)

    from lc_agents.backends import LocalBackend

    backend = LocalBackend(max_tokens=args.max_tokens)
    model = CachedChat(backend, args.cache, model_key="smollm2-135m-instruct:greedy")
    answerer = IclAnswerer(model, INSTRUCTION, POOL_LABELS, max_tokens=args.max_tokens)

    t_ref = time.time()
    steps = nav.optimize(val, answerer, POOL_LABELS, progress=True)
    plan = nav.graph.plan()
    refine_s = time.time() - t_ref
    print("plan after feedback:", plan, flush=True)

    results: dict[str, list[bool]] = {"contextnav": [], "similarity": [], "random": []}
    t_eval = time.time()
    for i, q in enumerate(test):
        results["contextnav"].append(answerer.correct(q, nav.build(q, POOL_LABELS).examples))
        results["similarity"].append(answerer.correct(q, similarity_shots(pool, q, args.shots)))
        results["random"].append(
            answerer.correct(q, random_shots(items, args.shots, seed=args.seed, query_id=q.id))
        )
        print(
            f"[{i + 1}/{len(test)}] "
            + " ".join(f"{m}={np.mean(v):.2f}" for m, v in results.items()),
            flush=True,
        )
    eval_s = time.time() - t_eval

    acc = {m: float(np.mean(v)) for m, v in results.items()}
    report = {
        "benchmark": "contextnav_icl",
        "machine": f"2-core CPU ({platform.processor() or platform.machine()}), shared",
        "model": f"SmolLM2-135M-Instruct (embedded, greedy, max {args.max_tokens} tokens)",
        "embedder": embedder.name,
        "args": vars(args),
        "pool_stats": data.stats,
        "accuracy": acc,
        "correct": {m: int(sum(v)) for m, v in results.items()},
        "n_test": len(test),
        "shot_audit": {"queries": len(audit), "counts": audit_counts, "plan": list(plan0)},
        "refinement": [
            {"chain": list(s.chain), "accuracy": s.accuracy, "accepted": s.accepted} for s in steps
        ],
        "plan_after_feedback": list(plan),
        "graph": nav.graph.to_dict(),
        "model_calls": model.misses,
        "cache_hits": model.hits,
        "seconds": {"refine": refine_s, "eval": eval_s, "total": time.time() - t0},
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "contextnav_icl.json").write_text(json.dumps(report, indent=1))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    methods = list(results)
    axes[0].bar(methods, [acc[m] for m in methods], color=["tab:green", "tab:blue", "tab:gray"])
    axes[0].set_ylim(0, 1)
    axes[0].set_ylabel("accuracy")
    axes[0].set_title(f"SmolLM2-135M, {args.shots}-shot, {len(test)} queries")
    bottom = np.zeros(len(methods))
    for kind, colour in zip(
        ("clean", *BAD), ("tab:green", "tab:red", "tab:orange", "tab:purple"), strict=True
    ):
        vals = np.array([audit_counts[m][kind] / (len(audit) * args.shots) for m in methods])
        axes[1].bar(methods, vals, bottom=bottom, label=kind, color=colour)
        bottom += vals
    axes[1].set_ylabel("share of chosen shots")
    axes[1].set_title(f"shot audit over {len(audit)} queries")
    axes[1].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(out / "contextnav_icl.png", dpi=120)
    print(
        json.dumps(
            {k: report[k] for k in ("accuracy", "correct", "model_calls", "seconds")}, indent=1
        )
    )


if __name__ == "__main__":
    main()
