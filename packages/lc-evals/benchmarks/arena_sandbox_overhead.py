"""What the arena's isolation costs per sandboxed run, side by side with no sandbox.

Three ways to run the same command on a copy of the ``arena_task.py`` repository, 20
times each, interleaved (so a busy machine slows all three alike):

* ``bare``: copy the repository and ``subprocess.run`` the command, nothing else;
* ``unsafe``: ``run_sandboxed(..., unsafe_no_isolation=True)``, the per-process layers
  only (rlimits, Landlock, seccomp, audit hook, supervisor);
* ``bubblewrap``: ``run_sandboxed(...)``, the default: bubblewrap namespaces plus the
  per-process layers.

Two commands: ``python -c pass`` (the fixed cost) and the repository's own pytest suite
(a realistic CI check). Reports the median wall time of each and the overhead of the
sandbox over ``bare`` (difference of medians, and ratio).

Run:  uv run python packages/lc-evals/benchmarks/arena_sandbox_overhead.py [runs]
Writes docs/benchmarks/lc-evals-arena/sandbox_overhead.json.
"""

from __future__ import annotations

import json
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from arena_task import write_task

from lc_evals.arena import SandboxLimits, isolation_status, run_sandboxed

OUT = pathlib.Path(__file__).resolve().parents[3] / "docs" / "benchmarks" / "lc-evals-arena"
COMMANDS = {
    "python -c pass": ["{python}", "-c", "pass"],
    "pytest (repository suite)": ["{python}", "-m", "pytest", "-q", "-p", "no:cacheprovider"],
}
ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def _bare(repo: pathlib.Path, argv: list[str]) -> float:
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        copy = pathlib.Path(tmp) / "repo"
        shutil.copytree(repo, copy, symlinks=True)
        cmd = [sys.executable if a == "{python}" else a for a in argv]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **ENV}
        proc = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, check=False)
        if proc.returncode != 0:
            raise SystemExit(f"bare run failed: {proc.stdout!r} {proc.stderr!r}")
    return time.perf_counter() - start


def _sandboxed(repo: pathlib.Path, argv: list[str], unsafe: bool) -> float:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run_sandboxed(
            repo, argv, env=ENV, limits=SandboxLimits(), unsafe_no_isolation=unsafe
        )
    seconds = time.perf_counter() - start
    if not result.ok:
        raise SystemExit(f"sandboxed run failed: {result}")
    return seconds


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    ok, why = isolation_status()
    if not ok:
        raise SystemExit(why)
    OUT.mkdir(parents=True, exist_ok=True)
    bwrap = subprocess.run(["bwrap", "--version"], capture_output=True, text=True, check=False)
    report: dict = {
        "machine": f"{os.cpu_count()}-core CPU ({platform.machine()}), shared with other jobs",
        "kernel": platform.release(),
        "python": platform.python_version(),
        "bubblewrap": bwrap.stdout.strip(),
        "runs_per_cell": runs,
        "statistic": "median wall seconds per run, copy + patch + run + cleanup included",
        "results": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        task = pathlib.Path(tmp)
        write_task(task)
        repo = task / "mathx"
        for name, argv in COMMANDS.items():
            times: dict[str, list[float]] = {"bare": [], "unsafe": [], "bubblewrap": []}
            _sandboxed(repo, argv, unsafe=False)  # warm the page cache and the probe
            for _ in range(runs):
                times["bare"].append(_bare(repo, argv))
                times["unsafe"].append(_sandboxed(repo, argv, unsafe=True))
                times["bubblewrap"].append(_sandboxed(repo, argv, unsafe=False))
            med = {k: statistics.median(v) for k, v in times.items()}
            row = {
                "median_s": {k: round(v, 4) for k, v in med.items()},
                "overhead_s": {k: round(med[k] - med["bare"], 4) for k in ("unsafe", "bubblewrap")},
                "ratio": {k: round(med[k] / med["bare"], 2) for k in ("unsafe", "bubblewrap")},
                "all_s": {k: [round(x, 4) for x in v] for k, v in times.items()},
            }
            report["results"][name] = row
            print(name, json.dumps({k: row[k] for k in ("median_s", "overhead_s", "ratio")}))
    (OUT / "sandbox_overhead.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
