"""Reproduce the paper's full-to-partial comparison on the datasets bundled with aeon.

No-KD, logit KD, FitNet (Base-KD) and GDPD students over datasets x earliness x seeds,
side by side with aeon classifiers trained directly on the same prefixes (MiniRocket +
logistic regression, MiniRocket + ridge, QUANT), scored by macro AUC-PRC on the official
test split, with paired Wilcoxon tests of GDPD against every other method. Runs
resumably (finished cells are kept under ``benchmarks/results/<name>``, keyed by a hash
of the settings), seed by seed, in ``--workers`` processes of one thread each, and
writes ``<name>.json``, ``<name>.md`` and ``<name>.png`` under
``docs/benchmarks/lc-timeseries-kd/``. ``--report-only`` writes them from the cells
finished so far (the JSON says how many of the grid's cells it holds).

    nice -n 10 uv run python packages/lc-timeseries-kd/benchmarks/reproduce_gdpd.py --workers 1
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import time
from dataclasses import asdict
from pathlib import Path

# one thread per worker for every pool (BLAS, OpenMP, numba): idle pool threads that
# spin while the cores are shared burn CPU time and slow the students down
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

HERE = Path(__file__).resolve().parent
DOCS = HERE.parents[2] / "docs" / "benchmarks" / "lc-timeseries-kd"
DATASETS = [
    "GunPoint",
    "ItalyPowerDemand",
    "ArrowHead",
    "BasicMotions",
    "JapaneseVowels",
    "OSULeaf",
]


def _config(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from lc_timeseries_kd.config import GDPDConfig, TrainConfig

    return TrainConfig(
        arch=args.arch,
        widths=tuple(args.widths),
        length=100,
        epochs=args.epochs,
        teacher_epochs=args.teacher_epochs,
        warmup_epochs=args.warmup,
        batch_size=args.batch_size,
        lr=args.lr,
        gdpd=GDPDConfig(
            weight=args.gdpd_weight,
            prior_pretrain_steps=args.prior_steps,
            hidden=args.prior_hidden,
            train_prior_after_warmup=not args.frozen_prior,
        ),
    )


def _work(job: tuple[list[str], argparse.Namespace]) -> None:
    import torch

    from lc_timeseries_kd.experiment import run_grid

    torch.set_num_threads(1)
    datasets, args = job
    # earliness by earliness, in the order given: an interrupted run leaves whole
    # earliness values (every dataset and seed) finished
    for e in args.earliness:
        run_grid(
            datasets,
            [e],
            args.seeds,
            args.methods,
            _config(args),
            args.out,
            progress=True,
            weight_grid=args.weight_grid or None,
            baselines=args.baselines,
            rerun=args.rerun,
        )
        args.rerun = False  # the first call took the directory over


def _environment() -> dict[str, object]:
    """CPU model and library versions, so that numbers can be compared across machines."""
    from importlib.metadata import PackageNotFoundError, version

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions = {}
    for dist in ("lc-timeseries-kd", "torch", "numpy", "scipy", "scikit-learn", "aeon", "numba"):
        try:
            versions[dist] = version(dist)
        except PackageNotFoundError:
            versions[dist] = None
    return {
        "cpu_model": cpu,
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": versions,
    }


def _plot(agg: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lc_timeseries_kd.experiment import PAPER_AVERAGES

    labels = {
        "none": "no KD",
        "logit": "logit KD",
        "fitnet": "Base-KD (FitNet)",
        "gdpd": "GDPD",
        "minirocket_lr": "MiniRocket + LR",
        "minirocket_ridge": "MiniRocket + ridge",
        "quant": "QUANT",
    }
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for m, label in labels.items():
        if m not in agg:
            continue
        es = sorted(agg[m])
        style = "o-" if m in ("none", "logit", "fitnet", "gdpd") else "x:"
        axes[0].plot(es, [agg[m][e]["average"] for e in es], style, label=label)
    for m, style in (("gdpd", "s--"), ("fitnet", "^--")):
        es = sorted(PAPER_AVERAGES[m])
        axes[0].plot(
            es, [PAPER_AVERAGES[m][e] for e in es], style, alpha=0.5, label=f"{labels[m]} (paper)"
        )
    axes[0].set(
        xlabel="earliness (observed fraction)", ylabel="AUC-PRC (%)", title="Average over datasets"
    )
    axes[0].legend(fontsize=8)
    others = [m for m in ("fitnet", "none", "minirocket_lr", "quant") if m in agg]
    if "gdpd" in agg and others:
        es = sorted(agg["gdpd"])
        width = 0.8 / len(others)
        for i, m in enumerate(others):
            diff = [agg["gdpd"][e]["average"] - agg[m][e]["average"] for e in es]
            axes[1].bar([j + i * width for j in range(len(es))], diff, width, label=labels[m])
        axes[1].axhline(0, color="k", lw=0.8)
        axes[1].set_xticks([j + 0.4 - width / 2 for j in range(len(es))])
        axes[1].set_xticklabels([f"e={e:g}" for e in es])
        axes[1].set(
            ylabel="GDPD minus method (AUC-PRC points, dataset average)",
            title="GDPD's lead (negative: GDPD behind)",
        )
        axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def _tests_table(tests: dict) -> str:
    """Markdown: GDPD minus each method (mean, wins/ties/losses, p, Holm p) per earliness."""
    lines = [
        "| earliness | GDPD vs | n | mean diff (pts) | wins/ties/losses | p (Wilcoxon) | p (Holm) |",
        "|---|---|---:|---:|---|---:|---:|",
    ]
    for e, row in tests.items():
        for m, r in row.items():
            p = "–" if r["p"] is None else f"{r['p']:.3g}"
            ph = "–" if r["p_holm"] is None else f"{r['p_holm']:.3g}"
            lines.append(
                f"| {e} | {m} | {r['n']} | {r['mean_diff']:+.1f} | "
                f"{r['wins']}/{r['ties']}/{r['losses']} | {p} | {ph} |"
            )
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", default=DATASETS)
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    p.add_argument(
        "--earliness",
        nargs="+",
        type=float,
        default=[0.4, 0.2, 0.8, 0.6],
        help="run in this order (whole earliness values finish first)",
    )
    p.add_argument("--arch", default="fcn")
    p.add_argument("--widths", nargs=3, type=int, default=[32, 64, 32])
    p.add_argument("--epochs", type=int, default=24)
    p.add_argument("--teacher-epochs", type=int, default=50)
    p.add_argument("--warmup", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--gdpd-weight", type=float, default=1.0, help="without --weight-grid")
    p.add_argument(
        "--weight-grid",
        nargs="*",
        type=float,
        default=[0.1, 1.0],
        help="weights of logit KD and GDPD, picked per cell by validation loss "
        "(empty: fixed --gdpd-weight and kd_weight 1)",
    )
    p.add_argument("--prior-steps", type=int, default=200)
    p.add_argument("--prior-hidden", type=int, default=128)
    p.add_argument("--frozen-prior", action="store_true", help="freeze the prior after the warm-up")
    p.add_argument("--methods", nargs="+", default=["none", "logit", "fitnet", "gdpd"])
    p.add_argument(
        "--baselines",
        nargs="*",
        default=["minirocket_lr", "minirocket_ridge", "quant"],
        help="aeon classifiers trained on the same prefixes",
    )
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--rerun", action="store_true", help="recompute cells of other settings")
    p.add_argument("--report-only", action="store_true", help="only write the report")
    p.add_argument("--name", default="gdpd_reproduction", help="stem of the files under docs")
    p.add_argument("--out", type=Path, default=None, help="cell directory (default per name)")
    p.add_argument("--docs", type=Path, default=DOCS, help="where the report files go")
    args = p.parse_args()
    if args.out is None:
        args.out = HERE / "results" / args.name

    load_start = os.getloadavg()
    start = time.perf_counter()
    groups = [args.datasets[i :: args.workers] for i in range(args.workers)]
    jobs = [(g, args) for g in groups if g]
    if args.report_only:
        pass
    elif len(jobs) == 1:
        _work(jobs[0])
    else:
        with mp.get_context("spawn").Pool(len(jobs)) as pool:
            pool.map(_work, jobs)
    wall = time.perf_counter() - start

    import numpy as np

    from lc_timeseries_kd.experiment import (
        PAPER_AVERAGES,
        aggregate,
        load_results,
        paired_tests,
        results_table,
    )

    cells = [
        c
        for c in load_results(args.out)
        if c["dataset"] in args.datasets
        and c["seed"] in args.seeds
        and any(abs(c["earliness"] - e) < 1e-9 for e in args.earliness)
    ]
    expected = len(args.datasets) * len(args.seeds) * len(args.earliness)
    agg = aggregate(cells)
    agg_acc = aggregate(cells, "accuracy")
    docs = args.docs
    docs.mkdir(parents=True, exist_ok=True)
    train_seconds = sum(m["seconds"] for c in cells for m in c["methods"].values())
    cpu_seconds = sum(
        c.get("cpu_seconds", 0.0) + c["teacher"].get("cpu_seconds", 0.0) for c in cells
    )
    env = _environment()
    report = {
        "machine": f"{env['cpu_count']}-core CPU ({env['cpu_model']}), shared",
        "environment": env,
        "cells_finished": len(cells),
        "cells_expected": expected,
        "complete": len(cells) == expected,
        "command": "python packages/lc-timeseries-kd/benchmarks/reproduce_gdpd.py "
        + " ".join(
            f"--{k.replace('_', '-')} " + (" ".join(map(str, v)) if isinstance(v, list) else str(v))
            for k, v in vars(args).items()
            if k not in ("out", "frozen_prior", "rerun", "report_only", "docs")
        )
        + (" --frozen-prior" if args.frozen_prior else ""),
        "wall_seconds_this_invocation": round(wall, 1),
        "load_average_1min_start_end": [round(load_start[0], 2), round(os.getloadavg()[0], 2)],
        "student_training_wall_seconds_total": round(train_seconds, 1),
        "cpu_seconds_total": round(cpu_seconds, 1),
        "two_core_wall_estimate_minutes": round(cpu_seconds / 2 / 60, 1),
        "config": {**asdict(_config(args)), "weight_grid": args.weight_grid or None},
        "weight_chosen": {
            m: {
                f"{w:g}": sum(1 for c in cells if c["methods"][m].get("weight") == w)
                for w in args.weight_grid
            }
            for m in ("logit", "gdpd")
            if args.weight_grid and m in args.methods
        },
        "auc_prc": {m: {str(e): v for e, v in by_e.items()} for m, by_e in agg.items()},
        "accuracy": {m: {str(e): v for e, v in by_e.items()} for m, by_e in agg_acc.items()},
        "cpu_seconds_per_cell_by_method": {
            m: round(
                sum(c["methods"][m]["cpu_seconds"] for c in cells if m in c["methods"])
                / max(1, sum(1 for c in cells if m in c["methods"])),
                3,
            )
            for m in [*args.methods, *args.baselines]
        },
        # a teacher is trained per (dataset, seed) and earliness pass; its CPU time is
        # booked on the first cell it served
        "teacher_cpu_seconds_per_training": round(
            float(
                np.mean(
                    [c["teacher"]["cpu_seconds"] for c in cells if c["teacher"].get("cpu_seconds")]
                    or [0.0]
                )
            ),
            3,
        ),
        "paired_wilcoxon_gdpd_vs": paired_tests(cells, "gdpd") if cells else {},
        "paired_wilcoxon_gdpd_vs_accuracy": paired_tests(cells, "gdpd", "accuracy")
        if cells
        else {},
        "paper_average_auc_prc": {
            m: {str(e): v for e, v in d.items()} for m, d in PAPER_AVERAGES.items()
        },
        "cells": cells,
    }
    (docs / f"{args.name}.json").write_text(json.dumps(report, indent=2))
    table = results_table(cells)
    if cells:
        table += "\n\n" + _tests_table(report["paired_wilcoxon_gdpd_vs"])  # type: ignore[arg-type]
    if len(cells) < expected:
        table = f"PARTIAL: {len(cells)} of {expected} cells finished.\n\n" + table
    (docs / f"{args.name}.md").write_text(table + "\n")
    _plot(agg, docs / f"{args.name}.png")
    print(table)
    print(f"{len(cells)}/{expected} cells; wall {wall:.0f} s, CPU {cpu_seconds:.0f} s")


if __name__ == "__main__":
    main()
