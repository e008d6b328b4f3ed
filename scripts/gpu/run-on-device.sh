#!/usr/bin/env bash
# On the GPU machine, from the repository root, after scripts/gpu/stage.sh ran on the build machine
# and .carry/gpu travelled: GPU tests, atoll and PyTorch benchmarks, JSON under $OUT, table last.
#   STEPS="tests bench torch" (default all), BENCH_ARGS / TORCH_ARGS / TEST_FILTER pass through;
#   each step has a time limit (TEST_LIMIT, BENCH_LIMIT, TORCH_LIMIT seconds) so one hang cannot
#   eat the whole lease.
set -uo pipefail
out=${OUT:-$PWD/out}
bin=$PWD/.carry/gpu
steps=${STEPS:-tests bench torch}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
status=0
if [[ $steps == *tests* ]]; then
  # The test binary is exactly the CTest label "gpu" (ctest files hold build-machine paths).
  timeout -k 5 "${TEST_LIMIT:-300}" "$bin/test_gpu" --gtest_filter="${TEST_FILTER:-*}" --gtest_output="json:$out/gpu_tests.json" >"$out/gpu_tests.log" 2>&1
  status=$?
  echo "test_gpu exit status $status"
  grep -E "^\[  FAILED|^\[  PASSED|^\[  SKIPPED|tests ran|Failure|error" "$out/gpu_tests.log" | tail -40
fi
if [[ $steps == *bench* ]]; then
  # shellcheck disable=SC2086
  timeout -k 5 "${BENCH_LIMIT:-200}" "$bin/atoll_bench_cuda" --json "$out/atoll_cuda.json" ${BENCH_ARGS:-} 2>&1 | tail -30
fi
if [[ $steps == *torch* ]]; then
  # shellcheck disable=SC2086
  PYTHONUNBUFFERED=1 timeout -k 5 "${TORCH_LIMIT:-200}" python3 bench/torch_models.py --json "$out/torch_models.json" ${TORCH_ARGS:-} 2>&1 | tail -30
fi
if [[ -f $out/atoll_cuda.json && -f $out/torch_models.json ]]; then
  python3 bench/compare.py "$out/atoll_cuda.json" "$out/torch_models.json" --json "$out/compare.json"
fi
exit $status
