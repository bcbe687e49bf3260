"""SWAX window study at CPU scale: fixed short, fixed long and stochastic attention windows.

Three identical SWAX models (sliding-window attention + mLSTM, 1:1) are trained, with the
same data stream and the same number of steps, under three window schedules, for several
seeds. Every training sequence is one of two kinds:

* *short context* (most sequences): ``MARK b_0 .. b_7 SEP b_0 .. b_7``, a block of
  ``--near-len`` random value tokens repeated right after a separator. Each repeated token
  is 8 positions after its original: inside the long window, beyond the two-layer
  receptive field of the short one. The long window's attention copies it exactly; with
  the short window the mLSTM must hold the whole block, in order, in its small matrix
  memory, where the tokens interfere.
* *long range* (a fraction ``--p-far``): ``MARK b_0 b_1`` at the very start and
  ``SEP b_0 b_1`` at the end, about 70 positions later, beyond twice the long window, so
  only the mLSTM can carry the block.

Filler tokens fill the rest; the loss is taken on the repeated tokens only.

This follows the mechanism of SWAX (arXiv 2509.24552): a long window solves most training
sequences with attention, so the mLSTM memory gets little training signal and long-range
recall suffers; a short window trains the memory on every sequence but loses exact local
access; training with a window drawn at random each step should give both.

Writes ``<name>.json`` and ``<name>.png`` under docs/benchmarks/lc-attention-linear/.

    uv run python packages/lc-attention/benchmarks/swax_recall.py --steps 600 --seeds 0 1 2 3 4
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import random
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from lc_attention.linear import StochasticWindow, SWAXConfig, SWAXModel

OUT = Path(__file__).resolve().parents[3] / "docs" / "benchmarks" / "lc-attention-linear"
IGNORE = -100


@dataclass(frozen=True)
class Task:
    """Token layout of the two recall tasks (vocabulary: filler, values, MARK, SEP).

    Both kinds of sequence hold ``MARK b_0 .. b_{n-1}`` somewhere and end with
    ``SEP b_0 .. b_{n-1}`` followed by 0-3 filler tokens; the loss is taken on the repeated
    ``b_j`` only. Each repeated token sits exactly ``lag`` positions after its original.

    * short context: ``n = near_len`` tokens, ``SEP`` right after the block, so the lag is
      ``near_len``: inside the long window, beyond two hops of the short one;
    * long range: ``n = far_len`` tokens at the very start, the lag is most of the
      sequence: beyond two hops of the long window.
    """

    seq: int = 80
    n_filler: int = 16
    n_values: int = 16
    near_len: int = 8
    far_len: int = 2

    @property
    def mark(self) -> int:
        return self.n_filler + self.n_values

    @property
    def sep(self) -> int:
        return self.mark + 1

    @property
    def vocab(self) -> int:
        return self.sep + 1

    def far_lag(self) -> int:
        """Smallest lag of a long-range sequence (MARK at 3, SEP with 3 filler after)."""
        return (self.seq - 3 - self.far_len - 1) - (3 + 1)

    def check(self, short: int, long: int) -> None:
        """The task separates the windows: near lag > 2 short hops, far lag > 2 long hops."""
        if not (self.near_len > 2 * (short - 1) and self.near_len <= long - 1):
            raise ValueError(
                f"near_len ({self.near_len}) must be beyond two short-window hops "
                f"({2 * (short - 1)}) and inside the long window ({long - 1})"
            )
        if self.far_lag() <= 2 * (long - 1):
            raise ValueError(
                f"far lag ({self.far_lag()}) must be beyond two long-window hops ({2 * (long - 1)})"
            )
        if 2 * self.near_len + 5 > self.seq:
            raise ValueError(f"seq ({self.seq}) too short for near_len ({self.near_len})")

    def batch(self, far: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Tokens ``[B, seq]`` and targets ``[B, seq]`` (``IGNORE`` where no loss is taken).

        ``far[b]`` makes sequence ``b`` a long-range one.
        """
        b_size = far.shape[0]
        tokens = torch.randint(0, self.n_filler, (b_size, self.seq), generator=gen)
        targets = torch.full((b_size, self.seq), IGNORE)
        for b in range(b_size):
            n = self.far_len if far[b] else self.near_len
            block = torch.randint(0, self.n_values, (n,), generator=gen) + self.n_filler
            sep = self.seq - n - 1 - int(torch.randint(0, 4, (1,), generator=gen))
            mark = int(torch.randint(0, 4, (1,), generator=gen)) if far[b] else sep - n - 1
            tokens[b, mark], tokens[b, sep] = self.mark, self.sep
            tokens[b, mark + 1 : mark + 1 + n] = block
            tokens[b, sep + 1 : sep + 1 + n] = block
            targets[b, sep : sep + n] = block  # position t predicts token t + 1
        return tokens, targets


def accuracy(model: SWAXModel, task: Task, window: int, far: bool, n: int, seed: int) -> float:
    """Exact-match accuracy of the value predictions on ``n`` fresh sequences of one kind."""
    gen = torch.Generator().manual_seed(seed)
    correct = total = 0
    with torch.no_grad():
        for _ in range(n // 64):
            tokens, targets = task.batch(torch.full((64,), far), gen)
            pred = model(tokens, window=window).argmax(-1)
            mask = targets != IGNORE
            correct += int((pred[mask] == targets[mask]).sum())
            total += int(mask.sum())
    return correct / total


def train(
    task: Task, schedule: StochasticWindow, args: argparse.Namespace, seed: int
) -> tuple[SWAXModel, dict[str, list[float]]]:
    """Train one model; the data stream depends only on ``seed``, not on the schedule."""
    torch.manual_seed(seed)
    cfg = SWAXConfig(
        vocab_size=task.vocab,
        d_model=args.d_model,
        n_layers=4,
        n_heads=args.heads,
        window=schedule.long,
        backend="torch",
    )
    model = SWAXModel(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    steps = args.steps
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * s / steps))
    )
    gen = torch.Generator().manual_seed(seed + 1)
    rng = random.Random(seed + 2)
    curves: dict[str, list[float]] = {"loss": [], "near_loss": [], "far_loss": [], "window": []}
    for step in tqdm(
        range(steps),
        desc=f"seed {seed} short={schedule.short} long={schedule.long} p={schedule.p_short}",
        mininterval=10,
    ):
        far = torch.rand(args.batch, generator=gen) < args.p_far
        tokens, targets = task.batch(far, gen)
        window = schedule.sample(step, steps, rng)
        logits = model(tokens, window=window)
        per_tok = F.cross_entropy(
            logits.view(-1, task.vocab), targets.view(-1), ignore_index=IGNORE, reduction="none"
        ).view(targets.shape)
        mask = targets != IGNORE
        loss = per_tok.sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        with torch.no_grad():
            seq_loss = per_tok.sum(1) / mask.sum(1)
            curves["loss"].append(float(loss))
            curves["near_loss"].append(float(seq_loss[~far].mean()) if (~far).any() else math.nan)
            curves["far_loss"].append(float(seq_loss[far].mean()) if far.any() else math.nan)
            curves["window"].append(window)
    return model, curves


def _smooth(xs: list[float], k: int) -> list[float]:
    """Means over consecutive blocks of ``k`` steps, skipping NaNs (steps without that kind)."""
    out = []
    for i in range(0, len(xs), k):
        block = [x for x in xs[i : i + k] if not math.isnan(x)]
        out.append(sum(block) / len(block) if block else math.nan)
    return out


def _summary(values: list[float]) -> dict[str, float]:
    return {
        "mean": statistics.fmean(values),
        "std": statistics.stdev(values) if len(values) > 1 else 0.0,
        "min": min(values),
        "max": max(values),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--short", type=int, default=4)
    parser.add_argument("--long", type=int, default=24)
    parser.add_argument("--p-short", type=float, default=0.5)
    parser.add_argument("--final-fraction", type=float, default=0.1)
    parser.add_argument("--p-far", type=float, default=0.2)
    parser.add_argument("--seq", type=int, default=80)
    parser.add_argument("--near-len", type=int, default=8)
    parser.add_argument("--far-len", type=int, default=2)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--eval", type=int, default=512, help="sequences per task and model")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--only", default="", help="run only the schedules whose name starts with this"
    )
    parser.add_argument("--name", default="swax_recall", help="stem of the JSON and PNG files")
    args = parser.parse_args()
    torch.set_num_threads(1)
    task = Task(seq=args.seq, near_len=args.near_len, far_len=args.far_len)
    task.check(args.short, args.long)
    schedules = {
        f"fixed short (w={args.short})": StochasticWindow(args.short, args.short, 1.0, 0.0),
        f"fixed long (w={args.long})": StochasticWindow(args.long, args.long, 0.0, 0.0),
        f"stochastic ({args.short}/{args.long})": StochasticWindow(
            args.short, args.long, args.p_short, args.final_fraction
        ),
    }
    schedules = {k: v for k, v in schedules.items() if k.startswith(args.only)}
    start = time.time()
    runs: list[dict] = []
    for seed in args.seeds:
        for name, schedule in schedules.items():
            t0 = time.time()
            model, curves = train(task, schedule, args, seed)
            model.eval()
            # the fixed models are evaluated at their own window, the stochastic one at the long
            eval_window = schedule.short if schedule.p_short == 1.0 else schedule.long
            run = {
                "model": name,
                "seed": seed,
                "eval_window": eval_window,
                "long_range_recall": accuracy(model, task, eval_window, True, args.eval, 10_000),
                "short_context_recall": accuracy(
                    model, task, eval_window, False, args.eval, 20_000
                ),
                "train_seconds": time.time() - t0,
                "final_near_loss": statistics.fmean(
                    x for x in curves["near_loss"][-50:] if not math.isnan(x)
                ),
                "final_far_loss": statistics.fmean(
                    x for x in curves["far_loss"][-50:] if not math.isnan(x)
                ),
                "steps_at_short_window": sum(w == args.short for w in curves["window"]),
                "curves": {k: _smooth(v, 10) for k, v in curves.items() if k != "window"},
            }
            if schedule.short != schedule.long:
                run["long_range_recall_at_short_window"] = accuracy(
                    model, task, schedule.short, True, args.eval, 10_000
                )
                run["short_context_recall_at_short_window"] = accuracy(
                    model, task, schedule.short, False, args.eval, 20_000
                )
            runs.append(run)
            print({k: v for k, v in run.items() if k != "curves"}, flush=True)
        # written after every seed, so an interrupted study still leaves its finished seeds
        write(args, task, list(schedules), runs, time.time() - start)


def write(
    args: argparse.Namespace, task: Task, names: list[str], runs: list[dict], seconds: float
) -> None:
    """Aggregate the runs over seeds and write the JSON and PNG."""
    metrics = [
        "long_range_recall",
        "short_context_recall",
        "long_range_recall_at_short_window",
        "short_context_recall_at_short_window",
        "final_near_loss",
        "final_far_loss",
    ]
    table = []
    for name in names:
        mine = [r for r in runs if r["model"] == name]
        if not mine:
            continue
        row: dict = {"model": name, "eval_window": mine[0]["eval_window"], "seeds": len(mine)}
        for m in metrics:
            if m in mine[0]:
                row[m] = _summary([r[m] for r in mine])
        table.append(row)
    result = {
        "table": table,
        "runs": runs,
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
        | {"task": asdict(task), "vocab": task.vocab},
        "chance": 1 / task.n_values,
        "seconds": seconds,
        "machine": f"2-core CPU ({platform.machine()}), torch {torch.__version__}",
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(result, indent=1))
    plot(result, args.out / f"{args.name}.png")


def plot(result: dict, path: Path) -> None:
    """Bar chart of mean recall (error bars: min..max over seeds) and the loss curves."""
    table, runs = result["table"], result["runs"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    xs = list(range(len(table)))
    for off, key, label in (
        (-0.2, "long_range_recall", "long-range recall"),
        (0.2, "short_context_recall", "short-context recall"),
    ):
        means = [r[key]["mean"] for r in table]
        err = [
            [r[key]["mean"] - r[key]["min"] for r in table],
            [r[key]["max"] - r[key]["mean"] for r in table],
        ]
        axes[0].bar([x + off for x in xs], means, 0.4, yerr=err, capsize=3, label=label)
    axes[0].axhline(result["chance"], color="gray", ls=":", label="chance")
    axes[0].set_xticks(xs, [r["model"] for r in table], fontsize=8)
    axes[0].set_ylabel(f"accuracy (mean, min..max over {table[0]['seeds']} seeds)")
    axes[0].set_ylim(0, 1.25)
    axes[0].legend(fontsize=8, loc="upper center", ncol=3)
    colors = {r["model"]: f"C{i}" for i, r in enumerate(table)}
    for ax, key, title in (
        (axes[1], "near_loss", "training loss, short-context sequences"),
        (axes[2], "far_loss", "training loss, long-range sequences"),
    ):
        for r in runs:
            ax.plot(
                r["curves"][key],
                color=colors[r["model"]],
                alpha=0.8,
                lw=1,
                label=r["model"] if r["seed"] == runs[0]["seed"] else None,
            )
        ax.set_xlabel("step / 10")
        ax.set_title(title, fontsize=9)
        ax.set_yscale("log")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
