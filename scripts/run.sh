#!/usr/bin/env bash
# Builds atoll and runs the main job: `atoll run` on the default model on the best device present
# (the GPU when there is one, else the CPU). Extra arguments go to `atoll run`.
set -euo pipefail
cd "$(dirname "$0")/.."
"$(dirname "$0")/build.sh" -DATOLL_BUILD_TESTS=OFF >&2
exec "${ATOLL_BUILD_DIR:-build}/src/apps/atoll" run "$@"
