#!/usr/bin/env bash
# Builds the GPU test and benchmark binaries here (the GPU machine has no Debian dev packages) and
# stages them, stripped, with the shared libraries they load (found through the binaries' $ORIGIN
# rpath), packed as .carry/gpu.tar.xz. Then:
#   run(carry=[".carry/gpu.tar.xz"], command="scripts/gpu/run-on-device.sh")
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$root/build-cuda}
stage=$root/.carry/gpu
cmake -S "$root" -B "$build" -G Ninja -DATOLL_CUDA=ON >/dev/null
bins=(tests/test_gpu tests/test_gpu_sched tests/run_onnx_cases bench/atoll_bench_cuda bench/atoll_bench_preempt bench/atoll_bench_kernel_exit bench/atoll_bench_staging bench/atoll_bench_launch bench/atoll_bench_gate bench/atoll_bench_green src/apps/atoll)
targets=()
for b in "${bins[@]}"; do targets+=("$(basename "$b")"); done
cmake --build "$build" -j2 --target "${targets[@]}"
rm -rf "$stage"
mkdir -p "$stage"
for b in "${bins[@]}"; do cp "$build/$b" "$stage/"; done
# Triton's perf_analyzer (scripts/serve-venv.sh) for the `perfa` step, where it was installed;
# the loop below brings the libraries the GPU machine lacks (libb64, its CUDA 12 runtime).
pa=$root/.venv-serve/perf_analyzer
if [[ -x $pa/bin/perf_analyzer ]]; then
  cp "$pa/bin/perf_analyzer" "$stage/"
  targets+=(perf_analyzer)
fi
for b in "${targets[@]}"; do strip "$stage/$b"; done
# Every library the loader resolves except glibc's own, which the GPU machine provides.
for b in "${targets[@]}"; do LD_LIBRARY_PATH=$pa/nvidia/cuda_runtime/lib ldd "$stage/$b"; done |
  awk '/=> \//{print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*)\.so' | xargs -r -I{} cp -L {} "$stage/"
# The device tool carries at most 64 MiB: the binaries (each holding every kernel) and gRPC's
# libraries go as one xz archive, unpacked by run-on-device.sh. Preset 9's 64 MiB dictionary
# spans several binaries, so their shared device code is stored once: 19.6 MB where preset 6's
# 8 MiB window gave 64.5 MB, at the edge of the limit (session 38).
tar -C "$stage" -cf - . | xz -T0 -9 >"$stage.tar.xz"
rm -rf "$stage"
du -h "$stage.tar.xz"
