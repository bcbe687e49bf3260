"""Reproduce the paper's full-to-partial comparison on the datasets bundled with aeon.

No-KD, logit KD, FitNet (Base-KD) and GDPD students over datasets x earliness x seeds,
scored by macro AUC-PRC on the official test split. Runs resumably (finished cells are
kept under ``benchmarks/results/``), in ``--workers`` processes of one thread each, and
writes ``gdpd_reproduction.json``, ``gdpd_reproduction.md`` and ``gdpd_reproduction.png``
under ``docs/benchmarks/lc-timeseries-kd/`` (``--name`` changes the file stem, e.g. for
ablations that train only some methods).

    python packages/lc-timeseries-kd/benchmarks/reproduce_gdpd.py --workers 2
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

    from lc_timeseries_kd.data import PAPER_EARLINESS
    from lc_timeseries_kd.experiment import run_grid

    torch.set_num_threads(1)
    datasets, args = job
    run_grid(
        datasets,
        PAPER_EARLINESS,
        args.seeds,
        args.methods,
        _config(args),
        args.out,
        progress=True,
        weight_grid=args.weight_grid or None,
    )


def _plot(agg: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lc_timeseries_kd.experiment import PAPER_AVERAGES

    labels = {"none": "no KD", "logit": "logit KD", "fitnet": "Base-KD (FitNet)", "gdpd": "GDPD"}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for m, label in labels.items():
        if m not in agg:
            continue
        es = sorted(agg[m])
        axes[0].plot(es, [agg[m][e]["average"] for e in es], "o-", label=f"{label} (ours)")
    for m, style in (("gdpd", "s--"), ("fitnet", "^--")):
        es = sorted(PAPER_AVERAGES[m])
        axes[0].plot(
            es, [PAPER_AVERAGES[m][e] for e in es], style, alpha=0.5, label=f"{labels[m]} (paper)"
        )
    axes[0].set(
        xlabel="earliness (observed fraction)", ylabel="AUC-PRC (%)", title="Average over datasets"
    )
    axes[0].legend(fontsize=8)
    if "gdpd" in agg and "fitnet" in agg:
        es = sorted(agg["gdpd"])
        datasets = [d for d in agg["gdpd"][es[0]] if d != "average"]
        width = 0.8 / len(es)
        for i, e in enumerate(es):
            diff = [agg["gdpd"][e][d] - agg["fitnet"][e][d] for d in datasets]
            axes[1].bar(
                [j + i * width for j in range(len(datasets))], diff, width, label=f"e={e:g}"
            )
        axes[1].axhline(0, color="k", lw=0.8)
        axes[1].set_xticks([j + 0.4 - width / 2 for j in range(len(datasets))])
        axes[1].set_xticklabels(datasets, rotation=30, ha="right", fontsize=8)
        axes[1].set(ylabel="GDPD - Base-KD (AUC-PRC points)", title="Per dataset")
        axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", default=DATASETS)
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
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
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--name", default="gdpd_reproduction", help="stem of the files under docs")
    p.add_argument("--out", type=Path, default=None, help="cell directory (default per name)")
    args = p.parse_args()
    if args.out is None:
        args.out = HERE / "results" / args.name

    load_start = os.getloadavg()
    start = time.perf_counter()
    groups = [args.datasets[i :: args.workers] for i in range(args.workers)]
    jobs = [(g, args) for g in groups if g]
    if len(jobs) == 1:
        _work(jobs[0])
    else:
        with mp.get_context("spawn").Pool(len(jobs)) as pool:
            pool.map(_work, jobs)
    wall = time.perf_counter() - start

    from lc_timeseries_kd.experiment import PAPER_AVERAGES, aggregate, load_results, results_table

    cells = [
        c
        for c in load_results(args.out)
        if c["dataset"] in args.datasets and c["seed"] in args.seeds
    ]
    agg = aggregate(cells)
    agg_acc = aggregate(cells, "accuracy")
    DOCS.mkdir(parents=True, exist_ok=True)
    train_seconds = sum(m["seconds"] for c in cells for m in c["methods"].values())
    cpu_seconds = sum(
        c.get("cpu_seconds", 0.0) + c["teacher"].get("cpu_seconds", 0.0) for c in cells
    )
    report = {
        "machine": f"2-core CPU ({platform.processor() or platform.machine()}), shared",
        "command": "python packages/lc-timeseries-kd/benchmarks/reproduce_gdpd.py "
        + " ".join(
            f"--{k.replace('_', '-')} " + (" ".join(map(str, v)) if isinstance(v, list) else str(v))
            for k, v in vars(args).items()
            if k not in ("out", "frozen_prior")
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
        "paper_average_auc_prc": {
            m: {str(e): v for e, v in d.items()} for m, d in PAPER_AVERAGES.items()
        },
        "cells": cells,
    }
    (DOCS / f"{args.name}.json").write_text(json.dumps(report, indent=2))
    table = results_table(cells)
    (DOCS / f"{args.name}.md").write_text(table + "\n")
    _plot(agg, DOCS / f"{args.name}.png")
    print(table)
    print(f"wall {wall:.0f} s, CPU {cpu_seconds:.0f} s")


if __name__ == "__main__":
    main()
