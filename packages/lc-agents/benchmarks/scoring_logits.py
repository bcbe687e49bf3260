"""Candidate scoring with and without ``logits_to_keep`` on a long prompt, side by side.

``LocalBackend.score_continuations`` ranks fixed candidate answers after a prompt (the
readers of the LDAR and ACE benchmarks). Its prompt forward needs the next-token
distribution of the last position only; computing the logits of every position costs a
``[T, vocab]`` matrix product and a float32 log-softmax over it (8,192 positions x
151,936 tokens = 5 GB for Qwen2.5-Coder-0.5B). The backend passes ``logits_to_keep=1``
when the model takes it; ``--mode full`` forces the old path.

Each (prompt length, mode) runs in its own process (so its peak resident memory is its
own): the embedded Qwen2.5-Coder-0.5B-Instruct in bfloat16, one torch thread, a prompt of
the given length from Python's documentation, six 4-digit candidates, the prefix cache
off so every repeat pays the whole prompt. Reported: process CPU seconds per call (the
machine is shared, so CPU time, not wall time), peak RSS, the ratio full / last-only, and
the largest score difference between the modes.

    OMP_NUM_THREADS=1 nice -n 10 uv run python packages/lc-agents/benchmarks/scoring_logits.py

Writes docs/benchmarks/lc-agents/scoring_logits.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import time
from pathlib import Path
from typing import Any

from _cells import run_cell, sizes

ROOT = Path(__file__).resolve().parents[3]
OUT = ROOT / "docs" / "benchmarks" / "lc-agents" / "scoring_logits.json"
MODEL = "qwen2.5-coder-0.5b-instruct"
CANDIDATES = ["1873", "1921", "1868", "1904", "1950", "1899"]


def prose(tokenizer: Any, n_tokens: int) -> str:
    """About ``n_tokens`` tokens of Python's documentation (installed with Python)."""
    from lc_evals.tasks.docqa import doc_paragraphs

    text = "\n\n".join(p.text for p in doc_paragraphs())
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(ids) < n_tokens:
        raise SystemExit(f"the documentation text has {len(ids)} tokens, fewer than {n_tokens}")
    return tokenizer.decode(ids[:n_tokens])


def measure(length: int, mode: str, repeats: int) -> dict[str, Any]:
    """One (length, mode) cell in this process."""
    import torch

    from lc_agents.backends import LocalBackend

    torch.set_num_threads(1)
    backend = LocalBackend(MODEL, dtype="bfloat16", prefix_cache=False)
    if mode == "full":
        backend._logits_to_keep = False  # the path before logits_to_keep
    tok = backend.tokenizer
    text = prose(tok, length)
    prompt = backend.prompt_ids([{"role": "user", "content": text + "\n\nIn what year?"}])
    conts = [tok.encode(c, add_special_tokens=False) for c in CANDIDATES]
    backend.score_continuations(prompt[:64], conts)  # warm-up
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times, scores = [], []
    for _ in range(repeats):
        t0 = time.process_time()
        scores = backend.score_continuations(prompt, conts)
        times.append(time.process_time() - t0)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "length": length,
        "prompt_tokens": len(prompt),
        "mode": mode,
        "cpu_seconds": min(times),
        "cpu_seconds_all": times,
        "peak_rss_mib": peak / 1024,
        "peak_rss_growth_mib": (peak - rss0) / 1024,
        "scores": scores,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lengths", default="1024,4096,8192", help="prompt lengths (tokens)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--cell", nargs=2, metavar=("LENGTH", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error(f"--repeats must be >= 1, got {args.repeats}")
    if args.cell:  # a child process: one cell, JSON on stdout
        print(json.dumps(measure(int(args.cell[0]), args.cell[1], args.repeats)))
        return
    lengths = sizes(ap, "--lengths", args.lengths, 128, "lengths of at least 128 tokens")
    rows = []
    for length in lengths:
        cells = {}
        for mode in ("last", "full"):
            cells[mode] = run_cell(__file__, length, mode, args.repeats)
            print(
                f"{length:>6} tokens {mode:>4}: {cells[mode]['cpu_seconds']:.2f} CPU s, "
                f"peak RSS {cells[mode]['peak_rss_mib']:.0f} MiB",
                flush=True,
            )
        last, full = cells["last"], cells["full"]
        rows.append(
            {
                "prompt_tokens": last["prompt_tokens"],
                "last_only": {k: last[k] for k in last if k != "scores"},
                "full_logits": {k: full[k] for k in full if k != "scores"},
                "cpu_ratio_full_over_last": full["cpu_seconds"] / last["cpu_seconds"],
                "peak_rss_saved_mib": full["peak_rss_mib"] - last["peak_rss_mib"],
                "max_score_difference": max(
                    abs(a - b) for a, b in zip(last["scores"], full["scores"], strict=True)
                ),
                "same_ranking": sorted(range(6), key=lambda i: -last["scores"][i])
                == sorted(range(6), key=lambda i: -full["scores"][i]),
            }
        )
    report = {
        "benchmark": "LocalBackend.score_continuations: logits of the last position vs all",
        "model": f"{MODEL} (embedded, bfloat16)",
        "machine": f"{platform.machine()} CPU, 1 torch thread, shared with other jobs",
        "candidates": CANDIDATES,
        "repeats": args.repeats,
        "rows": rows,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    for r in rows:
        print(
            f"{r['prompt_tokens']:>6} prompt tokens: full / last-only CPU "
            f"{r['cpu_ratio_full_over_last']:.2f}x, peak RSS saved "
            f"{r['peak_rss_saved_mib']:.0f} MiB, max |score diff| {r['max_score_difference']:.3g}"
        )


if __name__ == "__main__":
    main()
