"""The ``lc-evals`` command line: ``tasks``, ``generate``, ``ruler``, ``run``, ``report``,
``compare``, ``export``.

Examples::

    lc-evals generate niah_single -l 1024 -l 4096 --depth 0 --depth 0.5 --depth 1 \\
        -n 5 --seed 0 -o haystack=essay --out suite.jsonl
    lc-evals ruler -l 4096 -l 16384 -n 25 --tokenizer tokenizer.json --out ruler.jsonl
    lc-evals run suite.jsonl --system my_module:my_system --out results.jsonl
    lc-evals run suite.jsonl --endpoint http://127.0.0.1:8000/v1 --model m --workers 8 --out results.jsonl
    lc-evals report results.jsonl --out-dir report/
    lc-evals compare results.jsonl other.jsonl --by task,target_length
    lc-evals export results.jsonl --out-dir lm_eval_out/
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from lc_evals.endpoint import EndpointError, OpenAIChatModel
from lc_evals.errors import ResultsFileError, StaleResultsError

app = typer.Typer(
    name="lc-evals",
    help="Long-context task generators, evaluation harness and reports.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

F = TypeVar("F", bound=Callable[..., Any])
EXPECTED = (
    ValueError,
    TypeError,
    FileNotFoundError,
    ImportError,
    AttributeError,
    EndpointError,
    ResultsFileError,
    StaleResultsError,
)


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=2)


def _friendly(fn: F) -> F:
    """Turn expected errors into one line on stderr and exit status 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except EXPECTED as exc:
            raise _fail(str(exc)) from None

    return wrapper  # type: ignore[return-value]


def _parse_options(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--option must look like key=value, got {pair!r}")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def load_object(spec: str) -> Any:
    """Import ``module:attr`` (or ``path/to/file.py:attr``); a class is instantiated."""
    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"expected an import path 'module:attr', got {spec!r}")
    if module_name.endswith(".py"):
        path = Path(module_name)
        if not path.exists():
            raise FileNotFoundError(f"no such file: {path}")
        mod_spec = importlib.util.spec_from_file_location(path.stem, path)
        if mod_spec is None or mod_spec.loader is None:  # pragma: no cover
            raise ImportError(f"cannot import {path}")
        module = importlib.util.module_from_spec(mod_spec)
        sys.modules[path.stem] = module
        mod_spec.loader.exec_module(module)
    else:
        if "" not in sys.path:
            sys.path.insert(0, "")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            raise ImportError(f"cannot import module {module_name!r} ({exc})") from None
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise AttributeError(f"module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj() if isinstance(obj, type) else obj


def _load_tokenizer(spec: str | None) -> Any:
    if spec is None:
        return None
    if spec.endswith(".json") and Path(spec).exists():
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ImportError(
                "reading tokenizer.json needs the 'tokenizers' package: pip install tokenizers"
            ) from exc
        return Tokenizer.from_file(spec)
    if ":" in spec:
        return load_object(spec)
    raise FileNotFoundError(
        f"--tokenizer must be an existing tokenizer.json or 'module:attr', got {spec!r}"
    )


@app.command("tasks")
def tasks_command() -> None:
    """List the registered tasks with their default scorers."""
    from lc_evals.registry import available_tasks, task_spec

    for name in available_tasks():
        spec = task_spec(name)
        typer.echo(f"{name:<20} {spec.scorer:<13} {spec.description}")


@app.command("generate")
@_friendly
def generate_command(
    tasks: Annotated[list[str], typer.Argument(help="task names (see `lc-evals tasks`)")],
    out: Annotated[Path, typer.Option("--out", help="suite file to write (JSON Lines)")],
    length: Annotated[
        list[int], typer.Option("--length", "-l", help="target length; repeat for several")
    ],
    n: Annotated[int, typer.Option("--n", "-n", help="items per (task, length, depth) cell")] = 1,
    seed: Annotated[int, typer.Option(help="explicit seed")] = 0,
    depth: Annotated[
        list[float] | None, typer.Option(help="needle depth in [0, 1]; repeat for several")
    ] = None,
    option: Annotated[
        list[str] | None, typer.Option("--option", "-o", help="task option key=value (JSON values)")
    ] = None,
    tokenizer: Annotated[
        str | None, typer.Option(help="tokenizer.json path or 'module:attr'; default: characters")
    ] = None,
) -> None:
    """Generate a suite (tasks x lengths x depths) and write it as JSON Lines."""
    from lc_evals.results import write_suite
    from lc_evals.suite import make_suite

    items = make_suite(
        tasks,
        length,
        n=n,
        seed=seed,
        depths=depth or None,
        tokenizer=_load_tokenizer(tokenizer),
        **_parse_options(option or []),
    )
    write_suite(items, out)
    typer.echo(f"wrote {len(items)} items to {out}")


@app.command("ruler")
@_friendly
def ruler_command(
    out: Annotated[Path, typer.Option("--out", help="suite file to write (JSON Lines)")],
    length: Annotated[
        list[int], typer.Option("--length", "-l", help="target length; repeat for several")
    ],
    n: Annotated[int, typer.Option("--n", "-n", help="items per configuration and length")] = 1,
    seed: Annotated[int, typer.Option(help="explicit seed")] = 0,
    config: Annotated[
        list[str] | None,
        typer.Option("--config", "-c", help="RULER configuration; repeat (default: all 13)"),
    ] = None,
    template: Annotated[
        str, typer.Option(help="'ruler' (RULER's wording) or 'plain' (lc-evals' question)")
    ] = "ruler",
    length_counts: Annotated[
        str, typer.Option(help="'prompt' (whole prompt + reserve, as RULER) or 'context'")
    ] = "prompt",
    reserve: Annotated[
        int | None,
        typer.Option(help="units kept for the answer; default: RULER's tokens_to_generate"),
    ] = None,
    tokenizer: Annotated[
        str | None, typer.Option(help="tokenizer.json path or 'module:attr'; default: characters")
    ] = None,
) -> None:
    """Generate RULER's configurations (ruler_suite) and write them as JSON Lines."""
    from lc_evals.results import write_suite
    from lc_evals.ruler_configs import ruler_suite

    items = ruler_suite(
        length,
        n=n,
        seed=seed,
        configs=config or None,
        tokenizer=_load_tokenizer(tokenizer),
        template=template,
        length_counts=length_counts,
        reserve=reserve,
    )
    write_suite(items, out)
    typer.echo(f"wrote {len(items)} items to {out}")


@app.command("run")
@_friendly
def run_command(
    suite: Annotated[Path, typer.Argument(help="suite file written by `lc-evals generate`")],
    out: Annotated[Path, typer.Option("--out", help="results file (appended to; reruns resume)")],
    system: Annotated[
        str | None,
        typer.Option(help="'module:attr' of a ChatModel or a callable (TaskItem) -> str"),
    ] = None,
    endpoint: Annotated[
        str | None, typer.Option(help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")
    ] = None,
    model: Annotated[str | None, typer.Option(help="model name for --endpoint")] = None,
    workers: Annotated[int, typer.Option(help="parallel requests (threads)")] = 1,
    executor: Annotated[str, typer.Option(help="local | serial | ray")] = "local",
    scorer: Annotated[str | None, typer.Option(help="override every task's default scorer")] = None,
    max_tokens: Annotated[
        int | None, typer.Option(help="generation limit sent to chat models")
    ] = None,
    temperature: Annotated[
        float | None, typer.Option(help="sampling temperature sent to chat models")
    ] = None,
    rerun_stale: Annotated[
        bool,
        typer.Option(
            "--rerun-stale",
            help="results in --out made by another system, settings or suite are moved to "
            "<stem>.stale.jsonl and evaluated again (default: refuse)",
        ),
    ] = False,
) -> None:
    """Evaluate a system on a suite; finished items are never redone.

    A result in --out is reused only if it was produced from the same item by the same
    system and settings; a run manifest is written beside it (<stem>.manifest.json).
    """
    from lc_evals.harness import run
    from lc_evals.report import format_table, summarize
    from lc_evals.results import load_suite

    if (system is None) == (endpoint is None):
        raise ValueError("give exactly one of --system or --endpoint")
    if endpoint is not None and not model:
        raise ValueError("--endpoint needs --model")
    items = load_suite(suite)
    target = load_object(system) if system is not None else OpenAIChatModel(endpoint, model)  # type: ignore[arg-type]
    chat_options: dict[str, Any] = {
        k: v
        for k, v in {"max_tokens": max_tokens, "temperature": temperature}.items()
        if v is not None
    }
    if chat_options and not hasattr(target, "chat"):
        raise ValueError("--max-tokens/--temperature apply to chat models only")
    results = run(
        target,
        items,
        out,
        executor=executor,
        workers=workers,
        scorer=scorer,
        progress=sys.stderr.isatty(),
        on_mismatch="rerun" if rerun_stale else "error",
        **chat_options,
    )
    typer.echo(format_table(summarize(results)))
    typer.echo(f"{len(results)} results in {out}")


@app.command("report")
@_friendly
def report_command(
    results: Annotated[Path, typer.Argument(help="results file written by `lc-evals run`")],
    out_dir: Annotated[
        Path | None, typer.Option(help="write summary.json, summary.md and PNG plots here")
    ] = None,
    by: Annotated[str, typer.Option(help="comma-separated grouping fields")] = "task,target_length",
) -> None:
    """Print a summary table; with --out-dir also write plots (NIAH heat map, accuracy vs length)."""
    from lc_evals.report import format_table, plot_accuracy_vs_length, plot_niah_heatmap, summarize
    from lc_evals.results import load_results

    rows_in = load_results(results, torn_tail="skip")
    if not rows_in:
        raise ValueError(f"{results} holds no results")
    fields = [f.strip() for f in by.split(",") if f.strip()]
    rows = summarize(rows_in, by=fields)
    table = format_table(rows)
    typer.echo(table)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "summary.json").write_text(json.dumps(rows, indent=2) + "\n")
        (out_dir / "summary.md").write_text(table + "\n")
        written = [plot_accuracy_vs_length(rows_in, out_dir / "accuracy_vs_length.png")]
        for task in sorted(
            {r.task for r in rows_in if isinstance(r.metadata.get("depth"), int | float)}
        ):
            written.append(plot_niah_heatmap(rows_in, out_dir / f"heatmap_{task}.png", task=task))
        typer.echo("wrote " + ", ".join(str(p) for p in written))


@app.command("compare")
@_friendly
def compare_command(
    a: Annotated[Path, typer.Argument(help="results of system A")],
    b: Annotated[Path, typer.Argument(help="results of system B (paired with A by item id)")],
    by: Annotated[str, typer.Option(help="comma-separated grouping fields")] = "task",
) -> None:
    """Paired comparison of two runs on their common items (McNemar for accuracies)."""
    from lc_evals.report import compare, summarize
    from lc_evals.results import load_results

    ra, rb = load_results(a, torn_tail="skip"), load_results(b, torn_tail="skip")
    fields = [f.strip() for f in by.split(",") if f.strip()]
    groups = [row for row in summarize(ra, by=fields)]
    lines = [
        "| " + " | ".join([*fields, "n", "A", "B", "A-B", "95% CI", "p", "test"]) + " |",
        "| " + " | ".join(["---"] * len(fields) + ["---:"] * 6 + ["---"]) + " |",
    ]
    from lc_evals.report import _key

    for row in groups:
        key = tuple(row[f] for f in fields)
        sub_a = [r for r in ra if tuple(_key(r, f) for f in fields) == key]
        sub_b = [r for r in rb if tuple(_key(r, f) for f in fields) == key]
        try:
            c = compare(sub_a, sub_b)
        except ValueError:
            continue
        lines.append(
            "| "
            + " | ".join(
                [str(v) for v in key]
                + [
                    str(c["n"]),
                    f"{100 * c['mean_a']:.1f}",
                    f"{100 * c['mean_b']:.1f}",
                    f"{100 * c['diff']:+.1f}",
                    f"{100 * c['ci_low']:+.1f} to {100 * c['ci_high']:+.1f}",
                    f"{c['p_value']:.3g}",
                    c["method"],
                ]
            )
            + " |"
        )
    total = compare(ra, rb)
    typer.echo("\n".join(lines))
    typer.echo(
        f"all {total['n']} paired items: A-B = {100 * total['diff']:+.1f} points "
        f"(95% CI {100 * total['ci_low']:+.1f} to {100 * total['ci_high']:+.1f}), "
        f"p = {total['p_value']:.3g} ({total['method']})"
    )


@app.command("export")
@_friendly
def export_command(
    results: Annotated[Path, typer.Argument(help="results file written by `lc-evals run`")],
    out_dir: Annotated[Path, typer.Option(help="folder for results_<date>.json and samples")],
) -> None:
    """Write lm-evaluation-harness-style results JSON and per-task sample JSONL."""
    from lc_evals.export import export_lm_eval
    from lc_evals.manifest import read_manifest
    from lc_evals.results import load_results

    rows = load_results(results, torn_tail="skip")
    try:
        manifest: dict[str, Any] | None = read_manifest(results)
    except FileNotFoundError:
        manifest = None
    model = manifest["runs"][-1]["system"] if manifest and manifest.get("runs") else None
    written = export_lm_eval(rows, out_dir, model=model, manifest=manifest)
    typer.echo("wrote " + ", ".join(str(p) for p in written))


def main() -> None:  # pragma: no cover
    app()
