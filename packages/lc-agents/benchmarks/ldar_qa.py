"""LDAR vs top-k vs full context on QA with planted near-miss distractors.

Items: ``lc_evals`` task ``distractor_qa`` (a gold passage, ``--distractors`` near-miss
passages stating another number for a look-alike fact, ``--irrelevant`` unrelated ones).
Passages are ranked by MiniLM cosine similarity to the question. The downstream reader
(embedded SmolLM2-135M-Instruct, greedy) answers once per band of the action set for
every item; replies are cached on disk (``--cache``), so reruns and retraining are cheap.
LDAR is trained on the first ``--train`` items and evaluated with the rest; every method
is then scored from the same cached runs:

* ``ldar``: the band the trained head picks from the similarity profile;
* ``top1`` ... ``topk``: the k most similar passages;
* ``full``: every passage (the long-context strategy);
* ``oracle``: any band right (ceiling of the action set).

Accuracy and passage tokens (SmolLM2 tokenizer) per method.

Run (2-core CPU):
    nice uv run python packages/lc-agents/benchmarks/ldar_qa.py
Writes docs/benchmarks/lc-agents-ldar/ldar_qa.json, .png and the trained head ldar_head.pt.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch

import lc_evals
from lc_agents.contextnav import CachedChat
from lc_agents.ldar import (
    Band,
    LdarConfig,
    LdarRetriever,
    QaQuestion,
    QaReader,
    default_bands,
    label_examples,
    save_examples,
)
from lc_agents.models import cache_dir
from lc_agents.retrieval import HashingEmbedder, MiniLMEmbedder

ROOT = Path(__file__).resolve().parents[3]
OUT = ROOT / "docs" / "benchmarks" / "lc-agents-ldar"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", type=int, default=8)
    ap.add_argument("--test", type=int, default=6)
    ap.add_argument("--distractors", type=int, default=2)
    ap.add_argument("--irrelevant", type=int, default=3)
    ap.add_argument("--bands", choices=["compact", "default"], default="compact")
    ap.add_argument(
        "--time-budget",
        type=float,
        default=0.0,
        help="stop labelling new questions after this many seconds (0: no limit); the "
        "labelled ones are split in the train:test ratio",
    )
    ap.add_argument("--max-skip", type=int, default=1)
    ap.add_argument("--max-width", type=int, default=2)
    ap.add_argument("--token-penalty", type=float, default=0.1)
    ap.add_argument("--epochs", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--embedder", choices=["minilm", "hashing"], default="minilm")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-tokens", type=int, default=20)
    ap.add_argument("--cache", default=str(cache_dir() / "bench" / "ldar_qa.jsonl"))
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    t0 = time.time()

    n_pass = 1 + args.distractors + args.irrelevant
    items = lc_evals.generate(
        "distractor_qa",
        n=args.train + args.test,
        length=100_000,
        seed=args.seed,
        distractors=args.distractors,
        irrelevant=args.irrelevant,
        filler_sentences=0,
    )
    questions = [QaQuestion.from_task_item(it) for it in items]
    if args.bands == "compact":  # top-1/2/3, full, and the two bands skipping rank 0
        bands = sorted(
            {Band(0, 1), Band(0, 2), Band(0, 3), Band(0, n_pass), Band(1, 2), Band(1, 3)}
        )
    else:
        bands = default_bands(n_pass, max_skip=args.max_skip, max_width=args.max_width)
    embedder = MiniLMEmbedder() if args.embedder == "minilm" else HashingEmbedder(dim=256)

    from lc_agents.backends import LocalBackend

    backend = LocalBackend(max_tokens=args.max_tokens)
    model = CachedChat(backend, args.cache, model_key="smollm2-135m-instruct:greedy")
    reader = QaReader(model, count_tokens=backend.count_tokens, max_tokens=args.max_tokens)
    t_label = time.time()
    examples = []
    for i, q in enumerate(questions):
        if args.time_budget and time.time() - t_label > args.time_budget:
            print(f"time budget reached after {i} questions", flush=True)
            break
        examples += label_examples([q], embedder, reader, bands)
        print(f"labelled {i + 1}/{len(questions)} ({time.time() - t_label:.0f} s)", flush=True)
    label_s = time.time() - t_label
    n_train = round(len(examples) * args.train / (args.train + args.test))
    items = items[: len(examples)]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    save_examples(examples, out / "ldar_qa_examples.jsonl")
    train, test = examples[:n_train], examples[n_train:]
    gold_rank = []
    for e, it in zip(examples, items, strict=True):
        gold_rank.append(int(list(e.order).index(it.metadata["gold_index"])))

    retriever = LdarRetriever(
        bands, LdarConfig(token_penalty=args.token_penalty, epochs=args.epochs, seed=args.seed)
    )
    losses = retriever.fit(train)
    retriever.save(out / "ldar_head.pt")

    def score(pick) -> dict[str, float | None]:
        acc, tok = [], []
        for e in test:
            a = bands.index(pick(e))
            acc.append(e.correct[a])
            tok.append(e.tokens[a])
        return {"accuracy": float(np.mean(acc)), "tokens": float(np.mean(tok))}

    methods: dict[str, dict[str, float | None]] = {
        "ldar": score(lambda e: retriever.choose(e.similarities))
    }
    for k in range(1, n_pass):
        if Band(0, k) in bands:
            methods[f"top{k}"] = score(lambda e, k=k: Band(0, k))
    methods["full"] = score(lambda e: Band(0, n_pass))
    methods["oracle"] = {
        "accuracy": float(np.mean([np.nanmax(e.correct) for e in test])),
        "tokens": None,  # any band: no single token count (JSON null, not NaN)
    }
    train_fixed = {
        str(b): float(np.nanmean([e.correct[a] for e in train])) for a, b in enumerate(bands)
    }
    chosen = [str(retriever.choose(e.similarities)) for e in test]
    report = {
        "benchmark": "ldar_qa",
        "machine": f"2-core CPU ({platform.processor() or platform.machine()}), shared",
        "model": f"SmolLM2-135M-Instruct (embedded, greedy, max {args.max_tokens} tokens)",
        "embedder": embedder.name,
        "args": vars(args),
        "bands": [str(b) for b in bands],
        "n_train": len(train),
        "n_test": len(test),
        "methods": methods,
        "ldar_choices": chosen,
        "train_accuracy_per_band": train_fixed,
        "gold_rank_histogram": np.bincount(gold_rank, minlength=n_pass).tolist(),
        "final_loss": losses[-1],
        "model_calls": model.misses,
        "cache_hits": model.hits,
        "seconds": {"label": label_s, "total": time.time() - t0},
    }
    (out / "ldar_qa.json").write_text(json.dumps(report, indent=1, allow_nan=False))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, m in methods.items():
        if name == "oracle":
            ax.axhline(m["accuracy"], color="gray", ls=":", label="oracle band")
            continue
        colour = (
            "tab:red" if name == "ldar" else ("tab:blue" if name.startswith("top") else "black")
        )
        ax.scatter(m["tokens"], m["accuracy"], color=colour, s=60 if name == "ldar" else 30)
        ax.annotate(
            name,
            (m["tokens"], m["accuracy"]),
            textcoords="offset points",
            xytext=(4, 4),
            fontsize=8,
        )
    ax.set_xlabel("passage tokens per question")
    ax.set_ylabel("accuracy")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title(f"distractor QA, SmolLM2-135M, {len(test)} test questions")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "ldar_qa.png", dpi=120)
    print(
        json.dumps(
            {k: report[k] for k in ("methods", "ldar_choices", "model_calls", "seconds")}, indent=1
        )
    )


if __name__ == "__main__":
    main()
