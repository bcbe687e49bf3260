"""Decode-step latency of LycheeDecode vs full attention on SmolLM2-135M-Instruct (CPU).

SmolLM2 was trained to 8K tokens, so the KV cache here is synthetic: random keys and
values of the model's shape ([1, 3, T, 64] per layer, float32) at T = 8K, 16K, 32K, with
the real weights and RoPE positions T (latency does not depend on the cache values).
All modes run in the same process, on the same kind of cache, interleaved step by step
(mode A, mode B, ... then again), and each reports the best of ``--reps`` repetitions of
``--steps`` consecutive greedy decode steps (the cache grows, then is cropped back). On
the CPU with one thread the primary clock is the process CPU time (other jobs on a shared
machine do not count), with thread CPU time and wall clock kept beside it; switching the
model between modes (``enable_lychee`` / ``disable_lychee``) is outside the timed part.
With ``--device cuda`` (bf16) the model is SmolLM2-135M's architecture with random
weights (latency does not depend on the weight values; the role map keeps its learned
pattern), times are wall clock after a device synchronize, and the decode path uses the
lc-kernels decode kernels:

- ``full_sdpa``: the model's own SDPA attention over a ``PreallocatedCache`` (in-place
  append, no per-step copy of the cache);
- ``full_dense``: our decode path with every head a retrieval head and no top-k, over the
  same cache: dense attention with the same batched matmuls LycheeDecode uses;
- ``lychee``: LycheeDecode with the learned role map, same cache;
- ``full_dynamic``: SDPA over Hugging Face's ``DynamicCache`` (``torch.cat`` copies the
  whole cache every step), for reference.

Attention alone (the 30 layers' attention computation on the same cache, no weights) is
timed the same way: SDPA, the dense path and the hybrid path. Writes ``speed.json`` /
``speed.png`` under ``docs/benchmarks/lc-attention-lychee/``.

    nice -n 10 uv run python benchmarks/lychee_speed.py --lengths 8192 16384 32768
    python benchmarks/lychee_speed.py --device cuda --no-dynamic \
        --lengths 8192 16384 32768 65536 131072   # writes speed_gpu.json
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from lychee_common import OUT, ROLES, machine
from smollm2_shape import random_smollm2

from lc_attention.lychee import PreallocatedCache, RoleMap, disable_lychee, enable_lychee
from lc_attention.lychee.attention import decode_step, head_plan
from lc_attention.lychee.hf import _publish_plan

MODES = ("full_sdpa", "full_dense", "lychee", "full_dynamic")
CUDA = False  # set by main(): synchronize the device around every timed call


def _sync() -> None:
    if CUDA:
        torch.cuda.synchronize()


def _fill(cache, kv: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
    for layer, (k, v) in enumerate(kv):
        cache.update(k, v, layer)


class _Clock:
    """Accumulates wall-clock, thread CPU and process CPU seconds over ``with`` blocks."""

    def __init__(self) -> None:
        self.wall = self.thread = self.process = 0.0

    def __enter__(self) -> _Clock:
        _sync()
        self._t0 = (time.perf_counter(), time.thread_time(), time.process_time())
        return self

    def __exit__(self, *exc: object) -> None:
        _sync()
        w, t, p = self._t0
        self.wall += time.perf_counter() - w
        self.thread += time.thread_time() - t
        self.process += time.process_time() - p


CLOCKS = ("wall", "thread", "process")


def _interleaved(
    fns: dict[str, Callable[[_Clock], None]], reps: int
) -> dict[str, dict[str, list[float]]]:
    """Run each function once (warm-up), then ``reps`` rounds of all, interleaved.

    Each function times its own hot part with the clock it is given (so switching the
    model between modes is not counted). Returns ``{clock: {name: seconds per run}}`` for
    the clocks wall, thread (CPU time of the calling thread: with one torch thread all
    compute runs there) and process (CPU time of every thread of the process); the CPU
    clocks do not count time the scheduler gives to other processes on a shared machine.
    """
    for fn in fns.values():
        fn(_Clock())
    out: dict[str, dict[str, list[float]]] = {c: {name: [] for name in fns} for c in CLOCKS}
    for _ in range(reps):
        for name, fn in fns.items():
            clock = _Clock()
            fn(clock)
            for c in CLOCKS:
                out[c][name].append(getattr(clock, c))
    return out


def _measure(model, rm: RoleMap, t: int, args) -> dict:
    """Time one cache length ``t`` (synthetic cache, real weights)."""
    from transformers import DynamicCache

    cfg = model.config
    layers, hq, hkv = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads
    d = cfg.hidden_size // hq
    g = torch.Generator().manual_seed(t)
    dev, dtype = model.device, model.dtype
    kv = [
        tuple(torch.randn(1, hkv, t, d, generator=g).to(dev, dtype) for _ in range(2))
        for _ in range(layers)
    ]
    pre = PreallocatedCache(config=cfg, capacity=t + args.steps + 1)
    _fill(pre, kv)
    dyn = None
    if not args.no_dynamic:
        dyn = DynamicCache(config=cfg)
        _fill(dyn, kv)
    del kv
    everyone = RoleMap.from_model(model)
    tok = torch.tensor([[42]], device=dev)

    def decode(cache, roles: RoleMap | None) -> Callable[[_Clock], None]:
        def run(clock: _Clock) -> None:
            handle = enable_lychee(model, roles, topk=args.topk) if roles is not None else None
            try:
                ids = tok
                with torch.no_grad(), clock:
                    for _ in range(args.steps):
                        logits = model(ids, cache=cache, use_cache=True).logits
                        ids = logits[:, -1:].argmax(-1)
            finally:
                if handle is not None:
                    disable_lychee(model)
                cache.crop(-args.steps)

        return run

    fns = {
        "full_sdpa": decode(pre, None),
        "full_dense": decode(pre, everyone),
        "lychee": decode(pre, rm),
    }
    if dyn is not None:
        fns["full_dynamic"] = decode(dyn, None)
    step_t = _interleaved(fns, args.reps)

    # attention alone: the 30 layers' attention over the preallocated cache
    roles = [list(r) for r in rm.retrieval]
    publish = _publish_plan(roles, [True] * layers)
    plans = [head_plan(roles[i], publish[i], hq, hkv, dev) for i in range(layers)]
    dense = head_plan([True] * hq, [False] * hq, hq, hkv, dev)
    q = torch.randn(1, hq, d, generator=g).to(dev, dtype)
    cache_kv = [(layer.keys, layer.values) for layer in pre.layers]
    idx = torch.zeros(1, hq, args.topk, dtype=torch.long, device=dev)
    backend = "auto"  # the decode kernels on CUDA, batched PyTorch on CPU (as the model runs)

    def att_sdpa(clock: _Clock) -> None:
        with torch.no_grad(), clock:
            for k, v in cache_kv:
                F.scaled_dot_product_attention(q[:, :, None], k, v, enable_gqa=True)

    def att_dense(clock: _Clock) -> None:
        with torch.no_grad(), clock:
            for k, v in cache_kv:
                decode_step(
                    dense, q, k.transpose(1, 2), v.transpose(1, 2), indices=None, topk=1,
                    backend=backend, check=False,
                )  # fmt: skip

    def att_lychee(clock: _Clock) -> None:
        with torch.no_grad(), clock:
            for plan, (k, v) in zip(plans, cache_kv, strict=True):
                decode_step(
                    plan, q, k.transpose(1, 2), v.transpose(1, 2), indices=idx,
                    topk=args.topk, block_size=args.block_size, out_indices=idx,
                    backend=backend, check=False,  # as the model's decode path: no range check
                )  # fmt: skip

    att_t = _interleaved(
        {"full_sdpa": att_sdpa, "full_dense": att_dense, "lychee": att_lychee}, args.reps
    )
    # primary numbers: process CPU time with one thread (robust to other jobs), else wall
    main_clock = "process" if args.threads == 1 and not CUDA else "wall"
    row: dict = {"length": t}
    for name in step_t["wall"]:
        row[f"step_s_{name}"] = min(step_t[main_clock][name]) / args.steps
        for c in CLOCKS:
            row[f"step_s_{name}_{c}"] = min(step_t[c][name]) / args.steps
        row[f"step_s_{name}_wall_median"] = statistics.median(step_t["wall"][name]) / args.steps
    for name in att_t["wall"]:
        row[f"attention_s_{name}"] = min(att_t[main_clock][name])
        for c in CLOCKS:
            row[f"attention_s_{name}_{c}"] = min(att_t[c][name])
    for suffix in ("", *(f"_{c}" for c in CLOCKS)):
        best_full = min(row[f"step_s_full_sdpa{suffix}"], row[f"step_s_full_dense{suffix}"])
        row[f"step_speedup{suffix}"] = best_full / row[f"step_s_lychee{suffix}"]
        row[f"step_speedup_vs_sdpa{suffix}"] = (
            row[f"step_s_full_sdpa{suffix}"] / row[f"step_s_lychee{suffix}"]
        )
        best_att = min(
            row[f"attention_s_full_sdpa{suffix}"], row[f"attention_s_full_dense{suffix}"]
        )
        row[f"attention_speedup{suffix}"] = best_att / row[f"attention_s_lychee{suffix}"]
    return row


def plot(rows: list[dict], path: pathlib.Path) -> None:
    """Decode-step latency per mode and the speed-ups, against the cache length."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9.5, 3.4))
    xs = [r["length"] for r in rows]
    labels = {
        "full_dynamic": ("full, SDPA, DynamicCache", "x:"),
        "full_sdpa": ("full, SDPA, preallocated", "o-"),
        "full_dense": ("full, dense path, preallocated", "d-"),
        "lychee": ("LycheeDecode, preallocated", "s-"),
    }
    for name, (label, style) in labels.items():
        key = f"step_s_{name}"
        if all(key in r for r in rows):
            a1.plot(xs, [1e3 * r[key] for r in rows], style, label=label)
    a1.set_ylabel("decode step (ms)")
    a1.legend(fontsize=7)
    a2.plot(xs, [r["step_speedup"] for r in rows], "o-", label="whole step")
    a2.plot(xs, [r["attention_speedup"] for r in rows], "s-", label="attention only")
    a2.axhline(1.0, color="grey", lw=0.6)
    a2.set_ylabel("speedup vs faster full attention")
    a2.legend(fontsize=8)
    for a in (a1, a2):
        a.set_xscale("log", base=2)
        a.set_xlabel("KV cache length (tokens)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[8192, 16384, 32768])
    ap.add_argument("--topk", type=int, default=256)
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--steps", type=int, default=4, help="decode steps per repetition")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-dynamic", action="store_true", help="skip the DynamicCache row")
    ap.add_argument("--roles", type=pathlib.Path, default=ROLES)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument(
        "--random-weights",
        action="store_true",
        help="SmolLM2-135M's architecture with random weights (implied on CUDA)",
    )
    ap.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="stop starting new lengths after this many seconds (skipped ones are listed)",
    )
    ap.add_argument("--out", type=pathlib.Path, default=None, help="default: speed[_gpu].json")
    args = ap.parse_args()
    global CUDA
    CUDA = args.device == "cuda"
    out = args.out or OUT / ("speed_gpu.json" if CUDA else "speed.json")
    torch.set_num_threads(args.threads)
    rm = RoleMap.load(args.roles)
    if args.random_weights or CUDA:
        dtype = torch.bfloat16 if CUDA else torch.float32
        model = random_smollm2(30, args.device, dtype, max(args.lengths) + args.steps + 1)
        rm = RoleMap.from_model(model, retrieval=rm.retrieval)  # same roles, this stand-in
        model_name = f"SmolLM2-135M architecture, random weights, {str(dtype)[6:]}"
    else:
        from lc_agents.models import load_model

        model, _ = load_model("smollm2-135m-instruct")
        model_name = "SmolLM2-135M-Instruct (embedded GGUF, float32)"
    num_kv = int(rm.fingerprint["num_kv_heads"])
    kv_read = sum(
        len({h // (rm.num_heads // num_kv) for h, r in enumerate(row) if r}) for row in rm.retrieval
    )
    rows = []
    t_start = time.perf_counter()
    skipped = []
    for t in args.lengths:
        if args.budget_s is not None and time.perf_counter() - t_start > args.budget_s:
            print(f"time budget reached, skipping length {t}", flush=True)
            skipped.append(t)
            continue
        rows.append(_measure(model, rm, t, args))
        print({k: round(v, 4) if isinstance(v, float) else v for k, v in rows[-1].items()})
    result = {
        "model": f"{model_name}, synthetic KV cache",
        "roles": {
            "file": args.roles.name,
            "num_retrieval": rm.num_retrieval,
            "num_heads": rm.num_heads_total,
            "kv_head_reads": kv_read,
            "kv_heads_total": rm.num_layers * num_kv,
        },
        "topk": args.topk,
        "block_size": args.block_size,
        "decode_steps": args.steps,
        "reps": args.reps,
        "timing": (
            "best of reps, per decode step; modes interleaved in one process; "
            + (
                "step_s_* / attention_s_* are process CPU time (1 torch thread), the same as "
                "*_process; *_thread CPU time of the compute thread, *_wall wall clock; "
                "switching the model between modes is not timed"
                if args.threads == 1 and not CUDA
                else "wall clock" + (" after a device synchronize" if CUDA else "")
            )
        ),
        "machine": (
            f"{torch.cuda.get_device_name()}, torch {torch.__version__}"
            if CUDA
            else machine(args.threads)
        ),
        "seconds": round(time.perf_counter() - t_start, 1),
        "rows": rows,
    }
    if skipped:
        result["skipped_lengths"] = skipped
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    plot(rows, out.with_suffix(".png"))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
