#!/usr/bin/env bash
# On the GPU machine: the scheduler's RT arrival paths side by side (reset mode with RT tasks
# armed before they arrive, and launched on arrival) against rt-only, through `atoll colocate`
# (RT vgg19 at 100 Hz, BE resnet152), COLOCATE_SECONDS per run; JSON under $OUT, table last.
set -uo pipefail
out=${OUT:-$PWD/out}
bin=$PWD/.carry/gpu
secs=${COLOCATE_SECONDS:-5}
mkdir -p "$out"
run() {  # name, then colocate arguments
  local name=$1
  shift
  timeout -k 5 120 "$bin/atoll" colocate --rt vgg19:100 --be resnet152 --duration "$secs" --device cuda --json "$@" \
    >"$out/colocate_$name.json" 2>"$out/colocate_$name.log" || echo "colocate $name failed: $(tail -1 "$out/colocate_$name.log")"
}
for round in 1 2; do
  run "rt-only_$round" --mode rt-only
  run "reset-armed_$round" --mode reset --rt-arrival armed
  run "reset-launch_$round" --mode reset --rt-arrival launch
done
python3 scripts/gpu/colocate_table.py "$out"/colocate_*.json
