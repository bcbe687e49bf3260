"""LycheeDecode vs full attention on SmolLM2-135M-Instruct: NIAH accuracy and next-token
agreement on held-out long inputs (training-free: the role map comes from
``lychee_train.py``, learned on other items and a shorter length).

Per item, the prompt is prefilled once (dense, as LycheeDecode does) into a
``PreallocatedCache``; then from the same prefix cache (cropped back after each pass): (1) full attention decodes greedily (reference answer); (2) each
sparse variant decodes greedily (its NIAH answer); (3) each variant is teacher-forced
along the reference tokens and its argmax compared with the reference (next-token
agreement). Variants: the learned role map(s) (``--roles``, one label each in
``--name``), and a random role map with the same number of retrieval heads as the first
one (ablation). Writes ``quality.json`` / ``quality.png``. ``--model gemma-3-270m``: the
embedded Gemma-3-270M base model (plain prompt + answer prefix; sliding-window layers
stay dense), role map ``gemma_3_270m_roles.json`` and ``gemma_3_270m_quality.json`` by
default.

    nice -n 10 uv run python benchmarks/lychee_quality.py --lengths 4096 8192 --n 10
"""

from __future__ import annotations

import argparse
import json
import pathlib
import random
import resource
import sys
import time

import torch
from tqdm import tqdm

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from lychee_common import (
    OUT,
    default_roles,
    full_attention_layers,
    machine,
    model_label,
    task_ids,
)

from lc_attention.lychee import PreallocatedCache, RoleMap, disable_lychee, enable_lychee


def random_roles(rm: RoleMap, seed: int, hybrid: list[bool] | None = None) -> RoleMap:
    """Same number of retrieval heads as ``rm`` (the first hybrid layer kept), placed at
    random over the later full-attention layers (``hybrid``, default: all layers;
    sliding-window layers stay all-retrieval rows, run dense); when ``rm`` consists of
    whole KV groups, the same number of whole groups at random (so the same number of
    KV heads is read)."""
    rng = random.Random(seed)
    h = rm.num_heads
    hybrid = hybrid or [True] * rm.num_layers
    first = hybrid.index(True)
    kv = rm.fingerprint.get("num_kv_heads")
    g = h // kv if kv and kv < h and rm.expand_to_kv_groups() == rm else 1
    free_layers = [layer for layer in range(first + 1, rm.num_layers) if hybrid[layer]]
    pinned = h * (rm.num_layers - len(free_layers))
    free = [(layer, i) for layer in free_layers for i in range(0, h, g)]
    keep = set(rng.sample(free, (rm.num_retrieval - pinned) // g))
    rows = [
        [True] * h if layer not in free_layers else [(layer, i - i % g) in keep for i in range(h)]
        for layer in range(rm.num_layers)
    ]
    meta = {"random_seed": seed, "whole_groups": g > 1}
    return RoleMap(tuple(tuple(r) for r in rows), rm.fingerprint, meta)


def prefill(model, ids: torch.Tensor, cache, chunk: int | None) -> None:
    """Dense prefill of ``ids`` [1, T] into ``cache``, ``chunk`` tokens per forward pass
    (all at once when ``None``). Only the last position's logits are computed, so the LM
    head never materializes [T, vocab] (a [16K, 262K] float32 tensor is 17 GB).
    Chunks bound the attention's transient memory to [chunk, T] per head."""
    step = chunk or ids.shape[1]
    with torch.no_grad():
        for start in range(0, ids.shape[1], step):
            model(ids[:, start : start + step], cache=cache, use_cache=True, logits_to_keep=1)


def _decode(model, cache, first: torch.Tensor, steps: int, forced: torch.Tensor | None = None):
    """Greedy (or teacher-forced along ``forced``) decode; returns the argmax tokens."""
    tok = first
    preds = []
    with torch.no_grad():
        for i in range(steps):
            logits = model(tok, cache=cache, use_cache=True).logits[:, -1]
            pred = logits.argmax(-1, keepdim=True)
            preds.append(pred)
            tok = forced[:, i : i + 1] if forced is not None else pred
    cache.crop(-steps)
    return torch.cat(preds, dim=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[4096, 8192])
    ap.add_argument(
        "--n",
        type=int,
        nargs="+",
        default=[10],
        help="NIAH items per length (one, or one per length)",
    )
    ap.add_argument("--steps", type=int, default=16, help="decode steps per item")
    ap.add_argument("--topk", type=int, nargs="+", default=[256])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--model", default=None, help="lc_agents.models.load_model name")
    ap.add_argument(
        "--roles", type=pathlib.Path, nargs="+", default=None, help="role maps (default per model)"
    )
    ap.add_argument("--name", nargs="+", default=["learned"], help="label of each --roles variant")
    ap.add_argument(
        "--prefill-chunk", type=int, default=None, help="prefill this many tokens per pass"
    )
    ap.add_argument("--no-ablation", action="store_true", help="skip the random-roles variant")
    ap.add_argument("--out", type=pathlib.Path, default=None, help="default per model")
    ap.add_argument("--replot", action="store_true", help="only redraw --out's PNG from its JSON")
    args = ap.parse_args()
    args.roles = args.roles or [default_roles(args.model)]
    if args.out is None:
        stem = "quality" if args.model is None else f"{args.model.replace('-', '_')}_quality"
        args.out = OUT / f"{stem}.json"
    if args.replot:
        replot(args.out)
        return
    torch.set_num_threads(args.threads)
    from lc_agents.models import load_model

    model, tok = load_model(args.model or "smollm2-135m-instruct")
    if len(args.name) != len(args.roles):
        raise SystemExit("--name takes one label per --roles file")
    maps = {name: RoleMap.load(path) for name, path in zip(args.name, args.roles, strict=True)}
    learned = next(iter(maps.values()))
    hybrid = full_attention_layers(model)
    variants = dict(maps)
    if not args.no_ablation:
        variants["random"] = random_roles(learned, seed=0, hybrid=hybrid)
    rows = []
    t_start = time.perf_counter()
    counts = args.n * len(args.lengths) if len(args.n) == 1 else args.n
    if len(counts) != len(args.lengths):
        raise SystemExit("--n takes one value or one per length")
    for length, n in zip(args.lengths, counts, strict=True):
        stats: dict[str, dict[str, float]] = {}
        misses: dict[str, list[int]] = {}  # seeds of the items each variant missed
        for seed in tqdm(range(n), desc=f"len {length}"):
            ids, answers = task_ids(tok, "niah_single", length, seed=5000 + seed, prefix=True)
            cache = PreallocatedCache(config=model.config, capacity=ids.shape[1] + args.steps)
            if not all(hybrid):  # sliding-window layers keep their past so crop can rewind
                cache.activate_past_recording()
            prefill(model, ids[:, :-1], cache, args.prefill_chunk)
            last = ids[:, -1:]
            ref = _decode(model, cache, last, args.steps)
            ref_text = tok.decode(ref[0], skip_special_tokens=True)
            s = stats.setdefault("full", {"hits": 0, "agree": 0.0})
            s["hits"] += int(answers[0] in ref_text)
            s["agree"] += 1.0
            if answers[0] not in ref_text:
                misses.setdefault("full", []).append(5000 + seed)
            forced = torch.cat([last, ref[:, :-1]], dim=1)[:, 1:]
            for k in args.topk:
                for name, rm in variants.items():
                    key = f"{name}@k{k}"
                    enable_lychee(model, rm, topk=k)
                    try:
                        gen = _decode(model, cache, last, args.steps)
                        tf = _decode(model, cache, last, args.steps, forced=forced)
                    finally:
                        disable_lychee(model)
                    s = stats.setdefault(key, {"hits": 0, "agree": 0.0})
                    hit = answers[0] in tok.decode(gen[0], skip_special_tokens=True)
                    s["hits"] += int(hit)
                    if not hit:
                        misses.setdefault(key, []).append(5000 + seed)
                    s["agree"] += float((tf == ref).float().mean())
        row = {"length": length, "tokens": int(ids.shape[1]), "n": n}
        for key, s in stats.items():
            row[f"acc_{key}"] = s["hits"] / n
            row[f"agree_{key}"] = s["agree"] / n
        for key in stats:
            row[f"missed_{key}"] = misses.get(key, [])
        full_hits = stats["full"]["hits"]
        for key, s in stats.items():
            if key != "full":
                row[f"acc_ratio_{key}"] = s["hits"] / full_hits if full_hits else None
        rows.append(row)
        print(row)
        _write(args, maps, rows, list(stats), time.perf_counter() - t_start)


def _write(
    args, maps: dict[str, RoleMap], rows: list[dict], keys: list[str], seconds: float
) -> None:
    """Write ``quality.json`` / ``quality.png`` (called after every length)."""
    result = {
        "model": model_label(args.model),
        "task": (
            "niah_single (lc_evals.generate, essay haystack, 7-digit values, held-out seeds), "
            + ("chat template" if args.model is None else "plain prompt")
            + " + RULER answer prefix, greedy"
        ),
        "roles": {
            name: {
                "file": path.name,
                "num_retrieval": maps[name].num_retrieval,
                "num_heads": maps[name].num_heads_total,
            }
            for name, path in zip(args.name, args.roles, strict=True)
        },
        "decode_steps": args.steps,
        "prefill_chunk": args.prefill_chunk,
        "topk": args.topk,
        "machine": machine(args.threads),
        "seconds": round(seconds, 1),
        # peak resident memory of this process so far (Linux reports KiB)
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    plot(rows, keys, args.out.with_suffix(".png"))
    print(f"wrote {args.out}")


def plot(rows: list[dict], keys: list[str], path: pathlib.Path) -> None:
    """Accuracy and next-token agreement per variant: against the context length, or as
    bars when there is one length."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.4))
    if len(rows) == 1:
        r = rows[0]
        pos = range(len(keys))
        a1.bar(pos, [r[f"acc_{k}"] for k in keys], color=[f"C{i}" for i in pos])
        a2.bar(pos, [r[f"agree_{k}"] for k in keys], color=[f"C{i}" for i in pos])
        for a in (a1, a2):
            a.set_xticks(list(pos), keys, rotation=35, ha="right", fontsize=7)
            a.set_title(f"{r['n']} items, {r['length']} tokens", fontsize=9)
    else:
        xs = [r["length"] for r in rows]
        for key in keys:
            a1.plot(xs, [r[f"acc_{key}"] for r in rows], "o-", label=key)
            a2.plot(xs, [r[f"agree_{key}"] for r in rows], "o-", label=key)
        for a in (a1, a2):
            a.set_xlabel("context length (tokens)")
        a2.legend(fontsize=8)
    a1.set_ylabel("NIAH accuracy")
    a2.set_ylabel("next-token agreement with full")
    for a in (a1, a2):
        a.set_ylim(-0.05, 1.05)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def replot(path: pathlib.Path) -> None:
    """Redraw ``path``'s PNG from its JSON (keys in the order the JSON rows hold them)."""
    rows = json.loads(path.read_text())["rows"]
    keys = [k[len("acc_") :] for k in rows[0] if k.startswith("acc_") and "ratio" not in k]
    plot(rows, keys, path.with_suffix(".png"))


if __name__ == "__main__":
    main()
