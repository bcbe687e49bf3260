"""DSSA stage 1 (block scoring and top-k) on its own: chunked PyTorch vs the fused op.

``select_group_blocks`` scores blocks either with this package's chunked PyTorch path
(the CPU path) or with ``lc_kernels.compressed_attention.group_block_scores``, which on
CUDA is one fused Triton pass (log-sum-exp, then pooled group sums) and elsewhere its
brute-force PyTorch reference. Both run side by side in one process on random inputs in
SmolLM2-135M's attention shape (9 query heads, 3 KV heads, head dim 64): a prefill of S
queries with ``DSSAConfig.small(query_block=64)`` and one decode query
(``DSSAConfig.small()``) over S keys. Also reported: the share of selections on which
the two paths agree (the scores differ only by float summation order).

    python benchmarks/dssa_stage1.py --device cuda --lengths 8192 16384 32768 65536
    uv run python benchmarks/dssa_stage1.py --lengths 2048 4096   # CPU: vs the reference
    TRITON_INTERPRET=1 uv run python benchmarks/dssa_stage1.py --lengths 256 --reps 1 \
        --fused-backend triton --out /tmp/stage1_smoke.json   # the kernel, interpreted
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import time
from collections.abc import Callable
from typing import Any

import torch

from lc_attention.dssa import DSSAConfig, compress_keys, select_group_blocks
from lc_attention.dssa import selection as sel

OUT = pathlib.Path(__file__).resolve().parents[1] / "docs/benchmarks/lc-attention-dssa"


def _timed(fn: Callable[[], Any], device: str, reps: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(reps):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = fn()
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best, out


def measure(
    s: int, phase: str, device: str, dtype: torch.dtype, reps: int, fused: str | None = None
) -> dict[str, Any]:
    cfg = DSSAConfig.small(query_block=64 if phase == "prefill" else 1)
    g = torch.Generator().manual_seed(s)
    t = s if phase == "prefill" else 1
    q = torch.randn(1, t, 9, 64, generator=g).to(device, dtype)
    k = torch.randn(1, s, 3, 64, generator=g).to(device, dtype)
    kc = compress_keys(k, cfg)
    fused = fused or ("triton" if device == "cuda" else "torch")
    row: dict[str, Any] = {"length": s, "phase": phase, "fused_backend": fused}

    def run(backend: str | None) -> tuple[float, torch.Tensor]:
        sel.fused_backend = lambda q, c: backend  # type: ignore[assignment]
        fn = lambda: select_group_blocks(q, kc, s - t, s, cfg, 0.125)  # noqa: E731
        fn()  # warm-up (Triton compiles on the first call)
        return _timed(fn, device, reps)

    original = sel.fused_backend
    try:
        row["chunked_s"], a = run(None)
        row["fused_s"], b = run(fused)
    finally:
        sel.fused_backend = original
    row["speedup"] = row["chunked_s"] / row["fused_s"]
    row["same_selection"] = float((a.sort(-1).values == b.sort(-1).values).all(-1).float().mean())
    print({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}, flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[8192, 16384, 32768, 65536])
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--dtype", default=None, help="default: float32 on CPU, bfloat16 on CUDA")
    ap.add_argument("--reps", type=int, default=5, help="best of")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--fused-backend",
        choices=["auto", "torch", "triton"],
        default="auto",
        help="backend of the fused op (auto: triton on CUDA, torch elsewhere; triton on CPU "
        "needs TRITON_INTERPRET=1, a smoke test of the kernel)",
    )
    ap.add_argument("--out", type=pathlib.Path, default=None, help="default: stage1_<device>.json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype or ("bfloat16" if args.device == "cuda" else "float32"))
    fused = None if args.fused_backend == "auto" else args.fused_backend
    rows = [
        measure(s, phase, args.device, dtype, args.reps, fused)
        for s in args.lengths
        for phase in ("prefill", "decode")
    ]
    machine = torch.cuda.get_device_name() if args.device == "cuda" else platform.processor()
    out = args.out or OUT / f"stage1_{args.device}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "machine": machine or platform.machine(),
                "dtype": str(dtype),
                "torch": torch.__version__,
                "config": "DSSAConfig.small(query_block=64) prefill, DSSAConfig.small() decode",
                "rows": rows,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
