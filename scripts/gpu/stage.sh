#!/usr/bin/env bash
# Builds the GPU test and benchmark binaries here (the GPU machine has no Debian dev packages) and
# stages them, stripped, with the shared libraries they load, in .carry/gpu/ (found through the
# binaries' $ORIGIN rpath). Then: run(carry=[".carry/gpu"], command="scripts/gpu/run-on-device.sh").
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD_DIR:-$root/build-cuda}
stage=$root/.carry/gpu
cmake -S "$root" -B "$build" -G Ninja -DATOLL_CUDA=ON >/dev/null
bins=(tests/test_gpu tests/test_gpu_sched bench/atoll_bench_cuda bench/atoll_bench_preempt bench/atoll_bench_kernel_exit bench/atoll_bench_staging src/apps/atoll)
targets=()
for b in "${bins[@]}"; do targets+=("$(basename "$b")"); done
cmake --build "$build" -j2 --target "${targets[@]}"
rm -rf "$stage"
mkdir -p "$stage"
for b in "${bins[@]}"; do cp "$build/$b" "$stage/"; done
for b in "${targets[@]}"; do strip "$stage/$b"; done
# Every library the loader resolves except glibc's own, which the GPU machine provides.
for b in "${targets[@]}"; do ldd "$stage/$b"; done | awk '/=> \//{print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*)\.so' | xargs -r -I{} cp -L {} "$stage/"
du -sh "$stage"
ls "$stage"
