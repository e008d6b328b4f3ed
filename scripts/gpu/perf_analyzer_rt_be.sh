#!/usr/bin/env bash
# Issue 17's perf_analyzer target, measured as Triton users measure it: an RT client at a fixed
# Poisson rate through `atoll serve` over gRPC, alone and then beside BE clients at concurrency 8
# on other models (perf_analyzer runs of their own, started first and stopped after the RT run).
#   perf_analyzer_rt_be.sh ATOLL PERF_ANALYZER OUT_DIR
# PERFA_DEVICE (cuda), PERFA_RT (resnet50), PERFA_RATE (100 requests/s), PERFA_BE (resnet152
# bert_base), PERFA_BE_BATCH (8), PERFA_SECONDS (10: the RT run's three measurement windows; with
# stability not judged, perf_analyzer reports the three together).
# Inputs are zeros: a model's time does not depend on its values, and token id 0 is valid.
set -uo pipefail
atoll=$1 pa=$2 out=$3
mkdir -p "$out"
rate=${PERFA_RATE:-100} secs=${PERFA_SECONDS:-10} be_batch=${PERFA_BE_BATCH:-8}
repo=$(mktemp -d) server_pid='' be_pids=''
trap 'kill $server_pid $be_pids 2>/dev/null; rm -rf "$repo"' EXIT
model() {  # name zoo_model class max_batch
  mkdir -p "$repo/$1/1"
  printf '{"max_batch_size": %s, "parameters": {"zoo_model": {"string_value": "%s"}, "default_class": {"string_value": "%s"}}}\n' \
    "$4" "$2" "$3" >"$repo/$1/config.json"
}
model rt "${PERFA_RT:-resnet50}" rt 1
be_models=()
for m in ${PERFA_BE:-resnet152 bert_base}; do model "be_$m" "$m" be "$be_batch" && be_models+=("be_$m"); done
"$atoll" serve --device "${PERFA_DEVICE:-cuda}" --model-repository "$repo" --grpc-port 0 --http-port 0 \
  --metrics-port 0 >"$out/perfa_server.log" 2>&1 &
server_pid=$!
for _ in $(seq 600); do grep -q "gRPC .*metrics" "$out/perfa_server.log" && break; sleep 0.1; done
ports=$(grep -oE "gRPC [0-9.]+:[0-9]+, HTTP [0-9.]+:[0-9]+" "$out/perfa_server.log" | grep -oE ":[0-9]+" | tr -d :)
read -r grpc http <<<"$(echo $ports)"
[[ -n ${http:-} ]] || { echo "perfa: the server did not start: $(tail -3 "$out/perfa_server.log")"; exit 1; }
served() { python3 -c 'import json, sys, urllib.request as u
print(json.load(u.urlopen(sys.argv[1]))["model_stats"][0]["inference_stats"]["success"]["count"])' \
  "http://127.0.0.1:$http/v2/models/$1/stats"; }
rt_run() {  # csv name
  "$pa" -m rt -u "127.0.0.1:$grpc" -i grpc --input-data zero --request-rate-range "$rate" \
    --request-distribution poisson --measurement-mode time_windows --measurement-interval "$((secs * 1000 / 3))" \
    --stability-percentage 1000 --max-trials 3 -f "$out/$1.csv" >"$out/$1.log" 2>&1 ||
    echo "perfa: the RT run $1 failed: $(grep -iE 'error|fail' "$out/$1.log" | head -2)"
}
rt_run perfa_rt_alone
declare -A before
for m in "${be_models[@]}"; do
  before[$m]=$(served "$m")
  "$pa" -m "$m" -u "127.0.0.1:$grpc" -i grpc --input-data zero -b "$be_batch" --concurrency-range 8 \
    --measurement-mode time_windows --measurement-interval "$((secs * 1000))" --stability-percentage 1000 \
    --max-trials 10 >"$out/perfa_$m.log" 2>&1 &
  be_pids="$be_pids $!"
done
sleep 3  # the BE clients reach their concurrency before the RT measurement starts
started=$SECONDS
rt_run perfa_rt_mixed
elapsed=$((SECONDS - started))
for m in "${be_models[@]}"; do
  echo "perfa: $m served $(( ($(served "$m") - before[$m]) * be_batch / (elapsed > 0 ? elapsed : 1) )) inferences/s beside RT"
done
python3 - "$out" <<'PY'
import csv, sys
def row(name):
    with open(f"{sys.argv[1]}/{name}.csv") as f:
        return next(csv.DictReader(f))
alone, mixed = row("perfa_rt_alone"), row("perfa_rt_mixed")
for what, r in (("alone", alone), ("beside BE", mixed)):
    print(f"perfa: RT {what}: {float(r['Inferences/Second']):.1f}/s, p50 {int(r['p50 latency']) / 1000:.3f} ms, "
          f"p99 {int(r['p99 latency']) / 1000:.3f} ms")
print(f"perfa: RT p99 beside BE / alone = {int(mixed['p99 latency']) / int(alone['p99 latency']):.3f} (target <= 1.05)")
PY
