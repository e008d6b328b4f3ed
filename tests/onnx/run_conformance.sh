#!/usr/bin/env bash
# ONNX's backend test cases on the CPU backend: writes them with the onnx package, runs them,
# prints the table. Skips (77) when the Python packages are absent.
set -euo pipefail
python="$1" runner="$2" out="$3"
here="$(cd "$(dirname "$0")" && pwd)"
if ! "$python" -c "import onnx" 2>/dev/null; then
  echo "SKIP: no Python with the onnx package at '$python' (run scripts/install-python-deps.sh)"
  exit 77
fi
"$python" "$here/make_node_cases.py" "$out"
exec "$runner" --expect "$here/expected_pass.txt" "$out/node" "$out/simple" "$out/pytorch-converted" \
  "$out/pytorch-operator"
