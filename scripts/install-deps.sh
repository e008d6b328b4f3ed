#!/usr/bin/env bash
# Installs the Debian packages atoll builds and tests with. Idempotent; needs root (or sudo).
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config
      libfmt-dev libspdlog-dev nlohmann-json3-dev libcli11-dev
      libgtest-dev libgmock-dev libbenchmark-dev libeigen3-dev
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libcpp-httplib-dev  # atoll serve
      libonnx-dev  # ONNX import: the ONNX protobuf schema and op registry
      python3 python3-numpy python3-venv
      clang libclang-rt-14-dev libomp-dev  # the libFuzzer build (scripts/fuzz.sh)
      chromium  # renders the DISB HTML report in a test
      libb64-0d)  # perf_analyzer (scripts/serve-venv.sh) links it
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
