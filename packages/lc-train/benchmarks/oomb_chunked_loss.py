"""Peak memory of a chunk-recurrent step with and without the chunked LM-head loss.

A random-initialised Qwen2 model with Qwen2.5's vocabulary (151,936 tokens, tied
embeddings) and a small body (2 layers, hidden 256), so that the logits are what a
large vocabulary makes them at long context: the largest buffer of the step. For each
sequence length, side by side in one run, one chunk-recurrent forward/backward with the
logits of a whole chunk at once (``loss_chunk_size=None``) and with pieces of
``--loss-chunk`` positions. Every (setting, length) cell runs in a fresh subprocess;
its memory is the peak resident set size of that process (the kernel's ``VmHWM``,
reset after the model and inputs are built) minus the resident size at that point.
The loss and the relative gradient difference of the two settings are recorded too.

Writes ``docs/benchmarks/lc-train-oomb/oomb_chunked_loss.json`` and ``.png``.

    uv run python packages/lc-train/benchmarks/oomb_chunked_loss.py

``--timing`` instead times the step in one process at one length, the settings
interleaved over several rounds (fairer than single runs on a shared machine), and adds
the result to the JSON as ``timing``:

    uv run python packages/lc-train/benchmarks/oomb_chunked_loss.py --timing --lengths 2048
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).resolve().parents[3] / "docs" / "benchmarks" / "lc-train-oomb"
VOCAB = 151_936  # Qwen2.5


def run_cell(loss_chunk: int | None, length: int, args: argparse.Namespace) -> dict:
    """One chunk-recurrent step in this process; returns its measurements."""
    import torch

    from lc_train.oomb import ChunkRecurrentConfig, chunk_recurrent_backward
    from lc_train.oomb.memory import reset_peak_rss, rss_mb

    model = _model(args, length)
    ids = torch.randint(0, VOCAB, (1, length), generator=torch.Generator().manual_seed(length))
    for p in model.parameters():  # gradient buffers exist before the measurement
        p.grad = torch.zeros_like(p)
    cfg = ChunkRecurrentConfig(
        chunk_size=args.chunk, page_size=128, block_tokens=args.chunk, loss_chunk_size=loss_chunk
    )
    base = rss_mb("VmRSS")
    reset_peak_rss()
    start = time.perf_counter()
    result = chunk_recurrent_backward(model, ids, config=cfg)
    seconds = time.perf_counter() - start
    peak = rss_mb("VmHWM")
    grad = torch.cat([p.grad.flatten() for p in model.parameters()])
    path = Path(args.grad_dir) / f"{loss_chunk}_{length}.pt"
    torch.save(grad, path)
    rows = min(loss_chunk or args.chunk, args.chunk)
    return {
        "loss_chunk_size": loss_chunk,
        "length": length,
        "peak_mb": peak - base,
        "seconds": seconds,
        "loss": float(result.loss),
        "kv_bytes": result.kv_bytes,
        "logits_fp32_mb": rows * VOCAB * 4 / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    parser.add_argument("--chunk", type=int, default=1024)
    parser.add_argument("--loss-chunk", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--timing", action="store_true", help="interleaved step times only")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --timing")
    parser.add_argument(
        "--timing-chunks", type=int, nargs="+", default=[0, 512, 128], help="0: whole chunk"
    )
    parser.add_argument("--grad-dir", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--cell", nargs=2, metavar=("LOSS_CHUNK", "LENGTH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cell:
        import torch

        torch.set_num_threads(args.threads)
        loss_chunk = None if args.cell[0] == "none" else int(args.cell[0])
        print(json.dumps(run_cell(loss_chunk, int(args.cell[1]), args)))
        return

    import torch

    if args.timing:
        timing(args)
        return
    settings: list[int | None] = [None, args.loss_chunk]
    rows = []
    with tempfile.TemporaryDirectory() as grad_dir:
        for length in args.lengths:
            for loss_chunk in settings:
                print(f"loss_chunk_size={loss_chunk} at {length} tokens ...", flush=True)
                cmd = [sys.executable, __file__, "--cell", str(loss_chunk).lower(), str(length)]
                for flag in ("chunk", "hidden", "layers", "seed", "threads"):
                    cmd += [f"--{flag}", str(getattr(args, flag))]
                proc = subprocess.run(
                    [*cmd, "--grad-dir", grad_dir],
                    capture_output=True,
                    text=True,
                    env={
                        **os.environ,
                        "OMP_NUM_THREADS": str(args.threads),
                        # freed large buffers leave the resident set at once, so the peak
                        # RSS follows live tensors rather than malloc's free lists
                        "MALLOC_MMAP_THRESHOLD_": "131072",
                    },
                )
                if proc.returncode:
                    sys.exit(proc.stderr[-3000:])
                row = json.loads(proc.stdout.strip().splitlines()[-1])
                print(
                    f"    peak +{row['peak_mb']:.0f} MB, {row['seconds']:.1f} s, "
                    f"loss {row['loss']:.6f}",
                    flush=True,
                )
                rows.append(row)
            whole = torch.load(Path(grad_dir) / f"None_{length}.pt")
            piece = torch.load(Path(grad_dir) / f"{args.loss_chunk}_{length}.pt")
            rows[-1]["grad_rel_diff_vs_unchunked"] = float((piece - whole).norm() / whole.norm())
    summary = {}
    for length in args.lengths:
        a, b = (r for r in rows if r["length"] == length)
        summary[str(length)] = {
            "peak_mb_unchunked": a["peak_mb"],
            "peak_mb_chunked": b["peak_mb"],
            "saved_mb": a["peak_mb"] - b["peak_mb"],
            "peak_ratio": b["peak_mb"] / a["peak_mb"],
            "time_ratio": b["seconds"] / a["seconds"],
            "loss_abs_diff": abs(a["loss"] - b["loss"]),
            "grad_rel_diff": b["grad_rel_diff_vs_unchunked"],
        }
    record = {
        "machine": f"{platform.machine()} CPU, {os.cpu_count()} cores, "
        f"{args.threads} torch threads, Python {platform.python_version()}, "
        f"torch {torch.__version__}",
        "model": f"random Qwen2, vocab {VOCAB}, hidden {args.hidden}, {args.layers} layers, "
        "4/2 heads, tied embeddings, float32",
        "memory": "peak RSS (VmHWM) of a fresh process above its resident size before the step",
        "chunk_size": args.chunk,
        "loss_chunk_size": args.loss_chunk,
        "rows": rows,
        "summary": summary,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "oomb_chunked_loss.json").write_text(json.dumps(record, indent=2) + "\n")
    plot(rows, args, OUT / "oomb_chunked_loss.png", record["machine"])
    print(json.dumps(summary, indent=2))


def _model(args: argparse.Namespace, length: int):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(args.seed)
    config = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=args.hidden,
        intermediate_size=args.hidden * 11 // 4,
        num_hidden_layers=args.layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max(length, 32768),
        use_sliding_window=False,
        tie_word_embeddings=True,
    )
    return Qwen2ForCausalLM(config).float().train()


def timing(args: argparse.Namespace) -> None:
    """Seconds per step of each ``--timing-chunks`` setting, interleaved over rounds."""
    import statistics

    import torch

    from lc_train.oomb import ChunkRecurrentConfig, chunk_recurrent_backward

    torch.set_num_threads(args.threads)
    length = args.lengths[0]
    model = _model(args, length)
    ids = torch.randint(0, VOCAB, (1, length), generator=torch.Generator().manual_seed(length))
    seconds: dict[str, list[float]] = {str(c or None): [] for c in args.timing_chunks}
    for r in range(args.rounds):
        for c in args.timing_chunks:
            cfg = ChunkRecurrentConfig(
                chunk_size=args.chunk,
                page_size=128,
                block_tokens=args.chunk,
                loss_chunk_size=c or None,
            )
            model.zero_grad()
            start = time.perf_counter()
            chunk_recurrent_backward(model, ids, config=cfg)
            seconds[str(c or None)].append(time.perf_counter() - start)
            print(f"round {r + 1}: loss_chunk_size={c or None} {seconds[str(c or None)][-1]:.1f} s")
    base = statistics.median(seconds["None"])
    result = {
        "length": length,
        "rounds": args.rounds,
        "threads": args.threads,
        "seconds": seconds,
        "median_ratio_vs_whole_chunk": {k: statistics.median(v) / base for k, v in seconds.items()},
    }
    path = OUT / "oomb_chunked_loss.json"
    record = json.loads(path.read_text()) if path.exists() else {}
    record["timing"] = result
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(result, indent=2))


def plot(rows: list[dict], args: argparse.Namespace, path: Path, machine: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for loss_chunk, label in (
        (None, f"logits of a whole chunk ({args.chunk} positions)"),
        (args.loss_chunk, f"chunked loss ({args.loss_chunk} positions)"),
    ):
        pts = sorted(
            (r["length"], r["peak_mb"]) for r in rows if r["loss_chunk_size"] == loss_chunk
        )
        ax.plot(*zip(*pts), marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("peak memory of one step above the model (MB)")
    ax.set_title(f"OOMB step, random Qwen2 with a 152K vocabulary\n{machine}", fontsize=8)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
