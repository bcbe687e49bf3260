"""Peak memory and step time of one training step of SmolLM2-135M vs sequence length.

Side by side in one run: (a) ordinary training, (b) ordinary training with gradient
checkpointing, (c) chunk-recurrent training (lc_train.oomb). Every (method, length) cell
runs in a fresh subprocess; its memory is the peak resident set size of that process
(the kernel's VmHWM, reset after
loading) minus the resident size after the model was loaded, so cells cannot disturb each other.

    uv run python benchmarks/oomb_memory.py --lengths 512 1024 2048 4096 --oomb-extra 8192

On a GPU (peak memory from ``torch.cuda.max_memory_allocated``; bf16; KV pages
offloaded to pinned host memory with ``--offload``):

    uv run python benchmarks/oomb_memory.py --device cuda --dtype bfloat16 --offload \
        --lengths 4096 8192 16384 32768 --oomb-extra 65536 131072 --chunk 4096

Writes docs/benchmarks/lc-train/oomb_memory[_cuda].json and .png.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "docs" / "benchmarks" / "lc-train"
METHODS = ("ordinary", "checkpointing", "oomb")


def run_cell(method: str, length: int, args: argparse.Namespace) -> dict:
    """One training step in this process; returns its measurements."""
    import torch

    from lc_agents.models import load_model
    from lc_train.oomb import ChunkRecurrentConfig, chunk_recurrent_backward
    from lc_train.oomb.memory import reset_peak_rss, rss_mb

    torch.manual_seed(0)
    cuda = args.device == "cuda"
    model, _ = load_model(dtype=getattr(torch, args.dtype))
    model.to(args.device)
    model.train()
    if method == "checkpointing":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    ids = torch.randint(
        0, model.config.vocab_size, (1, length), generator=torch.Generator().manual_seed(length)
    ).to(args.device)
    if cuda:
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated() / 2**20
        torch.cuda.reset_peak_memory_stats()
    else:
        base = rss_mb("VmRSS")
        reset_peak_rss()  # loading the model is not counted
    start = time.perf_counter()
    if method == "oomb":
        config = ChunkRecurrentConfig(chunk_size=args.chunk, offload=args.offload)
        result = chunk_recurrent_backward(model, ids, config=config)
        loss, kv_bytes = float(result.loss), result.kv_bytes
        device_kv_bytes = result.device_kv_bytes
    else:
        out = model(ids, labels=ids)
        out.loss.backward()
        loss, kv_bytes, device_kv_bytes = float(out.loss), 0, 0
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() / 2**20 if cuda else rss_mb("VmHWM")
    return {
        "method": method,
        "length": length,
        "peak_mb": peak - base,
        "seconds": seconds,
        "loss": loss,
        "kv_bytes": kv_bytes,
        "device_kv_bytes": device_kv_bytes,  # with --offload: the staging slots only
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[512, 1024, 2048, 4096])
    parser.add_argument(
        "--oomb-extra", type=int, nargs="*", default=[8192], help="lengths run with OOMB only"
    )
    parser.add_argument("--chunk", type=int, default=512)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument(
        "--offload", action="store_true", help="keep OOMB's KV pages in host memory"
    )
    parser.add_argument("--cell", nargs=2, metavar=("METHOD", "LENGTH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cell:
        print(json.dumps(run_cell(args.cell[0], int(args.cell[1]), args)))
        return

    cells = [(m, n) for n in args.lengths for m in METHODS] + [("oomb", n) for n in args.oomb_extra]
    rows = []
    for i, (method, length) in enumerate(cells, 1):
        print(f"[{i}/{len(cells)}] {method} at {length} tokens ...", flush=True)
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--cell",
                method,
                str(length),
                "--chunk",
                str(args.chunk),
                "--device",
                args.device,
                "--dtype",
                args.dtype,
                *(["--offload"] if args.offload else []),
            ],
            capture_output=True,
            text=True,
            env={
                **os.environ,
                "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"),
                # a fixed mmap threshold makes freed large buffers leave the resident set at
                # once, so the peak RSS tracks live tensors rather than malloc's free lists
                "MALLOC_MMAP_THRESHOLD_": "131072",
            },
        )
        if proc.returncode:
            print(proc.stderr[-2000:], file=sys.stderr)
            rows.append(
                {"method": method, "length": length, "error": proc.stderr.strip().splitlines()[-1]}
            )
            continue
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        print(
            f"    peak +{row['peak_mb']:.0f} MB, {row['seconds']:.1f} s, loss {row['loss']:.4f}",
            flush=True,
        )
        rows.append(row)
    summary = summarize(rows)
    OUT.mkdir(parents=True, exist_ok=True)
    suffix = "_cuda" if args.device == "cuda" else ""
    record = {
        "machine": _machine(args.device),
        "model": f"SmolLM2-135M-Instruct ({args.dtype})",
        "memory": "torch.cuda.max_memory_allocated"
        if args.device == "cuda"
        else "peak RSS (VmHWM)",
        "chunk_size": args.chunk,
        "offload": args.offload,
        "rows": rows,
        "summary": summary,
    }
    (OUT / f"oomb_memory{suffix}.json").write_text(json.dumps(record, indent=2))
    plot(rows, OUT / f"oomb_memory{suffix}.png", record["machine"])
    print(json.dumps(summary, indent=2))


def _slope_mb_per_10k(points: list[tuple[int, float]]) -> float:
    import numpy as np

    x, y = np.array(points, dtype=float).T
    return float(np.polyfit(x, y, 1)[0] * 10_000)


def summarize(rows: list[dict]) -> dict:
    """MB per extra 10K tokens (least-squares slope), step-time ratios, 20 GB estimates."""
    import numpy as np

    ok = [r for r in rows if "error" not in r]
    out: dict = {}
    for method in METHODS:
        pts = sorted((r["length"], r["peak_mb"]) for r in ok if r["method"] == method)
        if len(pts) < 2:
            continue
        x, y = np.array(pts, dtype=float).T
        # ordinary/checkpointing grow super-linearly (attention, logits); fit a quadratic
        # to estimate where they cross 20 GB, a line for the per-10K-token growth.
        coeffs = np.polyfit(x, y, 2 if method != "oomb" and len(x) >= 3 else 1)
        roots = [
            r.real
            for r in np.roots(np.poly1d(coeffs) - 20_000)
            if abs(r.imag) < 1e-6 and r.real > 0
        ]
        out[method] = {
            "mb_per_10k_tokens": _slope_mb_per_10k(pts[-2:]),
            "longest_length_in_20gb_estimate": int(min(roots)) if roots else None,
        }
    kv = [r for r in ok if r["method"] == "oomb"]
    if len(kv) >= 2:
        kv_pts = sorted((r["length"], r["kv_bytes"] / 2**20) for r in kv)
        out["kv_and_kv_grad_mb_per_10k_tokens"] = _slope_mb_per_10k(kv_pts)
    times = {(r["method"], r["length"]): r["seconds"] for r in ok}
    out["step_time_ratio_oomb_vs_checkpointing"] = {
        str(n): times[("oomb", n)] / times[("checkpointing", n)]
        for (m, n) in times
        if m == "oomb" and ("checkpointing", n) in times
    }
    return out


def _machine(device: str) -> str:
    if device == "cuda":
        import torch

        return torch.cuda.get_device_name()
    return f"{platform.machine()} CPU, {os.cpu_count()} cores, Python {platform.python_version()}"


def plot(rows: list[dict], path: Path, machine: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for method in METHODS:
        pts = sorted(
            (r["length"], r["peak_mb"]) for r in rows if r["method"] == method and "error" not in r
        )
        if pts:
            ax.plot(*zip(*pts), marker="o", label=method)
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("peak memory of one step above the loaded model (MB)")
    ax.set_title(f"SmolLM2-135M training step ({machine})", fontsize=9)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
