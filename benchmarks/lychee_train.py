"""Learn LycheeDecode head roles for SmolLM2-135M-Instruct on a small synthetic corpus.

The calibration corpus is made offline from lc-evals generators (NIAH, key-value
retrieval, variable tracking) rendered with the chat template and followed by the
reference answer, cut to one length; the last ``--decode-len`` tokens (question tail
and answer) are simulated as decode steps. Writes ``smollm2_roles.json`` (the role map)
and ``train.json`` / ``train.png`` (the training curve) under
``docs/benchmarks/lc-attention-lychee/``; with ``--out other.json`` the curve goes to
``other_train.json`` / ``.png`` beside it. ``--model gemma-3-270m`` trains the embedded
Gemma-3-270M base model (plain prompts; only its full-attention layers get roles, the
sliding-window layers stay dense) and writes ``gemma_3_270m_roles.json`` by default.

    nice uv run python benchmarks/lychee_train.py --steps 150 --length 1536
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from lychee_common import ROLES, default_roles, machine, model_label, task_ids

from lc_attention.lychee import RoleTrainingConfig, train_head_roles

TASKS = ("niah_single", "niah_multikey", "kv_retrieval", "variable_tracking")


def corpus(tok, n: int, length: int, seed: int) -> torch.Tensor:
    """``[n, length]`` calibration ids: task prompts plus answers, right-aligned crops."""
    rows = []
    for i in range(n):
        task = TASKS[i % len(TASKS)]
        ids, _ = task_ids(tok, task, length + 64, seed=seed + i, with_answer=True)
        if ids.shape[1] < length:
            raise ValueError(f"{task} item {i} has {ids.shape[1]} < {length} tokens")
        rows.append(ids[0, -length:])
    return torch.stack(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=16, help="calibration sequences")
    ap.add_argument("--length", type=int, default=1536)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--topk", type=int, default=64)
    ap.add_argument("--decode-len", type=int, default=32)
    ap.add_argument("--target", type=float, default=0.2, help="fraction of retrieval heads")
    ap.add_argument(
        "--lambda-lr", type=float, default=1.0, help="ascent rate of the budget multiplier"
    )
    ap.add_argument(
        "--penalty", type=float, default=0.0, help="quadratic budget penalty c (damping)"
    )
    ap.add_argument("--warmup", type=int, default=0, help="steps to anneal the budget to --target")
    ap.add_argument(
        "--gate-unit",
        choices=("head", "kv_head"),
        default="head",
        help="one gate per query head, or per KV head (budget in KV heads read)",
    )
    ap.add_argument("--rank-by", choices=("average", "final"), default="average")
    ap.add_argument("--score-from", type=float, default=0.5, help="start of the score average")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default=None, help="lc_agents.models.load_model name")
    ap.add_argument("--out", type=pathlib.Path, default=None, help="role map (default per model)")
    args = ap.parse_args()
    args.out = args.out or default_roles(args.model)
    torch.set_num_threads(args.threads)
    from lc_agents.models import load_model

    model, tok = load_model(args.model or "smollm2-135m-instruct")
    seqs = corpus(tok, args.n, args.length, seed=1000 + args.seed)
    cfg = RoleTrainingConfig(
        topk=args.topk, decode_len=args.decode_len, target_retrieval=args.target,
        steps=args.steps, seed=args.seed, lambda_lr=args.lambda_lr, penalty=args.penalty,
        target_warmup=args.warmup, gate_unit=args.gate_unit, rank_by=args.rank_by,
        score_from=args.score_from,
    )  # fmt: skip
    t0 = time.perf_counter()
    result = train_head_roles(model, seqs, cfg)
    seconds = time.perf_counter() - t0
    rm = result.role_map
    rm.meta["train_seconds"] = round(seconds, 1)
    rm.meta["corpus"] = {"tasks": list(TASKS), "n": args.n, "length": args.length}
    rm.save(args.out)
    p0 = result.gates.p0().detach().cpu()
    p1 = result.gates.p1().detach().cpu()
    summary = {
        "model": model_label(args.model),
        "machine": machine(args.threads),
        "config": rm.meta["training"],
        "corpus": rm.meta["corpus"],
        "train_seconds": round(seconds, 1),
        "num_retrieval": rm.num_retrieval,
        "num_heads": rm.num_heads_total,
        "retrieval_per_layer": [sum(r) for r in rm.retrieval],
        "kv_heads_read": rm.kv_heads_read(),
        "score_late": result.score_late.tolist() if result.score_late is not None else None,
        "score_overall": (
            result.score_overall.tolist() if result.score_overall is not None else None
        ),
        "near_binary_fraction": float(((p0 > 0.9) | (p1 > 0.5)).float().mean()),
        "history": result.history,
    }
    # the curve beside the role map: train.json / train.png for the default map,
    # <name>_train.json / .png for another --out
    stem = "train" if args.out == ROLES else f"{args.out.stem}_train"
    summary_path = args.out.parent / f"{stem}.json"
    summary_path.write_text(json.dumps(summary, indent=1))
    print(
        f"{rm.num_retrieval}/{rm.num_heads_total} retrieval heads, {rm.kv_heads_read()} KV heads "
        f"read, in {seconds:.0f} s -> {args.out}"
    )

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    h = result.history
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.2))
    a1.plot([x["step"] for x in h], [x["distill"] for x in h], lw=0.8)
    a1.set_xlabel("step")
    a1.set_ylabel("relative distillation error")
    a1.set_yscale("log")
    a1b = a1.twinx()
    a1b.plot([x["step"] for x in h], [x["expected_fraction"] for x in h], "C1", lw=1.2)
    a1b.plot([x["step"] for x in h], [x.get("target", args.target) for x in h], "C1:", lw=0.8)
    unit = "KV heads read" if args.gate_unit == "kv_head" else "retrieval heads"
    a1b.set_ylabel(f"E[fraction of {unit}] (target dotted)", color="C1")
    grid = torch.tensor([[float(x) for x in r] for r in rm.retrieval])
    a2.imshow(grid.T, aspect="auto", cmap="Greens", interpolation="nearest")
    a2.set_xlabel("layer")
    a2.set_ylabel("query head")
    a2.set_title(
        f"retrieval heads ({rm.num_retrieval}/{rm.num_heads_total}, {rm.kv_heads_read()} KV heads)",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(summary_path.with_suffix(".png"), dpi=120)


if __name__ == "__main__":
    main()
