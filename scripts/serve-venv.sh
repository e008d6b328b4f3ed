#!/usr/bin/env bash
# The Python environment of the server's integration test: Triton's own client from PyPI
# (tritonclient, gRPC and HTTP) in .venv-serve beside the sources, and onnx to write the ONNX
# model it serves. Idempotent. perf_analyzer is not installed: PyPI serves only a placeholder
# package under that name for this platform.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-serve
if ! "$venv/bin/python" -c "import tritonclient.grpc, tritonclient.http, numpy, onnx" 2>/dev/null; then
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q "tritonclient[grpc,http]" numpy onnx
fi
