"""Summaries and plots of results: tables, the NIAH heat map, accuracy vs length."""

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


def summarize(
    results: Sequence[Result], by: Sequence[str] = ("task", "target_length")
) -> list[dict[str, Any]]:
    """Mean score and count per group.

    Args:
        results: results of one or more runs.
        by: grouping fields: ``"task"``, ``"scorer"`` or any metadata key such as
            ``"target_length"`` or ``"depth"``.

    Returns:
        rows ``{<by fields>..., "n": count, "score": mean score}`` sorted by the group.

    Examples:
        >>> from lc_evals.results import Result
        >>> rs = [Result("a", "t", "x", 1.0, "em", ("x",)), Result("b", "t", "y", 0.0, "em", ("x",))]
        >>> summarize(rs, by=("task",))
        [{'task': 't', 'n': 2, 'score': 0.5}]
    """
    groups: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    for r in results:
        groups[tuple(_key(r, f) for f in by)].append(r.score)
    rows = []
    for key in sorted(
        groups, key=lambda k: tuple((v is None, str(type(v)), v if v is not None else 0) for v in k)
    ):
        scores = groups[key]
        rows.append({**dict(zip(by, key)), "n": len(scores), "score": sum(scores) / len(scores)})
    return rows


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """A Markdown table of :func:`summarize` rows (scores as percentages)."""
    if not rows:
        return "(no results)"
    cols = list(rows[0])
    head = "| " + " | ".join(cols) + " |"
    rule = "| " + " | ".join("---:" if c in ("n", "score") else "---" for c in cols) + " |"
    lines = [head, rule]
    for row in rows:
        cells = [f"{100 * row[c]:.1f}" if c == "score" else str(row[c]) for c in cols]
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
    unit = next(
        (r.metadata.get("length_unit") for r in results if r.metadata.get("length_unit")), "tokens"
    )
    ax.set_xlabel(f"context length ({unit})")
    ax.set_ylabel("needle depth")
    for i in range(len(depths)):
        for j in range(len(lengths)):
            if not math.isnan(grid[i][j]):
                ax.text(j, i, f"{100 * grid[i][j]:.0f}", ha="center", va="center", fontsize=7)
    ax.set_title(title or f"NIAH accuracy{'' if task is None else f' ({task})'}")
    fig.colorbar(im, ax=ax, label="score")
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


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
    unit = next(
        (r.metadata.get("length_unit") for r in results if r.metadata.get("length_unit")), "tokens"
    )
    ax.set_xlabel(f"context length ({unit})")
    ax.set_ylabel("mean score")
    ax.set_title(title or "accuracy vs context length")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
