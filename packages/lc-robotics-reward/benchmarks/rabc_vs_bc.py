"""SARM reward quality, and RA-BC against BC with and without a reward model (CPU).

For each task: generate annotated good demonstrations (reward-model training set), a
mixed-quality demonstration set (the BC training set) and held-out mixed episodes; train
SARM; measure its quality on the held-out episodes; score every BC frame with it; train
BC policies with

- uniform weights (vanilla BC);
- two baselines that need no reward model, only each episode's outcome: keep the
  successful episodes only, and weight each episode by the share of the task's steps
  complete at its end (0, 1/2 or 1 here);
- RA-BC weights, RA-BC filtering (``r > kappa``) and the episode filter times the RA-BC
  weights;

and roll each policy out. Every method is trained with the same seeds and rolled out
from the same start states per seed, so methods are compared pairwise: an exact
sign-flip test on the per-(task, seed) success rates and an exact McNemar test on the
paired rollouts of each task.

Sanity check recorded per task: the good demonstrations' actions replayed open loop
must solve the task.

Writes ``docs/benchmarks/lc-robotics-reward/rabc_vs_bc.{json,png}``.

Run: ``uv run python packages/lc-robotics-reward/benchmarks/rabc_vs_bc.py``
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from lc_robotics_reward.bc import BCConfig, rollout_outcomes, train_bc
from lc_robotics_reward.configuration_sarm import SARMConfig
from lc_robotics_reward.dataset import RobotDataset
from lc_robotics_reward.evaluation import pearson, ranking_auc, spearman, stage_accuracy
from lc_robotics_reward.labels import derive_labels, frame_index_progress
from lc_robotics_reward.processor_sarm import SARMProcessor, predict_episode
from lc_robotics_reward.rabc import episode_filter, progress_deltas, rabc_filter, rabc_weights
from lc_robotics_reward.sim import (
    BEHAVIOURS,
    TASKS,
    demos_to_dataset,
    generate_demos,
    replay_demo,
)
from lc_robotics_reward.text import make_text_embedder
from lc_robotics_reward.training import train_sarm

ROOT = Path(__file__).resolve().parents[3]
OUT = ROOT / "docs" / "benchmarks" / "lc-robotics-reward"
MIX = {"good": 0.3, "regress": 0.35, "fail": 0.35}
METHODS = (
    "vanilla BC",
    "successful episodes only",
    "episodes weighted by final completion",
    "RA-BC (weights)",
    "RA-BC (filter)",
    "RA-BC (episode filter + weights)",
)
NO_REWARD_MODEL = ("successful episodes only", "episodes weighted by final completion")
RABC = ("RA-BC (weights)", "RA-BC (filter)", "RA-BC (episode filter + weights)")


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return float(centre - half), float(centre + half)


def sign_flip_p(diffs: list[float]) -> float:
    """Exact two-sided sign-flip (paired permutation) test of mean(diffs) = 0."""
    d = np.asarray(diffs, dtype=float)
    observed = abs(d.sum())
    flips = [abs(np.dot(signs, d)) for signs in itertools.product((1, -1), repeat=d.size)]
    return float(np.mean([f >= observed - 1e-12 for f in flips]))


def mcnemar_p(a: np.ndarray, b: np.ndarray) -> dict:
    """Exact McNemar test on paired binary outcomes (two-sided binomial on discordant pairs)."""
    only_a = int((a & ~b).sum())
    only_b = int((~a & b).sum())
    n = only_a + only_b
    k = min(only_a, only_b)
    p = 1.0 if n == 0 else min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)
    return {"only_first": only_a, "only_second": only_b, "p": p}


def paired_seed_tests(report: dict) -> dict:
    """Sign-flip tests on per-(task, seed) success-rate differences, pooled over tasks."""
    out = {}
    for a in RABC:
        for b in ("vanilla BC", *NO_REWARD_MODEL):
            diffs = []
            for res in report["tasks"].values():
                pa, pb = res["policies"][a], res["policies"][b]
                n = pa["rollouts_per_seed"]
                diffs += [
                    (x - y) / n
                    for x, y in zip(pa["successes_per_seed"], pb["successes_per_seed"], strict=True)
                ]
            out[f"{a} vs {b}"] = {
                "differences": [round(d, 4) for d in diffs],
                "mean_difference": float(np.mean(diffs)),
                "first_better_in": int(sum(d > 0 for d in diffs)),
                "of": len(diffs),
                "p": sign_flip_p(diffs),
            }
    return out


def final_completion(task, demo) -> float:
    """Share of the task's steps complete in a demonstration's last recorded state."""
    from lc_robotics_reward.sim.world import World

    world = World(task, 1, seed=0)
    world.set_state(*world.state_from_observation(demo.obs[-1:]))
    return float(world.steps_done()[0]) / len(task.steps)


def run_task(name: str, args: argparse.Namespace, embedder, log) -> dict:
    task = TASKS[name]
    t0 = time.time()
    rm_demos = generate_demos(task, args.rm_demos, seed=1000, styles={"good": 1.0})
    bc_demos = generate_demos(task, args.bc_demos, seed=2000, styles=MIX)
    ev_demos = generate_demos(task, args.eval_demos, seed=3000, styles=MIX)
    with tempfile.TemporaryDirectory() as tmp:  # through the on-disk format and back
        demos_to_dataset(rm_demos, TASKS).write(tmp)
        rm_set = RobotDataset.read(tmp)
    bc_set = demos_to_dataset(bc_demos, TASKS)
    ev_set = demos_to_dataset(ev_demos, TASKS)
    log(f"[{name}] demos generated in {time.time() - t0:.0f}s")
    good_bc = [d for d in bc_demos if d.style == "good"]
    replay_ok = sum(replay_demo(task, d) for d in good_bc)
    log(f"[{name}] good BC demos replayed open loop: {replay_ok}/{len(good_bc)} succeed")

    alpha = rm_set.temporal_proportions(task.text)
    cfg = SARMConfig(
        num_stages=len(task.subtasks),
        temporal_proportions=tuple(float(a) for a in alpha),
        text_dim=embedder.dim,
    )
    proc = SARMProcessor(rm_set, task.text, cfg, embedder)
    t0 = time.time()
    model, history = train_sarm(proc, args.sarm_steps, args.sarm_batch, seed=0)
    sarm_time = time.time() - t0
    log(f"[{name}] SARM trained in {sarm_time:.0f}s, final loss {history[-1]['loss']:.3f}")
    text = proc.text_table[0]

    def score(ds: RobotDataset) -> list[dict[str, np.ndarray]]:
        return [
            predict_episode(
                model, ep.frames["observation.image"], ep.frames["observation.state"], text
            )
            for ep in ds.episodes
        ]

    # ---- reward quality on held-out mixed episodes
    ev_pred = score(ev_set)
    accs, rho, r, rho_frame = [], [], [], []
    for ep, pred in zip(ev_set.episodes, ev_pred, strict=True):
        if ep.meta["style"] != "good":
            continue
        lab = derive_labels(ep.subtasks, ep.length, proc.subtasks, alpha)
        accs.append(stage_accuracy(pred["stage"], lab.stage))
        rho.append(spearman(pred["progress"], lab.progress))
        r.append(pearson(pred["progress"], lab.progress))
        rho_frame.append(pearson(frame_index_progress(ep.length), lab.progress))
    final = np.array([p["progress"][-3:].mean() for p in ev_pred])
    succ = np.array([ep.meta["success"] for ep in ev_set.episodes])
    good = np.array([ep.meta["style"] == "good" for ep in ev_set.episodes])
    quality = {
        "held_out_episodes": len(ev_set.episodes),
        "good_episodes": int(good.sum()),
        "stage_accuracy_good": float(np.mean(accs)),
        "progress_spearman_good": float(np.mean(rho)),
        "progress_pearson_good": float(np.mean(r)),
        "frame_index_label_pearson_good": float(np.mean(rho_frame)),
        "auc_final_progress_success_vs_failure": ranking_auc(final[succ], final[~succ]),
        "auc_final_progress_good_vs_bad_style": ranking_auc(final[good], final[~good]),
    }
    log(f"[{name}] reward quality {json.dumps(quality)}")

    # ---- RA-BC weights on the BC set
    bc_pred = score(bc_set)
    deltas = progress_deltas([p["progress"] for p in bc_pred], args.chunk)
    weights = rabc_weights(deltas)
    keep = rabc_filter(deltas)
    episodes_kept = episode_filter(
        [p["progress"] for p in bc_pred], threshold=args.episode_threshold
    )
    beh = np.concatenate([ep.frames["behaviour"] for ep in bc_set.episodes])
    by_behaviour = {
        b: {
            "frames": int((beh == i).sum()),
            "mean_weight": float(weights[beh == i].mean()) if (beh == i).any() else None,
            "kept_by_filter": float(keep[beh == i].mean()) if (beh == i).any() else None,
        }
        for i, b in enumerate(BEHAVIOURS)
    }
    starts = np.cumsum([0] + [ep.length for ep in bc_set.episodes[:-1]])
    ends_kept = episodes_kept[starts] > 0
    log(f"[{name}] weights by behaviour {json.dumps(by_behaviour)}")
    log(f"[{name}] episode filter keeps {int(ends_kept.sum())}/{len(ends_kept)} episodes")
    obs = np.concatenate([ep.frames["observation.environment_state"] for ep in bc_set.episodes])
    act = np.concatenate([ep.frames["action"] for ep in bc_set.episodes])
    success_frames = np.concatenate(
        [np.full(ep.length, float(ep.meta["success"])) for ep in bc_set.episodes]
    )
    completion = np.array([final_completion(task, d) for d in bc_demos])
    completion_frames = np.repeat(completion, [ep.length for ep in bc_set.episodes])
    method_weights = dict(
        zip(
            METHODS,
            (
                np.ones(len(obs)),
                success_frames,
                completion_frames,
                weights,
                keep,
                weights * episodes_kept,
            ),
            strict=True,
        )
    )

    # ---- BC policies and rollouts
    bc_cfg = BCConfig(
        steps=args.bc_steps, hidden=args.bc_hidden, lr=args.bc_lr, lr_schedule=args.bc_schedule
    )

    outcomes: dict[str, np.ndarray] = {}

    def evaluate(method: str, w: np.ndarray, cfg: BCConfig, seeds: int) -> dict:
        wins, steps_hist = [], np.zeros(len(task.steps) + 1, dtype=int)
        per_rollout = []
        t0 = time.time()
        for seed in range(seeds):
            policy = train_bc(obs, act, w, cfg, seed=seed)
            ok, steps = rollout_outcomes(policy, task, args.rollouts, seed=10_000 + seed)
            per_rollout.append(ok)
            wins.append(int(ok.sum()))
            steps_hist += np.bincount(steps, minlength=len(task.steps) + 1)
        outcomes[method] = np.stack(per_rollout)  # [seeds, rollouts], same start states
        n = seeds * args.rollouts
        return {
            "successes_per_seed": wins,
            "rollouts_per_seed": args.rollouts,
            "success_rate": sum(wins) / n,
            "wilson95": wilson(sum(wins), n),
            "steps_completed_histogram": steps_hist.tolist(),
            "training_frames_with_weight": int((w > 0).sum()),
            "effective_fraction": float(w.sum() / len(w)),
            "seconds": time.time() - t0,
        }

    results = {}
    for method, w in method_weights.items():
        if not (w > 0).any():  # e.g. no successful episode in a tiny smoke run
            w = np.ones(len(obs))
            log(f"[{name}] {method}: no frame has weight > 0; trained on uniform weights")
        results[method] = evaluate(method, w, bc_cfg, args.seeds)
        log(f"[{name}] {method}: {results[method]['successes_per_seed']} / {args.rollouts}")
    mcnemar = {
        f"{a} vs {b}": mcnemar_p(outcomes[a].ravel(), outcomes[b].ravel())
        for a in RABC
        for b in ("vanilla BC", *NO_REWARD_MODEL)
    }

    examples = {}
    for style in ("good", "regress", "fail"):
        i = next((k for k, ep in enumerate(ev_set.episodes) if ep.meta["style"] == style), None)
        if i is not None:
            ep = ev_set.episodes[i]
            lab = derive_labels(ep.subtasks, ep.length, proc.subtasks, alpha)
            examples[style] = {
                "predicted": ev_pred[i]["progress"].round(4).tolist(),
                "annotation_label": lab.progress.round(4).tolist(),
                "behaviour": ep.frames["behaviour"].tolist(),
                "success": ep.meta["success"],
            }
    return {
        "task": task.text,
        "subtasks": list(task.subtasks),
        "temporal_proportions": [float(a) for a in alpha],
        "bc_frames": len(obs),
        "bc_demo_success_rate": float(np.mean([d.success for d in bc_demos])),
        "bc_demo_styles": {s: sum(d.style == s for d in bc_demos) for s in MIX},
        "sarm_train_seconds": sarm_time,
        "sarm_final_loss": history[-1],
        "good_bc_demos_replayed_open_loop": {"succeeded": replay_ok, "of": len(good_bc)},
        "bc_demo_final_completion": {
            str(c): int((completion == c).sum()) for c in sorted(set(completion.tolist()))
        },
        "reward_quality": quality,
        "rabc": {
            "chunk": args.chunk,
            "delta_mean": float(deltas.mean()),
            "delta_std": float(deltas.std()),
            "by_behaviour": by_behaviour,
            "effective_fraction": float(weights.sum() / len(weights)),
            "filter_kept_fraction": float(keep.mean()),
            "episode_filter_threshold": args.episode_threshold,
            "episodes_kept": int(ends_kept.sum()),
            "episodes_kept_by_style": {
                s: int(
                    sum(
                        1
                        for ep, k in zip(bc_set.episodes, ends_kept, strict=True)
                        if k and ep.meta["style"] == s
                    )
                )
                for s in MIX
            },
        },
        "policies": results,
        "paired_rollouts_mcnemar": mcnemar,
        "examples": examples,
    }


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(report["tasks"])
    fig, axes = plt.subplots(1, 1 + len(tasks), figsize=(5 + 4.5 * len(tasks), 4))
    ax = axes[0]
    width = 0.8 / len(METHODS)
    colours = ("#888888", "#ffbb78", "#ff7f0e", "#1f77b4", "#2ca02c", "#9467bd")
    for m, method in enumerate(METHODS):
        rates = [report["tasks"][t]["policies"][method]["success_rate"] for t in tasks]
        lo = [
            rates[i] - report["tasks"][t]["policies"][method]["wilson95"][0]
            for i, t in enumerate(tasks)
        ]
        hi = [
            report["tasks"][t]["policies"][method]["wilson95"][1] - rates[i]
            for i, t in enumerate(tasks)
        ]
        x = np.arange(len(tasks)) + (m - (len(METHODS) - 1) / 2) * width
        ax.bar(
            x,
            rates,
            width,
            yerr=[lo, hi],
            label=method,
            color=colours[m],
            edgecolor="black",
            capsize=3,
        )
        for i, t in enumerate(tasks):  # one dot per training seed
            res = report["tasks"][t]["policies"][method]
            per_seed = np.asarray(res["successes_per_seed"]) / res["rollouts_per_seed"]
            ax.plot(np.full(per_seed.size, x[i]), per_seed, "k.", ms=3)
    ax.set_xticks(np.arange(len(tasks)), tasks)
    ax.set_ylim(0, 1.3)
    ax.set_yticks(np.linspace(0, 1, 6))
    ax.set_ylabel("success rate (95% Wilson interval; dots: seeds)")
    ax.set_title("BC on mixed-quality demos")
    ax.legend(fontsize=6.5, loc="upper left", ncol=2)
    for ax, t in zip(axes[1:], tasks, strict=True):
        for style, colour in (
            ("good", "tab:green"),
            ("regress", "tab:red"),
            ("fail", "tab:orange"),
        ):
            ex = report["tasks"][t]["examples"].get(style)
            if ex is None:
                continue
            ax.plot(ex["predicted"], color=colour, label=f"SARM, {style} demo")
            ax.plot(ex["annotation_label"], color=colour, ls=":", alpha=0.7)
        ax.set_title(f"{t}: predicted progress (dotted: labels)")
        ax.set_xlabel("frame")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def markdown_tables(report: dict) -> str:
    """The guide's tables: success per method (with per-seed values) and the paired tests."""
    tasks = list(report["tasks"])
    lines = ["| method | " + " | ".join(tasks) + " | per seed (" + ", ".join(tasks) + ") |"]
    lines.append("| --- " * (len(tasks) + 2) + "|")
    for method in METHODS:
        cells, seeds = [], []
        for t in tasks:
            res = report["tasks"][t]["policies"][method]
            k = sum(res["successes_per_seed"])
            n = res["rollouts_per_seed"] * len(res["successes_per_seed"])
            lo, hi = res["wilson95"]
            cells.append(f"{100 * k / n:.1f}% ({k}/{n}; 95% CI {100 * lo:.0f}-{100 * hi:.0f}%)")
            seeds.append(
                ", ".join(f"{x / res['rollouts_per_seed']:.2f}" for x in res["successes_per_seed"])
            )
        lines.append(f"| {method} | " + " | ".join(cells) + " | " + " / ".join(seeds) + " |")
    lines += [
        "",
        "| comparison | mean difference (pp) | better in | sign-flip p | "
        + " | ".join(f"McNemar {t}: only first / only second, p" for t in tasks)
        + " |",
    ]
    lines.append("| --- " * (len(tasks) + 4) + "|")
    for name, test in report["paired_seeds_sign_flip"].items():
        mc = [report["tasks"][t]["paired_rollouts_mcnemar"][name] for t in tasks]
        lines.append(
            f"| {name} | {100 * test['mean_difference']:+.1f} | {test['first_better_in']}/"
            f"{test['of']} | {test['p']:.3f} | "
            + " | ".join(f"{m['only_first']} / {m['only_second']}, {m['p']:.2g}" for m in mc)
            + " |"
        )
    return "\n".join(lines)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument("--rm-demos", type=int, default=40)
    parser.add_argument("--bc-demos", type=int, default=150)
    parser.add_argument("--eval-demos", type=int, default=40)
    parser.add_argument("--sarm-steps", type=int, default=400)
    parser.add_argument("--sarm-batch", type=int, default=16)
    parser.add_argument("--bc-steps", type=int, default=3000)
    parser.add_argument("--bc-hidden", type=int, default=256)
    parser.add_argument("--bc-lr", type=float, default=1e-3)
    parser.add_argument("--bc-schedule", default="cosine", choices=("cosine", "constant"))
    parser.add_argument("--chunk", type=int, default=5)
    parser.add_argument("--episode-threshold", type=float, default=0.9)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rollouts", type=int, default=100)
    parser.add_argument("--text", default="auto", choices=("auto", "minilm", "hash"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--plot-only", action="store_true", help="redraw the PNG from an existing JSON"
    )
    args = parser.parse_args()
    if args.plot_only:
        report = json.loads((args.out / "rabc_vs_bc.json").read_text())
        plot(report, args.out / "rabc_vs_bc.png")
        print(markdown_tables(report))
        return
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    embedder = make_text_embedder(args.text)
    start = time.time()

    def log(msg: str) -> None:
        print(f"{time.time() - start:7.0f}s {msg}", flush=True)

    report = {
        "machine": f"2-core CPU ({platform.machine()}, shared), torch {torch.__version__}",
        "cpu_model": _cpu_model(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "text_embedder": type(embedder).__name__,
        "demo_mix": MIX,
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "tasks": {},
    }
    cpu0 = time.process_time()
    for name in args.tasks:
        report["tasks"][name] = run_task(name, args, embedder, log)
    report["paired_seeds_sign_flip"] = paired_seed_tests(report)
    report["wall_seconds"] = time.time() - start
    report["cpu_seconds"] = time.process_time() - cpu0
    (args.out / "rabc_vs_bc.json").write_text(json.dumps(report, indent=1))
    plot(report, args.out / "rabc_vs_bc.png")
    log(f"wrote {args.out / 'rabc_vs_bc.json'}")
    print(markdown_tables(report))


if __name__ == "__main__":
    main()
