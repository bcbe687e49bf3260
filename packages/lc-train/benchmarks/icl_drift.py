"""In-context regression under AR(1) task drift: linear attention vs GLA vs softmax attention.

Writes docs/benchmarks/lc-train-icl-drift/icl_drift.json and icl_drift.png (test error
and learned forgetting factor against the drift rate 1 - rho).

    uv run python packages/lc-train/benchmarks/icl_drift.py [--steps 1200] [--seeds 2]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch

from lc_train.icl_drift import DriftConfig, TrainConfig, run_sweep

OUT = Path(__file__).resolve().parents[3] / "docs" / "benchmarks" / "lc-train-icl-drift"


def summarise(result: dict) -> list[dict]:
    rows = []
    rhos = sorted({r["rho"] for r in result["runs"]}, reverse=True)
    for rho in rhos:
        row: dict = {
            "rho": rho,
            "drift": round(1 - rho, 4),
            "kalman_test": result["kalman_test_error"][str(rho)],
        }
        for kind in ("linear", "gla", "softmax"):
            runs = [r for r in result["runs"] if r["rho"] == rho and r["kind"] == kind]
            if not runs:
                continue
            for key in ("train_error", "test_error"):
                vals = np.array([r[key] for r in runs])
                row[f"{kind}_{key}"] = float(vals.mean())
                row[f"{kind}_{key}_sd"] = float(vals.std())
            if kind == "gla":
                row["gla_decay"] = float(np.mean([r["decay"][0] for r in runs]))
        rows.append(row)
    return rows


def plot(rows: list[dict], path: Path) -> None:
    drift = [r["drift"] for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for kind, style in (("linear", "o-"), ("gla", "s-"), ("softmax", "^--")):
        if f"{kind}_test_error" in rows[0]:
            ax1.errorbar(
                drift,
                [r[f"{kind}_test_error"] for r in rows],
                yerr=[r[f"{kind}_test_error_sd"] for r in rows],
                fmt=style,
                label={"linear": "linear attention", "gla": "GLA", "softmax": "softmax attention"}[
                    kind
                ],
                capsize=3,
            )
    ax1.plot(drift, [r["kalman_test"] for r in rows], "k:", label="Kalman filter (optimal)")
    ax1.set_xlabel("drift rate 1 - rho")
    ax1.set_ylabel("test MSE on the query label")
    ax1.set_title("In-context regression under AR(1) drift")
    ax1.legend()
    ax2.plot(drift, [r["gla_decay"] for r in rows], "s-", color="C1")
    ax2.set_xlabel("drift rate 1 - rho")
    ax2.set_ylabel("learned forgetting factor lambda")
    ax2.set_title("Learned GLA forgetting factor")
    ax2.axhline(1.0, color="gray", lw=0.8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=1200)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--rhos", type=float, nargs="+", default=[1.0, 0.95, 0.9, 0.8, 0.6])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    torch.set_num_threads(1)
    task = DriftConfig(dim=5, n_context=30, noise=0.1)
    train = TrainConfig(steps=args.steps, batch=256, lr=3e-3, n_heads=1, eval_batch=4096)
    start = time.time()
    result = run_sweep(args.rhos, seeds=tuple(range(args.seeds)), task=task, train=train)
    result["rows"] = summarise(result)
    result["seconds"] = time.time() - start
    result["machine"] = f"2-core CPU ({platform.machine()}), torch {torch.__version__}"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "icl_drift.json").write_text(json.dumps(result, indent=1))
    plot(result["rows"], args.out / "icl_drift.png")
    for r in result["rows"]:
        print(
            f"rho={r['rho']:.2f} linear={r['linear_test_error']:.4f} gla={r['gla_test_error']:.4f} "
            f"softmax={r.get('softmax_test_error', float('nan')):.4f} kalman={r['kalman_test']:.4f} "
            f"lambda={r['gla_decay']:.3f}"
        )


if __name__ == "__main__":
    main()
