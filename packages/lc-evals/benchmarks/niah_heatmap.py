"""NIAH heat map and accuracy-vs-length curves for a lexical retrieval baseline.

The system under test is a real (if simple) baseline, not a model: it splits the
context into overlapping windows of characters (400 long, stride 200, so any needle lies
whole in some window), picks the first window sharing the most distinct (crudely stemmed)
words with the question, and answers with the value-shaped string (7-digit number or
UUID) within one stride around that window preceded by the most question words within 60 characters. Its
failures are its own: when several windows tie on overlap (distractor needles that share
a word of the key, background text using the key's words) the first one wins, and ties
get likelier as the context grows.

An oracle (returns the reference answer) is run too, as a check of the harness.

Run:  uv run python packages/lc-evals/benchmarks/niah_heatmap.py
Writes docs/benchmarks/lc-evals/{niah_heatmap_single.png, niah_heatmap_multikey.png,
accuracy_vs_length.png, niah_baseline.json}.
"""

from __future__ import annotations

import json
import pathlib
import platform
import re
import time

import lc_evals

OUT = pathlib.Path(__file__).resolve().parents[3] / "docs" / "benchmarks" / "lc-evals"
LENGTHS = [1_000 * 2**k for k in range(9)]  # characters, 1K to 256K
DEPTHS = [i / 10 for i in range(11)]
WINDOW = 400  # characters per retrieval window
STRIDE = 200  # characters between window starts
STOP = {
    "what",
    "is",
    "the",
    "for",
    "in",
    "of",
    "a",
    "an",
    "to",
    "are",
    "all",
    "and",
    "above",
    "text",
    "mentioned",
    "with",
}
VALUE_RE = re.compile(r"\b(?:\d{7}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b")
WORD_RE = re.compile(r"[a-z0-9]+")


def _words(text: str) -> set[str]:
    return {
        w[:-1] if len(w) > 3 and w.endswith("s") else w for w in WORD_RE.findall(text.lower())
    } - STOP


def lexical_retriever(item: lc_evals.TaskItem) -> str:
    """Top-1 window by distinct-word overlap with the question, then the best-cued value in it."""
    query = _words(item.question)
    starts = range(0, max(len(item.context) - WINDOW, 0) + STRIDE, STRIDE)
    start = max(starts, key=lambda i: len(query & _words(item.context[i : i + WINDOW])))
    best = item.context[max(start - STRIDE, 0) : start + WINDOW + STRIDE]  # read around the hit
    candidates = [m for m in VALUE_RE.finditer(best) if m.group() not in item.question]
    if not candidates:
        return "not found"
    cue = max(
        candidates, key=lambda m: len(query & _words(best[max(m.start() - 60, 0) : m.start()]))
    )
    return cue.group()


def main() -> None:
    t0 = time.perf_counter()
    suites = {
        "niah_single": lc_evals.make_suite(
            ["niah_single"],
            LENGTHS,
            n=3,
            seed=0,
            depths=DEPTHS,
            haystack="essay",
            value_kind="number",
        ),
        "niah_multikey": lc_evals.make_suite(
            ["niah_multikey"],
            LENGTHS,
            n=3,
            seed=0,
            depths=DEPTHS,
            haystack="needles",
            value_kind="number",
            num_distractors=3,
        ),
        "kv_retrieval": lc_evals.make_suite(["kv_retrieval"], LENGTHS, n=3, seed=0, depths=DEPTHS),
    }
    gen_s = time.perf_counter() - t0
    results = []
    oracle_scores = []
    for items in suites.values():
        results += lc_evals.run(lexical_retriever, items, progress=True)
        oracle_scores += [r.score for r in lc_evals.run(lambda item: item.answers[0], items)]
    lc_evals.plot_niah_heatmap(
        results,
        OUT / "niah_heatmap_single.png",
        task="niah_single",
        title="lexical retriever, niah_single, essay haystack",
    )
    lc_evals.plot_niah_heatmap(
        results,
        OUT / "niah_heatmap_multikey.png",
        task="niah_multikey",
        title="lexical retriever, niah_multikey, needle haystack",
    )
    lc_evals.plot_accuracy_vs_length(
        results, OUT / "accuracy_vs_length.png", title="lexical retriever baseline"
    )
    rows = lc_evals.summarize(results, by=("task", "target_length"))
    payload = {
        "system": f"lexical retriever: {WINDOW}-character windows (stride {STRIDE}), top-1 by distinct-word overlap, value with most question words in the 60 characters before it",
        "length_unit": "characters",
        "lengths": LENGTHS,
        "depths": DEPTHS,
        "items_per_cell": 3,
        "items": len(results),
        "generation_seconds": round(gen_s, 2),
        "oracle_mean_score": sum(oracle_scores) / len(oracle_scores),
        "by_task_and_length": rows,
        "by_task": lc_evals.summarize(results, by=("task",)),
        "machine": f"{platform.processor() or platform.machine()}, 2-core CPU",
        "command": "uv run python packages/lc-evals/benchmarks/niah_heatmap.py",
    }
    (OUT / "niah_baseline.json").write_text(json.dumps(payload, indent=2) + "\n")
    print(lc_evals.format_table(rows))
    print(
        f"oracle mean score {payload['oracle_mean_score']:.3f}; generation {gen_s:.1f} s for {len(results)} items"
    )


if __name__ == "__main__":
    main()
