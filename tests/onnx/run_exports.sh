#!/usr/bin/env bash
# Real exports (torchvision, transformers) against onnxruntime on the CPU backend, relative L2
# <= 1e-4. Skips (77) when the Python packages are absent.
set -euo pipefail
python="$1" runner="$2" out="$3"
here="$(cd "$(dirname "$0")" && pwd)"
if ! "$python" -c "import onnx, onnxruntime, torch, torchvision, transformers" 2>/dev/null; then
  echo "SKIP: no Python with onnx, onnxruntime, torch, torchvision and transformers at '$python'" \
    "(run ATOLL_EXPORT_TESTS=1 scripts/install-python-deps.sh)"
  exit 77
fi
"$python" "$here/export_models.py" "$out"
exec "$runner" --rel-l2 1e-4 --expect "$here/expected_exports.txt" "$out"
