"""The GPU suite's CPU smoke mode: every step runs end to end and writes its JSON.

``benchmarks/gpu_suite.py --smoke`` runs in a subprocess (each step is a process of its
own with ``TRITON_INTERPRET=1`` set before triton is imported) and writes everything
under a temporary results directory. The test reads the suite's summary and then every
JSON itself: a step that crashes, times out, writes nothing, writes a file without its
keys, or computes wrong numbers (kernels against their references) fails it.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # about a minute on two idle cores (nine processes)

# step -> (file under RESULTS/out, top-level keys it must hold)
EXPECTED: dict[str, tuple[str, set[str]]] = {
    "env": ("env.json", {"python", "torch", "triton", "transformers", "device"}),
    "fsa_vs_nsa": (
        "fsa_vs_nsa_smoke.json",
        {"config", "fla", "fla_installed", "correctness", "timings", "summary"},
    ),
    "fsa_profile": ("fsa_profile_smoke.json", {"machine", "cases", "fsa_steps_sweep"}),
    "decode_sparse": ("decode_sparse_smoke.json", {"config", "correctness", "timings"}),
    "dssa_stage1": ("dssa_stage1_smoke.json", {"machine", "dtype", "rows"}),
    "dssa_speed": ("dssa_speed_smoke.json", {"configs", "machine", "rows"}),
    "lychee_speed": ("lychee_speed_smoke.json", {"model", "roles", "machine", "rows"}),
    "oomb_gpu": ("oomb_gpu_cpu.json", {"config", "kernel", "training"}),
    "pytest_gpu": ("pytest_gpu.json", {"collected", "passed", "failed", "exitstatus"}),
}


def _content_checks(data: dict[str, dict[str, Any]]) -> None:
    """What each smoke result must say beyond its keys."""
    assert data["env"]["device"] == "cpu"
    assert data["env"]["triton_interpret"] == "1"

    fsa = data["fsa_vs_nsa"]
    assert {r["order"] for r in fsa["correctness"]} >= {"fsa", "nsa"}
    for row in fsa["correctness"]:
        assert "error" not in row, row
        assert max(row[k] for k in ("o", "dq", "dk", "dv")) < 1e-2, row
    impls = {r["impl"] for r in fsa["timings"] if "error" not in r}
    assert impls >= {"fsa", "nsa_order", "dense_sdpa"}, fsa["timings"]
    assert all(r["fwd_ms"] > 0 and r["fwd_bwd_ms"] > 0 for r in fsa["timings"])
    if not fsa["fla_installed"]:  # no fla here: the column is absent and the note says so
        assert "fla_parallel_nsa" not in impls
        assert "fla" in fsa["fla"]["note"]
    case = fsa["summary"]["per_case"][0]
    assert {"fsa_speedup_vs_nsa_order", "speedup_vs_sdpa"} <= case.keys()

    prof = data["fsa_profile"]
    assert prof["cases"][0]["fwd_by_cpu_time"]
    assert prof["fsa_steps_sweep"]

    dec = data["decode_sparse"]
    assert dec["correctness"][0]["full_rel_rms"] < 1e-2
    assert dec["correctness"][0]["sparse_rel_rms"] < 1e-2
    assert not [r for r in dec["timings"] if "error" in r]

    stage1 = data["dssa_stage1"]["rows"]
    assert {r["phase"] for r in stage1} == {"prefill", "decode"}
    assert all(r["fused_backend"] == "triton" and r["same_selection"] > 0.9 for r in stage1)

    speed = data["dssa_speed"]
    assert set(speed["configs"]) == {"published", "training_free"}
    assert {(r["config"], r["phase"]) for r in speed["rows"]} == {
        (c, p) for c in ("published", "training_free") for p in ("prefill", "decode")
    }

    lychee = data["lychee_speed"]["rows"]
    assert len(lychee) == 1
    assert lychee[0]["step_s_lychee"] > 0

    oomb = data["oomb_gpu"]
    assert max(oomb["kernel"][0]["rel_rms"].values()) < 1e-4
    assert {r["method"] for r in oomb["training"]} == {"ordinary", "oomb", "oomb_offload"}
    assert all(r.get("grad_rel_error_vs_ordinary", 0.0) < 1e-4 for r in oomb["training"])

    tests = data["pytest_gpu"]
    assert tests["collected"] > 0
    assert tests["exitstatus"] == 0


def test_every_step_of_the_smoke_suite_succeeds_and_writes_its_json(
    tmp_path: pathlib.Path,
) -> None:
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "gpu_suite.py"),
        "--smoke",
        "--results",
        str(tmp_path),
        "--python",
        sys.executable,
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    log = proc.stdout[-4000:] + proc.stderr[-2000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["mode"] == "smoke", log
    assert summary["finished"], log
    status = {s["name"]: s["status"] for s in summary["steps"]}
    assert status == dict.fromkeys(EXPECTED, "ok"), log
    assert summary["ok"], log
    assert proc.returncode == 0, log
    out = (tmp_path / "out").resolve()
    for step in summary["steps"]:  # smoke outputs stay in the results directory
        assert step["outputs"], step
        assert all(pathlib.Path(p).resolve().is_relative_to(out) for p in step["outputs"])
        assert step.get("note"), step  # what the smoke run leaves out is said
    data = {}
    for name, (filename, keys) in EXPECTED.items():
        data[name] = json.loads((out / filename).read_text())
        assert keys <= data[name].keys(), (name, sorted(data[name]))
    _content_checks(data)
    for png in (
        "fsa_vs_nsa_smoke",
        "decode_sparse_smoke",
        "dssa_speed_smoke",
        "lychee_speed_smoke",
    ):
        assert (out / f"{png}.png").stat().st_size > 0, png
