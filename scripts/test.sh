#!/usr/bin/env bash
# Builds atoll with its tests and runs them. GPU tests (label "gpu") skip with a message where
# no GPU exists; run them on a GPU machine with `ctest --test-dir build -L gpu`.
set -euo pipefail
cd "$(dirname "$0")/.."
# The ONNX conformance and export tests need PyPI packages; without them (no network) they skip.
"$(dirname "$0")/install-python-deps.sh" || echo "warning: PyPI packages for the ONNX tests not installed; they will skip"
"$(dirname "$0")/build.sh" -DATOLL_BUILD_TESTS=ON
"$(dirname "$0")/serve-venv.sh"  # tritonclient for the server test
ctest --test-dir "${ATOLL_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" --timeout 600
