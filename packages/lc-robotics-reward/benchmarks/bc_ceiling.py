"""The ceiling of the BC policy: open-loop replay and BC on good demonstrations only (CPU).

For each task: generate good demonstrations, replay their actions open loop in the
simulator, then train BC policies on them alone with two optimisation settings (the
package's earlier benchmark setting and the current default: wider, longer, with a
cosine learning-rate decay) and roll each out in closed loop.

Writes ``docs/benchmarks/lc-robotics-reward/bc_ceiling.json``.

Run: ``uv run python packages/lc-robotics-reward/benchmarks/bc_ceiling.py``
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch

from lc_robotics_reward.bc import BCConfig, rollout_outcomes, train_bc
from lc_robotics_reward.sim import TASKS, generate_demos, replay_demo

ROOT = Path(__file__).resolve().parents[3]
OUT = ROOT / "docs" / "benchmarks" / "lc-robotics-reward"
SETTINGS = {
    "1500 steps, 128 wide, lr 2e-3 constant (earlier benchmark)": BCConfig(
        steps=1500, hidden=128, lr=2e-3, lr_schedule="constant"
    ),
    "5000 steps, 256 wide, lr 1e-3 cosine (default)": BCConfig(),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS))
    parser.add_argument("--demos", type=int, default=150)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rollouts", type=int, default=100)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.time()
    report: dict = {
        "machine": f"2-core CPU ({platform.machine()}, shared), torch {torch.__version__}",
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "tasks": {},
    }
    for name in args.tasks:
        task = TASKS[name]
        demos = generate_demos(task, args.demos, seed=2000, styles={"good": 1.0})
        replayed = sum(replay_demo(task, d) for d in demos)
        obs = np.concatenate([d.obs for d in demos])
        act = np.concatenate([d.actions for d in demos])
        entry: dict = {
            "demos": len(demos),
            "frames": len(obs),
            "demo_length_mean": float(np.mean([d.length for d in demos])),
            "horizon": task.horizon,
            "replayed_open_loop_succeed": replayed,
            "settings": {},
        }
        for label, cfg in SETTINGS.items():
            rates, hist = [], np.zeros(len(task.steps) + 1, dtype=int)
            for seed in range(args.seeds):
                policy = train_bc(obs, act, np.ones(len(obs)), cfg, seed=seed)
                ok, steps = rollout_outcomes(policy, task, args.rollouts, seed=10_000 + seed)
                rates.append(float(ok.mean()))
                hist += np.bincount(steps, minlength=len(task.steps) + 1)
            entry["settings"][label] = {
                "success_per_seed": rates,
                "mean": float(np.mean(rates)),
                "steps_completed_histogram": hist.tolist(),
            }
            print(f"{time.time() - start:6.0f}s [{name}] {label}: {rates}", flush=True)
        print(f"[{name}] replay {replayed}/{len(demos)}", flush=True)
        report["tasks"][name] = entry
    report["wall_seconds"] = time.time() - start
    (args.out / "bc_ceiling.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
