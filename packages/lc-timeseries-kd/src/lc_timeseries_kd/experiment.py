"""Experiment grid: datasets x earliness x seeds x methods, resumable, with a table.

Each ``(dataset, earliness, seed)`` cell trains every requested student against one
teacher (shared by all earliness values of that dataset and seed) and writes
``cells/<dataset>_e<earliness>_s<seed>.json`` under the output directory. Runs are
keyed by a hash of their settings (training config, weight grid, methods, baselines):
``config.json`` records the settings and their hash, every cell records the hash, and a
finished cell is reused only when its hash matches, so an interrupted run resumes where
it stopped and results of different settings are never mixed. An output directory
holding other settings is refused unless ``rerun=True``, which moves the stale cells
to ``stale/<their hash>/``, recomputes those in the grid and says so.

Besides the students, a cell can score aeon baselines trained directly on the same
prefixes (:mod:`lc_timeseries_kd.baselines`), and :func:`paired_tests` compares one
method with every other by a paired Wilcoxon signed-rank test over datasets and seeds.

With a ``weight_grid``, the distillation weight of logit KD (``kd_weight``) and GDPD
(``gdpd.weight``) is picked per cell from the grid, as the paper does per dataset, but
by the student's validation loss (never by test data): one student is trained per
weight and the one with the lowest validation loss at its selected epoch is scored.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from lc_timeseries_kd.baselines import BASELINES, fit_predict_baseline
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
    "config_hash",
    "load_results",
    "paired_tests",
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


def _check_baselines(baselines: Sequence[str]) -> None:
    if isinstance(baselines, str):
        raise TypeError(f"baselines must be a sequence of names, got the string {baselines!r}")
    bad = [b for b in baselines if b not in BASELINES]
    if bad:
        raise ValueError(
            f"unknown baseline(s) {', '.join(bad)}; choose from {', '.join(BASELINES)}"
        )


def config_hash(settings: dict[str, Any]) -> str:
    """Short SHA-256 of a settings dictionary (keys sorted, so order does not matter).

    Example:
        >>> config_hash({"a": 1, "b": [2]}) == config_hash({"b": [2], "a": 1})
        True
    """
    text = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _diff(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for k in sorted(set(old) | set(new)):
        a, b = old.get(k), new.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _diff(a, b, f"{prefix}{k}.")
        elif a != b:
            out.append(f"{prefix}{k}: {a!r} -> {b!r}")
    return out


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
    baselines: Sequence[str] = (),
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
        baselines: aeon baselines (:data:`~lc_timeseries_kd.baselines.BASELINES`)
            trained on the prefixes of the whole official training split (training and
            validation series: they select no epoch) and scored on the same test
            prefixes; reported beside the students under ``"methods"`` with ``auc_prc``,
            ``accuracy``, ``seconds`` and ``cpu_seconds``.

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
    _check_baselines(baselines)
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
    if baselines:
        x_all = np.concatenate([x_tr, x_va])
        y_all = np.concatenate([ds.y_train, ds.y_val])
        for b in baselines:
            t0, c0 = time.perf_counter(), time.process_time()
            proba = fit_predict_baseline(b, x_all, y_all, x_te, ds.n_classes, seed)
            out["methods"][b] = {
                "auc_prc": auc_prc(ds.y_test, proba),
                "accuracy": accuracy(ds.y_test, proba),
                "seconds": round(time.perf_counter() - t0, 2),
                "cpu_seconds": round(time.process_time() - c0, 2),
            }
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
    baselines: Sequence[str] = (),
    rerun: bool = False,
) -> list[dict[str, Any]]:
    """Run (or resume) the grid and write one JSON per cell plus ``results.json``.

    The settings (``cfg``, ``weight_grid``, ``methods``, ``baselines``) are hashed with
    :func:`config_hash`. ``out_dir/config.json`` holds the settings and the hash of the
    run that owns the directory; each cell file holds the hash it was computed with. A
    cell is reused only if its hash equals the current one.

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
        baselines: aeon baselines scored in every cell (see :func:`run_cell`).
        rerun: when ``out_dir`` holds results of other settings, move its stale cells
            to ``out_dir/stale/<their hash>/``, recompute those in the grid and take the
            directory over (with a warning naming the changed settings) instead of
            raising.

    Returns:
        All cell results (finished earlier or now), in grid order.

    Raises:
        ValueError: unknown datasets, methods or baselines, or ``out_dir`` holds
            results of different settings and ``rerun`` is False (nothing is written).

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
    _check_baselines(baselines)
    root = Path(out_dir)
    settings = {
        **asdict(cfg),
        "weight_grid": [float(w) for w in weight_grid] if weight_grid else None,
        "methods": sorted(methods),
        "baselines": sorted(baselines),
    }
    settings = json.loads(json.dumps(settings))  # tuples become lists, as in config.json
    key = config_hash(settings)
    _claim(root, settings, key, rerun)
    cells = [(d, s, e) for d in datasets for s in seeds for e in es]
    results: list[dict[str, Any]] = []
    bar: Any = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(cells), desc="cells")
    cache: dict[tuple[str, int], tuple[PartialSeriesDataset, Any, float, float]] = {}
    for d, s, e in cells:
        path = root / "cells" / _cell_name(d, e, s)
        old = json.loads(path.read_text()) if path.is_file() else None
        if old is not None and old.get("config_hash") == key:
            results.append(old)
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
            cell = run_cell(
                ds,
                e,
                s,
                methods,
                cfg,
                teacher=teacher,
                weight_grid=weight_grid,
                baselines=baselines,
            )
            cell["config_hash"] = key
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


def _claim(root: Path, settings: dict[str, Any], key: str, rerun: bool) -> None:
    """Check ``root`` belongs to these settings (or take it over when ``rerun``)."""
    cfg_path = root / "config.json"
    cells = sorted((root / "cells").glob("*.json")) if (root / "cells").is_dir() else []
    if cfg_path.is_file():
        recorded = json.loads(cfg_path.read_text())
        old_key = recorded.get("config_hash")
        old_settings = recorded.get("settings", recorded)
    elif cells:  # cells without a config: written by another version or by hand
        old_key, old_settings = None, {}
    else:
        old_key, old_settings = key, settings
    hashes = {p: json.loads(p.read_text()).get("config_hash") for p in cells}
    stale = [p for p, h in hashes.items() if h != key]
    if old_key != key or stale:
        changed = _diff(old_settings, settings) if old_key != key else []
        if old_key != key and not changed:
            changed = ["(settings not recorded)"]
        what = (
            f"{root} holds results of other settings (recorded hash {old_key}, these "
            f"settings {key}; {len(stale)} cell(s) with another hash)"
            + (f"; changed: {'; '.join(changed)}" if changed else "")
        )
        if not rerun:
            raise ValueError(
                f"{what}. Use another output directory, or rerun=True (CLI: --rerun) to "
                "recompute the stale cells with the new settings"
            )
        # stale cells move aside (never mixed in, never lost) and are recomputed
        for path in stale:
            dest = root / "stale" / str(hashes[path] or "unhashed") / path.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            path.replace(dest)
        warnings.warn(
            f"{what}; moved {len(stale)} stale cell(s) to {root / 'stale'}, recomputing "
            "those in the grid and rewriting config.json",
            RuntimeWarning,
            stacklevel=3,
        )
    (root / "cells").mkdir(parents=True, exist_ok=True)
    if not cfg_path.is_file() or old_key != key:
        tmp = cfg_path.with_name(f".config.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"config_hash": key, "settings": settings}, indent=2))
        tmp.replace(cfg_path)


def load_results(out_dir: str | Path, config_hash: str | None = None) -> list[dict[str, Any]]:
    """Finished cells under ``out_dir/cells`` (sorted by file name).

    Args:
        out_dir: output directory of :func:`run_grid`.
        config_hash: keep only cells computed with these settings (default: the hash in
            ``out_dir/config.json`` when it has one; cells of other settings are left out).
    """
    root = Path(out_dir)
    if config_hash is None and (root / "config.json").is_file():
        config_hash = json.loads((root / "config.json").read_text()).get("config_hash")
    cells = [json.loads(p.read_text()) for p in sorted(Path(root, "cells").glob("*.json"))]
    if config_hash is None:
        return cells
    return [c for c in cells if c.get("config_hash") == config_hash]


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
    methods = [m for m in (*METHODS, *BASELINES) if m in agg]
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


def paired_tests(
    results: Iterable[dict[str, Any]],
    reference: str = "gdpd",
    metric: str = "auc_prc",
) -> dict[str, dict[str, dict[str, Any]]]:
    """Paired Wilcoxon signed-rank tests of ``reference`` against every other method.

    For each earliness (and for all earliness values pooled) the pairs are the
    ``(dataset, seed)`` cells where both methods were scored; the test is two-sided on
    ``reference - other`` (zero differences dropped, as in ``scipy.stats.wilcoxon``'s
    default). ``p_holm`` applies Holm's correction over the compared methods within
    the same earliness.

    Returns:
        ``{earliness or "all": {other: {"n", "mean_diff", "median_diff", "wins", "ties",
        "losses", "p", "p_holm"}}}`` with differences in percentage points; ``p`` is
        ``None`` when every difference is zero or fewer than two pairs exist.

    Examples:
        >>> cells = [{"dataset": "a", "seed": s, "earliness": 0.4,
        ...           "methods": {"gdpd": {"auc_prc": 0.9}, "none": {"auc_prc": 0.5 + s / 100}}}
        ...          for s in range(6)]
        >>> r = paired_tests(cells)["0.4"]["none"]
        >>> r["wins"], round(r["p"], 3)
        (6, 0.031)
    """
    from scipy.stats import wilcoxon

    scores: dict[str, dict[tuple[float, str, int], float]] = {}
    for cell in results:
        for m, r in cell["methods"].items():
            key = (float(cell["earliness"]), str(cell["dataset"]), int(cell["seed"]))
            scores.setdefault(m, {})[key] = 100.0 * float(r[metric])
    if reference not in scores:
        raise ValueError(f"reference method {reference!r} has no results")
    ref = scores[reference]
    groups: dict[str, list[float] | None] = {f"{e:g}": [e] for e in sorted({k[0] for k in ref})}
    groups["all"] = None
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for label, es in groups.items():
        row: dict[str, dict[str, Any]] = {}
        for other, sc in scores.items():
            if other == reference:
                continue
            keys = sorted(k for k in ref if k in sc and (es is None or k[0] in es))
            d = np.array([ref[k] - sc[k] for k in keys])
            p: float | None = None
            if d.size >= 2 and np.any(d != 0):
                p = float(wilcoxon(d).pvalue)
            row[other] = {
                "n": int(d.size),
                "mean_diff": float(d.mean()) if d.size else float("nan"),
                "median_diff": float(np.median(d)) if d.size else float("nan"),
                "wins": int((d > 0).sum()),
                "ties": int((d == 0).sum()),
                "losses": int((d < 0).sum()),
                "p": p,
            }
        _holm(row)
        out[label] = row
    return out


def _holm(row: dict[str, dict[str, Any]]) -> None:
    """Holm-adjusted p-values (``p_holm``) over the entries of ``row`` that have a ``p``."""
    tested = sorted((v["p"], k) for k, v in row.items() if v["p"] is not None)
    m, running = len(tested), 0.0
    for i, (p, k) in enumerate(tested):
        running = max(running, min(1.0, (m - i) * p))
        row[k]["p_holm"] = running
    for v in row.values():
        v.setdefault("p_holm", None)
