#!/usr/bin/env bash
# Builds atoll with its tests and runs them. GPU tests (label "gpu") skip with a message where
# no GPU exists; run them on a GPU machine with `ctest --test-dir build -L gpu`.
set -euo pipefail
cd "$(dirname "$0")/.."
"$(dirname "$0")/install-deps.sh"
# The Python environments install while the build compiles: on a fresh machine they take about
# 85 s, most of it waiting on downloads, and the build keeps both cores busy meanwhile.
# The ONNX conformance and export tests need PyPI packages; without them (no network) they skip.
{ "$(dirname "$0")/install-python-deps.sh" ||
    echo "warning: PyPI packages for the ONNX tests not installed; they will skip"; } &
python_deps=$!
"$(dirname "$0")/serve-venv.sh" &  # tritonclient for the server test
serve_venv=$!
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT  # a failed build leaves no install running
"$(dirname "$0")/build.sh" -DATOLL_BUILD_TESTS=ON
wait "$python_deps"
wait "$serve_venv"
ctest --test-dir "${ATOLL_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" --timeout 600
