"""One arena battle with the embedded SmolLM2-135M-Instruct, next to an oracle.

Both runs use the task of ``arena_task.py`` and the ``lc-agents arena`` command (run as
a subprocess; lc-evals itself imports no model code):

* ``smollm2``: the embedded model plays submitter and reviewer (self-play), greedy;
* ``oracle``: scripted replies, the gold patch and a careful test file, as a check that
  the pipeline can award a win when the outputs are right.

Run:  OMP_NUM_THREADS=1 uv run python packages/lc-evals/benchmarks/arena_smollm2.py [oracle] [smollm2]
(no names: both; one thread avoids spinning torch threads on a busy machine)
Writes docs/benchmarks/lc-evals-arena/{smollm2_battle.json, oracle_battle.json,
summary.json}.
"""

from __future__ import annotations

import json
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from arena_task import CORE, FIXED, REVIEW_TESTS, write_task

from lc_evals.arena import make_diff

OUT = pathlib.Path(__file__).resolve().parents[3] / "docs" / "benchmarks" / "lc-evals-arena"


def _arena(task: pathlib.Path, out: pathlib.Path, *extra: str) -> tuple[dict, float, str]:
    cmd = ["lc-agents", "arena", "--repo", str(task / "mathx"), "--issue", str(task / "issue.json")]
    cmd += ["--out", str(out), *extra]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    record = json.loads((out / "battles.jsonl").read_text().splitlines()[-1])
    return record, seconds, proc.stdout + proc.stderr


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    only = set(sys.argv[1:]) or {"oracle", "smollm2"}
    old = OUT / "summary.json"
    previous = json.loads(old.read_text()).get("runs", {}) if old.exists() else {}
    summary: dict = {
        "machine": f"2-core CPU ({platform.machine()}), shared",
        "python": platform.python_version(),
        "task": "mathx-clamp-upper (arena_task.py)",
        "runs": {k: v for k, v in previous.items() if k not in only},
    }
    with tempfile.TemporaryDirectory() as tmp:
        task = pathlib.Path(tmp)
        write_task(task)
        sub = task / "oracle_submitter.txt"
        sub.write_text("```diff\n" + make_diff("mathx/core.py", CORE, FIXED) + "```\n")
        rev = task / "oracle_reviewer.txt"
        rev.write_text("```diff\n" + make_diff("tests/test_issue.py", None, REVIEW_TESTS) + "```\n")
        runs = {
            "oracle": ("--scripted-submitter", str(sub), "--scripted-reviewer", str(rev)),
            "smollm2": ("--max-tokens", "384", "--retriever", "auto"),
        }
        for name, extra in runs.items():
            if name not in only:
                continue
            record, seconds, log = _arena(task, task / f"results-{name}", *extra)
            (OUT / f"{name}_battle.json").write_text(json.dumps(record, indent=2) + "\n")
            v = record["verdict"]
            summary["runs"][name] = {
                "seconds": round(seconds, 1),
                "winner": v["winner"],
                "reason": v["reason"],
                "patch_applied": v["patch_applied"],
                "patch_valid": v["patch_valid"],
                "tests_applied": v["tests_applied"],
                "tests_valid": v["tests_valid"],
                "tests_discriminative": v["tests_discriminative"],
                "containment_events": record["events"],
                "isolation": record.get("isolation"),
                "patch_error": (record["runs"].get("ci_generated") or {}).get("patch_error"),
                "context": [ln for ln in log.splitlines() if ln.startswith("context:")],
            }
            print(name, json.dumps(summary["runs"][name], indent=1))
    (OUT / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
