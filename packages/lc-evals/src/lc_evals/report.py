"""Summaries and plots of results: tables with 95% intervals, paired comparisons, the
NIAH heat map, accuracy vs length."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lc_evals.results import Result

_GROUP_FIELDS = {"task", "scorer"}


def _key(result: Result, field: str) -> Any:
    if field in _GROUP_FIELDS:
        return getattr(result, field)
    return result.metadata.get(field)


Z95 = 1.959963984540054  # two-sided 95% normal quantile


def _is_binary(scores: Sequence[float]) -> bool:
    return all(x in (0.0, 1.0) for x in scores)


def wilson_interval(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion ``successes / n``.

    Examples:
        >>> [round(x, 4) for x in wilson_interval(8, 10)]
        [0.4902, 0.9433]
    """
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def interval(scores: Sequence[float]) -> dict[str, Any]:
    """Mean, standard error and 95% interval of scores in ``[0, 1]``.

    Scores that are all 0 or 1 (accuracies) get the Wilson interval; graded scores the
    normal interval ``mean +- 1.96 se`` (sample standard deviation), clipped to
    ``[0, 1]``; with one graded score the interval is the whole range.

    Returns:
        ``{"score", "se", "ci_low", "ci_high", "interval"}`` (``interval`` is
        ``"wilson"`` or ``"normal"``).
    """
    n = len(scores)
    if n == 0:
        raise ValueError("no scores")
    mean = sum(scores) / n
    if _is_binary(scores):
        low, high = wilson_interval(sum(scores), n)
        se = math.sqrt(mean * (1 - mean) / n)
        kind = "wilson"
    else:
        kind = "normal"
        if n == 1:
            se, low, high = math.inf, 0.0, 1.0
        else:
            var = sum((x - mean) ** 2 for x in scores) / (n - 1)
            se = math.sqrt(var / n)
            low, high = max(0.0, mean - Z95 * se), min(1.0, mean + Z95 * se)
    return {"score": mean, "se": se, "ci_low": low, "ci_high": high, "interval": kind}


def summarize(
    results: Sequence[Result], by: Sequence[str] = ("task", "target_length")
) -> list[dict[str, Any]]:
    """Count, mean score, standard error and 95% interval per group.

    Args:
        results: results of one or more runs.
        by: grouping fields: ``"task"``, ``"scorer"`` or any metadata key such as
            ``"target_length"`` or ``"depth"``.

    Returns:
        rows ``{<by fields>..., "n", "score", "se", "ci_low", "ci_high", "interval"}``
        sorted by the group; see :func:`interval` (Wilson for accuracies).

    Examples:
        >>> from lc_evals.results import Result
        >>> rs = [Result("a", "t", "x", 1.0, "em", ("x",)), Result("b", "t", "y", 0.0, "em", ("x",))]
        >>> row = summarize(rs, by=("task",))[0]
        >>> row["n"], row["score"], round(row["ci_low"], 3), round(row["ci_high"], 3)
        (2, 0.5, 0.095, 0.905)
    """
    groups: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    for r in results:
        groups[tuple(_key(r, f) for f in by)].append(r.score)
    rows = []
    for key in sorted(
        groups, key=lambda k: tuple((v is None, str(type(v)), v if v is not None else 0) for v in k)
    ):
        scores = groups[key]
        rows.append({**dict(zip(by, key)), "n": len(scores), **interval(scores)})
    return rows


def compare(
    a: Sequence[Result], b: Sequence[Result], *, resamples: int = 10_000, seed: int = 0
) -> dict[str, Any]:
    """Paired comparison of two systems on the items both were scored on (same ids).

    Accuracies (all scores 0 or 1) get McNemar's exact test: a two-sided binomial test
    on the items exactly one system got right. Graded scores get a sign-flip
    randomization test on the paired differences (``resamples`` draws, seeded). The
    95% interval of the difference ``mean(a) - mean(b)`` is the normal interval of the
    paired differences.

    When every paired difference is equal, up to rounding (B better by the same amount on every item,
    or no difference at all, or a single item) the sample spread is zero or undefined
    and the normal interval would collapse to a point or be infinite. The interval then
    comes from the differences with two pseudo-pairs added: a difference of ``+1`` and
    one of ``-1`` at weight one half each and a difference of ``0`` at weight one. For
    accuracies this is Agresti and Min's adjusted Wald interval for matched proportions
    (one half added to each cell of the paired 2x2 table); for graded scores, which
    also differ by at most 1, the same pseudo-counts stand for the spread a few items
    cannot rule out. The interval is ``mean +- 1.96 se`` of the augmented differences
    (weighted mean and standard error over ``n + 2`` observations), clipped to
    ``[-1, 1]``; ``se`` reports that standard error. Example: ten items, B better by
    0.1 on each, give a difference of -0.1 and the interval about -0.25 to +0.08
    instead of the point -0.1.

    Returns:
        ``{"n", "mean_a", "mean_b", "diff", "se", "ci_low", "ci_high", "p_value",
        "method", "a_only", "b_only"}``; ``a_only``/``b_only`` count items where one
        system scored higher.

    Raises:
        ValueError: the two runs share no item id.
    """
    by_id = {r.id: r.score for r in b}
    pairs = [(r.score, by_id[r.id]) for r in a if r.id in by_id]
    if not pairs:
        raise ValueError("the two runs have no item in common (results are paired by id)")
    n = len(pairs)
    diffs = [x - y for x, y in pairs]
    mean_d = sum(diffs) / n
    if max(diffs) - min(diffs) <= 1e-12:  # equal up to rounding: no spread to estimate
        # Agresti-Min pseudo-pairs: weights 1/2 at +1 and -1, 1 at 0 (n + 2 in all).
        n_adj = n + 2
        centre = sum(diffs) / n_adj
        second = (sum(d * d for d in diffs) + 1.0) / n_adj
        se = math.sqrt(max(second - centre * centre, 0.0) / n_adj)
        ci_low, ci_high = max(-1.0, centre - Z95 * se), min(1.0, centre + Z95 * se)
    else:
        se = math.sqrt(sum((d - mean_d) ** 2 for d in diffs) / (n - 1) / n)
        ci_low, ci_high = mean_d - Z95 * se, mean_d + Z95 * se
    a_only = sum(d > 0 for d in diffs)
    b_only = sum(d < 0 for d in diffs)
    if _is_binary([x for pair in pairs for x in pair]):
        method = "mcnemar_exact"
        m = a_only + b_only
        k = min(a_only, b_only)
        p_value = 1.0 if m == 0 else min(1.0, 2 * sum(math.comb(m, i) for i in range(k + 1)) / 2**m)
    else:
        import numpy as np

        method = "sign_flip"
        d = np.asarray(diffs)
        rng = np.random.default_rng(seed)
        signs = rng.choice([-1.0, 1.0], size=(resamples, n))
        null = np.abs((signs * d).mean(axis=1))
        p_value = float((1 + np.sum(null >= abs(mean_d) - 1e-12)) / (resamples + 1))
    return {
        "n": n,
        "mean_a": sum(x for x, _ in pairs) / n,
        "mean_b": sum(y for _, y in pairs) / n,
        "diff": mean_d,
        "se": se,
        "ci_low": ci_low,
        "ci_high": ci_high,
        "p_value": p_value,
        "method": method,
        "a_only": a_only,
        "b_only": b_only,
    }


_HIDDEN = {"se", "ci_low", "ci_high", "interval"}


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """A Markdown table of :func:`summarize` rows (scores, errors, intervals as percentages)."""
    if not rows:
        return "(no results)"
    cols = [c for c in rows[0] if c not in _HIDDEN]
    extra = ["se", "95% CI"] if "ci_low" in rows[0] else []
    head = "| " + " | ".join(cols + extra) + " |"
    rule = (
        "| "
        + " | ".join("---:" if c in ("n", "score") else "---" for c in cols)
        + "".join(" | ---:" for _ in extra)
        + " |"
    )
    lines = [head, rule]
    for row in rows:
        cells = [f"{100 * row[c]:.1f}" if c == "score" else str(row[c]) for c in cols]
        if extra:
            se = row["se"]
            cells.append("-" if math.isinf(se) else f"{100 * se:.1f}")
            cells.append(f"{100 * row['ci_low']:.1f}-{100 * row['ci_high']:.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _short(n: int) -> str:
    return str(n) if n < 10_000 else f"{n / 1000:g}K"


def _depth_bins(depths: list[float]) -> list[float]:
    unique = sorted({round(d, 3) for d in depths})
    if len(unique) <= 11:
        return unique
    return [i / 10 for i in range(11)]


def _nearest(value: float, grid: list[float]) -> float:
    return min(grid, key=lambda g: abs(g - value))


def heatmap_grid(
    results: Sequence[Result], task: str | None = None
) -> tuple[list[int], list[float], list[list[float]]]:
    """Mean score on a (depth x length) grid: ``(lengths, depths, grid[d][l])``, NaN where empty.

    Only results whose metadata has a numeric ``depth`` count.
    """
    rows = [
        r
        for r in results
        if (task is None or r.task == task) and isinstance(r.metadata.get("depth"), int | float)
    ]
    if not rows:
        raise ValueError(
            f"no results with a depth{'' if task is None else f' for task {task!r}'} to plot"
        )
    lengths = sorted({int(r.metadata["target_length"]) for r in rows})
    depths = _depth_bins([float(r.metadata["depth"]) for r in rows])
    sums = [[0.0] * len(lengths) for _ in depths]
    counts = [[0] * len(lengths) for _ in depths]
    for r in rows:
        i = depths.index(_nearest(float(r.metadata["depth"]), depths))
        j = lengths.index(int(r.metadata["target_length"]))
        sums[i][j] += r.score
        counts[i][j] += 1
    grid = [
        [sums[i][j] / counts[i][j] if counts[i][j] else math.nan for j in range(len(lengths))]
        for i in range(len(depths))
    ]
    return lengths, depths, grid


def _length_unit(results: Sequence[Result]) -> str:
    """The length unit the results' items were measured in (``"tokens"`` if none says)."""
    return next(
        (r.metadata["length_unit"] for r in results if r.metadata.get("length_unit")), "tokens"
    )


def _save(fig: Any, path: str | Path) -> Path:
    """Write ``fig`` as PNG to ``path`` (parents made) and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def plot_niah_heatmap(
    results: Sequence[Result],
    path: str | Path,
    *,
    task: str | None = None,
    title: str | None = None,
) -> Path:
    """The classic needle-in-a-haystack heat map (depth x context length), as PNG.

    Returns the path written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LinearSegmentedColormap

    lengths, depths, grid = heatmap_grid(results, task)
    cmap = LinearSegmentedColormap.from_list(
        "rg", ["#d7191c", "#fdae61", "#ffffbf", "#a6d96a", "#1a9641"]
    )
    fig, ax = plt.subplots(figsize=(1.2 + 0.9 * len(lengths), 1.0 + 0.45 * len(depths)))
    im = ax.imshow(grid, cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(lengths)), [str(x) for x in lengths], rotation=45)
    ax.set_yticks(range(len(depths)), [f"{100 * d:.0f}%" for d in depths])
    unit = _length_unit(results)
    ax.set_xlabel(f"context length ({unit})")
    ax.set_ylabel("needle depth")
    for i in range(len(depths)):
        for j in range(len(lengths)):
            if not math.isnan(grid[i][j]):
                ax.text(j, i, f"{100 * grid[i][j]:.0f}", ha="center", va="center", fontsize=7)
    ax.set_title(title or f"NIAH accuracy{'' if task is None else f' ({task})'}")
    fig.colorbar(im, ax=ax, label="score")
    return _save(fig, path)


def plot_accuracy_vs_length(
    results: Sequence[Result], path: str | Path, *, title: str | None = None
) -> Path:
    """Mean score against target length, one line per task, as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summarize(
        [r for r in results if "target_length" in r.metadata], by=("task", "target_length")
    )
    if not rows:
        raise ValueError("no results with a target_length to plot")
    fig, ax = plt.subplots(figsize=(6, 4))
    lengths = sorted({row["target_length"] for row in rows})
    for task in sorted({row["task"] for row in rows}):
        pts = [(row["target_length"], row["score"]) for row in rows if row["task"] == task]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=task)
    ax.set_xscale("log", base=2)
    ax.minorticks_off()
    ax.set_xticks(lengths, [_short(x) for x in lengths])
    ax.set_ylim(-0.02, 1.02)
    unit = _length_unit(results)
    ax.set_xlabel(f"context length ({unit})")
    ax.set_ylabel("mean score")
    ax.set_title(title or "accuracy vs context length")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, path)
