#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with clang (ASan + UBSan, coverage-instrumented libraries,
# only what the parsers need) into ${ATOLL_FUZZ_DIR:-build-fuzz}, then runs each from the
# checked-in seed corpus (never written to; new inputs go to a scratch folder), one per core.
#   default (CI): FUZZ_RUNS inputs per target (default 50000) from seed 1, so a commit's result is
#     the same on every run: CI is red only for a change that brought the problem in.
#   FUZZ_SECONDS=S: explore for S seconds per target from a random seed, to find new problems.
# A finding stops the script with the crashing input saved under $FUZZ_ARTIFACTS (default
# <build>/artifacts): add it to fuzz/corpus/<target>/ once fixed, so it stays a regression input.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${ATOLL_FUZZ_DIR:-build-fuzz}
flags="-O1 -g1 -fsanitize=address,undefined,float-cast-overflow,fuzzer-no-link -fno-sanitize-recover=undefined"
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DATOLL_CUDA=OFF \
  -DATOLL_BUILD_TESTS=OFF -DATOLL_FUZZ=ON -DCMAKE_CXX_FLAGS="$flags -fno-omit-frame-pointer" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$build" -j "$(nproc)" --target atoll_fuzz_targets
if [ -n "${FUZZ_SECONDS:-}" ]; then
  budget="-max_total_time=$FUZZ_SECONDS"
  what="${FUZZ_SECONDS} s from a random seed"
else
  budget="-seed=1 -runs=${FUZZ_RUNS:-50000}"
  what="seed 1"
fi
artifacts=${FUZZ_ARTIFACTS:-$build/artifacts}
mkdir -p "$artifacts"
# One target from its seed corpus ($1): a line with its input count, or the log of its finding.
run_target() {
  local name bin scratch
  name=$(basename "$1")
  bin="$build/fuzz/fuzz_$name"
  [ -x "$bin" ] || { echo "fuzz: $bin is missing (configure with -DATOLL_FUZZ=ON)"; return 1; }
  scratch=$(mktemp -d)
  # -rss_limit_mb: a parser that allocates what a header claims shows up as a finding.
  # shellcheck disable=SC2086  # $budget is one or two flags
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$bin" $budget -rss_limit_mb=1024 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$artifacts/${name}-" "$scratch" "$1" 2>"$scratch.log" ||
    { tail -40 "$scratch.log"; echo "fuzz: fuzz_$name found a problem (input in $artifacts)"; return 1; }
  echo "fuzz_$name: $(grep -E 'stat::number_of_executed_units' "$scratch.log" | awk '{print $2}') inputs ($what), no finding"
  rm -rf "$scratch" "$scratch.log"
}
export build budget what artifacts
export -f run_target
# Each target is one process on one core, and independent of the others (from seed 1 it runs the
# same inputs either way): $(nproc) at a time. xargs fails (123) when any target does.
printf '%s\n' fuzz/corpus/*/ | xargs -P "$(nproc)" -I{} bash -c 'run_target "$1"' _ {}
