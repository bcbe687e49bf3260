"""SWAX window study at CPU scale: fixed short, fixed long and stochastic attention windows.

Three identical SWAX models (sliding-window attention + mLSTM, 1:1) are trained on the same
associative-recall stream and evaluated on

* a long-range recall task: the key-value pairs sit at the start of the sequence, about
  twice the long window away from the queries, so only the mLSTM memory can carry them;
* a short-context task: the pairs sit just before the queries, inside the long window but
  outside the short one.

Writes docs/benchmarks/lc-attention-linear/swax_recall.json and .png.

    uv run python packages/lc-attention/benchmarks/swax_recall.py [--steps 600]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import random
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from lc_attention.linear import StochasticWindow, SWAXConfig, SWAXModel

OUT = Path(__file__).resolve().parents[3] / "docs" / "benchmarks" / "lc-attention-linear"

FILLER, KEYS, VALUES, QUERY = range(0, 16), range(16, 32), range(32, 48), 48
VOCAB = 49
SEQ, PAIRS, QUERIES = 64, 1, 1
NEAR_GAP = (5, 9)  # filler tokens between the pairs and the queries in short-range sequences


def make_batch(
    batch: int, far: torch.Tensor, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids ``[B, SEQ]`` and targets ``[B, SEQ]`` (-100 where no loss is taken).

    ``far[b]`` places sequence ``b``'s pairs at the start (long range) instead of just
    before the query block (short range).
    """
    tokens = torch.randint(FILLER.start, FILLER.stop, (batch, SEQ), generator=gen)
    targets = torch.full((batch, SEQ), -100)
    q_start = SEQ - 3 * QUERIES
    for b in range(batch):
        keys = torch.randperm(len(KEYS), generator=gen)[:PAIRS] + KEYS.start
        vals = torch.randint(VALUES.start, VALUES.stop, (PAIRS,), generator=gen)
        block = torch.stack([keys, vals], 1).flatten()
        if far[b]:
            start = int(torch.randint(0, 5, (1,), generator=gen))
        else:
            gap = int(torch.randint(*NEAR_GAP, (1,), generator=gen))
            start = q_start - gap - 2 * PAIRS
        tokens[b, start : start + 2 * PAIRS] = block
        order = torch.randperm(PAIRS, generator=gen)[:QUERIES]
        for j, p in enumerate(order.tolist()):
            pos = q_start + 3 * j
            tokens[b, pos], tokens[b, pos + 1], tokens[b, pos + 2] = QUERY, keys[p], vals[p]
            targets[b, pos + 1] = vals[p]
    return tokens, targets


def accuracy(model: SWAXModel, window: int, far: bool, n: int, seed: int) -> float:
    gen = torch.Generator().manual_seed(seed)
    correct = total = 0
    with torch.no_grad():
        for _ in range(n // 64):
            tokens, targets = make_batch(64, torch.full((64,), far), gen)
            pred = model(tokens, window=window).argmax(-1)
            mask = targets >= 0
            correct += int((pred[mask] == targets[mask]).sum())
            total += int(mask.sum())
    return correct / total


def train(
    schedule: StochasticWindow, steps: int, batch: int, p_far: float, seed: int
) -> tuple[SWAXModel, list[float]]:
    torch.manual_seed(seed)
    cfg = SWAXConfig(
        vocab_size=VOCAB, d_model=32, n_layers=4, n_heads=2, window=schedule.long, backend="torch"
    )
    model = SWAXModel(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * s / steps))
    )
    gen = torch.Generator().manual_seed(seed + 1)
    rng = random.Random(seed + 2)
    losses = []
    for step in tqdm(
        range(steps), desc=f"short={schedule.short} long={schedule.long} p={schedule.p_short}"
    ):
        far = torch.rand(batch, generator=gen) < p_far
        tokens, targets = make_batch(batch, far, gen)
        window = schedule.sample(step, steps, rng)
        logits = model(tokens, window=window)
        loss = F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    return model, losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--short", type=int, default=4)
    parser.add_argument("--long", type=int, default=24)
    parser.add_argument("--p-far", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--only", default="", help="run only the variants whose name starts with this"
    )
    parser.add_argument("--name", default="swax_recall", help="stem of the JSON and PNG files")
    args = parser.parse_args()
    torch.set_num_threads(1)
    variants = {
        f"fixed short (w={args.short})": (
            StochasticWindow(args.short, args.short, 1.0, 0.0),
            args.short,
        ),
        f"fixed long (w={args.long})": (
            StochasticWindow(args.long, args.long, 0.0, 0.0),
            args.long,
        ),
        f"stochastic ({args.short}/{args.long})": (
            StochasticWindow(args.short, args.long, 0.5, 0.1),
            args.long,
        ),
    }
    variants = {k: v for k, v in variants.items() if k.startswith(args.only)}
    rows, curves = [], {}
    start = time.time()
    for name, (schedule, eval_window) in variants.items():
        model, losses = train(schedule, args.steps, args.batch, args.p_far, args.seed)
        model.eval()
        row = {
            "model": name,
            "eval_window": eval_window,
            "long_range_recall": accuracy(model, eval_window, True, 512, 10_000),
            "short_context_recall": accuracy(model, eval_window, False, 512, 20_000),
        }
        if schedule.short != schedule.long:
            row["long_range_recall_at_short_window"] = accuracy(
                model, schedule.short, True, 512, 10_000
            )
            row["short_context_recall_at_short_window"] = accuracy(
                model, schedule.short, False, 512, 20_000
            )
        rows.append(row)
        curves[name] = losses
        print(row, flush=True)
    result = {
        "rows": rows,
        "settings": vars(args)
        | {"out": str(args.out), "seq": SEQ, "pairs": PAIRS, "queries": QUERIES},
        "chance": 1 / len(VALUES),
        "seconds": time.time() - start,
        "machine": f"2-core CPU ({platform.machine()}), torch {torch.__version__}",
        "loss_curves": {k: v[:: max(1, len(v) // 100)] for k, v in curves.items()},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(result, indent=1))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    names = [r["model"] for r in rows]
    xs = range(len(rows))
    ax1.bar(
        [x - 0.2 for x in xs],
        [r["long_range_recall"] for r in rows],
        0.4,
        label="long-range recall",
    )
    ax1.bar(
        [x + 0.2 for x in xs],
        [r["short_context_recall"] for r in rows],
        0.4,
        label="short-context recall",
    )
    ax1.axhline(result["chance"], color="gray", ls=":", label="chance")
    ax1.set_xticks(list(xs), names, fontsize=8)
    ax1.set_ylabel("accuracy")
    ax1.legend(fontsize=8)
    for name, losses in curves.items():
        ax2.plot(
            torch.tensor(losses).view(-1, 10).mean(1).tolist() if len(losses) % 10 == 0 else losses,
            label=name,
        )
    ax2.set_xlabel("step / 10")
    ax2.set_ylabel("training loss")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out / f"{args.name}.png", dpi=120)


if __name__ == "__main__":
    main()
