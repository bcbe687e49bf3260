"""Command line: ``lc-tskd run`` (grid of experiments), ``datasets``, ``table``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lc_timeseries_kd.config import METHODS, GDPDConfig, TrainConfig
from lc_timeseries_kd.data import PAPER_EARLINESS, bundled_datasets

app = typer.Typer(
    help="Distillation from full to partial time series (GDPD and baselines).",
    no_args_is_help=True,
)


def _split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


@app.command()
def datasets() -> None:
    """List the classification datasets bundled with the installed aeon wheel."""
    for name in bundled_datasets():
        typer.echo(name)


@app.command()
def run(
    datasets: str = typer.Option(
        "GunPoint,ItalyPowerDemand,ArrowHead,OSULeaf,BasicMotions,JapaneseVowels",
        help="Comma-separated bundled dataset names.",
    ),
    earliness: str = typer.Option(
        ",".join(f"{e:g}" for e in PAPER_EARLINESS), help="Comma-separated fractions in (0, 1]."
    ),
    seeds: str = typer.Option("0,1,2", help="Comma-separated integer seeds."),
    methods: str = typer.Option(",".join(METHODS), help="Subset of none,logit,fitnet,gdpd."),
    arch: str = typer.Option("fcn", help="fcn or lstm."),
    epochs: int = typer.Option(60, help="Training epochs of the students."),
    teacher_epochs: int = typer.Option(0, help="Teacher epochs (0: same as --epochs)."),
    warmup: int = typer.Option(20, help="GDPD / FitNet warm-up epochs."),
    lr: float = typer.Option(1e-3, help="Adam learning rate."),
    batch_size: int = typer.Option(32, help="Minibatch size."),
    length: int = typer.Option(100, help="Resampled series length."),
    widths: str = typer.Option("128,256,128", help="FCN channels of the three blocks."),
    hidden: int = typer.Option(100, help="LSTM units per layer."),
    layers: int = typer.Option(3, help="LSTM layers."),
    gdpd_weight: float = typer.Option(1.0, help="Weight of the GDPD terms."),
    weight_grid: str = typer.Option(
        "",
        help="Comma-separated weights of logit KD and GDPD, picked per cell by "
        "validation loss (empty: the fixed weights).",
    ),
    prior_hidden: int = typer.Option(256, help="Width of the GDPD noise predictor."),
    steps: int = typer.Option(5, help="DDIM steps."),
    prior_steps: int = typer.Option(0, help="Extra prior pre-training steps (GDPD)."),
    baselines: str = typer.Option(
        "",
        help="Comma-separated aeon baselines trained on the same prefixes "
        "(minirocket_lr, minirocket_ridge, quant).",
    ),
    rerun: bool = typer.Option(
        False, help="Recompute cells of OUT that were run with other settings."
    ),
    threads: int = typer.Option(0, help="torch threads (0 keeps torch's default)."),
    out: Annotated[Path, typer.Option(help="Output directory (resumable).")] = Path(
        "lc-tskd-results"
    ),
) -> None:
    """Run datasets x earliness x seeds x methods; reuse cells finished in OUT.

    OUT is keyed by a hash of the settings: a directory holding results of other
    settings is refused (or, with --rerun, its cells are recomputed).
    """
    import torch

    from lc_timeseries_kd.experiment import results_table, run_grid

    if threads > 0:
        torch.set_num_threads(threads)
    try:
        w = tuple(int(v) for v in _split(widths))
        cfg = TrainConfig(
            arch=arch,
            hidden=hidden,
            layers=layers,
            widths=w,  # type: ignore[arg-type]
            length=length,
            epochs=epochs,
            teacher_epochs=teacher_epochs or None,
            warmup_epochs=warmup,
            batch_size=batch_size,
            lr=lr,
            gdpd=GDPDConfig(
                weight=gdpd_weight,
                inference_steps=steps,
                prior_pretrain_steps=prior_steps,
                hidden=prior_hidden,
            ),
        )
        grid = [float(v) for v in _split(weight_grid)] if weight_grid else None
        results = run_grid(
            _split(datasets),
            [float(e) for e in _split(earliness)],
            [int(s) for s in _split(seeds)],
            _split(methods),
            cfg,
            out,
            weight_grid=grid,
            baselines=_split(baselines),
            rerun=rerun,
        )
    except ValueError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(code=2) from err
    table = results_table(results)
    (out / "table.md").write_text(table + "\n")
    typer.echo(table)


@app.command()
def table(
    out: Annotated[Path, typer.Argument(help="Output directory of a run.")],
    metric: str = typer.Option("auc_prc", help="auc_prc or accuracy."),
) -> None:
    """Print the results table (mean over seeds, %) of the finished cells in OUT."""
    from lc_timeseries_kd.experiment import load_results, results_table

    typer.echo(results_table(load_results(out), metric))


if __name__ == "__main__":  # pragma: no cover
    app()
