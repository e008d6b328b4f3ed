#!/usr/bin/env bash
# On the GPU machine, from the repository root, after scripts/gpu/stage.sh ran on the build machine
# and .carry/gpu travelled: GPU tests, atoll and PyTorch benchmarks, JSON under $OUT, table last.
#   STEPS="tests sched l2 bench torch" (default all), BENCH_ARGS / TORCH_ARGS / TEST_FILTER pass through;
#   each step has a time limit (TEST_LIMIT, BENCH_LIMIT, TORCH_LIMIT seconds) so one hang cannot
#   eat the whole lease.
set -uo pipefail
out=${OUT:-$PWD/out}
bin=$PWD/.carry/gpu
steps=${STEPS:-tests sched l2 bench torch}
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
if [[ $steps == *tests* && -x $bin/test_gpu_sched ]]; then
  timeout -k 5 "${TEST_LIMIT:-300}" "$bin/test_gpu_sched" --gtest_filter="${SCHED_TEST_FILTER:-*}" \
    --gtest_output="json:$out/gpu_sched_tests.json" >"$out/gpu_sched_tests.log" 2>&1
  st=$?
  echo "test_gpu_sched exit status $st"
  grep -E "^\[  FAILED|^\[  PASSED|^\[  SKIPPED|tests ran|Failure|error" "$out/gpu_sched_tests.log" | tail -20
  [[ $st -eq 0 ]] || status=$st
fi
if [[ $steps == *sched* ]]; then
  # The main job, then co-location and DISB on the GPU: every scheduler mode, SCHED_SECONDS per mode.
  timeout -k 5 120 "$bin/atoll" run resnet50 --device auto --json >"$out/run_resnet50.json" 2>"$out/run_resnet50.log" ||
    echo "atoll run failed: $(tail -1 "$out/run_resnet50.log")"
  secs=${SCHED_SECONDS:-3}
  for mode in rt-only seq streams streams-prio wait reset; do
    timeout -k 5 120 "$bin/atoll" colocate --rt vgg19:100 --be resnet152 --mode "$mode" --duration "$secs" \
      --device cuda --json >"$out/colocate_$mode.json" 2>"$out/colocate_$mode.log" || echo "colocate $mode failed: $(tail -1 "$out/colocate_$mode.log")"
  done
  python3 - "$out" <<'PY'
import json, sys, glob, os
for f in sorted(glob.glob(os.path.join(sys.argv[1], "colocate_*.json"))):
    try:
        d = json.load(open(f))
    except Exception as e:
        print(f, "unreadable", e); continue
    print(os.path.basename(f), json.dumps(d)[:400])
PY
  timeout -k 5 "${DISB_LIMIT:-300}" "$bin/atoll" bench disb --workload "${DISB_WORKLOADS:-A}" --device cuda \
    --duration "$secs" --out "$out/disb" 2>&1 | tail -25
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
