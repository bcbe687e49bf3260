"""Experiment grid: datasets x earliness x seeds x methods, resumable, with a table.

Each ``(dataset, earliness, seed)`` cell trains every requested student against one
teacher (shared by all earliness values of that dataset and seed) and writes
``cells/<dataset>_e<earliness>_s<seed>.json`` under the output directory. A cell
whose file exists is skipped, so an interrupted run resumes where it stopped.

With a ``weight_grid``, the distillation weight of logit KD (``kd_weight``) and GDPD
(``gdpd.weight``) is picked per cell from the grid, as the paper does per dataset, but
by the student's validation loss (never by test data): one student is trained per
weight and the one with the lowest validation loss at its selected epoch is scored.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from lc_timeseries_kd.config import METHODS, TrainConfig
from lc_timeseries_kd.data import (
    PartialSeriesDataset,
    bundled_datasets,
    check_earliness,
    prefix_view,
    prepare_dataset,
)
from lc_timeseries_kd.metrics import accuracy, auc_prc
from lc_timeseries_kd.training import predict_proba, train_student, train_teacher

__all__ = [
    "PAPER_AVERAGES",
    "TUNED_METHODS",
    "aggregate",
    "load_results",
    "results_table",
    "run_cell",
    "run_grid",
    "select_by_validation",
]

#: The paper's average AUC-PRC (%) over its datasets, by earliness.
PAPER_AVERAGES: dict[str, dict[float, float]] = {
    "gdpd": {0.2: 73.8, 0.4: 81.7, 0.6: 86.0, 0.8: 89.0},
    "fitnet": {0.2: 69.2, 0.4: 78.0, 0.6: 83.7, 0.8: 84.8},
}


#: Methods whose distillation weight a ``weight_grid`` selects (the paper tunes the
#: weight of logit KD and GDPD over a grid; FitNet's hint stage has no task term).
TUNED_METHODS: tuple[str, ...] = ("logit", "gdpd")


def _with_weight(cfg: TrainConfig, method: str, weight: float) -> TrainConfig:
    if method == "logit":
        return replace(cfg, kd_weight=weight)
    if method == "gdpd":
        return replace(cfg, gdpd=replace(cfg.gdpd, weight=weight))
    raise ValueError(f"method {method!r} has no tunable weight; tunable: {TUNED_METHODS}")


def select_by_validation(candidates: dict[str, dict[str, Any]]) -> str:
    """Key of the candidate with the lowest ``val_loss`` (the first one on ties).

    Example:
        >>> select_by_validation({"0.1": {"val_loss": 0.4}, "1": {"val_loss": 0.3}})
        '1'
    """
    if not candidates:
        raise ValueError("no candidates to select from")
    return min(candidates, key=lambda k: candidates[k]["val_loss"])


def _check_grid(weight_grid: Sequence[float] | None) -> list[float]:
    grid = [float(w) for w in weight_grid] if weight_grid else []
    if any(not w >= 0 for w in grid):
        raise ValueError(f"weight_grid values must be >= 0, got {grid}")
    return grid


def _cell_name(dataset: str, earliness: float, seed: int) -> str:
    return f"{dataset}_e{earliness:g}_s{seed}.json"


def run_cell(
    ds: PartialSeriesDataset,
    earliness: float,
    seed: int,
    methods: Sequence[str],
    cfg: TrainConfig,
    teacher: Any = None,
    weight_grid: Sequence[float] | None = None,
) -> dict[str, Any]:
    """Train and evaluate every method on one dataset / earliness / seed.

    Args:
        ds: prepared dataset (full series).
        earliness: observed fraction in ``(0, 1]``.
        seed: seed of the students (same initial student for every method).
        methods: subset of ``none, logit, fitnet, gdpd``.
        cfg: training settings.
        teacher: a trained teacher; trained here (seeded by ``seed``) when ``None``.
        weight_grid: distillation weights tried for logit KD and GDPD; the student with
            the lowest validation loss is kept (``None``: the weights in ``cfg``).

    Returns:
        ``{"dataset", "earliness", "seed", "cpu_seconds", "teacher": {...}, "methods":
        {name: {"auc_prc", "accuracy", "val_loss", "best_epoch", "seconds",
        "cpu_seconds"}}}`` with metrics on the test prefixes (``val_loss``: validation
        cross-entropy at the selected epoch; ``seconds`` is wall time, ``cpu_seconds`` the
        process CPU time, which does not grow when other programs share the cores). With
        a ``weight_grid``, tuned methods also carry ``"weight"`` (the one kept) and
        ``"candidates"`` (the same metrics for every weight tried); their times cover
        all candidates.
    """
    e = check_earliness(earliness)
    cpu0 = time.process_time()
    for m in methods:
        if m not in METHODS:
            raise ValueError(f"unknown method {m!r}; choose from {', '.join(METHODS)}")
    teacher_info: dict[str, Any] = {}
    if teacher is None:
        res = train_teacher(
            ds.x_train, ds.y_train, ds.x_val, ds.y_val, cfg, seed, n_classes=ds.n_classes
        )
        teacher = res.model
        teacher_info["seconds"] = res.seconds
    p_full = predict_proba(teacher, ds.x_test)
    x_tr = prefix_view(ds.x_train, e)
    x_va = prefix_view(ds.x_val, e)
    x_te = prefix_view(ds.x_test, e)
    p_prefix = predict_proba(teacher, x_te)
    teacher_info.update(
        auc_prc_full=auc_prc(ds.y_test, p_full),
        accuracy_full=accuracy(ds.y_test, p_full),
        auc_prc_prefix=auc_prc(ds.y_test, p_prefix),
    )
    out: dict[str, Any] = {
        "dataset": ds.name,
        "earliness": e,
        "seed": seed,
        "teacher": teacher_info,
        "methods": {},
    }
    grid = _check_grid(weight_grid)

    def fit(method: str, c: TrainConfig) -> dict[str, Any]:
        cpu_m = time.process_time()
        res = train_student(
            method,
            x_tr,
            ds.x_train,
            ds.y_train,
            x_va,
            ds.y_val,
            teacher,
            c,
            seed,
            n_classes=ds.n_classes,
        )
        proba = predict_proba(res.model, x_te)
        return {
            "auc_prc": auc_prc(ds.y_test, proba),
            "accuracy": accuracy(ds.y_test, proba),
            "val_loss": res.val_loss[res.best_epoch - 1],
            "best_epoch": res.best_epoch,
            "seconds": round(res.seconds, 2),
            "cpu_seconds": round(time.process_time() - cpu_m, 2),
        }

    for m in methods:
        if grid and m in TUNED_METHODS:
            candidates = {f"{w:g}": fit(m, _with_weight(cfg, m, w)) for w in grid}
            key = select_by_validation(candidates)
            out["methods"][m] = {
                **candidates[key],
                "weight": float(key),
                "seconds": round(sum(c["seconds"] for c in candidates.values()), 2),
                "cpu_seconds": round(sum(c["cpu_seconds"] for c in candidates.values()), 2),
                "candidates": candidates,
            }
        else:
            out["methods"][m] = fit(m, cfg)
    out["cpu_seconds"] = round(time.process_time() - cpu0, 2)
    return out


def run_grid(
    datasets: Sequence[str],
    earliness: Sequence[float],
    seeds: Sequence[int],
    methods: Sequence[str],
    cfg: TrainConfig,
    out_dir: str | Path,
    progress: bool = True,
    weight_grid: Sequence[float] | None = None,
) -> list[dict[str, Any]]:
    """Run (or resume) the grid and write one JSON per cell plus ``results.json``.

    Args:
        datasets: bundled dataset names (see :func:`lc_timeseries_kd.data.bundled_datasets`).
        earliness: observed fractions, each in ``(0, 1]``.
        seeds: seeds; each seed has its own validation split, teacher and students.
        methods: subset of ``none, logit, fitnet, gdpd``.
        cfg: training settings.
        out_dir: output directory (created).
        progress: show a progress bar over cells.
        weight_grid: distillation weights of logit KD and GDPD, picked per cell by
            validation loss (see :func:`run_cell`); ``None`` uses the weights in ``cfg``.

    Returns:
        All cell results (finished earlier or now), in grid order.

    Example:
        >>> cfg = TrainConfig(arch="fcn", epochs=2, warmup_epochs=1)  # doctest: +SKIP
        >>> run_grid(["GunPoint"], [0.4], [0], ["none", "gdpd"], cfg, "out")  # doctest: +SKIP
    """
    available = bundled_datasets()
    unknown = [d for d in datasets if d not in available]
    if unknown:
        raise ValueError(
            f"unknown dataset(s) {', '.join(unknown)}; bundled datasets: {', '.join(available)}"
        )
    es = [check_earliness(e) for e in earliness]
    bad = [m for m in methods if m not in METHODS]
    if bad:
        raise ValueError(f"unknown method(s) {', '.join(bad)}; choose from {', '.join(METHODS)}")
    _check_grid(weight_grid)
    root = Path(out_dir)
    (root / "cells").mkdir(parents=True, exist_ok=True)
    settings = {**asdict(cfg), "weight_grid": list(weight_grid) if weight_grid else None}
    (root / "config.json").write_text(json.dumps(settings, indent=2))
    cells = [(d, s, e) for d in datasets for s in seeds for e in es]
    results: list[dict[str, Any]] = []
    bar: Any = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(cells), desc="cells")
    cache: dict[tuple[str, int], tuple[PartialSeriesDataset, Any, float, float]] = {}
    for d, s, e in cells:
        path = root / "cells" / _cell_name(d, e, s)
        if path.is_file():
            results.append(json.loads(path.read_text()))
        else:
            if (d, s) not in cache:
                cache.clear()
                ds = prepare_dataset(d, length=cfg.length, val_fraction=cfg.val_fraction, seed=s)
                t0, c0 = time.perf_counter(), time.process_time()
                teacher = train_teacher(
                    ds.x_train, ds.y_train, ds.x_val, ds.y_val, cfg, s, n_classes=ds.n_classes
                ).model
                cache[(d, s)] = (ds, teacher, time.perf_counter() - t0, time.process_time() - c0)
            ds, teacher, t_sec, t_cpu = cache[(d, s)]
            cell = run_cell(ds, e, s, methods, cfg, teacher=teacher, weight_grid=weight_grid)
            cell["teacher"]["seconds"] = round(t_sec, 2)
            # the teacher is shared by the earliness values of (dataset, seed): book its
            # CPU time on the first cell that trained it
            cell["teacher"]["cpu_seconds"] = round(t_cpu, 2)
            t_cpu = 0.0
            cache[(d, s)] = (ds, teacher, t_sec, 0.0)
            path.write_text(json.dumps(cell, indent=2))
            results.append(cell)
        if bar is not None:
            bar.update(1)
            bar.set_postfix_str(f"{d} e={e:g} s={s}")
    if bar is not None:
        bar.close()
    (root / "results.json").write_text(json.dumps(results, indent=2))
    return results


def load_results(out_dir: str | Path) -> list[dict[str, Any]]:
    """All finished cells under ``out_dir/cells`` (sorted by file name)."""
    return [json.loads(p.read_text()) for p in sorted(Path(out_dir, "cells").glob("*.json"))]


def aggregate(
    results: Iterable[dict[str, Any]], metric: str = "auc_prc"
) -> dict[str, dict[float, dict[str, float]]]:
    """Mean ``metric`` (in %) per method, earliness and dataset, plus the dataset average.

    Returns:
        ``{method: {earliness: {dataset: mean_over_seeds, ..., "average": mean_over_datasets}}}``.
    """
    acc: dict[str, dict[float, dict[str, list[float]]]] = {}
    for cell in results:
        for m, r in cell["methods"].items():
            acc.setdefault(m, {}).setdefault(cell["earliness"], {}).setdefault(
                cell["dataset"], []
            ).append(100.0 * r[metric])
    out: dict[str, dict[float, dict[str, float]]] = {}
    for m, by_e in acc.items():
        out[m] = {}
        for e, by_d in sorted(by_e.items()):
            means = {d: float(np.mean(v)) for d, v in sorted(by_d.items())}
            means["average"] = float(np.mean(list(means.values())))
            out[m][e] = means
    return out


def results_table(results: Iterable[dict[str, Any]], metric: str = "auc_prc") -> str:
    """Markdown table: rows dataset x earliness, columns methods (mean over seeds, %).

    The last rows are the averages over datasets per earliness.
    """
    agg = aggregate(list(results), metric)
    methods = [m for m in METHODS if m in agg]
    if not methods:
        return "(no results)"
    header = "| dataset | earliness | " + " | ".join(methods) + " |"
    lines = [header, "|" + "---|" * (len(methods) + 2)]
    earliness = sorted({e for m in methods for e in agg[m]})
    datasets = sorted({d for m in methods for e in agg[m] for d in agg[m][e]} - {"average"})
    for d in [*datasets, "average"]:
        for e in earliness:
            vals = [agg[m].get(e, {}).get(d) for m in methods]
            if all(v is None for v in vals):
                continue
            best = max(v for v in vals if v is not None)
            cells = [
                "" if v is None else (f"**{v:.1f}**" if v == best else f"{v:.1f}") for v in vals
            ]
            name = f"**{d}**" if d == "average" else d
            lines.append(f"| {name} | {e:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
