"""MemAgent's sentence scoring with and without ``logits_to_keep``, side by side.

``QuestionScorer`` (the ``score`` memory mode) ranks a chunk's sentences by how much
each raises the model's likelihood of the question: one forward over ``note + question``
per sentence, batched. Only the question line's positions are read, yet without
``logits_to_keep`` the model computes a ``[rows, width, vocab]`` logit tensor and its
float32 log-softmax (16 rows x 60 positions x 151,936 tokens = 580 MB for
Qwen2.5-Coder-0.5B). The scorer pads on the left, so the question ends every row, and
asks for the last ``len(question) + 1`` positions when the model takes
``logits_to_keep``; ``full`` forces every position's logits.

Each (sentence count, mode) runs in its own process (so its peak resident memory is its
own): the embedded Qwen2.5-Coder-0.5B-Instruct in float32 (``LocalBackend``'s default),
one torch thread, sentences from Python's documentation, a fresh cache per repeat.
Reported: process CPU seconds per ``score`` call (the machine is shared, so CPU time),
peak RSS, the ratio full / kept and the largest score difference.

    OMP_NUM_THREADS=1 nice -n 10 uv run python packages/lc-agents/benchmarks/question_scoring.py

Writes docs/benchmarks/lc-agents/question_scoring.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import resource
import time
from pathlib import Path
from typing import Any

from _cells import run_cell, sizes

ROOT = Path(__file__).resolve().parents[3]
OUT = ROOT / "docs" / "benchmarks" / "lc-agents" / "question_scoring.json"
MODEL = "qwen2.5-coder-0.5b-instruct"
QUESTION = "Which statement leaves the innermost enclosing loop early?"


def sentences(n: int, min_words: int = 8, max_words: int = 60) -> list[str]:
    """The first ``n`` distinct prose sentences of Python's documentation (installed with
    Python; the scorer caches repeats, so each must be new)."""
    from lc_evals.tasks.docqa import doc_paragraphs

    out: list[str] = []
    for p in doc_paragraphs():
        for s in re.split(r"(?<=[.!?])\s+", " ".join(p.text.split())):
            if min_words <= len(s.split()) <= max_words and s not in out:
                out.append(s)
                if len(out) == n:
                    return out
    raise SystemExit(f"the documentation has {len(out)} such sentences, fewer than {n}")


def measure(n: int, mode: str, repeats: int) -> dict[str, Any]:
    """One (sentence count, mode) cell in this process."""
    import torch

    from lc_agents.backends import LocalBackend
    from lc_agents.memagent.scoring import QuestionScorer

    torch.set_num_threads(1)
    backend = LocalBackend(MODEL)
    scorer = QuestionScorer(backend.model, backend.tokenizer)
    if mode == "full":
        scorer._keeps_logits = False  # every position's logits
    texts = sentences(n)
    scorer.score(QUESTION, texts[:2])  # warm-up
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times, scores = [], []
    for _ in range(repeats):
        scorer.clear()
        t0 = time.process_time()
        scores = scorer.score(QUESTION, texts)
        times.append(time.process_time() - t0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tokens = [len(backend.tokenizer.encode(t, add_special_tokens=False)) for t in texts]
    return {
        "sentences": n,
        "mean_sentence_tokens": sum(tokens) / len(tokens),
        "mode": mode,
        "cpu_seconds": min(times),
        "cpu_seconds_all": times,
        "peak_rss_mib": peak / 1024,
        "peak_rss_growth_mib": (peak - rss0) / 1024,
        "scores": scores,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--sentences", default="16,64", help="sentences per score call")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--cell", nargs=2, metavar=("N", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error(f"--repeats must be >= 1, got {args.repeats}")
    if args.cell:  # a child process: one cell, JSON on stdout
        print(json.dumps(measure(int(args.cell[0]), args.cell[1], args.repeats)))
        return
    counts = sizes(ap, "--sentences", args.sentences, 1, "counts of at least 1")
    rows = []
    for n in counts:
        cells = {}
        for mode in ("kept", "full"):
            cells[mode] = run_cell(__file__, n, mode, args.repeats)
            print(
                f"{n:>4} sentences {mode:>4}: {cells[mode]['cpu_seconds']:.2f} CPU s, "
                f"peak RSS {cells[mode]['peak_rss_mib']:.0f} MiB",
                flush=True,
            )
        kept, full = cells["kept"], cells["full"]
        rows.append(
            {
                "sentences": n,
                "mean_sentence_tokens": kept["mean_sentence_tokens"],
                "kept": {k: kept[k] for k in kept if k != "scores"},
                "full_logits": {k: full[k] for k in full if k != "scores"},
                "cpu_ratio_full_over_kept": full["cpu_seconds"] / kept["cpu_seconds"],
                "peak_rss_saved_mib": full["peak_rss_mib"] - kept["peak_rss_mib"],
                "max_score_difference": max(
                    abs(a - b) for a, b in zip(kept["scores"], full["scores"], strict=True)
                ),
            }
        )
    report = {
        "benchmark": "QuestionScorer.score: logits of the question line vs every position",
        "model": f"{MODEL} (embedded, float32)",
        "machine": f"{platform.machine()} CPU, 1 torch thread, shared with other jobs",
        "question": QUESTION,
        "batch_size": 16,
        "repeats": args.repeats,
        "rows": rows,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
