"""Command line: ``lc-bandits run CONFIG`` runs an experiment described by a file.

The file is JSON or TOML with optional sections ``problem`` and ``learner`` (fields of
:class:`~lc_bandits.config.ProblemConfig` and :class:`~lc_bandits.config.LearnerConfig`)
and top-level ``policies``, ``name``, ``output_dir`` and ``record_every``::

    name = "small"
    output_dir = "results"
    policies = ["cqb_eps", "cqb_opt", "random"]

    [problem]
    horizon = 1000
    num_instances = 2
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tomllib
from collections.abc import Sequence
from typing import Any

from lc_bandits.config import ExperimentConfig

__all__ = ["load_config", "main"]


def load_config(path: str | pathlib.Path) -> ExperimentConfig:
    """Read an :class:`ExperimentConfig` from a ``.json`` or ``.toml`` file.

    Raises:
        FileNotFoundError: if the file does not exist.
        ValueError: on another suffix or invalid content.
    """
    p = pathlib.Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"config file {str(p)!r} does not exist")
    text = p.read_text(encoding="utf-8")
    data: Any
    if p.suffix == ".json":
        data = json.loads(text)
    elif p.suffix == ".toml":
        data = tomllib.loads(text)
    else:
        raise ValueError(f"config file {str(p)!r} must end in .json or .toml")
    return ExperimentConfig.from_dict(data)


def _error(err: BaseException | str, status: int) -> int:
    """Print ``lc-bandits: error: ...`` on one line of stderr and return ``status``."""
    text = str(err) if isinstance(err, str) else (str(err) or type(err).__name__)
    if isinstance(err, Exception) and not isinstance(err, OSError | ValueError):
        text = f"{type(err).__name__}: {text}"
    print(f"lc-bandits: error: {' '.join(text.split())}", file=sys.stderr)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``lc-bandits``; returns the exit status.

    Errors are reported as one ``lc-bandits: error: ...`` line on stderr, never a
    traceback: status 2 for an invalid config, 1 for a failure while running (the
    output directory is checked before the simulation starts).
    """
    parser = argparse.ArgumentParser(prog="lc-bandits", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run an experiment from a JSON or TOML config file")
    run.add_argument("config", help="path to the .json or .toml config")
    run.add_argument("--output-dir", help="override the config's output_dir")
    run.add_argument("--quiet", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)

    from dataclasses import replace

    from lc_bandits.experiment import run_experiment

    try:
        config = load_config(args.config)
        if args.output_dir is not None:
            config = replace(config, output_dir=args.output_dir)
        if config.output_dir is None:
            config = replace(config, output_dir=".")
    except (OSError, ValueError, TypeError, tomllib.TOMLDecodeError) as err:
        return _error(err, 2)
    try:
        result = run_experiment(config, progress=not args.quiet)
    except KeyboardInterrupt:
        return _error("interrupted", 130)
    except Exception as err:  # any failure of the run is reported as one line
        return _error(err, 1)
    for name, s in result.policies.items():
        if name != "oracle":
            print(
                f"{name:>10}: regret at T = {s.final_regret:8.3f} ± {s.final_regret_stderr:.3f}"
                f"   ({s.steps_per_second:,.0f} run-steps/s)"
            )
    print(f"wrote {pathlib.Path(config.output_dir or '.') / config.name}.json and .png")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
