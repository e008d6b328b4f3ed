#!/usr/bin/env bash
# On the GPU machine, from the repository root, after scripts/gpu/stage.sh ran on the build machine
# and .carry/gpu travelled: GPU tests, atoll and PyTorch benchmarks, JSON under $OUT, table last.
#   STEPS="tests l2run sched disb preempt kexit l2 bench torch" (default all; "padding", "roofline", "l2tune", "onnx", "serve", "perfa", "csan", "launch", "upexit", "ncu", "attn", "gate" and "green"
#   run only when named), BENCH_ARGS / TORCH_ARGS / TEST_FILTER pass through (BENCH_AB and DISB_AB
#   alternate an on/off switch) (and the engine's
#   ATOLL_CUDA_* switches, read by every binary); every output comes
#   back as $OUT/results.tgz;
#   each step has a time limit (TEST_LIMIT, default 400: test_gpu ran past 200 s on an H100 in session 37; BENCH_LIMIT,
#   TORCH_LIMIT seconds) so one hang cannot
#   eat the whole lease.
set -uo pipefail
out=${OUT:-$PWD/out}
bin=$PWD/.carry/gpu
steps=${STEPS:-tests l2run sched disb preempt kexit l2 bench torch}
mkdir -p "$out"
if [[ ! -d $bin && -f $bin.tar.xz ]]; then
  mkdir -p "$bin" && tar -C "$bin" -xJf "$bin.tar.xz"
fi
# The binaries' $ORIGIN rpath finds their direct libraries, but RUNPATH is not inherited: gRPC's
# libraries staged beside them find each other only through the loader's path.
export LD_LIBRARY_PATH=$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# Whole words only: "l2" must not match "l2run".
has_step() { [[ " $steps " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
status=0
if has_step tests; then
  # The test binary is exactly the CTest label "gpu" (ctest files hold build-machine paths).
  timeout -k 5 "${TEST_LIMIT:-400}" "$bin/test_gpu" --gtest_filter="${TEST_FILTER:-*}" --gtest_output="json:$out/gpu_tests.json" >"$out/gpu_tests.log" 2>&1
  status=$?
  echo "test_gpu exit status $status"
  grep -E "^\[  FAILED|^\[  PASSED|^\[  SKIPPED|tests ran|Failure|error" "$out/gpu_tests.log" | tail -40
fi
if has_step tests && [[ -x $bin/test_gpu_sched ]]; then
  timeout -k 5 "${TEST_LIMIT:-400}" "$bin/test_gpu_sched" --gtest_filter="${SCHED_TEST_FILTER:-*}" \
    --gtest_output="json:$out/gpu_sched_tests.json" >"$out/gpu_sched_tests.log" 2>&1
  st=$?
  echo "test_gpu_sched exit status $st"
  grep -E "^\[  FAILED|^\[  PASSED|^\[  SKIPPED|tests ran|Failure|error" "$out/gpu_sched_tests.log" | tail -20
  [[ $st -eq 0 ]] || status=$st
fi
if has_step l2run && [[ -f .carry/l2/resnet50_fit.json ]]; then
  # A residency config made here for ResNet-50 batch 8, applied by `atoll run --l2` on the GPU,
  # next to the same run without it.
  for l2 in "" .carry/l2/resnet50_fit.json; do
    timeout -k 5 120 "$bin/atoll" run resnet50 --batch 8 --device cuda ${l2:+--l2 "$l2"} >"$out/run_l2${l2:+_fit}.txt" 2>&1 ||
      echo "atoll run ${l2:+--l2 $l2} failed: $(tail -1 "$out/run_l2${l2:+_fit}.txt")"
    echo "atoll run resnet50 --batch 8 ${l2:+--l2 $l2}:"
    tail -4 "$out/run_l2${l2:+_fit}.txt"
  done
fi
if has_step sched; then
  # The main job, then co-location on the GPU: every scheduler mode, SCHED_SECONDS per mode.
  timeout -k 5 120 "$bin/atoll" run resnet50 --device auto >"$out/run_resnet50.txt" 2>&1 ||
    echo "atoll run failed: $(tail -1 "$out/run_resnet50.txt")"
  head -3 "$out/run_resnet50.txt"
  secs=${SCHED_SECONDS:-3}
  for mode in rt-only seq streams streams-prio wait reset; do
    timeout -k 5 120 "$bin/atoll" colocate --rt vgg19:100 --be resnet152 --mode "$mode" --duration "$secs" \
      --device cuda --json >"$out/colocate_$mode.json" 2>"$out/colocate_$mode.log" || echo "colocate $mode failed: $(tail -1 "$out/colocate_$mode.log")"
  done
  python3 scripts/gpu/colocate_table.py "$out"/colocate_*.json
fi
if has_step disb; then
  # DISB_WORKLOADS: one name, "all", or a space-separated list; DISB_SECONDS per mode; DISB_MODES
  # (comma-separated) limits the modes; DISB_ARGS pass through, DISB_TAG suffixes the output folders;
  # DISB_ATOLL names another atoll binary (a branch's, carried beside the archive).
  # A workload takes its modes' seconds plus its loads, warm-up and standalone runs (25-45 s on
  # the H200: G and REAL load five models); the wall time printed here is for budgeting calls.
  # DISB_AB=VAR (an on/off switch such as ATOLL_CUDA_SIDE_FLAG): each workload runs with VAR=0 and
  # then VAR=1 on the same machine, tagged _VAR0 and _VAR1, so the two sit side by side in the
  # table. For a setting, DISB_AB_VALUES lists its values instead (ATOLL_CUDA_UPLOAD_BLOCKS:
  # DISB_AB_VALUES="64 16"; as 0/1 it was refused and then ran on one block), tagged _VAR<value>.
  disb_one() {  # workload, tag
    local started=$SECONDS
    # shellcheck disable=SC2086
    timeout -k 5 "${DISB_LIMIT:-300}" "${DISB_ATOLL:-$bin/atoll}" bench disb --workload "$1" --device cuda \
      --duration "${DISB_SECONDS:-3}" ${DISB_MODES:+--modes "$DISB_MODES"} ${DISB_ARGS:-} \
      --out "$out/disb_$1$2" 2>&1 | grep -v "s left$" | tee "$out/disb_$1$2.log" | tail -14
    grep -h "warn" "$out/disb_$1$2.log" | head -3
    echo "disb $1$2: $((SECONDS - started)) s of wall time"
  }
  for w in ${DISB_WORKLOADS:-A}; do
    if [[ -n ${DISB_AB:-} ]]; then
      for v in ${DISB_AB_VALUES:-0 1}; do (export "$DISB_AB=$v" && disb_one "$w" "${DISB_TAG:-}_$DISB_AB$v"); done
    else
      disb_one "$w" "${DISB_TAG:-}"
    fi
  done
  python3 scripts/gpu/disb_table.py "$out"
  # Where each preemption's device time went (the traced mode's trace.json).
  python3 scripts/gpu/preempt_split.py "$out" | grep -v "^  [a-z-]*: latency_us"
fi
if has_step preempt; then
  # shellcheck disable=SC2086
  timeout -k 5 "${PREEMPT_LIMIT:-240}" "$bin/atoll_bench_preempt" --json "$out/preempt_sweep.json" ${PREEMPT_ARGS:-} 2>&1 | tail -30
fi
if has_step launch; then
  # Host time of an RT task's graph launch idle, behind a running task, behind a gate, and with
  # two instantiations (LAUNCH_ARGS: --models, --batch, --trials).
  # shellcheck disable=SC2086
  timeout -k 5 "${LAUNCH_LIMIT:-120}" "$bin/atoll_bench_launch" --json "$out/launch_probe.json" ${LAUNCH_ARGS:-} 2>&1 | tail -30
fi
if has_step gate; then
  # How long after an opened gate is visible the preemption flag lands: the held stream's write
  # (the scheduler's way) against a doorbell kernel, idle and with BE spin kernels on every SM.
  timeout -k 5 "${GATE_LIMIT:-120}" "$bin/atoll_bench_gate" --trials "${GATE_TRIALS:-200}" --json "$out/gate_probe.json" 2>&1 | tail -8
fi
if has_step green; then
  # Green contexts (issue 14): RT latency and BE throughput with BE, then RT too, on disjoint SMs.
  # shellcheck disable=SC2086
  timeout -k 5 "${GREEN_LIMIT:-180}" "$bin/atoll_bench_green" --json "$out/green_probe.json" ${GREEN_ARGS:-} 2>&1 | tail -14
fi
if has_step upexit; then
  # A BE upload launch's exit (kernel 0 carrying its batch-32 input's SM copy) under each setting
  # of the upload copy (UPEXIT_VARIANTS, flag:blocks for ATOLL_CUDA_UPLOAD_FLAG and _BLOCKS), each
  # with the restore test of uploads under the same setting.
  for v in ${UPEXIT_VARIANTS:-ahead:64 fresh:64 fresh:16}; do
    flag=${v%:*} blocks=${v#*:}
    echo "upload copy: flag $flag, $blocks blocks"
    # shellcheck disable=SC2086
    ATOLL_CUDA_UPLOAD_FLAG=$flag ATOLL_CUDA_UPLOAD_BLOCKS=$blocks timeout -k 5 "${UPEXIT_LIMIT:-150}" \
      "$bin/atoll_bench_kernel_exit" --models ${UPEXIT_MODELS:-vgg19 resnet152} --batches 32 --uploads \
      --trials "${UPEXIT_TRIALS:-20}" --json "$out/upexit_${flag}_$blocks.json" 2>&1 | grep "with its upload"
    ATOLL_CUDA_UPLOAD_FLAG=$flag ATOLL_CUDA_UPLOAD_BLOCKS=$blocks timeout -k 5 150 "$bin/test_gpu_sched" \
      --gtest_filter='CudaPreemption.Uploads*' 2>&1 | grep -E "^\[  (PASSED|FAILED)"
  done
fi
if has_step kexit; then
  # Mid-kernel flag raises on every model kernel (KEXIT_ARGS narrows: --models, --batches, --trials).
  # shellcheck disable=SC2086
  timeout -k 5 "${KEXIT_LIMIT:-300}" "$bin/atoll_bench_kernel_exit" --json "$out/kernel_exit.json" ${KEXIT_ARGS:-} 2>&1 | tail -60
fi
if has_step attn; then
  # The fused attention's first checks: its op cases (reference, CPU backend, rerun, stop at
  # entry) and the attention models against the CPU reference, then the attention models timed
  # with it off and on, alternated, and kernel exit with it on (ATTN_MODELS, ATTN_BATCHES).
  timeout -k 5 "${TEST_LIMIT:-400}" "$bin/test_gpu" \
    --gtest_filter='AllOps/GpuOpTest.*attention*:GpuModelFusedAttention.*' >"$out/attn_tests.log" 2>&1
  echo "attention tests: exit $?; $(grep -E '^\[  (PASSED|FAILED)' "$out/attn_tests.log" | tr '\n' ' ')"
  for round in 1 2; do
    for on in 0 1; do
      # shellcheck disable=SC2086
      ATOLL_CUDA_FUSED_ATTENTION=$on timeout -k 5 "${BENCH_LIMIT:-200}" "$bin/atoll_bench_cuda" \
        --models ${ATTN_MODELS:-bert_base distilbert} --batches ${ATTN_BATCHES:-1 8 32} \
        --json "$out/attn_bench_${on}_$round.json" 2>&1 | sed "s/^/fused $on: /" | grep -v "^fused $on: *$"
    done
  done
  # shellcheck disable=SC2086
  ATOLL_CUDA_FUSED_ATTENTION=1 timeout -k 5 "${KEXIT_LIMIT:-300}" "$bin/atoll_bench_kernel_exit" \
    --models ${ATTN_MODELS:-bert_base distilbert} --batches 8 32 --json "$out/attn_kexit.json" 2>&1 | tail -12
fi
if has_step ncu; then
  # Hardware counters of one model pass's GEMM kernels (NCU_MODELS: model:batch ...): a plain run
  # first fills the tuning cache, so the profiled run launches the tiles the tuner chose and no
  # timing candidates. Raw metrics as CSV ($out/ncu_MODEL_bBATCH.csv; scripts/gpu/ncu_table.py
  # reads them).
  if command -v ncu >/dev/null; then
    for mb in ${NCU_MODELS:-vgg19:32 bert_base:8}; do
      model=${mb%:*} batch=${mb#*:}
      timeout -k 5 120 "$bin/atoll" run "$model" --batch "$batch" --device cuda --iters 5 >/dev/null 2>&1
      timeout -k 5 "${NCU_LIMIT:-200}" ncu --clock-control none --kernel-name "regex:${NCU_REGEX:-gemm}" \
        --launch-count "${NCU_COUNT:-24}" --section SpeedOfLight --section WarpStateStats \
        --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section LaunchStats \
        --page raw --csv "$bin/atoll" run "$model" --batch "$batch" --device cuda --iters 1 --warmup 0 \
        >"$out/ncu_${model}_b$batch.csv" 2>"$out/ncu_${model}_b$batch.log"
      echo "ncu $model b$batch: exit $? ($(grep -c '^"[0-9]' "$out/ncu_${model}_b$batch.csv") kernels)"
    done
    python3 scripts/gpu/ncu_table.py "$out"/ncu_*.csv
  else
    echo "ncu: not on this machine's PATH"
  fi
fi
if has_step l2 && [[ -f .carry/l2/sim.json ]]; then
  # Residency configs made and simulated on the build machine (scripts/l2/make_configs.py), each
  # measured here against no residency (one model load per model), then rank-correlated.
  for model in $(python3 -c 'import json,sys; print(" ".join(dict.fromkeys(r["model"] for r in json.load(open(sys.argv[1])))))' .carry/l2/sim.json); do
    cfgs=()
    for f in .carry/l2/"${model}"_*.json; do cfgs+=(--config "$f"); done
    timeout -k 5 "${L2_LIMIT:-120}" "$bin/atoll" l2 measure "$model" --batch 8 --device cuda "${cfgs[@]}" \
      --max-pairs "${L2_PAIRS:-40}" --json >"$out/l2_$model.json" 2>"$out/l2_$model.log" ||
      echo "l2 measure $model failed: $(tail -1 "$out/l2_$model.log")"
  done
  python3 scripts/l2/rank.py .carry/l2/sim.json "$out"/l2_*.json --json "$out/l2_rank.json"
fi
if has_step l2tune; then
  # AutoScratch on the GPU: each optimizer with the same wall budget on each TUNE_MODELS model at
  # TUNE_BATCH, measured time as the cost; best config and search log as JSON.
  for m in ${TUNE_MODELS:-resnet50 mobilenet_v2}; do
    for opt in ${TUNE_OPTIMIZERS:-heuristic random ea ppo}; do
      timeout -k 5 $((${TUNE_SECONDS:-20} + 60)) "$bin/atoll" l2 tune "$m" --batch "${TUNE_BATCH:-32}" \
        --evaluator cuda --optimizer "$opt" --budget-s "${TUNE_SECONDS:-20}" --seed 1 \
        --out "$out/tune_${m}_$opt.json" --log "$out/tunelog_${m}_$opt.json" >"$out/tune_${m}_$opt.log" 2>&1 ||
        echo "l2 tune $m $opt failed: $(tail -1 "$out/tune_${m}_$opt.log")"
      echo "l2 tune $m b${TUNE_BATCH:-32} $opt: $(grep -v 'left$' "$out/tune_${m}_$opt.log" | tail -2 | tr '\n' ' ')"
    done
  done
fi
if has_step padding; then
  # Kernel profiles of PAD_MODELS at batch 1, then the high-contention pairs of the padding issue:
  # RT and BE both closed loop, every ordered pair, PAIRS_SECONDS per pair and mode.
  pad_models=${PAD_MODELS:-vgg19 resnet152 densenet201 inception_v3 bert_base}
  profiles=()
  for m in $pad_models; do
    if timeout -k 5 "${PROFILE_LIMIT:-120}" "$bin/atoll" profile "$m" --batch 1 --device cuda \
      --out "$out/profile_$m.json" >"$out/profile_$m.log" 2>&1; then
      profiles+=(--profile "$out/profile_$m.json")
      tail -3 "$out/profile_$m.log" | head -2
    else
      echo "profile $m failed: $(tail -1 "$out/profile_$m.log")"
    fi
  done
  # PAIRS_ARGS pass through (e.g. "--padding-rt-budget 1").
  # shellcheck disable=SC2086
  timeout -k 5 "${PAIRS_LIMIT:-500}" "$bin/atoll" bench pairs --device cuda --models "${pad_models// /,}" \
    --modes "${PAIRS_MODES:-rt-only,reset,streams,padding-concurrent,padding-slices}" --duration "${PAIRS_SECONDS:-0.5}" \
    "${profiles[@]}" ${PAIRS_ARGS:-} --json "$out/pairs.json" >"$out/pairs.txt" 2>"$out/pairs.log" ||
    echo "bench pairs failed: $(tail -1 "$out/pairs.log")"
  cat "$out/pairs.txt"
fi
if has_step roofline; then
  # Where the time of the models that miss issue 13's targets goes: `atoll profile` of each
  # ROOFLINE_MODELS entry (MODEL:BATCH), its heaviest kernels with their GEMM tile and their shares
  # of the device's peaks. ROOFLINE_AB=VAR profiles each with VAR=0 and then VAR=1 (for instance
  # ATOLL_CUDA_CLUSTER_TILE), tagged _VAR0 and _VAR1.
  roofline_one() {  # model:batch, tag
    local m=${1%%:*} b=${1##*:}
    if timeout -k 5 "${PROFILE_LIMIT:-120}" "$bin/atoll" profile "$m" --batch "$b" --device cuda \
      --out "$out/roofline_${m}_b$b$2.json" >"$out/roofline_${m}_b$b$2.log" 2>&1; then
      echo "== $m b$b$2"
      sed -n '/the kernels that take/,/the model:/p' "$out/roofline_${m}_b$b$2.log"
    else
      echo "profile $m b$b$2 failed: $(tail -1 "$out/roofline_${m}_b$b$2.log")"
    fi
  }
  for mb in ${ROOFLINE_MODELS:-vgg19:32 resnet50:32 resnet152:32 inception_v3:32 bert_base:8}; do
    if [[ -n ${ROOFLINE_AB:-} ]]; then
      for v in 0 1; do (export "$ROOFLINE_AB=$v" && roofline_one "$mb" "_$ROOFLINE_AB$v"); done
    else
      roofline_one "$mb" ""
    fi
  done
fi
if has_step onnx; then
  # ONNX on CUDA (fp16 storage, so relative L2 <= ONNX_REL_L2 instead of the cases' fp32
  # tolerances): ONNX's backend node and model cases, the real exports of tests/onnx, and an
  # exported ResNet-50 timed against the zoo's.
  cases=/tmp/onnx_cases exports=/tmp/onnx_exports
  python3 tests/onnx/make_node_cases.py "$cases" >"$out/onnx_make_cases.log" 2>&1 || echo "make_node_cases failed"
  timeout -k 5 "${ONNX_LIMIT:-150}" "$bin/run_onnx_cases" --device cuda --rel-l2 "${ONNX_REL_L2:-1e-2}" \
    "$cases/node" "$cases/simple" "$cases/pytorch-converted" "$cases/pytorch-operator" >"$out/onnx_cases_cuda.txt" 2>&1
  echo "ONNX cases on CUDA: exit $?; $(tail -1 "$out/onnx_cases_cuda.txt")"
  grep -E " (WRONG|CRASH) " "$out/onnx_cases_cuda.txt" | head -20
  python3 tests/onnx/export_models.py "$exports" >"$out/onnx_exports.log" 2>&1 || echo "export_models failed"
  timeout -k 5 "${ONNX_LIMIT:-150}" "$bin/run_onnx_cases" --device cuda --rel-l2 "${ONNX_REL_L2:-1e-2}" \
    --expect tests/onnx/expected_exports.txt "$exports" >"$out/onnx_exports_cuda.txt" 2>&1
  echo "ONNX real exports on CUDA: exit $?"
  cat "$out/onnx_exports_cuda.txt"
  python3 -c 'import torch, torchvision; torch.onnx.export(torchvision.models.resnet50().eval(), (torch.randn(1, 3, 224, 224),), "/tmp/resnet50.onnx", input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}}, opset_version=17, dynamo=False)' >"$out/onnx_resnet50_export.log" 2>&1 ||
    echo "resnet50 export failed: $(tail -1 "$out/onnx_resnet50_export.log")"
  for m in resnet50 /tmp/resnet50.onnx; do
    tag=zoo
    [[ $m == *.onnx ]] && tag=onnx
    for b in 1 8; do
      timeout -k 5 120 "$bin/atoll" run "$m" --device cuda --batch "$b" --iters 300 --json >"$out/onnx_run_${tag}_b$b.json" 2>"$out/onnx_run.log" ||
        echo "atoll run $m b$b failed: $(tail -1 "$out/onnx_run.log")"
    done
  done
  python3 - "$out" <<'PY'
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/onnx_run_*.json")):
    d = json.load(open(f))
    print(f.rsplit("/", 1)[1], "median ms", d["latency_ms"]["median"], "p99 ms", d["latency_ms"]["p99"])
PY
fi
if has_step serve; then
  # The server over gRPC on loopback (issue 17's targets): overhead against in-process requests,
  # and the RT p99 beside closed-loop BE clients against the RT client alone. SERVE_ARGS pass
  # through (--rt-launch per-kernel, --rt-sm-copies).
  # shellcheck disable=SC2086
  timeout -k 5 "${SERVE_LIMIT:-150}" "$bin/atoll" bench serve --device cuda --rt "${SERVE_RT:-resnet50:100}" \
    --be "${SERVE_BE:-resnet152:8,bert_base:8}" --duration "${SERVE_SECONDS:-10}" --requests 1000 ${SERVE_ARGS:-} \
    --json "$out/serve_bench.json" 2>&1 | tail -12
fi
if has_step perfa; then
  # Issue 17's perf_analyzer target: RT p99 beside BE clients at concurrency 8 against the RT
  # client alone, with Triton's perf_analyzer (staged by stage.sh from .venv-serve) as the client.
  if [[ -x $bin/perf_analyzer ]]; then
    timeout -k 5 "${PERFA_LIMIT:-150}" scripts/gpu/perf_analyzer_rt_be.sh "$bin/atoll" "$bin/perf_analyzer" "$out/perfa" |
      tail -8
  else
    echo "perfa: no perf_analyzer staged (run scripts/serve-venv.sh, then scripts/gpu/stage.sh)"
  fi
fi
if has_step csan; then
  # compute-sanitizer over the GPU tests: memcheck (out-of-bounds and misaligned accesses, leaks)
  # and racecheck (shared-memory hazards in the tiled GEMM and reduction kernels). Both run 10-100x
  # slower than the plain suite and mostly on the host, so each tool runs as CSAN_SHARDS gtest
  # shards side by side, with load-time tuning off (the tile tests cover every tile). The default
  # filters take the op-level tests: the model tests run the same kernels at larger sizes and take
  # minutes each under memcheck (session 10). CSAN_FILTER="*" is the whole suite.
  # CSAN_PLAN=buckets: memcheck over the tests the op-level runs leave (CSAN_FILTER overrides),
  # test_gpu's in CSAN_SHARDS buckets of about equal weight (scripts/gpu/csan_buckets.py) instead
  # of gtest's shards by index. Tests that hold a stream and wait for another stream's kernels (the
  # doorbell, the scheduler's held RT lanes beside BE work) made no progress under memcheck within
  # minutes (sessions 28, 31, 39), consistent with the tool running the device's work one launch at
  # a time; so each of them (CSAN_SINGLES of test_gpu, every test of test_gpu_sched) runs alone in
  # its own process for CSAN_TEST_LIMIT seconds, CSAN_JOBS at a time beside the buckets: one that
  # cannot progress is named, and no other test waits behind it.
  # ATOLL_TEST_SLOWDOWN (CSAN_SLOWDOWN, default 50; tests/test_env.h) tells the tests they run
  # instrumented and side by side: timings and device-wide memory are not judged (the plain run
  # judges them) and hang limits stretch by the factor; what is judged here is the tool's report.
  # One memcheck run of BINARY's tests FILTER: log $out/csan_NAME.log, exit status in .rc beside it.
  csan_memcheck() {  # binary, name, filter, limit
    ATOLL_TEST_SLOWDOWN=${CSAN_SLOWDOWN:-50} ATOLL_CUDA_AUTOTUNE=0 timeout -k 5 "$4" \
      compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 "$bin/$1" --gtest_filter="$3" \
      >"$out/csan_$2.log" 2>&1
    echo $? >"$out/csan_$2.rc"
  }
  csan_report() {  # name, label
    local log=$out/csan_$1.log
    echo "compute-sanitizer $2: exit $(cat "$out/csan_$1.rc"); $(grep -cE '^\[       OK' "$log") ok; $(grep -E '^\[  PASSED|^\[  FAILED  \] [0-9]' "$log" | tail -1 | tr -s ' ')$(grep -E '^\[  SKIPPED \] [0-9]' "$log" | tr -s ' ' | sed 's/, listed below://; s/^/ /'); $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1)"
  }
  # Waits for each "name pid" run and reports it.
  wait_csan() {
    local entry name pid
    for entry in "$@"; do
      read -r name pid <<<"$entry"
      wait "$pid"
      echo $? >"$out/csan_$name.rc"
      csan_report "$name" "${name/_/ }"
    done
  }
  # The op-level tests: every kernel at small sizes (the shard plan's default, the bucket plan's
  # complement).
  op_level='*GpuOpTest*:GpuOps.*:GpuMathOps.*:*GpuLongBlocks*:GpuInstance.*:GpuOnnx.*:WeightToHalf.*'
  if command -v compute-sanitizer >/dev/null && [[ ${CSAN_PLAN:-} == buckets ]]; then
    singles=${CSAN_SINGLES:-GpuStreamGate.*}
    shards=${CSAN_SHARDS:-8}
    i=0
    while read -r bucket; do
      csan_memcheck test_gpu "test_gpu_$i" "$bucket" "${CSAN_LIMIT:-540}" &
      i=$((i + 1))
    done < <("$bin/test_gpu" --gtest_list_tests --gtest_filter="${CSAN_FILTER:--$op_level:$singles}" |
      python3 scripts/gpu/csan_buckets.py "$shards")
    labels=()
    for spec in "test_gpu $singles" "test_gpu_sched *"; do
      read -r binary filter <<<"$spec"
      while read -r test; do
        while (($(jobs -rp | wc -l) >= shards + ${CSAN_JOBS:-8})); do sleep 1; done
        csan_memcheck "$binary" "single_${#labels[@]}" "$test" "${CSAN_TEST_LIMIT:-150}" &
        labels+=("$binary $test")
      done < <("$bin/$binary" --gtest_list_tests --gtest_filter="$filter" | python3 scripts/gpu/csan_buckets.py --list)
    done
    wait
    for ((j = 0; j < i; ++j)); do csan_report "test_gpu_$j" "test_gpu bucket $j"; done
    for ((j = 0; j < ${#labels[@]}; ++j)); do csan_report "single_$j" "${labels[j]}"; done
    echo "compute-sanitizer: $(grep -lx 124 "$out"/csan_*.rc | wc -l) runs at their time limit," \
      "$(grep -l "ERROR SUMMARY: [1-9]" "$out"/csan_*.log | wc -l) with memcheck errors, of $(ls "$out"/csan_*.rc | wc -l)"
  elif command -v compute-sanitizer >/dev/null; then
    shards=${CSAN_SHARDS:-6}
    pids=()
    for tool in ${CSAN_TOOLS:-memcheck racecheck}; do
      filter=${CSAN_FILTER:-$op_level}
      [[ $tool == racecheck ]] && filter=${CSAN_RACE_FILTER:-*GpuOpTest*:*GpuLongBlocks*}
      extra=()
      [[ $tool == memcheck ]] && extra=(--leak-check full)
      for ((i = 0; i < shards; ++i)); do
        ATOLL_TEST_SLOWDOWN=${CSAN_SLOWDOWN:-50} ATOLL_CUDA_AUTOTUNE=0 GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i \
          timeout -k 5 "${CSAN_LIMIT:-400}" \
          compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 3 "$bin/test_gpu" \
          --gtest_filter="$filter" >"$out/csan_${tool}_$i.log" 2>&1 &
        pids+=("${tool}_$i $!")
      done
    done
    wait_csan "${pids[@]}"
  else
    echo "compute-sanitizer: not on this machine's PATH"
  fi
fi
if has_step bench; then
  # BENCH_TAG suffixes the JSON (a second run with other settings, e.g. ATOLL_CUDA_TMA_IM2COL=1).
  # BENCH_AB=VAR (an on/off switch such as ATOLL_CUDA_GEMV) alternates VAR=0 and VAR=1 for
  # BENCH_ROUNDS rounds (default 2) on the same machine, JSON tagged _VAR<v>_<round>.
  bench_one() {  # tag
    # shellcheck disable=SC2086
    timeout -k 5 "${BENCH_LIMIT:-200}" "$bin/atoll_bench_cuda" --json "$out/atoll_cuda$1.json" ${BENCH_ARGS:-} 2>&1 | tail -30
  }
  if [[ -n ${BENCH_AB:-} ]]; then
    for round in $(seq "${BENCH_ROUNDS:-2}"); do
      for v in 0 1; do
        (export "$BENCH_AB=$v" && bench_one "${BENCH_TAG:-}_$BENCH_AB${v}_$round" | sed "s/^/$BENCH_AB=$v round $round: /")
      done
    done
  else
    bench_one "${BENCH_TAG:-}"
  fi
fi
if has_step torch; then
  # shellcheck disable=SC2086
  PYTHONUNBUFFERED=1 timeout -k 5 "${TORCH_LIMIT:-200}" python3 bench/torch_models.py --json "$out/torch_models.json" ${TORCH_ARGS:-} 2>&1 | tail -30
fi
if [[ -f $out/atoll_cuda.json && -f $out/torch_models.json ]]; then
  python3 bench/compare.py "$out/atoll_cuda.json" "$out/torch_models.json" --json "$out/compare.json"
fi
# The device tool brings back only a few files per call: everything goes home as one archive
# (results.tgz, extract with tar xzf), the originals removed. KEEP_FILES=1 leaves them as they are.
if [[ ${KEEP_FILES:-0} != 1 ]] && [[ -n $(ls -A "$out") ]]; then
  archive=$(mktemp "${TMPDIR:-/tmp}/results.XXXXXX.tgz")
  if tar czf "$archive" -C "$out" . && find "$out" -mindepth 1 -delete && mv "$archive" "$out/results.tgz"; then
    echo "results: $out/results.tgz ($(du -h "$out/results.tgz" | cut -f1))"
  else
    echo "results: packing failed; the files stay in $out"
  fi
fi
exit $status
