"""DSSA's second stage: every PyTorch execution path side by side, on the same selection.

For each case the block ids come from DSSA's own selection
(``select_group_blocks``), then each PyTorch path of the sparse stage computes the
attention over them: ``gathered`` (each query gathers its own blocks; run in chunks of
``--gather-chunk`` queries beyond that, its memory being ``O(T * K * block * D)``),
``grouped`` (one SDPA per position-aligned query group over its blocks; group 1 for
per-query selections), ``block_major`` (forced blocks per tile, every other block with
the queries that chose it) and ``tiled`` (tiles of 64 queries over the union of their
blocks). lc-attention 0.15 kept ``block_major`` only (the fastest; see
``docs/benchmarks/lc-attention-dssa.md``): a path missing from the installed version,
or one that cannot carry a gradient, is skipped and left out of the JSON. Paths are timed in turns in one process, one thread, best of
``--reps``; process CPU time is the figure that counts on a shared machine, wall time is
given next to it. Every output is compared with the tiled path's.

Cases (SmolLM2-135M attention shape: 9 query heads, 3 KV heads, head dim 64;
``DSSAConfig.small`` with ``dense_len=1024``, 16 blocks of 64 keys): prefill of ``S``
tokens with per-query selection and with ``query_block=64``, a chunked prefill (the last
512 queries over ``S`` keys), a decode step (one query over ``S`` keys), and
forward+backward of the prefill (training) for the paths that carry gradients.

    nice uv run python packages/lc-attention/benchmarks/dssa_sparse_paths.py --length 4096

Writes ``docs/benchmarks/lc-attention-dssa/sparse_paths.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

OUT = Path(__file__).resolve().parents[3] / "docs" / "benchmarks" / "lc-attention-dssa"


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="DSSA sparse stage: PyTorch paths side by side")
    ap.add_argument("--length", type=int, default=4096, help="keys S")
    ap.add_argument("--chunk", type=int, default=512, help="queries of the chunked prefill")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--gather-chunk", type=int, default=512)
    ap.add_argument("--paths", nargs="*", default=None, help="paths to time (default: all)")
    ap.add_argument("--out", type=Path, default=OUT / "sparse_paths.json")
    return ap.parse_args()


def _timed(fn: Callable[[], Any], reps: int) -> tuple[float, float]:
    """Best process CPU time and best wall time of ``reps`` calls, after one warm-up."""
    fn()
    cpu, wall = math.inf, math.inf
    for _ in range(reps):
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        cpu = min(cpu, time.process_time() - c0)
        wall = min(wall, time.perf_counter() - w0)
    return cpu, wall


def _paths(gather_chunk: int) -> dict[str, Callable[..., torch.Tensor]]:
    """Each path as ``fn(q, k, v, idx_groups, start, config, scale) -> out``."""
    import lc_attention.dssa.attention as att
    import lc_attention.dssa.sparse as sp

    def has(mod: object, name: str) -> bool:
        return hasattr(mod, name)

    from lc_attention.dssa.selection import first_full_group, query_groups

    def per_query(idx: torch.Tensor, start: int, qb: int, t: int) -> torch.Tensor:
        if qb == 1:
            return idx
        return idx.index_select(1, query_groups(start, qb, t)[0])

    def gathered(q, k, v, idx, start, cfg, sc):  # type: ignore[no-untyped-def]
        t = q.shape[1]
        ids = per_query(idx, start, cfg.query_block, t)
        pos = torch.arange(start, start + t)
        outs = [
            att._gathered_attention(
                q[:, a : a + gather_chunk],
                k,
                v,
                ids[:, a : a + gather_chunk],
                pos[a : a + gather_chunk],
                cfg.block_size,
                sc,
                None,
            )
            for a in range(0, t, gather_chunk)
        ]
        return torch.cat(outs, 1)

    def grouped(q, k, v, idx, start, cfg, sc):  # type: ignore[no-untyped-def]
        qb = cfg.query_block
        full = first_full_group(start, q.shape[1], cfg) if cfg.topk_fraction else 0
        return sp.grouped_selected_attention(q, k, v, idx, start, cfg.block_size, sc, qb, full)

    def block_major(q, k, v, idx, start, cfg, sc):  # type: ignore[no-untyped-def]
        ids = per_query(idx, start, cfg.query_block, q.shape[1])
        return sp.block_major_selected_attention(
            q, k, v, ids, start, cfg.block_size, sc, cfg.init_blocks, cfg.local_blocks
        )

    def tiled(q, k, v, idx, start, cfg, sc):  # type: ignore[no-untyped-def]
        t = q.shape[1]
        ids = per_query(idx, start, cfg.query_block, t)
        pos = torch.arange(start, start + t)
        return sp.tiled_selected_attention(q, k, v, ids, pos, cfg.block_size, sc, 64, None)

    table = {"gathered": gathered, "grouped": grouped, "block_major": block_major, "tiled": tiled}
    present = {
        "gathered": has(att, "_gathered_attention"),
        "grouped": has(sp, "grouped_selected_attention"),
        "block_major": has(sp, "block_major_selected_attention"),
        "tiled": has(sp, "tiled_selected_attention"),
    }
    return {name: fn for name, fn in table.items() if present[name]}


def main() -> None:
    args = _args()
    torch.set_num_threads(1)
    from lc_attention.dssa import DSSAConfig, compress_keys
    from lc_attention.dssa.selection import select_group_blocks

    paths = _paths(args.gather_chunk)
    names = [n for n in (args.paths or list(paths)) if n in paths]
    s, hq, hkv, d = args.length, 9, 3, 64
    sc = 1.0 / math.sqrt(d)
    g = torch.Generator().manual_seed(0)
    q_all = torch.randn(1, s, hq, d, generator=g)
    k = torch.randn(1, s, hkv, d, generator=g)
    v = torch.randn(1, s, hkv, d, generator=g)
    cases = [
        ("prefill", 1, s, False),
        ("prefill", 64, s, False),
        ("chunked prefill", 1, args.chunk, False),
        ("chunked prefill", 64, args.chunk, False),
        ("decode", 1, 1, False),
        ("prefill, forward+backward", 1, s, True),
        ("prefill, forward+backward", 64, s, True),
    ]
    rows: list[dict[str, Any]] = []
    for phase, qb, t, grad in cases:
        cfg = DSSAConfig.small(dense_len=1024, query_block=qb)
        start = s - t
        q = q_all[:, start:].contiguous()
        with torch.no_grad():
            idx = select_group_blocks(q, compress_keys(k, cfg), start, s, cfg, sc)
        row: dict[str, Any] = {"phase": phase, "query_block": qb, "queries": t, "keys": s}
        ref: torch.Tensor | None = None
        outs: dict[str, torch.Tensor] = {}
        for name in names:
            fn = paths[name]
            if grad:
                qq, kk, vv = (x.clone().requires_grad_() for x in (q, k, v))

                def call(fn=fn, qq=qq, kk=kk, vv=vv, idx=idx, start=start, cfg=cfg) -> None:
                    qq.grad = kk.grad = vv.grad = None
                    fn(qq, kk, vv, idx, start, cfg, sc).square().sum().backward()

                try:
                    cpu, wall = _timed(call, args.reps)
                except RuntimeError:  # no gradient on this path (block_major before 0.15)
                    continue
            else:
                with torch.no_grad():
                    outs[name] = fn(q, k, v, idx, start, cfg, sc)
                    cpu, wall = _timed(
                        lambda fn=fn, q=q, idx=idx, start=start, cfg=cfg: fn(
                            q, k, v, idx, start, cfg, sc
                        ),
                        args.reps,
                    )
            row[f"{name}_cpu_s"] = cpu
            row[f"{name}_wall_s"] = wall
            print(f"{phase:28s} qb={qb:<3d} T={t:<5d} {name:12s} cpu {cpu:.4f} s wall {wall:.4f} s")
        ref = outs.get("tiled")
        if ref is not None and len(outs) > 1:
            for name, o in outs.items():
                row[f"{name}_max_abs_diff"] = float((o - ref).abs().max())
        timed = [n for n in names if f"{n}_cpu_s" in row]
        if not timed:
            continue
        best = min(timed, key=lambda n: row[f"{n}_cpu_s"])
        row["fastest"] = best
        for n in timed:
            row[f"{n}_over_fastest"] = row[f"{n}_cpu_s"] / row[f"{best}_cpu_s"]
        rows.append(row)
    result = {
        "command": "nice uv run python packages/lc-attention/benchmarks/dssa_sparse_paths.py "
        f"--length {s} --chunk {args.chunk} --reps {args.reps}"
        + (f" --paths {' '.join(args.paths)}" if args.paths else ""),
        "machine": platform.machine(),
        "threads": 1,
        "torch": torch.__version__,
        "shape": {"query_heads": hq, "kv_heads": hkv, "head_dim": d, "dtype": "float32"},
        "config": "DSSAConfig.small(dense_len=1024, query_block=1 | 64): 16 blocks of 64",
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
