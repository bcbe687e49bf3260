"""GPU check of OOMB's CUDA paths: Triton paged attention and host offload with prefetch.

One short script for a CUDA machine (a few minutes on one GPU):

1. Kernel: the Triton chunk attention over a paged past against the PyTorch reference
   in fp32 and bf16 (relative RMS error of the output, dQ/dK/dV and the gradient pages)
   and the time of one forward + backward of each, side by side.
2. Training: a Llama with SmolLM2-135M's attention shape (9 query / 3 KV heads, head
   dim 64; random weights, fewer layers) on one long sequence: ordinary
   back-propagation, chunk-recurrent training with the Triton kernels, and the same with
   KV pages offloaded to host memory (2 layers resident, prefetch on a side stream):
   gradient error against ordinary training, peak CUDA memory, step time, and the
   stager's counters.

    uv run python packages/lc-train/benchmarks/oomb_gpu.py
    TRITON_INTERPRET=1 uv run python packages/lc-train/benchmarks/oomb_gpu.py \\
        --device cpu --small --out /tmp/oomb_gpu_smoke   # smoke test without a GPU
    # --smoke instead of --small: one layer, 96 tokens, vocabulary 1024 (the GPU suite's)

Writes ``docs/benchmarks/lc-train-oomb/oomb_gpu[_<device>].json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch

OUT = Path(__file__).resolve().parents[3] / "docs" / "benchmarks" / "lc-train-oomb"


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return float((a - b).pow(2).mean().sqrt() / b.pow(2).mean().sqrt().clamp_min(1e-30))


def kernel_check(args: argparse.Namespace, device: torch.device) -> list[dict]:
    """Triton vs reference on one chunk over a paged past."""
    from lc_kernels.paged import (
        PagedKV,
        paged_chunk_attention_backward,
        paged_chunk_attention_forward,
    )

    rows = []
    b, h, hkv, d, page = 1, 9, 3, 64, args.page
    t, past_len = args.kernel_chunk, args.kernel_past
    n_pages = -(-past_len // page)
    gen = torch.Generator().manual_seed(0)
    dtypes = [torch.float32] + ([torch.bfloat16] if device.type == "cuda" else [])
    for dtype in dtypes:

        def rnd(*shape: int, dtype: torch.dtype = dtype) -> torch.Tensor:
            return torch.randn(*shape, generator=gen).to(device, dtype)

        q, k, v, do = rnd(b, t, h, d), rnd(b, t, hkv, d), rnd(b, t, hkv, d), rnd(b, t, h, d)
        pages = [rnd(n_pages + 2, b, hkv, page, d) for _ in range(2)]
        table = torch.randperm(n_pages + 2, generator=gen)[:n_pages].to(device)
        res: dict[str, dict] = {}
        for backend in ("torch", "triton"):
            grads = [torch.zeros_like(pages[0]) for _ in range(2)]
            past = PagedKV(pages[0], pages[1], table, past_len, grads[0], grads[1], 1024)
            times = []
            for rep in range(args.reps + 1):
                _sync(device)
                t0 = time.perf_counter()
                out, lse = paged_chunk_attention_forward(q, k, v, past, backend=backend)
                dq, dk, dv = paged_chunk_attention_backward(
                    q, k, v, out, lse, do, past, backend=backend
                )
                _sync(device)
                if rep:  # the first call compiles
                    times.append(time.perf_counter() - t0)
            for g in grads:  # gradients were added reps + 1 times
                g /= args.reps + 1
            res[backend] = {"out": out, "dq": dq, "dk": dk, "dv": dv, "gk": grads[0],
                            "gv": grads[1], "s": min(times)}  # fmt: skip
        row = {
            "dtype": str(dtype).replace("torch.", ""),
            "chunk": t,
            "past": past_len,
            "page": page,
            "heads": f"{h}q/{hkv}kv, d={d}",
            "rel_rms": {
                key: _rel(res["triton"][key], res["torch"][key])
                for key in ("out", "dq", "dk", "dv", "gk", "gv")
            },
            "torch_fwd_bwd_s": res["torch"]["s"],
            "triton_fwd_bwd_s": res["triton"]["s"],
            "speedup": res["torch"]["s"] / res["triton"]["s"],
        }
        print(row, flush=True)
        rows.append(row)
    return rows


def training_check(args: argparse.Namespace, device: torch.device) -> list[dict]:
    """Ordinary training vs chunk-recurrent (Triton) vs chunk-recurrent with offload."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from lc_train.oomb import ChunkRecurrentConfig, chunk_recurrent_backward

    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=args.vocab,
            hidden_size=576,
            intermediate_size=1536,
            num_hidden_layers=args.layers,
            num_attention_heads=9,
            num_key_value_heads=3,
            max_position_embeddings=args.seq,
            tie_word_embeddings=True,
        )
    ).to(device, getattr(torch, args.dtype))
    ids = torch.randint(0, args.vocab, (1, args.seq), generator=torch.Generator().manual_seed(1))
    ids = ids.to(device)

    def step(fn) -> tuple[float, float, torch.Tensor, object]:
        model.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device) if device.type == "cuda" else 0
        _sync(device)
        t0 = time.perf_counter()
        extra = fn()
        _sync(device)
        seconds = time.perf_counter() - t0
        peak = (torch.cuda.max_memory_allocated(device) - base) if device.type == "cuda" else 0
        flat = torch.cat([p.grad.float().flatten() for p in model.parameters()])
        return seconds, peak / 2**20, flat, extra

    rows = []
    reference = None
    methods = {
        "ordinary": lambda: model(ids, labels=ids).loss.backward(),
        "oomb": lambda: chunk_recurrent_backward(
            model, ids, config=ChunkRecurrentConfig(chunk_size=args.chunk, page_size=args.page,
                                                    block_tokens=args.chunk)
        ),
        "oomb_offload": lambda: chunk_recurrent_backward(
            model, ids, config=ChunkRecurrentConfig(chunk_size=args.chunk, page_size=args.page,
                                                    block_tokens=args.chunk, offload=True)
        ),
    }  # fmt: skip
    for name, fn in methods.items():
        if name == "ordinary" and args.seq > args.ordinary_max:
            continue
        seconds, peak_mb, grad, extra = step(fn)
        row = {"method": name, "seq": args.seq, "step_s": seconds, "peak_mb": peak_mb}
        if reference is None and name == "ordinary":
            reference = grad
        elif reference is not None:
            row["grad_rel_error_vs_ordinary"] = float((grad - reference).norm() / reference.norm())
        if extra is not None and hasattr(extra, "device_kv_bytes"):
            row["device_kv_mb"] = extra.device_kv_bytes / 2**20
            row["kv_mb"] = extra.kv_bytes / 2**20
            stats = getattr(extra, "offload_stats", None)
            if stats is not None:
                row["offload_stats"] = vars(stats)
        print(row, flush=True)
        rows.append(row)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--small", action="store_true", help="tiny sizes (smoke test)")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="smaller still than --small (one layer, 96 tokens, vocabulary 1024)",
    )
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--seq", type=int, default=16384)
    ap.add_argument("--vocab", type=int, default=49152, help="vocabulary (SmolLM2's)")
    ap.add_argument("--chunk", type=int, default=2048)
    ap.add_argument("--page", type=int, default=128)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--ordinary-max", type=int, default=16384)
    ap.add_argument("--kernel-chunk", type=int, default=4096)
    ap.add_argument("--kernel-past", type=int, default=32768)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", type=Path, default=OUT, help="directory of the JSON")
    args = ap.parse_args()
    if args.small:
        args.seq, args.chunk, args.page, args.layers = 256, 64, 16, 2
        args.kernel_chunk, args.kernel_past, args.reps = 32, 80, 1
        args.dtype = "float32"
    if args.smoke:
        args.seq, args.chunk, args.page, args.layers = 96, 32, 16, 1
        args.kernel_chunk, args.kernel_past, args.reps = 16, 40, 1
        args.dtype, args.vocab = "float32", 1024
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run with --device cpu --small for a smoke test")
    t0 = time.time()
    result = {
        "machine": (
            torch.cuda.get_device_name(device)
            if device.type == "cuda"
            else f"CPU ({platform.machine()}), Triton interpreter"
        ),
        "torch": torch.__version__,
        "config": {**vars(args), "out": str(args.out)},
        "kernel": kernel_check(args, device),
        "training": training_check(args, device),
    }
    result["wall_s"] = time.time() - t0
    args.out.mkdir(parents=True, exist_ok=True)
    name = "oomb_gpu.json" if device.type == "cuda" else f"oomb_gpu_{device.type}.json"
    (args.out / name).write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out / name}")


if __name__ == "__main__":
    main()
