#!/usr/bin/env bash
# The Python environment of the server's integration test: Triton's own client from PyPI
# (tritonclient, gRPC and HTTP) in .venv-serve beside the sources, and onnx to write the ONNX
# model it serves. Idempotent. perf_analyzer: PyPI's perf-analyzer is a placeholder on this
# platform, and tritonclient's manylinux wheels shipped the binary until 2.60; 2.49's runs on
# Debian 12's glibc (2.53's and later need 2.38). It goes into .venv-serve/perf_analyzer
# (its own folder, so the client library above stays current) with the CUDA 12 runtime it links.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-serve
if ! "$venv/bin/python" -c "import tritonclient.grpc, tritonclient.http, numpy, onnx" 2>/dev/null; then
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q "tritonclient[grpc,http]" numpy onnx
fi
pa=$venv/perf_analyzer
if [ ! -x "$pa/bin/perf_analyzer" ]; then
  "$venv/bin/pip" install -q --no-deps --target "$pa" "tritonclient==2.49.0" nvidia-cuda-runtime-cu12
fi
