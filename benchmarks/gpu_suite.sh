#!/usr/bin/env bash
# Every GPU check in one pass, for a CUDA machine: the bf16 kernel tests compiled for the
# device, then the GPU benchmarks of lc-kernels, lc-train (OOMB) and lc-attention (DSSA,
# LycheeDecode). Each step has its own time limit, so one slow or failing step does not
# cost the others; results land where the CPU runs put theirs (docs/benchmarks/...).
#
#   bash benchmarks/gpu_suite.sh [RESULTS_DIR]    # default /tmp/gpu_suite
#   STEPS="pytest_gpu fsa_vs_nsa" bash benchmarks/gpu_suite.sh   # only the named steps
#
# RESULTS_DIR receives summary.txt (one line per step: exit status and seconds) and
# results.tgz (the step logs, under gpu_suite_logs/, and every file the benchmarks
# wrote), refreshed after each step. Runs from source trees (PYTHONPATH), with the machine's own torch/triton.
set -u
cd "$(dirname "$0")/.."
RES=${1:-/tmp/gpu_suite}
LOG=/tmp/gpu_suite_logs
mkdir -p "$RES" "$LOG"
PYTHONPATH=$(printf "%s:" "$PWD"/packages/*/src)$PWD/benchmarks${PYTHONPATH:+:$PYTHONPATH}
export PYTHONPATH PYTHONUNBUFFERED=1 CI=1 HF_HUB_OFFLINE=1
PY=${PY:-python3}  # the interpreter that has torch, triton and transformers
touch /tmp/gpu_suite.start
: >"$RES/summary.txt"

step() {  # step NAME SECONDS COMMAND...
  local name=$1 limit=$2 t0=$SECONDS rc
  shift 2
  [[ -z ${STEPS:-} || " $STEPS " == *" $name "* ]] || return 0
  echo "== $name (limit ${limit}s)"
  timeout -k 5 "$limit" "$@" >"$LOG/$name.log" 2>&1
  rc=$?
  echo "$name rc=$rc $((SECONDS - t0))s" | tee -a "$RES/summary.txt"
  tail -n 3 "$LOG/$name.log"
  find docs/benchmarks -type f -newer /tmp/gpu_suite.start >/tmp/gpu_suite.files
  tar czf "$RES/results.tgz" -C /tmp gpu_suite_logs -C "$PWD" -T /tmp/gpu_suite.files
}

step env 20 bash -c 'nvidia-smi; "$0" -c "import torch, triton, transformers;
print(torch.__version__, triton.__version__, transformers.__version__, torch.cuda.get_device_name())"' "$PY"
step fsa_vs_nsa 120 "$PY" packages/lc-kernels/benchmarks/fsa_vs_nsa.py --device cuda --budget-s 80
step oomb_gpu 75 "$PY" packages/lc-train/benchmarks/oomb_gpu.py
step dssa_stage1 60 "$PY" benchmarks/dssa_stage1.py --device cuda --lengths 8192 16384 32768 65536
step dssa_speed 80 "$PY" benchmarks/dssa_speed.py --device cuda --reps 5 --decode-steps 8 \
  --lengths 8192 16384 32768 65536 --model-lengths 8192 16384 32768 --layers 30 \
  --config published: --config training_free:kernel_size=4,stride=4,query_block=1
step lychee_speed 100 "$PY" benchmarks/lychee_speed.py --device cuda --no-dynamic --reps 3 \
  --steps 8 --lengths 8192 16384 32768 65536 131072
step pytest_gpu 150 "$PY" -m pytest -v -p no:cacheprovider --timeout 120 -m "not model and not slow" \
  packages/lc-kernels/tests/test_selected_attention.py packages/lc-kernels/tests/test_selected_attention_errors.py \
  packages/lc-kernels/tests/test_paged_triton.py packages/lc-train/tests/test_oomb_triton.py packages/lc-kernels/tests/test_paged.py \
  packages/lc-kernels/tests/test_package.py packages/lc-kernels/tests/test_decode_triton.py packages/lc-kernels/tests/test_compressed_attention.py \
  packages/lc-kernels/tests/test_decode_reference.py packages/lc-kernels/tests/test_group_block_scores.py \
  packages/lc-attention/tests/test_dssa_fused_stage1.py
step decode_sparse 40 "$PY" packages/lc-kernels/benchmarks/decode_sparse.py --device cuda --budget-s 25
step fsa_profile 75 "$PY" packages/lc-kernels/benchmarks/fsa_profile.py
echo "done in ${SECONDS}s" | tee -a "$RES/summary.txt"
