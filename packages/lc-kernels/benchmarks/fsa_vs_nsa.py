"""Selected attention: FSA loop order vs NSA loop order vs dense attention, side by side.

On a CUDA machine (one run, about 90 s on an H200): bf16, B = 1, 4 KV heads, head dim
128, blocks of 64, top-16 selection (block 0 and the 2 most recent blocks forced, the
rest random), T in {8K, 16K, 32K, 64K, 128K} and query heads per KV head G in
{1, 2, 4, 8, 16}. Columns, all on the same inputs and the same selection:

- ``fsa``: ``lc_kernels.selected_attention(..., order="fsa")``;
- ``nsa_order``: the same function with ``order="nsa"``;
- ``fla_parallel_nsa``: flash-linear-attention's ``fla.ops.nsa.parallel_nsa``, selection
  branch only (no gates, no compressed or sliding-window branch), given the same block
  ids and per-token block counts; only where ``import fla`` works and at power-of-two
  G >= 16 (its minimum). Otherwise the column is absent and ``fla.note`` says why;
- ``dense_sdpa``: dense causal GQA attention through PyTorch SDPA, the baseline.

For every case it reports forward and forward+backward latency (median ms:
``triton.testing.do_bench`` for calls under 25 ms, else the median of 3 timed calls after
a warm-up, so the slow columns at 128K stay affordable), the peak GPU memory of one
forward and of one forward+backward (``torch.cuda.max_memory_allocated`` after a reset,
inputs included), speed-ups of every column against SDPA and of FSA against the NSA
order (and against fla where present). A bf16 correctness check of every kernel against
the fp32 reference at T = 4096 precedes the timings. ``--budget-s`` stops starting new
cases once that many seconds have passed (the skipped ones are listed in the JSON).

On CPU it times the PyTorch reference path against dense causal SDPA at small T.
``--smoke`` runs the GPU code path on CPU tensors through Triton's interpreter at tiny
sizes (T = 16, G = 2, fp16; set ``TRITON_INTERPRET=1``) and writes
``fsa_vs_nsa_smoke.json`` to ``--out`` when one is given (nothing otherwise).

Writes ``docs/benchmarks/lc-kernels/fsa_vs_nsa_{gpu,cpu}.json`` and ``.png``.

    uv run python packages/lc-kernels/benchmarks/fsa_vs_nsa.py [--device cpu|cuda]
    TRITON_INTERPRET=1 uv run python packages/lc-kernels/benchmarks/fsa_vs_nsa.py \\
        --smoke --out /tmp/fsa_smoke
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
from _timing import one_call_ms, time_cpu_ms

from lc_kernels import selected_attention
from lc_kernels.compressed_attention import topk_blocks_from_scores

OUT = Path(__file__).resolve().parents[3] / "docs" / "benchmarks" / "lc-kernels"
BLOCK, TOPK, HKV, D = 64, 16, 4, 128
GPU_LENGTHS = [8192, 16384, 32768, 65536, 131072]
GPU_GROUPS = [1, 2, 4, 8, 16]
SMOKE_LENGTHS, SMOKE_GROUPS, SMOKE_HKV, SMOKE_D = [16], [2], 1, 16
SLOW_MS = 25.0  # calls slower than this are timed as the median of SLOW_REPS calls
SLOW_REPS = 3


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


def fla_group_ok(g: int) -> bool:
    """Group sizes ``parallel_nsa`` accepts: a power of two, at least 16."""
    return g >= 16 and g & (g - 1) == 0


def fla_column() -> tuple[Callable[..., torch.Tensor] | None, dict[str, Any]]:
    """flash-linear-attention's ``parallel_nsa`` as ``fn(q, k, v, idx)``, or None, and a note.

    Called as in fla's current API, ``parallel_nsa(q, k, v, block_indices=..., block_counts=...,
    block_size=...)`` with no gates (``g_cmp``/``g_slc``/``g_swa`` None): the selected-attention
    branch alone, the op the lc kernels compute. Block ids are ours (``-1`` slots last, as
    ``topk_blocks_from_scores`` sorts them) with the per-token count of valid ids, so fla
    reads exactly the blocks our kernels read.
    """
    try:
        import fla  # type: ignore[import-not-found]
        from fla.ops.nsa import parallel_nsa  # type: ignore[import-not-found]
    except Exception as exc:  # not installed, or its import failed (no GPU, version clash)
        note = f"no fla_parallel_nsa column: import failed ({type(exc).__name__}: {exc})"
        return None, {"installed": False, "note": note[:300]}

    def run(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        counts = (idx >= 0).sum(-1).long()  # [B, T, H_kv]
        return parallel_nsa(
            q, k, v, block_indices=idx.long(), block_counts=counts, block_size=BLOCK
        )

    info = {
        "installed": True,
        "version": getattr(fla, "__version__", "unknown"),
        "note": "fla.ops.nsa.parallel_nsa, selection branch only (no gates), same block ids "
        "and per-token block counts; timed at power-of-two G >= 16 (its minimum)",
    }
    return run, info


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
    if fla is not None and fla_group_ok(g):
        impls["fla_parallel_nsa"] = lambda x: fla(x["q"], x["k"], x["v"], x["idx"])
    return impls


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).pow(2).mean().sqrt() / b.pow(2).mean().sqrt())


def gpu_correctness(
    t: int = 4096,
    device: str = "cuda",
    dtype: torch.dtype = torch.bfloat16,
    groups: tuple[int, ...] = (1, 2, 4, 8, 16),
    hkv: int = 2,
    d: int = D,
    fla: Callable[..., torch.Tensor] | None = None,
) -> list[dict[str, Any]]:
    """Kernels vs the fp32 reference on the same (rounded) inputs: rel. RMS of o, dq, dk, dv."""
    rows = []
    for g in groups:
        x = make_inputs(t, g, hkv, d, dtype, device, seed=g)
        ref_in = [x[n].float().requires_grad_(True) for n in ("q", "k", "v")]
        ref = selected_attention(*ref_in, x["idx"], BLOCK, backend="torch")
        ref.backward(x["do"].float())
        runs: dict[str, Callable[..., torch.Tensor]] = {
            order: lambda q, k, v, idx, order=order: selected_attention(
                q, k, v, idx, BLOCK, backend="triton", order=order
            )
            for order in ("fsa", "nsa")
        }
        if fla is not None and fla_group_ok(g):
            runs["fla_parallel_nsa"] = fla
        for order, run in runs.items():
            ins = [x[n].clone().requires_grad_(True) for n in ("q", "k", "v")]
            row: dict[str, Any] = {"T": t, "G": g, "order": order}
            try:
                o = run(*ins, x["idx"])
                o.backward(x["do"])
                errs = [_rel(o, ref)] + [
                    _rel(a.grad, b.grad) for a, b in zip(ins, ref_in, strict=True)
                ]
                row.update(zip(("o", "dq", "dk", "dv"), errs, strict=True))
            except Exception as exc:  # a failing column is reported, the others still run
                row["error"] = f"{type(exc).__name__}: {exc}"[:300]
            rows.append(row)
            print(
                f"correctness T={t} G={g} {order}: "
                + " ".join(f"{k}={v:.2e}" for k, v in row.items() if k in ("o", "dq", "dk", "dv"))
                + (f" error {row['error']}" if "error" in row else "")
            )
    return rows


def _timer(smoke: bool) -> Callable[..., tuple[float, str]]:
    """``bench(fn, grad_to_none) -> (ms, how)``: CPU wall clock of one call in smoke mode;
    on CUDA ``do_bench`` for fast calls and the median of ``SLOW_REPS`` calls for slow ones."""
    if smoke:

        def bench_cpu(fn: Callable[[], Any], grad_to_none: Any = None) -> tuple[float, str]:
            return one_call_ms(fn), "one call (CPU, interpreter)"

        return bench_cpu
    from triton.testing import do_bench

    def once(fn: Callable[[], Any], grad_to_none: Any) -> float:
        for x in grad_to_none or ():
            x.grad = None
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end)

    def bench(fn: Callable[[], Any], grad_to_none: Any = None) -> tuple[float, str]:
        first = once(fn, grad_to_none)  # after the warm-up (memory) call: compiled already
        if first < SLOW_MS:
            ms = do_bench(fn, warmup=10, rep=40, grad_to_none=grad_to_none)
            return float(ms), "do_bench median"
        times = [first] + [once(fn, grad_to_none) for _ in range(SLOW_REPS - 1)]
        return statistics.median(times), f"median of {SLOW_REPS} calls"

    return bench


def _peak_mib(fn: Callable[[], Any]) -> float:
    """Peak allocated GPU memory (MiB, inputs included) of one call, after a reset; the call
    also serves as the warm-up (compilation, autotuning) of the timings that follow."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() / 2**20


def run_gpu(
    lengths: list[int], groups: list[int], budget_s: float, smoke: bool = False
) -> dict[str, Any]:
    """The GPU comparison; ``smoke=True`` runs the same code on CPU tensors (Triton interpreter, fp16, tiny T)."""
    start = time.time()
    fla, fla_info = fla_column()
    device, dtype = ("cpu", torch.float16) if smoke else ("cuda", torch.bfloat16)
    hkv, d = (SMOKE_HKV, SMOKE_D) if smoke else (HKV, D)
    bench = _timer(smoke)
    cuda = not smoke
    result: dict[str, Any] = {
        "machine": "smoke test on CPU (Triton interpreter)"
        if smoke
        else torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "config": {
            "dtype": str(dtype),
            "batch": 1,
            "kv_heads": hkv,
            "head_dim": d,
            "block_size": BLOCK,
            "top_k": TOPK,
            "lengths": lengths,
            "groups": groups,
            "budget_s": budget_s,
        },
        "timing": "median ms: triton.testing.do_bench (warmup 10 ms, rep 40 ms) for calls "
        f"under {SLOW_MS:g} ms, else the median of {SLOW_REPS} calls; each case first runs "
        "once untimed (compilation, peak memory)"
        if not smoke
        else "one call per mode (CPU wall clock, Triton interpreter: not a speed measurement)",
        "memory": "fwd_peak_mib / fwd_bwd_peak_mib: torch.cuda.max_memory_allocated after "
        "reset_peak_memory_stats, one call, inputs included; inputs_mib: allocated before",
        "fla_installed": fla is not None,
        "fla": fla_info,
        "correctness": gpu_correctness(lengths[0], device, dtype, tuple(groups), hkv, d, fla=fla)
        if smoke
        else gpu_correctness(fla=fla),
        "timings": [],
    }
    print(fla_info["note"], flush=True)
    for t in lengths:
        for g in groups:
            if time.time() - start > budget_s:
                print(f"time budget reached, skipping T={t} G={g}")
                result.setdefault("skipped", []).append({"T": t, "G": g})
                continue
            x = make_inputs(t, g, hkv, d, dtype, device)
            inputs_mib = torch.cuda.memory_allocated() / 2**20 if cuda else None
            for name, fn in _impls(fla, g).items():
                row: dict[str, Any] = {"T": t, "G": g, "impl": name, "inputs_mib": inputs_mib}
                try:
                    row["fwd_peak_mib"] = _peak_mib(lambda fn=fn, x=x: fn(x)) if cuda else None
                    row["fwd_ms"], row["fwd_timing"] = bench(lambda fn=fn, x=x: fn(x))
                    qkv = [x[n].clone().requires_grad_(True) for n in ("q", "k", "v")]
                    y = dict(x, q=qkv[0], k=qkv[1], v=qkv[2])

                    def fwd_bwd(fn=fn, y=y) -> None:
                        fn(y).backward(y["do"])

                    row["fwd_bwd_peak_mib"] = _peak_mib(fwd_bwd) if cuda else None
                    row["fwd_bwd_ms"], row["fwd_bwd_timing"] = bench(fwd_bwd, grad_to_none=qkv)
                    del qkv, y
                except Exception as exc:
                    row["error"] = f"{type(exc).__name__}: {exc}"[:300]
                result["timings"].append(row)
                print(row, flush=True)
            del x
            if cuda:
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
    """Ratios per (T, G) and mode: every column vs SDPA, FSA vs the NSA order (and vs fla).

    ``speedup_vs_sdpa[impl]`` is SDPA time / impl time (> 1: faster than dense);
    ``fsa_speedup_vs_nsa_order`` is NSA-order time / FSA time. Means over G <= 4 (the
    FSA paper's regime) and over all cases are given for FSA vs the NSA order.
    """
    by = {(r["T"], r["G"], r["impl"]): r for r in rows if "error" not in r}
    out: dict[str, Any] = {"per_case": []}
    for mode in ("fwd_ms", "fwd_bwd_ms"):
        small, every = [], []
        for (t, g, impl), r in sorted(by.items()):
            if impl != "fsa":
                continue
            nsa, dense = by.get((t, g, "nsa_order")), by.get((t, g, "dense_sdpa"))
            fla = by.get((t, g, "fla_parallel_nsa"))
            case: dict[str, Any] = {"T": t, "G": g, "mode": mode}
            if nsa:
                case["fsa_speedup_vs_nsa_order"] = nsa[mode] / r[mode]
                every.append(case["fsa_speedup_vs_nsa_order"])
                if g <= 4:
                    small.append(case["fsa_speedup_vs_nsa_order"])
            if dense:
                case["fsa_speedup_vs_dense"] = dense[mode] / r[mode]
                case["speedup_vs_sdpa"] = {
                    name: dense[mode] / by[(t, g, name)][mode]
                    for name in ("fsa", "nsa_order", "fla_parallel_nsa")
                    if (t, g, name) in by
                }
            if fla:
                case["fsa_speedup_vs_fla"] = fla[mode] / r[mode]
            out["per_case"].append(case)
        if small:
            out[f"mean_fsa_speedup_vs_nsa_order_G_le_4_{mode[:-3]}"] = statistics.fmean(small)
        if every:
            out[f"mean_fsa_speedup_vs_nsa_order_{mode[:-3]}"] = statistics.fmean(every)
    return out


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
                    "fwd_ms": time_cpu_ms(fn),
                    "fwd_bwd_ms": time_cpu_ms(fwd_bwd),
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
    """One column per group size G; rows: forward, forward+backward latency, and (GPU)
    peak memory of forward+backward; one line per implementation against T."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in result["timings"] if "error" not in r]
    impls = list(dict.fromkeys(r["impl"] for r in rows))
    groups = sorted({r["G"] for r in rows}) or [1]
    panels = [("fwd_ms", "forward (ms)"), ("fwd_bwd_ms", "forward+backward (ms)")]
    if any(r.get("fwd_bwd_peak_mib") is not None for r in rows):
        panels.append(("fwd_bwd_peak_mib", "fwd+bwd peak memory (MiB)"))
    fig, axes = plt.subplots(
        len(panels), len(groups), figsize=(3.2 * len(groups), 2.8 * len(panels)), squeeze=False
    )
    for i, (key, label) in enumerate(panels):
        for j, g in enumerate(groups):
            ax = axes[i][j]
            for impl, mark in zip(impls, "osD^v<>", strict=False):
                pts = sorted(
                    (r["T"], r[key])
                    for r in rows
                    if r["impl"] == impl and r["G"] == g and r.get(key)
                )
                if pts:
                    ax.plot(*zip(*pts, strict=True), marker=mark, label=impl)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.tick_params(labelsize=7)
            if i == 0:
                ax.set_title(f"G = {g}", fontsize=9)
            if j == 0:
                ax.set_ylabel(label, fontsize=8)
            if i == len(panels) - 1:
                ax.set_xlabel("sequence length T", fontsize=8)
    axes[0][-1].legend(fontsize=7)
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
    ap.add_argument("--lengths", type=int, nargs="+", default=None, help="GPU/smoke: T values")
    ap.add_argument("--groups", type=int, nargs="+", default=None, help="GPU/smoke: G values")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="run the GPU code path on CPU at tiny sizes (set TRITON_INTERPRET=1); writes "
        "fsa_vs_nsa_smoke.json to --out if given, nothing otherwise",
    )
    ap.add_argument("--out", type=Path, default=None, help=f"output directory (default {OUT})")
    args = ap.parse_args()
    if args.smoke:
        res = run_gpu(
            args.lengths or SMOKE_LENGTHS, args.groups or SMOKE_GROUPS, args.budget_s, smoke=True
        )
        print(json.dumps(res["summary"], indent=1))
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "fsa_vs_nsa_smoke.json").write_text(json.dumps(res, indent=2))
            plot(res, args.out / "fsa_vs_nsa_smoke.png")
            print(f"wrote {args.out / 'fsa_vs_nsa_smoke'}.json and .png")
        return
    dev = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    out = args.out or OUT
    out.mkdir(parents=True, exist_ok=True)
    if dev == "cuda":
        result = run_gpu(args.lengths or GPU_LENGTHS, args.groups or GPU_GROUPS, args.budget_s)
    else:
        result = run_cpu(args.lengths or [256, 512, 1024, 2048], args.groups or [1, 4])
    name = f"fsa_vs_nsa_{'gpu' if dev == 'cuda' else 'cpu'}"
    (out / f"{name}.json").write_text(json.dumps(result, indent=2))
    plot(result, out / f"{name}.png")
    print(f"wrote {out / name}.json and .png")


if __name__ == "__main__":
    main()
