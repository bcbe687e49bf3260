"""DSSA vs dense attention-layer time in SmolLM2-135M geometry (9 query heads, 3 KV heads, D 64).

Decode: one query over an S-token KV cache (dense SDPA vs DSSA's gathered top-k blocks,
block selection included). Prefill: causal attention over S tokens (dense SDPA vs DSSA
through ``lc_kernels.selected_attention``: Triton on CUDA, the dense-mask reference on
CPU, so CPU prefill is slower by construction). Writes
``docs/benchmarks/lc-attention-dssa/speed.json``.

    uv run python benchmarks/dssa_speed.py --lengths 8192 16384 32768
    uv run python benchmarks/dssa_speed.py --device cuda --prefill-lengths 8192 32768
"""

from __future__ import annotations

import argparse
import json
import pathlib
import time

import torch
import torch.nn.functional as F

from lc_attention.dssa import CompressedKeyCache, DSSAConfig, dssa_attention

OUT = pathlib.Path(__file__).resolve().parents[1] / "docs/benchmarks/lc-attention-dssa"


def _time(fn, reps: int, device: str, *fargs, **fkw) -> float:
    fn(*fargs, **fkw)
    best = float("inf")
    for _ in range(reps):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn(*fargs, **fkw)
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best


def _dense(q, k, v, causal: bool):
    g = q.shape[2] // k.shape[2]
    return F.scaled_dot_product_attention(
        q.transpose(1, 2),
        k.repeat_interleave(g, 2).transpose(1, 2),
        v.repeat_interleave(g, 2).transpose(1, 2),
        is_causal=causal,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[8192, 16384, 32768])
    ap.add_argument("--prefill-lengths", type=int, nargs="*", default=[4096])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=pathlib.Path, default=OUT / "speed.json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    dev = args.device
    dtype = torch.float32 if dev == "cpu" else torch.bfloat16
    g = torch.Generator(device=dev).manual_seed(0)
    rows = []
    for name, cfg in (("small", DSSAConfig.small()), ("minicpm4", DSSAConfig())):
        for s in args.lengths:
            q = torch.randn(1, 1, 9, 64, device=dev, dtype=dtype, generator=g)
            k = torch.randn(1, s, 3, 64, device=dev, dtype=dtype, generator=g)
            v = torch.randn(1, s, 3, 64, device=dev, dtype=dtype, generator=g)
            cache = CompressedKeyCache()
            dense = _time(_dense, args.reps, dev, q, k, v, False)
            sparse = _time(dssa_attention, args.reps, dev, q, k, v, cfg, cache=cache)
            rows.append({"phase": "decode", "config": name, "length": s, "dense_s": dense,
                         "dssa_s": sparse, "speedup": dense / sparse})  # fmt: skip
            print(rows[-1])
        for s in args.prefill_lengths:
            q = torch.randn(1, s, 9, 64, device=dev, dtype=dtype, generator=g)
            k = torch.randn(1, s, 3, 64, device=dev, dtype=dtype, generator=g)
            v = torch.randn(1, s, 3, 64, device=dev, dtype=dtype, generator=g)
            dense = _time(_dense, args.reps, dev, q, k, v, True)
            sparse = _time(dssa_attention, args.reps, dev, q, k, v, cfg)
            rows.append({"phase": "prefill", "config": name, "length": s, "dense_s": dense,
                         "dssa_s": sparse, "speedup": dense / sparse})  # fmt: skip
            print(rows[-1])
    out = {
        "geometry": "1 layer, 9 query heads, 3 KV heads, head_dim 64 (SmolLM2-135M)",
        "device": dev if dev != "cpu" else f"cpu, {args.threads} threads",
        "dtype": str(dtype),
        "timing": f"best of {args.reps}",
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if dev != "cpu":
        args.out = args.out.with_name(args.out.stem + f"_{dev}.json")
    args.out.write_text(json.dumps(out, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
