"""Decode-step latency of LycheeDecode vs full attention on SmolLM2-135M-Instruct (CPU).

SmolLM2 was trained to 8K tokens, so the KV cache here is synthetic: random keys and
values of the model's shape ([1, 3, T, 64] per layer, float32) at T = 8K, 16K, 32K, with
the real weights and RoPE positions T (latency does not depend on the cache values).
Both modes run in the same process on the same cache, alternating, and report the
best of ``--reps`` steps:

- ``step``: one full ``model(token, past_key_values=cache)`` decode step (Hugging Face
  ``DynamicCache``, whose append copies the whole cache with ``torch.cat`` every step,
  in both modes);
- ``attention``: the attention computation alone summed over the 30 layers (SDPA
  over the whole cache vs ``hybrid_decode_attention`` with the learned roles);
- ``append``: the ``DynamicCache`` append of one token over all layers (shared cost).

Writes ``speed.json`` / ``speed.png`` under ``docs/benchmarks/lc-attention-lychee/``.

    nice uv run python benchmarks/lychee_speed.py --lengths 8192 16384 32768
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from lychee_common import OUT, ROLES, machine

from lc_attention.lychee import RoleMap, disable_lychee, enable_lychee, hybrid_decode_attention
from lc_attention.lychee.hf import _publish_plan


def _best(fn, reps: int) -> float:
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _measure(model, rm: RoleMap, t: int, topk: int, reps: int) -> dict[str, float]:
    """Time one cache length ``t`` (synthetic cache, real weights)."""
    from transformers import DynamicCache

    cfg = model.config
    layers, hq, hkv = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads
    d = cfg.hidden_size // hq
    roles = [list(r) for r in rm.retrieval]
    publish = _publish_plan(roles, [True] * layers)
    tok = torch.tensor([[42]])
    g = torch.Generator().manual_seed(t)
    cache = DynamicCache()
    kv = []
    for layer in range(layers):
        k = torch.randn(1, hkv, t, d, generator=g)
        v = torch.randn(1, hkv, t, d, generator=g)
        cache.update(k, v, layer)
        kv.append((k, v))
    q = torch.randn(1, hq, d, generator=g)

    def step() -> None:
        with torch.no_grad():
            model(tok, past_key_values=cache, use_cache=True)
        cache.crop(-1)

    def append() -> None:
        for layer in range(layers):
            cache.update(torch.zeros(1, hkv, 1, d), torch.zeros(1, hkv, 1, d), layer)
        cache.crop(-1)

    def attn_full() -> None:
        with torch.no_grad():
            for k, v in kv:
                F.scaled_dot_product_attention(q[:, :, None], k, v, enable_gqa=True)

    def attn_lychee() -> None:
        idx = None
        with torch.no_grad():
            for layer, (k, v) in enumerate(kv):
                _, idx = hybrid_decode_attention(
                    q, k.transpose(1, 2), v.transpose(1, 2), retrieval=roles[layer],
                    indices=idx, topk=topk, publish=publish[layer],
                )  # fmt: skip

    full_step = _best(step, reps)
    enable_lychee(model, rm, topk=topk)
    try:
        lychee_step = _best(step, reps)
    finally:
        disable_lychee(model)
    row = {
        "length": t,
        "step_s_full": full_step,
        "step_s_lychee": lychee_step,
        "attention_s_full": _best(attn_full, reps),
        "attention_s_lychee": _best(attn_lychee, reps),
        "append_s": _best(append, reps),
    }
    row["step_speedup"] = row["step_s_full"] / row["step_s_lychee"]
    row["attention_speedup"] = row["attention_s_full"] / row["attention_s_lychee"]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[8192, 16384, 32768])
    ap.add_argument("--topk", type=int, default=256)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--roles", type=pathlib.Path, default=ROLES)
    ap.add_argument("--out", type=pathlib.Path, default=OUT / "speed.json")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from lc_agents.models import load_model

    model, _ = load_model()
    rm = RoleMap.load(args.roles)
    rows = []
    for t in args.lengths:
        rows.append(_measure(model, rm, t, args.topk, args.reps))
        print({k: round(v, 4) if isinstance(v, float) else v for k, v in rows[-1].items()})
    result = {
        "model": "SmolLM2-135M-Instruct (embedded GGUF, float32), synthetic KV cache",
        "roles": {
            "file": args.roles.name,
            "num_retrieval": rm.num_retrieval,
            "num_heads": rm.num_heads_total,
        },
        "topk": args.topk,
        "machine": machine(args.threads),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.2))
    xs = [r["length"] for r in rows]
    a1.plot(xs, [1e3 * r["step_s_full"] for r in rows], "o-", label="full attention")
    a1.plot(xs, [1e3 * r["step_s_lychee"] for r in rows], "s-", label="LycheeDecode")
    a1.plot(xs, [1e3 * r["append_s"] for r in rows], "x:", label="DynamicCache append")
    a1.set_ylabel("decode step (ms)")
    a1.legend(fontsize=8)
    a2.plot(xs, [r["step_speedup"] for r in rows], "o-", label="whole step")
    a2.plot(xs, [r["attention_speedup"] for r in rows], "s-", label="attention only")
    a2.axhline(1.0, color="grey", lw=0.6)
    a2.set_ylabel("speedup vs full attention")
    a2.legend(fontsize=8)
    for a in (a1, a2):
        a.set_xscale("log", base=2)
        a.set_xlabel("KV cache length (tokens)")
    fig.tight_layout()
    fig.savefig(args.out.with_suffix(".png"), dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
