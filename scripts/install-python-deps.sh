#!/usr/bin/env bash
# Installs the PyPI packages the ONNX tests use (onnx's backend test cases, onnxruntime as the
# reference, and with ATOLL_EXPORT_TESTS=1 torch/torchvision/transformers for real exports) into a
# virtual environment at
# ${ATOLL_PYENV:-$HOME/.cache/atoll/pyenv}, which outlives build folders and clones. Idempotent.
# The tests that need these packages skip with a message when they are absent.
set -euo pipefail
env_dir="${ATOLL_PYENV:-$HOME/.cache/atoll/pyenv}"
# Versions the conformance expectations (tests/onnx/expected_pass.txt) were recorded with.
pkgs=(numpy onnx==1.23.2 onnxruntime==1.32.0)
check="import numpy, onnx, onnxruntime
assert onnx.__version__ == '1.23.2'"
# The real-export test's exporters: PyPI's torch for Linux pulls ~3.5 GB of CUDA packages (about
# 8 minutes on a fresh machine, most of CI's time budget), so they come only when asked for
# (ATOLL_EXPORT_TESTS=1); without them the test fills the exporters' graphs kept in
# tests/onnx/graphs with seeded weights, and GPU machines with PyTorch export afresh.
if [ "${ATOLL_EXPORT_TESTS:-0}" = 1 ]; then
  pkgs+=(torch==2.15.0 torchvision==0.29.2 transformers==5.24.0)
  check="$check
import torch, torchvision, transformers
assert transformers.__version__ == '5.24.0'"
fi
if [ -x "$env_dir/bin/python" ] && "$env_dir/bin/python" -c "$check" 2>/dev/null; then
  exit 0
fi
python3 -m venv "$env_dir"
"$env_dir/bin/pip" install --quiet --disable-pip-version-check "${pkgs[@]}"
