"""Selected attention: FSA loop order vs NSA loop order vs dense attention, side by side.

On a CUDA machine (one run, a few minutes on an H200): bf16, B = 1, 4 KV heads, head
dim 128, blocks of 64, top-16 selection (block 0 and the 2 most recent blocks forced,
the rest random), T in {8K, 16K, 32K, 64K} and query heads per KV head G in {1, 2, 4, 8};
forward and forward+backward latency (``triton.testing.do_bench``, median ms) of the
FSA-order kernel, the NSA-order kernel and dense causal SDPA; flash-linear-attention's
``parallel_nsa`` joins at G = 16 (its minimum) when it is installed. A bf16 correctness
check of both kernels against the fp32 reference precedes the timings.

On CPU it times the PyTorch reference path against dense causal SDPA at small T.

Writes ``docs/benchmarks/lc-kernels/fsa_vs_nsa_{gpu,cpu}.json`` and ``.png``.

    uv run python packages/lc-kernels/benchmarks/fsa_vs_nsa.py [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from lc_kernels import selected_attention
from lc_kernels.compressed_attention import topk_blocks_from_scores

OUT = Path(__file__).resolve().parents[3] / "docs" / "benchmarks" / "lc-kernels"
BLOCK, TOPK, HKV, D = 64, 16, 4, 128


def make_inputs(
    t: int, g: int, hkv: int, d: int, dtype: torch.dtype, device: str, seed: int = 0
) -> dict[str, Any]:
    """Random q, k, v, dO and a top-k causal selection with forced initial/local blocks."""
    gen = torch.Generator(device=device).manual_seed(seed)
    q = torch.randn(1, t, hkv * g, d, device=device, dtype=dtype, generator=gen)
    k = torch.randn(1, t, hkv, d, device=device, dtype=dtype, generator=gen)
    v = torch.randn(1, t, hkv, d, device=device, dtype=dtype, generator=gen)
    do = torch.randn_like(q)
    nb = -(-t // BLOCK)
    scores = torch.rand(1, t, hkv, nb, device=device, generator=gen)
    idx = topk_blocks_from_scores(scores, BLOCK, TOPK, init_blocks=1, local_blocks=2)
    return {"q": q, "k": k, "v": v, "do": do, "idx": idx.contiguous()}


def sdpa_causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Dense causal GQA attention through PyTorch SDPA (flash kernel on GPU)."""
    o = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True, enable_gqa=True
    )
    return o.transpose(1, 2)


def _fla_fn() -> Callable[..., torch.Tensor] | None:
    try:
        from fla.ops.nsa import parallel_nsa  # type: ignore[import-not-found]
    except Exception:
        return None

    def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        ids = idx.clamp_min(
            0
        ).long()  # unused slots repeat block 0: same work, no -1 semantics needed
        try:
            return parallel_nsa(
                q, k, v, block_indices=ids, block_counts=ids.shape[-1], block_size=BLOCK
            )
        except TypeError:  # older signature: gates are positional
            ones = torch.ones(q.shape[:3], device=q.device, dtype=q.dtype)
            return parallel_nsa(q, k, v, ones, torch.zeros_like(ones), ids, ids.shape[-1], BLOCK)

    return run


def _impls(
    fla: Callable[..., torch.Tensor] | None, g: int
) -> dict[str, Callable[[dict[str, Any]], torch.Tensor]]:
    impls: dict[str, Callable[[dict[str, Any]], torch.Tensor]] = {
        "fsa": lambda x: selected_attention(
            x["q"], x["k"], x["v"], x["idx"], BLOCK, backend="triton", order="fsa"
        ),
        "nsa_order": lambda x: selected_attention(
            x["q"], x["k"], x["v"], x["idx"], BLOCK, backend="triton", order="nsa"
        ),
        "dense_sdpa": lambda x: sdpa_causal(x["q"], x["k"], x["v"]),
    }
    if fla is not None and g >= 16:
        impls["fla_parallel_nsa"] = lambda x: fla(x["q"], x["k"], x["v"], x["idx"])
    return impls


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).pow(2).mean().sqrt() / b.pow(2).mean().sqrt())


def gpu_correctness(
    t: int = 4096,
    device: str = "cuda",
    dtype: torch.dtype = torch.bfloat16,
    groups: tuple[int, ...] = (1, 2, 4, 8),
    hkv: int = 2,
    d: int = D,
) -> list[dict[str, Any]]:
    """Kernels vs the fp32 reference on the same (rounded) inputs: rel. RMS of o, dq, dk, dv."""
    rows = []
    for g in groups:
        x = make_inputs(t, g, hkv, d, dtype, device, seed=g)
        ref_in = [x[n].float().requires_grad_(True) for n in ("q", "k", "v")]
        ref = selected_attention(*ref_in, x["idx"], BLOCK, backend="torch")
        ref.backward(x["do"].float())
        for order in ("fsa", "nsa"):
            ins = [x[n].clone().requires_grad_(True) for n in ("q", "k", "v")]
            o = selected_attention(*ins, x["idx"], BLOCK, backend="triton", order=order)
            o.backward(x["do"])
            errs = [_rel(o, ref)] + [_rel(a.grad, b.grad) for a, b in zip(ins, ref_in, strict=True)]
            rows.append(
                {
                    "T": t,
                    "G": g,
                    "order": order,
                    **dict(zip(("o", "dq", "dk", "dv"), errs, strict=True)),
                }
            )
            print(
                f"correctness T={t} G={g} {order}: "
                + " ".join(f"{k}={v:.2e}" for k, v in rows[-1].items() if k in "o dq dk dv")
            )
    return rows


def run_gpu(
    lengths: list[int], groups: list[int], budget_s: float, smoke: bool = False
) -> dict[str, Any]:
    """The GPU comparison; ``smoke=True`` runs the same code on CPU tensors (Triton interpreter, fp16, tiny T)."""
    start = time.time()
    fla = _fla_fn()
    device, dtype = ("cpu", torch.float16) if smoke else ("cuda", torch.bfloat16)
    if smoke:

        def do_bench(
            fn: Callable[[], Any], warmup: int = 0, rep: int = 0, grad_to_none: Any = None
        ) -> float:
            return _time_cpu(fn, reps=1)
    else:
        from triton.testing import do_bench
    result: dict[str, Any] = {
        "machine": "smoke test on CPU" if smoke else torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "config": {
            "dtype": str(dtype),
            "batch": 1,
            "kv_heads": HKV,
            "head_dim": D,
            "block_size": BLOCK,
            "top_k": TOPK,
        },
        "fla_installed": fla is not None,
        "correctness": gpu_correctness(lengths[0], device, dtype, tuple(groups), 1, 32)
        if smoke
        else gpu_correctness(),
        "timings": [],
    }
    plan = [(t, g) for t in lengths for g in groups] + (
        [(t, 16) for t in lengths] if fla is not None else []
    )
    for t, g in plan:
        if time.time() - start > budget_s:
            print(f"time budget reached, skipping T={t} G={g}")
            result.setdefault("skipped", []).append({"T": t, "G": g})
            continue
        x = make_inputs(t, g, 1 if smoke else HKV, 32 if smoke else D, dtype, device)
        for name, fn in _impls(fla, g).items():
            row: dict[str, Any] = {"T": t, "G": g, "impl": name}
            try:
                row["fwd_ms"] = do_bench(lambda fn=fn, x=x: fn(x), warmup=10, rep=40)
                qkv = [x[n].clone().requires_grad_(True) for n in ("q", "k", "v")]
                y = dict(x, q=qkv[0], k=qkv[1], v=qkv[2])

                def fwd_bwd(fn=fn, y=y) -> None:
                    fn(y).backward(y["do"])

                row["fwd_bwd_ms"] = do_bench(fwd_bwd, warmup=5, rep=40, grad_to_none=qkv)
            except Exception as exc:
                row["error"] = f"{type(exc).__name__}: {exc}"[:300]
            result["timings"].append(row)
            print(row, flush=True)
        del x
        if not smoke:
            torch.cuda.empty_cache()
    result["summary"] = summarise(result["timings"])
    result["autotuned"] = autotuned_configs()
    result["wall_s"] = time.time() - start
    return result


def autotuned_configs() -> dict[str, dict[str, str]]:
    """The launch configuration ``triton.autotune`` chose for each FSA kernel, per key."""
    from lc_kernels.selected_attention import triton as kernels

    out = {}
    for name in dir(kernels):
        cache = getattr(getattr(kernels, name), "cache", None)
        if name.startswith("_fsa") and isinstance(cache, dict):
            out[name] = {str(key): str(cfg) for key, cfg in cache.items()}
    return out


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Speed-ups FSA / NSA order and FSA / dense, per (T, G) and averaged over G <= 4."""
    by = {(r["T"], r["G"], r["impl"]): r for r in rows if "error" not in r}
    out: dict[str, Any] = {"per_case": []}
    for mode in ("fwd_ms", "fwd_bwd_ms"):
        small = []
        for (t, g, impl), r in sorted(by.items()):
            if impl != "fsa":
                continue
            nsa, dense = by.get((t, g, "nsa_order")), by.get((t, g, "dense_sdpa"))
            case = {"T": t, "G": g, "mode": mode}
            if nsa:
                case["fsa_speedup_vs_nsa_order"] = nsa[mode] / r[mode]
                if g <= 4:
                    small.append(case["fsa_speedup_vs_nsa_order"])
            if dense:
                case["fsa_speedup_vs_dense"] = dense[mode] / r[mode]
            out["per_case"].append(case)
        if small:
            out[f"mean_fsa_speedup_vs_nsa_order_G_le_4_{mode[:-3]}"] = statistics.fmean(small)
    return out


def _time_cpu(fn: Callable[[], Any], reps: int = 3) -> float:
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def run_cpu(lengths: list[int], groups: list[int]) -> dict[str, Any]:
    torch.set_num_threads(1)  # the machine is shared: one thread gives steadier numbers
    rows = []
    block, topk, hkv, d = 64, 8, 2, 64
    for t in lengths:
        for g in groups:
            x = make_inputs(t, g, hkv, d, torch.float32, "cpu")
            nb = -(-t // block)
            scores = torch.rand(1, t, hkv, nb, generator=torch.Generator().manual_seed(1))
            x["idx"] = topk_blocks_from_scores(scores, block, topk, 1, 2)
            fns = {
                "reference": lambda x=x: selected_attention(
                    x["q"], x["k"], x["v"], x["idx"], block, backend="torch"
                ),
                "dense_sdpa": lambda x=x: sdpa_causal(x["q"], x["k"], x["v"]),
            }
            for name, fn in fns.items():
                qkv = [x[n].clone().requires_grad_(True) for n in ("q", "k", "v")]

                def fwd_bwd(name=name, qkv=qkv, x=x) -> None:
                    if name == "reference":
                        o = selected_attention(*qkv, x["idx"], block, backend="torch")
                    else:
                        o = sdpa_causal(*qkv)
                    o.backward(x["do"])

                row = {
                    "T": t,
                    "G": g,
                    "impl": name,
                    "fwd_ms": _time_cpu(fn),
                    "fwd_bwd_ms": _time_cpu(fwd_bwd),
                }
                rows.append(row)
                print(row, flush=True)
    return {
        "machine": f"2-core CPU ({platform.machine()}, 1 torch thread), torch {torch.__version__}",
        "config": {
            "dtype": "float32",
            "batch": 1,
            "kv_heads": hkv,
            "head_dim": d,
            "block_size": block,
            "top_k": topk,
        },
        "timings": rows,
    }


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in result["timings"] if "error" not in r]
    impls = sorted({r["impl"] for r in rows})
    groups = sorted({r["G"] for r in rows})
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, mode in zip(axes, ("fwd_ms", "fwd_bwd_ms"), strict=True):
        for impl in impls:
            for g in groups:
                pts = sorted((r["T"], r[mode]) for r in rows if r["impl"] == impl and r["G"] == g)
                if pts:
                    ax.plot(*zip(*pts, strict=True), marker="o", label=f"{impl} G={g}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length T")
        ax.set_ylabel("latency (ms)")
        ax.set_title(mode.replace("_ms", "").replace("_", "+"))
    axes[1].legend(fontsize=6, ncol=2)
    fig.suptitle(f"selected attention: {result['machine']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    ap.add_argument(
        "--budget-s",
        type=float,
        default=420.0,
        help="stop starting GPU cases after this many seconds",
    )
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="run the GPU code path on CPU at tiny sizes (set TRITON_INTERPRET=1); writes nothing",
    )
    args = ap.parse_args()
    if args.smoke:
        res = run_gpu([96], [1, 3], args.budget_s, smoke=True)
        print(json.dumps(res["summary"], indent=1))
        return
    dev = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    OUT.mkdir(parents=True, exist_ok=True)
    if dev == "cuda":
        result = run_gpu([8192, 16384, 32768, 65536], [1, 2, 4, 8], args.budget_s)
    else:
        result = run_cpu([256, 512, 1024, 2048], [1, 4])
    name = f"fsa_vs_nsa_{'gpu' if dev == 'cuda' else 'cpu'}"
    (OUT / f"{name}.json").write_text(json.dumps(result, indent=2))
    plot(result, OUT / f"{name}.png")
    print(f"wrote {OUT / name}.json and .png")


if __name__ == "__main__":
    main()
