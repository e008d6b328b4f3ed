#!/usr/bin/env bash
# Configures and builds atoll into ${ATOLL_BUILD_DIR:-build}. CUDA parts build when nvcc exists.
set -euo pipefail
cd "$(dirname "$0")/.."
"$(dirname "$0")/install-deps.sh"
build_dir="${ATOLL_BUILD_DIR:-build}"
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DATOLL_CUDA="${ATOLL_CUDA:-AUTO}" \
  -DATOLL_CUDA_ARCHITECTURES="${ATOLL_CUDA_ARCHITECTURES:-90a}" "$@"
cmake --build "$build_dir" -j "$(nproc)"
