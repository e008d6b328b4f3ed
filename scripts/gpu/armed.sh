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
python3 - "$out" <<'PY'
import json, sys, glob, os
print(f"{'run':22} {'RT p50':>8} {'RT p99':>8} {'max':>8} {'BE/s':>7} {'preempt':>7} {'arr->1st p50':>12} {'p99':>7} {'staging':>8} {'queue':>7}")
for f in sorted(glob.glob(os.path.join(sys.argv[1], "colocate_*.json"))):
    try:
        d = json.load(open(f))
    except Exception as e:
        print(f, "unreadable", e); continue
    rt = [c for c in d["clients"] if c["class"] == "rt"][0]["latency_ms"]
    pre = d.get("preemptions", {})
    lat = pre.get("latency_us", {})
    b = d.get("rt_breakdown", {})
    name = os.path.basename(f)[len("colocate_"):-5]
    print(f"{name:22} {rt['p50']:8.3f} {rt['p99']:8.3f} {rt['max']:8.3f} {d['be_throughput_per_s']:7.1f} {pre.get('count', 0):7d} "
          f"{lat.get('p50', 0):12.1f} {lat.get('p99', 0):7.1f} {b['staging_us']['p50']:8.1f} {b['queueing_us']['p50']:7.1f}")
PY
