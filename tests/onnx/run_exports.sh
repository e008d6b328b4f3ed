#!/usr/bin/env bash
# Real exports (torchvision, transformers) against onnxruntime on the CPU backend, relative L2
# <= 1e-4. With torch the models are exported afresh (export_models.py); without it (CI: PyPI's
# torch is ~3.5 GB) the exporters' graphs kept in tests/onnx/graphs get seeded weights
# (fill_exports.py). Skips (77) when onnx or onnxruntime is absent.
set -euo pipefail
python="$1" runner="$2" out="$3"
here="$(cd "$(dirname "$0")" && pwd)"
if "$python" -c "import onnx, onnxruntime, torch, torchvision, transformers" 2>/dev/null; then
  "$python" "$here/export_models.py" "$out"
elif "$python" -c "import onnx, onnxruntime" 2>/dev/null; then
  echo "no torch at '$python': the graphs of tests/onnx/graphs with seeded weights"
  "$python" "$here/fill_exports.py" "$out"
else
  echo "SKIP: no Python with onnx and onnxruntime at '$python' (run scripts/install-python-deps.sh)"
  exit 77
fi
exec "$runner" --rel-l2 1e-4 --expect "$here/expected_exports.txt" "$out"
