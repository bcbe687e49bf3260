"""Decode step of hybrid-head sparse decoding: sparse vs full attention, side by side.

One decode step (one new query token) over a KV cache of 8K..128K tokens, bf16, batch 1,
32 query heads, 8 KV heads, head dim 128 (the Llama-3-8B attention shape), top-k 2048.
Timed (median ms, ``triton.testing.do_bench`` on CUDA):

- ``sdpa_full``: PyTorch SDPA over the whole cache (the dense baseline);
- ``full``: our split-K full decode attention (``full_decode_attention``);
- ``retrieval``: full attention plus the top-k positions (``retrieval_decode_attention``);
- ``sparse_shared`` / ``sparse_per_head``: ``sparse_decode_attention`` over top-k
  positions, one list per KV head / per query head;
- ``hybrid``: a LycheeDecode layer with one KV group (4 query heads) as retrieval heads
  and the other 28 query heads as sparse heads reusing the retrieval head's positions;
- ``block_topk`` and ``torch_topk``: top-k of ``[1, 32, S]`` fp32 scores.

The cache is held as a Hugging Face ``[B, HKV, S, D]`` tensor and passed as a
transposed view. A bf16 correctness check against the fp32 reference (relative RMS of
the outputs, overlap of the top-k sets) runs first.

On CPU (``--device cpu --small``) it times the PyTorch path (the reference; Triton is
not used) against SDPA at 1K..4K tokens and a smaller head shape. ``--smoke`` runs the
CUDA code path on CPU tensors through Triton's interpreter at tiny sizes and writes
``decode_sparse_smoke.json`` to ``--out`` when one is given (nothing otherwise).

Writes ``docs/benchmarks/lc-kernels-decode/decode_sparse_{gpu,cpu}.json`` and ``.png``.

    uv run python packages/lc-kernels/benchmarks/decode_sparse.py --device cuda
    uv run python packages/lc-kernels/benchmarks/decode_sparse.py --device cpu --small
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[3] / "docs" / "benchmarks" / "lc-kernels-decode"


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="decode step: sparse vs full attention")
    ap.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    ap.add_argument("--small", action="store_true", help="small contexts and heads (for CPU)")
    ap.add_argument("--smoke", action="store_true", help="CUDA path on CPU, interpreter; no output")
    ap.add_argument("--topk", type=int, default=None, help="positions per head (default 2048)")
    ap.add_argument("--block-size", type=int, default=128, help="first-stage top-k block")
    ap.add_argument("--contexts", type=int, nargs="*", default=None)
    ap.add_argument("--budget-s", type=float, default=420.0, help="stop starting new contexts")
    ap.add_argument("--out", type=Path, default=None, help=f"output directory (default {OUT})")
    return ap.parse_args()


ARGS = _args()
if ARGS.smoke:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from _timing import one_call_ms, time_cpu_ms  # noqa: E402

from lc_kernels.decode import (  # noqa: E402
    block_topk,
    full_decode_attention,
    retrieval_decode_attention,
    sparse_decode_attention,
)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).pow(2).mean().sqrt() / b.pow(2).mean().sqrt().clamp_min(1e-30))


def make_cache(
    b: int, s: int, hq: int, hkv: int, d: int, dtype: torch.dtype, device: str, seed: int = 0
) -> dict[str, torch.Tensor]:
    """Query ``[B, HQ, D]`` and a Hugging Face cache ``[B, HKV, S, D]`` (plus the
    ``[B, S, HKV, D]`` views the kernels take)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    q = torch.randn(b, hq, d, device=device, dtype=dtype, generator=gen)
    k_hf = torch.randn(b, hkv, s, d, device=device, dtype=dtype, generator=gen)
    v_hf = torch.randn(b, hkv, s, d, device=device, dtype=dtype, generator=gen)
    return {
        "q": q,
        "k_hf": k_hf,
        "v_hf": v_hf,
        "k": k_hf.transpose(1, 2),
        "v": v_hf.transpose(1, 2),
    }


def impls(
    x: dict[str, torch.Tensor], topk: int, block: int, backend: str
) -> dict[str, Callable[[], Any]]:
    """The timed calls of one context length."""
    q, k, v = x["q"], x["k"], x["v"]
    b, hq, _ = q.shape
    hkv = k.shape[2]
    g = hq // hkv
    _, idx = retrieval_decode_attention(q, k, v, topk, block_size=block, backend=backend)
    shared = idx[:, ::g].contiguous()  # [B, HKV, topk]: the first head of each group
    scores = torch.randn(b, hq, k.shape[1], device=q.device, dtype=torch.float32)

    def hybrid() -> torch.Tensor:
        _, r_idx = retrieval_decode_attention(
            q[:, :g], k[:, :, :1], v[:, :, :1], topk, block_size=block, backend=backend
        )
        reuse = r_idx[:, :1].expand(b, hkv - 1, topk)
        return sparse_decode_attention(
            q[:, g:], k[:, :, 1:], v[:, :, 1:], reuse, check=False, backend=backend
        )

    return {
        "sdpa_full": lambda: F.scaled_dot_product_attention(
            q.unsqueeze(2), x["k_hf"], x["v_hf"], enable_gqa=True
        ),
        "full": lambda: full_decode_attention(q, k, v, backend=backend),
        "retrieval": lambda: retrieval_decode_attention(
            q, k, v, topk, block_size=block, backend=backend
        ),
        "sparse_shared": lambda: sparse_decode_attention(
            q, k, v, shared, check=False, backend=backend
        ),
        "sparse_per_head": lambda: sparse_decode_attention(
            q, k, v, idx, check=False, backend=backend
        ),
        "hybrid": hybrid,
        "block_topk": lambda: block_topk(scores, topk, block_size=block, backend=backend),
        "torch_topk": lambda: torch.topk(scores, topk, dim=-1),
    }


def correctness(x: dict[str, torch.Tensor], topk: int, block: int, backend: str) -> dict[str, Any]:
    """Outputs on the bf16 inputs vs the fp32 reference on the same (rounded) values."""
    q, k, v = x["q"], x["k"], x["v"]
    qf, kf, vf = q.float(), k.float(), v.float()
    out, idx = retrieval_decode_attention(q, k, v, topk, block_size=block, backend=backend)
    r_out, r_idx = retrieval_decode_attention(qf, kf, vf, topk, backend="torch")
    overlap = torch.stack(
        [torch.isin(idx[0, h], r_idx[0, h]).float().mean() for h in range(q.shape[1])]
    )
    sp = sparse_decode_attention(q, k, v, r_idx, backend=backend)
    r_sp = sparse_decode_attention(qf, kf, vf, r_idx, backend="torch")
    full = full_decode_attention(q, k, v, backend=backend)
    return {
        "S": k.shape[1],
        "full_rel_rms": _rel(full, r_out),
        "retrieval_out_rel_rms": _rel(out, r_out),
        "sparse_rel_rms": _rel(sp, r_sp),
        "topk_overlap_min": float(overlap.min()),
        "topk_overlap_mean": float(overlap.mean()),
        "topk_exact_rows": float((idx == r_idx).all(-1).float().mean()),
        "sparse_vs_full_rel_rms": _rel(r_sp, r_out),
    }


def run(device: str, small: bool, smoke: bool) -> dict[str, Any]:
    start = time.time()
    if smoke:
        b, hq, hkv, d, topk, dtype = 1, 4, 2, 32, 16, torch.float16
        contexts = ARGS.contexts or [100]
        backend = "triton"
    elif small:
        b, hq, hkv, d, topk, dtype = 1, 8, 2, 64, 128, torch.bfloat16
        contexts = ARGS.contexts or [1024, 2048, 4096]
        backend = "torch" if device == "cpu" else "triton"
    else:
        b, hq, hkv, d, topk, dtype = 1, 32, 8, 128, 2048, torch.bfloat16
        contexts = ARGS.contexts or [8192, 16384, 32768, 65536, 131072]
        backend = "torch" if device == "cpu" else "triton"
    topk = ARGS.topk or topk
    block = ARGS.block_size
    if device == "cuda":
        from triton.testing import do_bench

        def bench(fn: Callable[[], Any]) -> float:
            return float(do_bench(fn, warmup=25, rep=100))
    else:
        torch.set_num_threads(1)  # shared machine: one thread gives steadier numbers

        def bench(fn: Callable[[], Any]) -> float:
            if smoke:  # one call: the interpreter's time says nothing about speed
                return one_call_ms(fn)
            return time_cpu_ms(fn, reps=5)

    machine = (
        torch.cuda.get_device_name()
        if device == "cuda"
        else f"2-core CPU ({platform.machine()}, 1 torch thread)"
    )
    result: dict[str, Any] = {
        "machine": machine,
        "label": "GPU, Triton kernels"
        if backend == "triton" and device == "cuda"
        else "CPU, PyTorch reference path (no Triton)",
        "torch": torch.__version__,
        "config": {
            "dtype": str(dtype),
            "batch": b,
            "q_heads": hq,
            "kv_heads": hkv,
            "head_dim": d,
            "topk": topk,
            "block_size": block,
            "backend": backend,
            "cache_layout": "[B, HKV, S, D] passed as a transposed view",
        },
        "correctness": [],
        "timings": [],
    }
    for i, s in enumerate(contexts):
        if time.time() - start > ARGS.budget_s:
            result.setdefault("skipped", []).append(s)
            print(f"time budget reached, skipping S={s}")
            continue
        x = make_cache(b, s, hq, hkv, d, dtype, device)
        if i < 2 or smoke:
            row = correctness(x, topk, block, backend)
            result["correctness"].append(row)
            print("correctness", row, flush=True)
        times: dict[str, float] = {}
        for name, fn in impls(x, topk, block, backend).items():
            try:
                times[name] = bench(fn)
            except Exception as exc:  # keep the other rows
                result["timings"].append({"S": s, "impl": name, "error": str(exc)[:300]})
                continue
        for name, ms in times.items():
            row = {"S": s, "impl": name, "ms": ms}
            if "sdpa_full" in times:
                row["speedup_vs_sdpa_full"] = times["sdpa_full"] / ms
            result["timings"].append(row)
            print(row, flush=True)
        del x
        if device == "cuda":
            torch.cuda.empty_cache()
    result["wall_s"] = time.time() - start
    return result


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in result["timings"] if "ms" in r]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for name in dict.fromkeys(r["impl"] for r in rows):
        pts = sorted((r["S"], r["ms"]) for r in rows if r["impl"] == name)
        axes[0].plot(*zip(*pts, strict=True), marker="o", label=name)
        if name not in ("sdpa_full", "block_topk", "torch_topk"):
            sp = sorted((r["S"], r["speedup_vs_sdpa_full"]) for r in rows if r["impl"] == name)
            axes[1].plot(*zip(*sp, strict=True), marker="o", label=name)
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("context length S (tokens)")
        ax.legend(fontsize=7)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("decode-step latency (ms)")
    axes[1].axhline(1.0, color="grey", lw=0.8)
    axes[1].set_ylabel("speed-up vs SDPA full attention")
    c = result["config"]
    fig.suptitle(
        f"{result['label']}: {result['machine']}, {c['dtype']}, HQ={c['q_heads']}, "
        f"HKV={c['kv_heads']}, D={c['head_dim']}, top-k={c['topk']}",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    if ARGS.smoke:
        res = run("cpu", small=True, smoke=True)
        print(json.dumps(res["correctness"], indent=1))
        if ARGS.out is None:
            return
        dev, name = "cpu", "decode_sparse_smoke"
    else:
        dev = (
            ARGS.device
            if ARGS.device != "auto"
            else ("cuda" if torch.cuda.is_available() else "cpu")
        )
        res = run(dev, ARGS.small, smoke=False)
        name = f"decode_sparse_{'gpu' if dev == 'cuda' else 'cpu'}"
    out = ARGS.out or OUT
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(res, indent=2))
    plot(res, out / f"{name}.png")
    print(f"wrote {out / name}.json and .png")


if __name__ == "__main__":
    main()
