"""Where the time of FSA-order selected attention goes on a GPU: host work vs kernels.

For a few (T, G) cases of ``fsa_vs_nsa.py``'s setting it reports, for the forward and
the forward+backward, the device time per call (``triton.testing.do_bench``), the host
time of issuing one call (no synchronize), and the profiler's per-kernel CUDA time and
per-op CPU time, so launch and planning overhead can be told apart from kernel time;
then it sweeps ``FSA_STEPS`` (entries each program handles) at 16K and 64K.

    python packages/lc-kernels/benchmarks/fsa_profile.py   # CUDA only

Writes ``docs/benchmarks/lc-kernels/fsa_profile_gpu.json``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fsa_vs_nsa import BLOCK, HKV, OUT, D, make_inputs

from lc_kernels import selected_attention


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


def calls(t: int, g: int, order: str) -> tuple[Callable[[], Any], Callable[[], Any], list]:
    """``(forward, forward+backward, [q, k, v])`` of one bf16 case of ``fsa_vs_nsa.py``."""
    x = make_inputs(t, g, HKV, D, torch.bfloat16, "cuda")
    qkv = [x[n].clone().requires_grad_(True) for n in ("q", "k", "v")]

    def fwd() -> torch.Tensor:
        return selected_attention(*qkv, x["idx"], BLOCK, backend="triton", order=order)

    def fwd_bwd() -> None:
        fwd().backward(x["do"])

    return fwd, fwd_bwd, qkv


def case(t: int, g: int, order: str) -> dict:
    from triton.testing import do_bench

    fwd, fwd_bwd, qkv = calls(t, g, order)
    out: dict = {"T": t, "G": g, "order": order}
    for name, fn in (("fwd", fwd), ("fwd_bwd", fwd_bwd)):
        out[f"{name}_device_ms"] = do_bench(fn, warmup=10, rep=40, grad_to_none=qkv)
        torch.cuda.synchronize()
        h0 = time.perf_counter()
        for _ in range(5):
            fn()
        host = (time.perf_counter() - h0) / 5
        torch.cuda.synchronize()
        out[f"{name}_host_issue_ms"] = 1e3 * host
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
        out[f"{name}_by_device_time"] = _top(prof, "self_device_time_total")
        out[f"{name}_by_cpu_time"] = _top(prof, "cpu_time_total")
        print(
            f"T={t} G={g} {order} {name}: device {out[f'{name}_device_ms']:.3f} ms, "
            f"host issue {out[f'{name}_host_issue_ms']:.3f} ms",
            flush=True,
        )
        for r in out[f"{name}_by_device_time"][:8]:
            print(f"   {r['self_device_us'] / 3:9.1f} us/call  x{r['calls'] // 3}  {r['name']}")
    return out


def steps_sweep(t: int, g: int, values: tuple[int, ...] = (2, 4, 8, 16)) -> list[dict]:
    """Device time of the FSA order for each ``FSA_STEPS`` (entries per work chunk)."""
    from triton.testing import do_bench

    from lc_kernels.selected_attention import triton as kernels

    fwd, fwd_bwd, qkv = calls(t, g, "fsa")
    default, rows = kernels.FSA_STEPS, []
    try:
        for steps in values:
            kernels.FSA_STEPS = steps  # read at every call (plan chunk size)
            row = {"T": t, "G": g, "fsa_steps": steps}
            row["fwd_ms"] = do_bench(fwd, warmup=10, rep=40)
            row["fwd_bwd_ms"] = do_bench(fwd_bwd, warmup=5, rep=40, grad_to_none=qkv)
            print(row, flush=True)
            rows.append(row)
    finally:
        kernels.FSA_STEPS = default
    return rows


def main() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA device")
    rows = [case(t, g, "fsa") for t, g in ((16384, 1), (16384, 4), (65536, 1), (65536, 4))]
    sweep = [r for t, g in ((16384, 1), (16384, 4), (65536, 4)) for r in steps_sweep(t, g)]
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "fsa_profile_gpu.json"
    result = {"machine": torch.cuda.get_device_name(), "cases": rows, "fsa_steps_sweep": sweep}
    path.write_text(json.dumps(result, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
