"""DSSA stage 2 with per-query selection on CPU, beside dense attention.

``DSSAConfig.training_free()`` lets every query pick its own 16 blocks;
``block_major_selected_attention`` (the forced blocks per tile, then every other
selected block with the chunks of queries that chose it, merged by log-sum-exp)
computes the attention over them. It runs side by side in one process with dense
causal SDPA and stage 1 (block scoring and top-k), in SmolLM2-135M's attention shape
(9 query heads, 3 KV heads, head dim 64, float32), process CPU time, best of ``--reps``
with the functions taking turns. Inputs: random (no two queries agree) or
``--inputs docs``: the queries, keys and values of one layer of the embedded
SmolLM2-135M-Instruct on the last window of Python's documentation (real attention).
Rows written before lc-attention 0.15 also hold the removed tiled path's time
(``tiled_s``); the comparison of every former PyTorch path is
``packages/lc-attention/benchmarks/dssa_sparse_paths.py``.

    uv run python benchmarks/dssa_stage2.py --lengths 8192 16384 32768 --inputs random docs
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from lc_attention.dssa import DSSAConfig, compress_keys, select_group_blocks
from lc_attention.dssa.sparse import block_major_selected_attention

OUT = pathlib.Path(__file__).resolve().parents[1] / "docs/benchmarks/lc-attention-dssa"
SCALE = 0.125  # 1 / sqrt(64)


def _best(fns: list[Callable[[], Any]], reps: int) -> list[float]:
    """Best process CPU time of each function; the functions take turns, ``reps`` rounds."""
    best = [float("inf")] * len(fns)
    for _ in range(reps):
        for i, fn in enumerate(fns):
            t0 = time.process_time()
            fn()
            best[i] = min(best[i], time.process_time() - t0)
    return best


def random_qkv(s: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(s)
    q = torch.randn(1, s, 9, 64, generator=g)
    k = torch.randn(1, s, 3, 64, generator=g)
    v = torch.randn(1, s, 3, 64, generator=g)
    return q, k, v


def docs_qkv(s: int, layer: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Query, key, value ``[1, S, H, 64]`` of decoder layer ``layer`` of the embedded
    SmolLM2 (dense attention) on the last ``s`` tokens' window of Python's documentation."""
    from dssa_quality import doc_window
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from lc_agents.models import load_model

    model, tok = load_model("smollm2-135m-instruct")
    model.model.layers = model.model.layers[: layer + 1]
    model.config.num_hidden_layers = layer + 1
    seen: dict[str, torch.Tensor] = {}

    def capture(module, query, key, value, attention_mask, **kwargs):  # type: ignore[no-untyped-def]
        if module.layer_idx == layer:
            seen.update(q=query.transpose(1, 2), k=key.transpose(1, 2), v=value.transpose(1, 2))
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)

    AttentionInterface.register("lc_capture", capture)
    model.set_attn_implementation("lc_capture")
    with torch.no_grad():
        model(doc_window(tok, s, -1), use_cache=False)
    return seen["q"].contiguous(), seen["k"].contiguous(), seen["v"].contiguous()


def measure(s: int, inputs: str, layer: int, reps: int) -> dict[str, Any]:
    q, k, v = random_qkv(s) if inputs == "random" else docs_qkv(s, layer)
    cfg = DSSAConfig.training_free()
    kc = compress_keys(k, cfg)

    def stage1() -> torch.Tensor:
        return select_group_blocks(q, kc, 0, s, cfg, SCALE)

    idx = stage1()
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    fns = [
        lambda: F.scaled_dot_product_attention(
            qt, kt, vt, is_causal=True, scale=SCALE, enable_gqa=True
        ),
        stage1,
        lambda: block_major_selected_attention(
            q, k, v, idx, 0, cfg.block_size, SCALE, cfg.init_blocks, cfg.local_blocks
        ),
    ]
    with torch.no_grad():
        dense, sel, major = _best(fns, reps)
    row = {
        "length": s,
        "inputs": inputs if inputs == "random" else f"docs, layer {layer}",
        "dense_s": dense,
        "stage1_s": sel,
        "block_major_s": major,
        "layer_speedup_block_major": dense / (sel + major),
    }
    print({k: round(x, 4) if isinstance(x, float) else x for k, x in row.items()}, flush=True)
    return row


def _plot(rows: list[dict[str, Any]], path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = sorted({r["inputs"] for r in rows})
    fig, axes = plt.subplots(1, len(kinds), figsize=(5.5 * len(kinds), 4), squeeze=False)
    for ax, kind in zip(axes[0], kinds, strict=True):
        sub = [r for r in rows if r["inputs"] == kind]
        x = range(len(sub))
        w = 0.2
        names = [("dense", "dense_s"), ("stage 1", "stage1_s"), ("tiled", "tiled_s"),
                 ("block-major", "block_major_s")]  # fmt: skip
        parts = [(label, key) for label, key in names if all(key in r for r in sub)]
        for i, (label, key) in enumerate(parts):
            off = (i - (len(parts) - 1) / 2) * w
            ax.bar([j + off for j in x], [r[key] for r in sub], w, label=label)
        ax.set_xticks(list(x), [f"{r['length'] // 1024}K" for r in sub])
        ax.set_yscale("log")
        ax.set_ylabel("CPU seconds (one thread)")
        ax.set_title(f"training_free(): stage 2 paths, {kind} inputs")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[8192, 16384, 32768])
    ap.add_argument("--inputs", nargs="+", choices=["random", "docs"], default=["random"])
    ap.add_argument("--layer", type=int, default=3, help="decoder layer of --inputs docs")
    ap.add_argument("--reps", type=int, default=2, help="best of")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=pathlib.Path, default=OUT / "stage2_cpu.json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rows = [measure(s, kind, args.layer, args.reps) for kind in args.inputs for s in args.lengths]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "machine": platform.processor() or platform.machine(),
                "threads": args.threads,
                "torch": torch.__version__,
                "config": "DSSAConfig.training_free() (per-query selection, 4-token spans)",
                "rows": rows,
            },
            indent=2,
        )
    )
    _plot(rows, args.out.with_suffix(".png"))


if __name__ == "__main__":
    main()
