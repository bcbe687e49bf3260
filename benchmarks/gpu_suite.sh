#!/usr/bin/env bash
# Every GPU check in one pass, for a CUDA machine: the GPU benchmarks of lc-kernels
# (FSA vs NSA order vs fla parallel_nsa vs SDPA, the FSA profile, decode kernels),
# lc-attention (DSSA stage 1 and speed, LycheeDecode speed) and lc-train (OOMB), then the
# compiled-kernel tests (bf16 included). The driver is benchmarks/gpu_suite.py (its
# docstring has the table of steps); this wrapper runs it from the source trees with the
# machine's own torch/triton.
#
#   bash benchmarks/gpu_suite.sh [RESULTS_DIR]                  # default /tmp/gpu_suite
#   STEPS="pytest_gpu fsa_vs_nsa" bash benchmarks/gpu_suite.sh  # only the named steps
#   SMOKE=1 bash benchmarks/gpu_suite.sh [RESULTS_DIR]          # CPU smoke test (CI)
#   PY=/path/to/python bash benchmarks/gpu_suite.sh             # default python3
#
# Time budget per step (seconds; each step is stopped at its limit, the total is capped
# at 475 s so a full run stays under 8 minutes on an H200; expected about 6.5):
#   env 20, fsa_vs_nsa 105, fsa_profile 40, decode_sparse 35, dssa_stage1 35,
#   dssa_speed 50, lychee_speed 45, oomb_gpu 65, pytest_gpu 75.
# The benchmarks that sweep sizes stop starting new cases before their limit
# (--budget-s) and still write their JSON; pytest is interrupted at its limit and its
# report counts what ran. `--dry-run` prints every step's limit and command.
#
# Results land where the CPU runs put theirs (docs/benchmarks/...). RESULTS_DIR receives
# summary.json (per step: status ok/failed/timeout/bad_output/no_time, exit code,
# seconds, output files, note), summary.txt (one line per step), logs/<step>.log,
# out/ (env.json, pytest_gpu.json) and results.tgz (all of it plus every file the steps
# wrote), refreshed after each step.
#
# Smoke mode (SMOKE=1 or --smoke): every step on CPU at tiny sizes, Triton kernels under
# TRITON_INTERPRET=1, no GPU visible, all JSON under RESULTS_DIR/out (default
# /tmp/gpu_suite_smoke), never over docs/benchmarks; each step must write parseable JSON
# with its expected keys. What a step cannot do on CPU is stated in its summary note
# (pytest_gpu only collects there). Two steps run at once (--jobs); about 100 s of CPU
# time, a minute or two on 2 cores. Exit status 0 only if every step is ok.
# tests-integration/test_gpu_suite_smoke.py runs it in CI.
set -u
cd "$(dirname "$0")/.."
PY=${PY:-python3}  # the interpreter that has torch, triton and transformers
PYTHONPATH=$(printf "%s:" "$PWD"/packages/*/src)$PWD/benchmarks${PYTHONPATH:+:$PYTHONPATH}
export PYTHONPATH PYTHONUNBUFFERED=1 CI=${CI:-1} HF_HUB_OFFLINE=1 PY
exec "$PY" benchmarks/gpu_suite.py "$@"
