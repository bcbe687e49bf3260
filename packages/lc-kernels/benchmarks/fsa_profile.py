"""Where the time of FSA-order selected attention goes on a GPU: host work vs kernels.

For a few (T, G) cases of ``fsa_vs_nsa.py``'s setting it reports, for the forward and
the forward+backward, the device time per call (``triton.testing.do_bench``), the host
time of issuing one call (no synchronize), and the profiler's per-kernel CUDA time and
per-op CPU time, so launch and planning overhead can be told apart from kernel time;
then it sweeps ``FSA_STEPS`` (entries each program handles) at 16K and 64K.

``--smoke`` runs the same code on CPU tensors through Triton's interpreter (set
``TRITON_INTERPRET=1``) at T = 16, G = 2, fp16, with one call per measurement and a
CPU-only profile, and writes ``fsa_profile_smoke.json`` to ``--out``: a check that the
script works, not a measurement.

    python packages/lc-kernels/benchmarks/fsa_profile.py   # CUDA
    TRITON_INTERPRET=1 uv run python packages/lc-kernels/benchmarks/fsa_profile.py \\
        --smoke --out /tmp/fsa_profile_smoke

Writes ``docs/benchmarks/lc-kernels/fsa_profile_gpu.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import one_call_ms
from fsa_vs_nsa import BLOCK, HKV, OUT, SMOKE_D, SMOKE_HKV, D, make_inputs

from lc_kernels import selected_attention

SMOKE = False  # set by main(): CPU tensors, interpreter, one call per measurement


def _top(prof, key: str, n: int = 12) -> list[dict]:
    rows = sorted(prof.key_averages(), key=lambda e: getattr(e, key), reverse=True)[:n]
    return [
        {
            "name": e.key[:80],
            "calls": e.count,
            "self_device_us": e.self_device_time_total,
            "cpu_total_us": e.cpu_time_total,
        }
        for e in rows
    ]


def _bench(fn: Callable[[], Any], warmup: int, grad_to_none: list | None = None) -> float:
    """Device ms per call (``do_bench``); in smoke mode the wall clock of one call."""
    if SMOKE:
        return one_call_ms(fn)
    from triton.testing import do_bench

    return do_bench(fn, warmup=warmup, rep=40, grad_to_none=grad_to_none)


def _sync() -> None:
    if not SMOKE:
        torch.cuda.synchronize()


def calls(t: int, g: int, order: str) -> tuple[Callable[[], Any], Callable[[], Any], list]:
    """``(forward, forward+backward, [q, k, v])`` of one bf16 case of ``fsa_vs_nsa.py``."""
    if SMOKE:
        x = make_inputs(t, g, SMOKE_HKV, SMOKE_D, torch.float16, "cpu")
    else:
        x = make_inputs(t, g, HKV, D, torch.bfloat16, "cuda")
    qkv = [x[n].clone().requires_grad_(True) for n in ("q", "k", "v")]

    def fwd() -> torch.Tensor:
        return selected_attention(*qkv, x["idx"], BLOCK, backend="triton", order=order)

    def fwd_bwd() -> None:
        fwd().backward(x["do"])

    return fwd, fwd_bwd, qkv


def case(t: int, g: int, order: str) -> dict:
    fwd, fwd_bwd, qkv = calls(t, g, order)
    out: dict = {"T": t, "G": g, "order": order}
    issue_reps, prof_reps = (1, 1) if SMOKE else (5, 3)
    activities = [ProfilerActivity.CPU] + ([] if SMOKE else [ProfilerActivity.CUDA])
    for name, fn in (("fwd", fwd), ("fwd_bwd", fwd_bwd)):
        out[f"{name}_device_ms"] = _bench(fn, warmup=10, grad_to_none=qkv)
        _sync()
        h0 = time.perf_counter()
        for _ in range(issue_reps):
            fn()
        host = (time.perf_counter() - h0) / issue_reps
        _sync()
        out[f"{name}_host_issue_ms"] = 1e3 * host
        with profile(activities=activities) as prof:
            for _ in range(prof_reps):
                fn()
            _sync()
        out[f"{name}_by_device_time"] = _top(prof, "self_device_time_total")
        out[f"{name}_by_cpu_time"] = _top(prof, "cpu_time_total")
        print(
            f"T={t} G={g} {order} {name}: device {out[f'{name}_device_ms']:.3f} ms, "
            f"host issue {out[f'{name}_host_issue_ms']:.3f} ms",
            flush=True,
        )
        for r in out[f"{name}_by_device_time"][:8]:
            print(
                f"   {r['self_device_us'] / prof_reps:9.1f} us/call  "
                f"x{r['calls'] // prof_reps}  {r['name']}"
            )
    return out


def steps_sweep(t: int, g: int, values: tuple[int, ...] = (2, 4, 8, 16)) -> list[dict]:
    """Device time of the FSA order for each ``FSA_STEPS`` (entries per work chunk)."""
    from lc_kernels.selected_attention import triton as kernels

    fwd, fwd_bwd, qkv = calls(t, g, "fsa")
    default, rows = kernels.FSA_STEPS, []
    try:
        for steps in values:
            kernels.FSA_STEPS = steps  # read at every call (plan chunk size)
            row = {"T": t, "G": g, "fsa_steps": steps}
            row["fwd_ms"] = _bench(fwd, warmup=10)
            row["fwd_bwd_ms"] = _bench(fwd_bwd, warmup=5, grad_to_none=qkv)
            print(row, flush=True)
            rows.append(row)
    finally:
        kernels.FSA_STEPS = default
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="CPU tensors through Triton's interpreter at T = 16 (set TRITON_INTERPRET=1)",
    )
    ap.add_argument("--out", type=Path, default=None, help=f"output directory (default {OUT})")
    args = ap.parse_args()
    global SMOKE
    SMOKE = args.smoke
    if SMOKE:
        cases, sweeps, values = [(16, 2)], [(16, 2)], (4,)
        machine = "smoke test on CPU (Triton interpreter)"
    else:
        if not torch.cuda.is_available():
            raise SystemExit("needs a CUDA device (or --smoke with TRITON_INTERPRET=1)")
        cases = [(16384, 1), (16384, 4), (65536, 1), (65536, 4)]
        sweeps, values = [(16384, 1), (16384, 4), (65536, 4)], (2, 4, 8, 16)
        machine = torch.cuda.get_device_name()
    t0 = time.time()
    rows = [case(t, g, "fsa") for t, g in cases]
    sweep = [r for t, g in sweeps for r in steps_sweep(t, g, values)]
    out = args.out or OUT
    out.mkdir(parents=True, exist_ok=True)
    path = out / ("fsa_profile_smoke.json" if SMOKE else "fsa_profile_gpu.json")
    result = {
        "machine": machine,
        "torch": torch.__version__,
        "cases": rows,
        "fsa_steps_sweep": sweep,
        "wall_s": time.time() - t0,
    }
    path.write_text(json.dumps(result, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
