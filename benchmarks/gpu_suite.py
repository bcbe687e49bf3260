"""Every GPU check and benchmark in one pass, with a CPU smoke mode for CI.

On a CUDA machine it runs, one after the other, each in its own process with its own
time limit (so one slow or failing step does not cost the others), and writes JSON:

====================  =======  ===================================================  ======
step                  limit s  what                                                 H200 s
====================  =======  ===================================================  ======
``env``                    20  nvidia-smi, torch / triton / transformers / fla           5
                               versions (``out/env.json``)
``fsa_vs_nsa``            105  lc-kernels selected attention: FSA order vs NSA          90
                               order vs fla ``parallel_nsa`` vs SDPA, T 8K..128K,
                               G 1..16, latency + peak memory; stops starting
                               cases after ``--budget-s 75`` (skipped ones listed)
``fsa_profile``            40  FSA host vs kernel time, ``FSA_STEPS`` sweep             30
``decode_sparse``          35  lc-kernels decode kernels vs SDPA (``--budget-s 20``)    30
``dssa_stage1``            35  lc-attention DSSA stage 1: fused kernel vs chunked       20
``dssa_speed``             50  DSSA vs dense, layer and 30-layer model, 2 configs       40
``lychee_speed``           45  LycheeDecode vs full attention (``--budget-s 25``)       45
``oomb_gpu``               65  lc-train OOMB paged kernels and training step            58
``pytest_gpu``             75  compiled-kernel tests (bf16 included); at the limit      75
                               it is interrupted and ``out/pytest_gpu.json`` counts
                               what ran (status ``timeout``)
====================  =======  ===================================================  ======

The limits add up to 470 s, and ``--total-s`` (default 475) caps the whole run: a step
never gets more than what is left, and one that cannot get 10 s is reported as
``no_time``, so a full run stays under 8 minutes (about 6.5 expected). The H200 column
is an estimate from the previous GPU runs (the ``wall_s`` of the JSONs under
``docs/benchmarks/``): fsa_vs_nsa took 63 s for the old 4 x 4 grid (T <= 64K, G <= 8),
whose slowest calls (NSA order fwd+bwd, 0.4 s at 64K, about 0.8 s at 128K; SDPA fwd+bwd
at 128K, G = 16, about 1.8 s) are now timed as the median of 3 calls instead of
``do_bench``; decode_sparse 30 s (budget-bound); dssa_speed 22 s for one configuration
(now two); oomb_gpu 52 s; lychee_speed hit a 70 s limit before its 128K row, so it now
has a budget; dssa_stage1 has not run on a GPU yet. Results land where the CPU runs put
theirs (``docs/benchmarks/...``); RESULTS_DIR receives ``summary.json`` (per step:
status ``ok``/``failed``/``timeout``/``bad_output``/``no_time``, exit code, seconds,
CPU seconds, limit, output files, note), ``summary.txt`` (one line per step),
``logs/<step>.log`` and ``results.tgz`` (the logs, the summary and every file the steps
wrote), refreshed after each step. Where ``PYTHONDONTWRITEBYTECODE`` is set, the steps
keep their bytecode under ``~/.cache/lc-gpu-suite/pycache`` instead (nine fresh
interpreters would otherwise recompile torch nine times).

``--smoke`` (or ``SMOKE=1``) runs every step on CPU instead: tiny sizes, Triton
kernels under ``TRITON_INTERPRET=1`` (set in each step's environment before triton is
imported), no CUDA device visible, every JSON written to ``RESULTS_DIR/out/`` (never
over ``docs/benchmarks``). Each output must exist, be written by the step, parse and
hold its expected keys, or the step fails. What a step cannot do on CPU is said in its
``note`` (``env``: no GPU to report; ``pytest_gpu``: collection only, the tests
themselves run on CPU in the per-package test sessions; ``dssa_speed`` and
``lychee_speed``: their CPU path, the Triton kernels being covered by the other
steps). About 100 s of CPU time in all; two steps run at once (``--jobs 2``), which is
about a minute on two idle cores (two minutes on a loaded one). Exit status 0 only if
every selected step is ok. ``tests-integration/test_gpu_suite_smoke.py`` runs it.

    bash benchmarks/gpu_suite.sh [RESULTS_DIR]          # default /tmp/gpu_suite
    STEPS="pytest_gpu fsa_vs_nsa" bash benchmarks/gpu_suite.sh   # only the named steps
    SMOKE=1 bash benchmarks/gpu_suite.sh                # CPU smoke, /tmp/gpu_suite_smoke
    uv run python benchmarks/gpu_suite.py --smoke [--results DIR] [--steps ...] [--jobs 2]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "benchmarks"
TOTAL_S = 475.0
MIN_STEP_S = 10.0
SMOKE_LIMIT_S = 150.0  # smoke mode: sizes bound the time, the limit only catches a hang
SMOKE_TOTAL_S = 600.0
GRACE_S = 10.0  # after SIGINT at the limit, before SIGKILL (pytest writes its report)

# Tests of compiled kernels (the first ones run first; later files may not be reached).
PYTEST_FILES = [
    "packages/lc-kernels/tests/test_selected_attention.py",
    "packages/lc-kernels/tests/test_selected_attention_errors.py",
    "packages/lc-kernels/tests/test_paged_triton.py",
    "packages/lc-train/tests/test_oomb_triton.py",
    "packages/lc-kernels/tests/test_paged.py",
    "packages/lc-kernels/tests/test_package.py",
    "packages/lc-kernels/tests/test_decode_triton.py",
    "packages/lc-kernels/tests/test_compressed_attention.py",
    "packages/lc-kernels/tests/test_decode_reference.py",
    "packages/lc-kernels/tests/test_group_block_scores.py",
    "packages/lc-attention/tests/test_dssa_fused_stage1.py",
]
PYTEST_GLOBS = ["packages/lc-kernels/tests/test_*.py"]  # new kernel tests join at the end


@dataclasses.dataclass(frozen=True)
class Step:
    """One step: its command on a GPU and in smoke mode, and the JSON files it must write.

    Commands are argument lists run with the suite's interpreter; ``{out}`` is replaced by
    the smoke output directory, ``{budget}`` by the step's limit minus ``budget_margin``
    seconds (for the scripts that stop starting new cases after ``--budget-s``).
    """

    name: str
    limit_s: float
    gpu: list[str]
    smoke: list[str]
    outputs: list[str]  # GPU mode: paths under docs/benchmarks
    smoke_outputs: list[str]  # smoke mode: paths under the output directory
    keys: list[str]  # top-level keys every output must hold
    smoke_note: str = ""
    budget_margin: float = 0.0


BENCH = "benchmarks"
KB = "packages/lc-kernels/benchmarks"
DSSA_CONFIGS = [
    "--config",
    "published:",
    "--config",
    "training_free:kernel_size=4,stride=4,query_block=1",
]

STEPS = [
    Step(
        "env", 20,
        ["benchmarks/gpu_suite.py", "--env-report", "{out}/env.json"],
        ["benchmarks/gpu_suite.py", "--env-report", "{out}/env.json"],
        ["env.json"], ["env.json"], ["python", "torch", "triton", "transformers", "cuda"],
        smoke_note="no CUDA device in smoke mode: versions only",
    ),
    Step(
        "fsa_vs_nsa", 105,
        [f"{KB}/fsa_vs_nsa.py", "--device", "cuda", "--budget-s", "{budget}"],
        [f"{KB}/fsa_vs_nsa.py", "--smoke", "--out", "{out}"],
        ["lc-kernels/fsa_vs_nsa_gpu.json"], ["fsa_vs_nsa_smoke.json"],
        ["config", "fla", "correctness", "timings", "summary", "wall_s"],
        smoke_note="Triton interpreter, T = 16, G = 2; fla not timed (needs CUDA)",
        budget_margin=30,
    ),
    Step(
        "fsa_profile", 40,
        [f"{KB}/fsa_profile.py"],
        [f"{KB}/fsa_profile.py", "--smoke", "--out", "{out}"],
        ["lc-kernels/fsa_profile_gpu.json"], ["fsa_profile_smoke.json"],
        ["machine", "cases", "fsa_steps_sweep"],
        smoke_note="Triton interpreter, CPU-only profile",
    ),
    Step(
        "decode_sparse", 35,
        [f"{KB}/decode_sparse.py", "--device", "cuda", "--budget-s", "{budget}"],
        [f"{KB}/decode_sparse.py", "--smoke", "--contexts", "48", "--block-size", "16",
         "--out", "{out}"],
        ["lc-kernels-decode/decode_sparse_gpu.json"], ["decode_sparse_smoke.json"],
        ["config", "correctness", "timings", "wall_s"],
        smoke_note="Triton interpreter, one 48-token context",
        budget_margin=15,
    ),
    Step(
        "dssa_stage1", 35,
        [f"{BENCH}/dssa_stage1.py", "--device", "cuda", "--lengths", "8192", "16384", "32768", "65536"],
        [f"{BENCH}/dssa_stage1.py", "--device", "cpu", "--fused-backend", "triton",
         "--lengths", "256", "--reps", "1", "--out", "{out}/dssa_stage1_smoke.json"],
        ["lc-attention-dssa/stage1_cuda.json"], ["dssa_stage1_smoke.json"],
        ["machine", "dtype", "rows"],
        smoke_note="fused Triton kernel under the interpreter, 256 keys",
    ),
    Step(
        "dssa_speed", 50,
        [f"{BENCH}/dssa_speed.py", "--device", "cuda", "--reps", "5", "--decode-steps", "8",
         "--lengths", "8192", "16384", "32768", "65536", "--model-lengths", "8192", "16384",
         "32768", "--layers", "30", *DSSA_CONFIGS],
        [f"{BENCH}/dssa_speed.py", "--device", "cpu", "--random-weights", "--reps", "1",
         "--model-reps", "1", "--decode-steps", "1", "--lengths", "1152", "--model-lengths",
         "1152", "--layers", "1", *DSSA_CONFIGS, "--out", "{out}/dssa_speed_smoke.json"],
        ["lc-attention-dssa/speed_gpu.json"], ["dssa_speed_smoke.json"],
        ["configs", "machine", "rows"],
        smoke_note="CPU path (PyTorch), 1152 tokens, 1 layer: its Triton kernels run in "
        "fsa_vs_nsa and dssa_stage1",
    ),
    Step(
        "lychee_speed", 45,
        [f"{BENCH}/lychee_speed.py", "--device", "cuda", "--no-dynamic", "--reps", "3",
         "--steps", "8", "--lengths", "8192", "16384", "32768", "65536", "131072",
         "--budget-s", "{budget}"],
        [f"{BENCH}/lychee_speed.py", "--device", "cpu", "--random-weights", "--no-dynamic",
         "--reps", "1", "--steps", "1", "--lengths", "320", "--topk", "64",
         "--out", "{out}/lychee_speed_smoke.json"],
        ["lc-attention-lychee/speed_gpu.json"], ["lychee_speed_smoke.json"],
        ["model", "roles", "machine", "rows"],
        smoke_note="CPU path (batched PyTorch), 320 tokens: the decode kernels run in "
        "decode_sparse",
        budget_margin=20,
    ),
    Step(
        "oomb_gpu", 65,
        ["packages/lc-train/benchmarks/oomb_gpu.py"],
        ["packages/lc-train/benchmarks/oomb_gpu.py", "--device", "cpu", "--smoke",
         "--out", "{out}"],
        ["lc-train-oomb/oomb_gpu.json"], ["oomb_gpu_cpu.json"],
        ["config", "kernel", "training", "wall_s"],
        smoke_note="Triton interpreter, one layer, 96 tokens, float32 only",
    ),
    Step(
        "pytest_gpu", 75,
        ["benchmarks/gpu_suite.py", "--pytest-report", "{out}/pytest_gpu.json", "--",
         "-m", "not model and not slow"],
        ["benchmarks/gpu_suite.py", "--pytest-report", "{out}/pytest_gpu.json", "--",
         "-m", "not model and not slow", "--collect-only"],
        ["pytest_gpu.json"], ["pytest_gpu.json"],
        ["collected", "passed", "failed", "skipped", "exitstatus"],
        smoke_note="collection only: these tests run on CPU (interpreter) in the "
        "per-package test sessions; compiled and bf16 only on a GPU",
    ),
]  # fmt: skip


def _pytest_files() -> list[str]:
    files = [f for f in PYTEST_FILES if (ROOT / f).exists()]
    for pattern in PYTEST_GLOBS:
        files += sorted(str(p.relative_to(ROOT)) for p in ROOT.glob(pattern))
    return list(dict.fromkeys(files))


# ----------------------------------------------------------------- helper subcommands


def env_report(path: Path) -> None:
    """Write the machine's versions and device to ``path`` (the ``env`` step)."""
    import torch
    import transformers
    import triton

    cuda = torch.cuda.is_available()
    smi = shutil.which("nvidia-smi")
    report: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "transformers": transformers.__version__,
        "cuda": torch.version.cuda if cuda else None,
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "triton_interpret": os.environ.get("TRITON_INTERPRET", ""),
    }
    try:
        import fla  # type: ignore[import-not-found]

        report["fla"] = getattr(fla, "__version__", "unknown")
    except Exception as exc:
        report["fla"] = f"not importable: {type(exc).__name__}"
    if smi:
        run = subprocess.run([smi], capture_output=True, text=True, timeout=10)
        report["nvidia_smi"] = run.stdout
    print(json.dumps({k: v for k, v in report.items() if k != "nvidia_smi"}, indent=1))
    print(report.get("nvidia_smi", "no nvidia-smi"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2))


class _Counter:
    """pytest plugin: counts outcomes and writes them as JSON when the session ends
    (also when it is interrupted by SIGINT at the step's time limit)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.counts = {"collected": 0, "passed": 0, "failed": 0, "skipped": 0, "errors": 0}
        self.failures: list[str] = []
        self.t0 = time.time()

    def pytest_collection_finish(self, session: Any) -> None:
        self.counts["collected"] = len(session.items)  # after -m / -k deselection

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.when == "call" or report.outcome != "passed":
            if report.outcome == "failed":
                key = "failed" if report.when == "call" else "errors"
                self.failures.append(f"{report.nodeid} ({report.when})")
            else:
                key = report.outcome
            self.counts[key] += 1

    def pytest_sessionfinish(self, session: Any, exitstatus: int) -> None:
        result = {
            **self.counts,
            "exitstatus": int(exitstatus),
            "interrupted": int(exitstatus) == 2,
            "failures": self.failures[:50],
            "files": _pytest_files(),
            "wall_s": time.time() - self.t0,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(result, indent=2))


def pytest_report(path: Path, args: list[str]) -> int:
    """Run pytest on the compiled-kernel test files; write the outcome counts to ``path``."""
    import importlib.util

    import pytest

    extra = ["--timeout", "60"] if importlib.util.find_spec("pytest_timeout") else []
    return int(
        pytest.main(
            ["-v", "-p", "no:cacheprovider", *extra, *args, *_pytest_files()],
            plugins=[_Counter(path)],
        )
    )


# --------------------------------------------------------------------------- driver


def _check_output(path: Path, keys: list[str], since: float) -> str | None:
    """None if ``path`` was written after ``since``, parses as JSON and holds ``keys``."""
    if not path.exists():
        return f"{path} was not written"
    if path.stat().st_mtime < since - 1:
        return f"{path} is older than this step"
    try:
        data = json.loads(path.read_text())
    except ValueError as exc:
        return f"{path} is not JSON: {exc}"
    missing = [k for k in keys if k not in data]
    return f"{path} lacks keys {missing}" if missing else None


def _wait(proc: subprocess.Popen, timeout: float) -> tuple[int | None, float | None]:
    """Exit code and CPU seconds (user + system, its own and its children's) of ``proc``,
    or ``(None, None)`` if it is still running after ``timeout`` seconds."""
    deadline = time.time() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, round(usage.ru_utime + usage.ru_stime, 1)
        if time.time() > deadline:
            return None, None
        time.sleep(0.1)


class Suite:
    def __init__(self, args: argparse.Namespace) -> None:
        self.smoke = args.smoke
        self.res = args.results
        self.out = self.res / "out"
        self.logs = self.res / "logs"
        self.total_s = args.total_s
        self.python = args.python
        self.start = time.time()
        self.rows: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        if self.smoke:
            shutil.rmtree(self.out, ignore_errors=True)  # stale files must not pass the check
        for d in (self.out, self.logs):
            d.mkdir(parents=True, exist_ok=True)
        self.env = self._env()

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        src = [str(p) for p in sorted((ROOT / "packages").glob("*/src"))]
        env["PYTHONPATH"] = os.pathsep.join(
            [*src, str(ROOT / "benchmarks"), *filter(None, [env.get("PYTHONPATH")])]
        )
        env.update(PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1", CI=env.get("CI", "1"))
        if self.smoke:
            env.update(TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
        if env.get("PYTHONDONTWRITEBYTECODE") and "PYTHONPYCACHEPREFIX" not in env:
            # each step is a fresh interpreter: without cached bytecode every one of them
            # recompiles torch and transformers (5-10 s each); keep the bytecode out of the
            # installed packages, in a cache directory of its own
            del env["PYTHONDONTWRITEBYTECODE"]
            cache = Path(env.get("XDG_CACHE_HOME", Path.home() / ".cache"))
            env["PYTHONPYCACHEPREFIX"] = str(cache / "lc-gpu-suite" / "pycache")
        return env

    def _argv(self, step: Step, limit: float) -> list[str]:
        argv = step.smoke if self.smoke else step.gpu
        budget = f"{max(5.0, limit - step.budget_margin):.0f}"
        return [self.python] + [a.format(out=self.out, budget=budget) for a in argv]

    def _outputs(self, step: Step) -> list[Path]:
        if self.smoke or step.name in ("env", "pytest_gpu"):
            names = step.smoke_outputs if self.smoke else step.outputs
            return [self.out / n for n in names]
        return [DOCS / n for n in step.outputs]

    def run_step(self, step: Step) -> dict[str, Any]:
        left = self.total_s - (time.time() - self.start)
        step_limit = SMOKE_LIMIT_S if self.smoke else step.limit_s
        limit = min(step_limit, left - 1)
        row: dict[str, Any] = {"name": step.name, "limit_s": step_limit}
        if self.smoke and step.smoke_note:
            row["note"] = step.smoke_note
        if limit < min(MIN_STEP_S, step_limit):
            row.update(status="no_time", rc=None, seconds=0.0)
            row["note"] = f"not run: {left:.0f} s left of the total {self.total_s:.0f} s"
            return self._record(row)
        argv = self._argv(step, limit)
        log = self.logs / f"{step.name}.log"
        row.update(command=" ".join(argv[1:]), log=str(log), effective_limit_s=round(limit, 1))
        print(f"== {step.name} (limit {limit:.0f}s)", flush=True)
        t0 = time.time()
        with log.open("w") as fh:
            proc = subprocess.Popen(
                argv, cwd=ROOT, env=self.env, stdout=fh, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
            rc, cpu = _wait(proc, limit)
            timed_out = rc is None
            if timed_out:
                os.killpg(proc.pid, signal.SIGINT)  # pytest and friends write their report
                rc, cpu = _wait(proc, GRACE_S)
                if rc is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    rc, cpu = _wait(proc, 60)
        row.update(rc=rc, seconds=round(time.time() - t0, 1), cpu_s=cpu)
        problems = [p for p in (_check_output(o, step.keys, t0) for o in self._outputs(step)) if p]
        row["outputs"] = [str(o) for o in self._outputs(step)]
        if timed_out:
            row["status"] = "timeout"
        elif rc != 0:
            row["status"] = "failed"
        elif problems:
            row["status"] = "bad_output"
        else:
            row["status"] = "ok"
        if problems:
            row["problems"] = problems
        if row["status"] != "ok":
            tail = log.read_text(errors="replace").splitlines()[-15:]
            row["log_tail"] = tail
        return self._record(row)

    def _record(self, row: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.rows.append(row)
            line = f"{row['name']} {row['status']} rc={row['rc']} {row['seconds']}s"
            line += f" (cpu {row['cpu_s']}s)" if row.get("cpu_s") is not None else ""
            print(line + (f"  ({row['note']})" if "note" in row else ""), flush=True)
            for extra in row.get("problems", []) + row.get("log_tail", [])[-3:]:
                print(f"   {extra}", flush=True)
            self._write()
        return row

    def _write(self, done: bool = False) -> None:
        order = {s.name: i for i, s in enumerate(STEPS)}
        rows = sorted(self.rows, key=lambda r: order[r["name"]])
        summary = {
            "mode": "smoke" if self.smoke else "gpu",
            "started": datetime.datetime.fromtimestamp(self.start).isoformat(timespec="seconds"),
            "wall_s": round(time.time() - self.start, 1),
            "total_limit_s": self.total_s,
            "finished": done,
            "ok": done and all(r["status"] == "ok" for r in rows),
            "python": self.python,
            "steps": rows,
        }
        (self.res / "summary.json").write_text(json.dumps(summary, indent=2))
        (self.res / "summary.txt").write_text(
            "".join(f"{r['name']} {r['status']} rc={r['rc']} {r['seconds']}s\n" for r in rows)
            + (f"done in {summary['wall_s']}s\n" if done else "")
        )
        if not self.smoke:
            self._tarball()

    def _tarball(self) -> None:
        written = [
            p for p in DOCS.rglob("*") if p.is_file() and p.stat().st_mtime >= self.start - 1
        ]
        with tarfile.open(self.res / "results.tgz", "w:gz") as tar:
            for p in (self.res / "summary.json", self.res / "summary.txt"):
                tar.add(p, arcname=p.name)
            tar.add(self.logs, arcname="gpu_suite_logs")
            tar.add(self.out, arcname="out")
            for p in written:
                tar.add(p, arcname=str(p.relative_to(ROOT)))

    def run(self, steps: list[Step], jobs: int) -> bool:
        if jobs <= 1:
            for step in steps:
                self.run_step(step)
        else:
            with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
                list(pool.map(self.run_step, steps))
        self._write(done=True)
        ok = all(r["status"] == "ok" for r in self.rows)
        print(f"done in {time.time() - self.start:.0f}s: {'all ok' if ok else 'FAILED'}; "
              f"summary in {self.res / 'summary.json'}")  # fmt: skip
        return ok


def main() -> None:
    # the steps' helper commands: --env-report PATH, --pytest-report PATH -- PYTEST_ARGS...
    if sys.argv[1:2] == ["--env-report"]:
        env_report(Path(sys.argv[2]))
        return
    if sys.argv[1:2] == ["--pytest-report"]:
        raise SystemExit(pytest_report(Path(sys.argv[2]), [a for a in sys.argv[3:] if a != "--"]))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results_dir", nargs="?", type=Path, default=None)
    ap.add_argument("--results", type=Path, default=None, help="results directory")
    ap.add_argument(
        "--smoke",
        action="store_true",
        default=os.environ.get("SMOKE", "") not in ("", "0"),
        help="every step on CPU at tiny sizes (Triton interpreter); also SMOKE=1",
    )
    ap.add_argument(
        "--steps",
        nargs="+",
        default=os.environ.get("STEPS", "").split() or None,
        help=f"only these steps (also STEPS=...); default all: {' '.join(s.name for s in STEPS)}",
    )
    ap.add_argument(
        "--total-s",
        type=float,
        default=None,
        help=f"limit of the whole run (default {TOTAL_S:g}; smoke {SMOKE_TOTAL_S:g})",
    )
    ap.add_argument(
        "--jobs",
        type=int,
        default=2,
        help="steps run at once in smoke mode (default 2; a GPU run is always one at a time)",
    )
    ap.add_argument(
        "--dry-run", action="store_true", help="print each step's limit and command, run nothing"
    )
    ap.add_argument(
        "--python",
        default=os.environ.get("PY") or sys.executable,
        help="interpreter of the steps (default: $PY or this one)",
    )
    args = ap.parse_args()
    default = Path("/tmp/gpu_suite_smoke" if args.smoke else "/tmp/gpu_suite")
    args.results = (args.results or args.results_dir or default).resolve()
    if args.total_s is None:
        args.total_s = SMOKE_TOTAL_S if args.smoke else TOTAL_S
    unknown = set(args.steps or ()) - {s.name for s in STEPS}
    if unknown:
        ap.error(f"unknown steps {sorted(unknown)}; known: {[s.name for s in STEPS]}")
    steps = [s for s in STEPS if not args.steps or s.name in args.steps]
    if args.dry_run:
        total = 0.0
        for step in steps:
            limit = SMOKE_LIMIT_S if args.smoke else step.limit_s
            total += limit
            argv = step.smoke if args.smoke else step.gpu
            budget = f"{max(5.0, limit - step.budget_margin):.0f}"
            out = args.results / "out"
            print(f"{step.name:14s} {limit:5.0f}s  " + " ".join(
                a.format(out=out, budget=budget) for a in argv))  # fmt: skip
        print(f"sum of limits {total:.0f}s, total limit {args.total_s:.0f}s")
        return
    suite = Suite(args)
    ok = suite.run(steps, args.jobs if args.smoke else 1)
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
