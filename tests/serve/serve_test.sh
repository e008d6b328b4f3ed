#!/usr/bin/env bash
# Runs serve_test.py with the Python of .venv-serve (scripts/serve-venv.sh), else python3.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
python="$root/.venv-serve/bin/python"
[ -x "$python" ] || python=python3
exec "$python" "$(dirname "$0")/serve_test.py" "$@"
