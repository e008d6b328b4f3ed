#!/usr/bin/env bash
# The CPU test suite under AddressSanitizer and UndefinedBehaviorSanitizer (float-cast-overflow
# included), every finding fatal, in ${ATOLL_SANITIZE_DIR:-build-asan}; then every libFuzzer
# target in fuzz/ for a bounded time (scripts/fuzz.sh, its own clang build). CPU only (no CUDA).
# The ONNX real-export test (label "exports": torch and onnxruntime time) runs in scripts/test.sh only.
set -euo pipefail
cd "$(dirname "$0")/.."
"$(dirname "$0")/install-deps.sh"
"$(dirname "$0")/serve-venv.sh"
dir="${ATOLL_SANITIZE_DIR:-build-asan}"
flags="-O1 -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# -g1: line tables are all a sanitizer report needs, and full debug info costs a quarter of the build.
# The test programs' and the CLI's own code at -O0 (the libraries keep -O1): half the CPU of their
# -O1 build.
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DATOLL_CUDA=OFF \
  -DATOLL_BUILD_TESTS=ON -DATOLL_TEST_OPT=-O0 -DATOLL_APP_OPT=-O0 -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined"
cmake --build "$dir" -j "$(nproc)"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir "$dir" -LE "gpu|exports" --output-on-failure -j "$(nproc)" --timeout 600
"$(dirname "$0")/fuzz.sh"
