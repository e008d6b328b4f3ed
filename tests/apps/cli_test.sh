#!/usr/bin/env bash
# End-to-end checks of the atoll CLI: the commands a user types, their output and their errors.
# NumPy comes from Debian (scripts/install-deps.sh), hence the system python3.
set -uo pipefail
atoll=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; failures=$((failures + 1)); }

# expect_ok NAME REGEX CMD...: exits 0 and prints REGEX
expect_ok() {
  local name=$1 regex=$2; shift 2
  local out
  if out=$("$@" 2>&1) && grep -qE -e "$regex" <<<"$out"; then pass "$name"; else fail "$name: $out"; fi
}
# expect_error NAME REGEX CMD...: exits non-zero with one line on stderr matching REGEX
expect_error() {
  local name=$1 regex=$2; shift 2
  local err
  if "$@" >/dev/null 2>"$work/err"; then fail "$name: exited 0"; return; fi
  err=$(cat "$work/err")
  if grep -qE -e "$regex" <<<"$err" && [ "$(wc -l <"$work/err")" -le 3 ]; then pass "$name"; else fail "$name: $err"; fi
}

expect_ok "models lists the zoo" "inception_v3" "$atoll" models
expect_ok "info json keys" '"naive_activation_bytes"' "$atoll" info resnet50 --json
expect_ok "info resnet50 params" '"params": 25557032' "$atoll" info resnet50 --json
expect_ok "info bert params" '"params": 109482240' "$atoll" info bert_base --json
expect_ok "run resnet50 on cpu" "top-5" "$atoll" run resnet50 --device cpu --iters 1 --warmup 0
expect_ok "run json" '"median"' "$atoll" run tiny_bert --device cpu --iters 2 --json

onnx_cnn="$(dirname "$0")/../../fuzz/corpus/onnx/cnn.onnx"
expect_ok "info onnx model" '"batch": 4' "$atoll" info "$onnx_cnn" --batch 4 --json
expect_ok "run onnx model on cpu" "output +y \\[2, 4\\]" "$atoll" run "$onnx_cnn" --device cpu --batch 2 --iters 1 --warmup 0
expect_ok "colocate onnx models on sim" "RT +.*cnn.onnx@2" "$atoll" colocate --rt "$onnx_cnn@2:100" \
  --be "$onnx_cnn@4" --mode reset --duration 0.2 --device sim
expect_error "colocate missing onnx model" "--be '$work/none.onnx': ONNX model .* does not exist" \
  "$atoll" colocate --rt tiny_cnn --be "$work/none.onnx" --mode reset --duration 0.2 --device sim
expect_error "missing onnx model" "cannot open ONNX model" "$atoll" info "$work/none.onnx"
printf 'not a model' >"$work/bad.onnx"
expect_error "corrupt onnx model" "not an ONNX model" "$atoll" run "$work/bad.onnx" --device cpu
expect_error "bad --dim" "NAME=N" "$atoll" info "$onnx_cnn" --dim seq
expect_error "unknown model" "unknown model 'resnet51'" "$atoll" info resnet51
expect_error "batch 0" "batch" "$atoll" run tiny_cnn --batch 0
expect_error "bad device" "device" "$atoll" run tiny_cnn --device tpu
expect_error "missing npy" "cannot open" "$atoll" run tiny_cnn --device cpu --input input=/nonexistent.npy
expect_error "bad input syntax" "NAME=FILE" "$atoll" run tiny_cnn --device cpu --input garbage
"$atoll" l2 config tiny_cnn --slices 0 --out "$work/l2.json" >/dev/null 2>&1
expect_error "l2 config on the cpu" "applies on the GPU" "$atoll" run tiny_cnn --device cpu --l2 "$work/l2.json"
expect_error "missing l2 config" "cannot open L2 config" "$atoll" run tiny_cnn --device cpu --l2 "$work/none.json"
echo '{"format": "atoll.l2config/1"' >"$work/bad_l2.json"
expect_error "malformed l2 config" "bad_l2.json" "$atoll" run tiny_cnn --device cpu --l2 "$work/bad_l2.json"
# The tuner writes a config the loaders take, and a search log.
expect_ok "l2 tune on the simulator" "wrote" "$atoll" l2 tune tiny_bert --batch 8 --optimizer ea --evaluator sim \
  --steps 40 --out "$work/tuned.json" --log "$work/tune_log.json"
expect_ok "tuned config simulates" "DRAM" "$atoll" l2 simulate tiny_bert --batch 8 --config "$work/tuned.json"
expect_ok "tune log has every step" '"step": 40' cat "$work/tune_log.json"
expect_error "tuned config for another batch" "batch" "$atoll" l2 simulate tiny_bert --batch 4 --config "$work/tuned.json"
if ! nvidia-smi >/dev/null 2>&1; then
  expect_error "tune on a missing GPU" "--evaluator cuda needs a CUDA GPU" "$atoll" l2 tune tiny_cnn --evaluator cuda
fi

# Real inputs and outputs round-trip through NumPy files.
/usr/bin/python3 - "$work" <<'PY'
import numpy as np, sys
rng = np.random.default_rng(0)
np.save(sys.argv[1] + "/good.npy", rng.standard_normal((1, 3, 32, 32), dtype=np.float32))
np.save(sys.argv[1] + "/bad.npy", rng.standard_normal((1, 3, 31, 32), dtype=np.float32))
np.save(sys.argv[1] + "/ints.npy", np.zeros((1, 3, 32, 32), dtype=np.int64))
PY
expect_error "wrong input shape" "input 'input': expected shape \[1, 3, 32, 32\], given \[1, 3, 31, 32\]" \
  "$atoll" run tiny_cnn --device cpu --input "input=$work/bad.npy"
expect_error "wrong input dtype" "expected dtype f32, given i64" "$atoll" run tiny_cnn --device cpu --input "input=$work/ints.npy"
expect_error "unknown input name" "has no input 'image'" "$atoll" run tiny_cnn --device cpu --input "image=$work/good.npy"
if "$atoll" run tiny_cnn --device cpu --iters 1 --input "input=$work/good.npy" --output "$work/out" >/dev/null 2>&1 &&
  /usr/bin/python3 -c "import numpy as np,sys; a=np.load('$work/out/logits.npy'); sys.exit(0 if a.shape==(1,10) and np.isfinite(a).all() else 1)"; then
  pass "outputs written as npy"
else
  fail "outputs written as npy"
fi
# The same input gives the same output; another input gives another.
"$atoll" run tiny_cnn --device cpu --iters 1 --input "input=$work/good.npy" --output "$work/out2" >/dev/null 2>&1
"$atoll" run tiny_cnn --device cpu --iters 1 --output "$work/out3" >/dev/null 2>&1
if /usr/bin/python3 -c "import numpy as np,sys; a,b,c=[np.load('$work/'+d+'/logits.npy') for d in ('out','out2','out3')]; sys.exit(0 if (a==b).all() and not (a==c).all() else 1)"; then
  pass "outputs depend on the given input only"
else
  fail "outputs depend on the given input only"
fi

# colocate: each client its own batch, the RT order, one-line errors for bad client specs.
expect_ok "colocate per-client batch" '"batch": 4' \
  "$atoll" colocate --rt tiny_vgg@2:500 --be tiny_cnn@4,tiny_bert --duration 0.01 --rt-order edf --json
expect_ok "colocate padding JSON parses (logs on stderr)" '^ok$' bash -c \
  "'$atoll' colocate --rt tiny_cnn:100 --be tiny_vgg --mode padding-slices --duration 0.01 --json 2>/dev/null |
   python3 -c 'import json, sys; json.load(sys.stdin); print(\"ok\")'"
expect_ok "colocate records the RT order" '"rt_order": "edf"' \
  "$atoll" colocate --rt tiny_vgg:500 --be tiny_cnn --duration 0.01 --rt-order edf --json
expect_ok "colocate text shows the staging share" "of which staging" \
  "$atoll" colocate --rt tiny_vgg@1:500 --be tiny_cnn@8 --duration 0.01
expect_error "colocate batch 0" "--be 'tiny_cnn@0': the batch after '@' must be an integer" \
  "$atoll" colocate --rt tiny_vgg --be tiny_cnn@0
expect_error "colocate batch not a number" "--rt 'tiny_vgg@x:100': the batch after '@'" \
  "$atoll" colocate --rt tiny_vgg@x:100 --be tiny_cnn
expect_error "colocate rate not a number" "--rt 'tiny_vgg:fast': the rate after ':'" \
  "$atoll" colocate --rt tiny_vgg:fast --be tiny_cnn
expect_error "colocate rate on a BE client" "--be 'tiny_cnn:100': expected MODEL\[@BATCH\]" \
  "$atoll" colocate --rt tiny_vgg --be tiny_cnn:100
expect_error "colocate unknown model" "--be 'resnet51@8': unknown model 'resnet51'" \
  "$atoll" colocate --rt tiny_vgg --be resnet51@8
expect_error "colocate bad RT order" "rt-order" "$atoll" colocate --rt tiny_vgg --be tiny_cnn --rt-order lifo
cat >"$work/w.json" <<'JSON'
{"name": "cli", "clients": [
  {"name": "rt", "model": "tiny_vgg", "priority": "rt", "load": {"type": "periodic", "rate": 200}},
  {"name": "be", "model": "tiny_bert", "batch": 4, "seq": 16, "priority": "be", "load": {"type": "closed"}}]}
JSON
expect_ok "disb records the RT order" '"rt_order": "edf"' sh -c \
  "'$atoll' bench disb --workload '$work/w.json' --modes rt-only,reset --duration 0.05 --rt-order edf --out '$work/disb' >/dev/null && cat '$work/disb/results.json'"

# Input hardening (issue 18): lenient parses refused, errors before long runs, one escaped line.
expect_error "empty model name" "model name is empty" "$atoll" run ""
expect_error "negative seed" "seed" "$atoll" run tiny_cnn --device cpu --seed -1
start=$SECONDS
expect_error "tune log path checked first" "/proc/x/log.json" \
  "$atoll" l2 tune tiny_cnn --optimizer random --evaluator sim --steps 100000 --log /proc/x/log.json
if [ $((SECONDS - start)) -lt 20 ]; then pass "tune log refused before the search"; else fail "tune log refused late"; fi
expect_error "seed past 2^64 - 1" "seed.*whole number" "$atoll" run tiny_cnn --device cpu --seed 18446744073709551616
# CLI11's own errors quote arguments escaped, in one line; an unwritable stderr is no crash.
expect_error "raw bytes in an argument" '--device.*\\xff' "$atoll" run tiny_cnn --device $'cp\xff\x1b[2J'
if [ "$(grep -c . "$work/err")" -eq 1 ]; then pass "one line for a CLI11 error"; else fail "CLI11 error: $(cat "$work/err")"; fi
"$atoll" info no_such_model 2>/dev/full
rc=$?
if [ "$rc" -eq 1 ]; then pass "unwritable stderr: exit 1"; else fail "unwritable stderr: exit $rc"; fi
expect_error "the same input twice" "input 'input' is given more than once" \
  "$atoll" run tiny_cnn --device cpu --input "input=$work/good.npy" --input "input=$work/good.npy"
expect_error "unwritable --output before running" "--output '/proc/atoll-x'" \
  "$atoll" run tiny_cnn --device cpu --iters 1000000 --output /proc/atoll-x
expect_error "invalid bytes escaped" 'unknown model .bad\\xff\\x1b.' "$atoll" info $'bad\xff\x1b'
expect_error "slices with two dashes" "'1-2-3' is not a slice index" "$atoll" l2 config tiny_cnn --slices 1-2-3 --out "$work/s.json"
expect_error "slices with a suffix" "'1x' is not a slice index" "$atoll" l2 config tiny_cnn --slices 1x --out "$work/s.json"
expect_error "slices range backwards" "3-1 runs backwards" "$atoll" l2 config tiny_cnn --slices 3-1 --out "$work/s.json"
expect_error "colocate empty BE spec" "--be" "$atoll" colocate --rt tiny_vgg --be , --mode reset
expect_error "colocate BE list ending in a comma before --rt" "--be: expected MODEL\\[@BATCH\\]" \
  "$atoll" colocate --be=, --rt tiny_vgg --mode reset
expect_error "colocate without --rt" "--rt is required" "$atoll" colocate --be tiny_vgg --mode reset
expect_error "colocate near-zero rate refused" "at 1e-300 Hz has a period of 1e\\+300 s, longer than the run's 0.01 s" \
  "$atoll" colocate --rt tiny_cnn:1e-300 --mode rt-only --duration 0.01 --json
expect_error "colocate too many arrivals" "limit of 10000000" \
  "$atoll" colocate --rt tiny_cnn:1000000 --mode rt-only --duration 3600

# The kernel profiler on the simulator, and the padding mode planning with (or without) its file.
expect_ok "profile on sim" "profiled tiny_cnn batch 2 on simulated GPU.*: 13 kernels" \
  "$atoll" profile tiny_cnn --batch 2 --device sim --out "$work/tiny_cnn.profile.json"
expect_ok "profile says the room it leaves" "leaves SMs idle [0-9]+% of its time, [0-9.]+ of [0-9]+ SMs" \
  "$atoll" profile tiny_cnn --batch 2 --device sim --out "$work/tiny_cnn.profile.json"
expect_ok "profile file is keyed" '"fingerprint": "[0-9a-f]{16}"' cat "$work/tiny_cnn.profile.json"
expect_ok "profile names the heaviest kernels and their shares of the peaks" \
  "^  [a-z0-9._]+ +Conv2d +- +[0-9.]+ +[0-9.]+% +[0-9.]+ \\([0-9]+%\\) +[0-9.]+ \\([0-9]+%\\)$" \
  "$atoll" profile tiny_cnn --batch 2 --device sim --out "$work/tiny_cnn.profile.json"
expect_ok "profile gives the model's rate against the peak" \
  "the model: [0-9.]+ TFLOP/s over its kernels' time, [0-9]+% of the device's 250 TFLOP/s" \
  "$atoll" profile tiny_cnn --batch 2 --device sim --out "$work/tiny_cnn.profile.json"
expect_ok "colocate padding with a profile" '"padded_kernels": [1-9]' "$atoll" colocate --rt resnet50:1000 \
  --be tiny_cnn@2 --mode padding-concurrent --duration 0.01 --profile "$work/tiny_cnn.profile.json" --json
expect_ok "colocate padding profiles on the device" "BE kernels ran beside RT tasks" \
  "$atoll" colocate --rt tiny_vgg:2000 --be tiny_cnn --mode padding-concurrent --duration 0.01
expect_error "colocate profile of no client" "profile of 'tiny_cnn' batch 2 .* belongs to no client" \
  "$atoll" colocate --rt tiny_vgg:2000 --be tiny_cnn@1 --mode reset --duration 0.01 --profile "$work/tiny_cnn.profile.json"
echo '{"format": "atoll.profile/1"}' >"$work/bad.profile.json"
expect_error "colocate malformed profile" "bad.profile.json: kernel profile JSON" \
  "$atoll" colocate --rt tiny_vgg --be tiny_cnn --profile "$work/bad.profile.json"
expect_error "profile unknown model" "unknown model 'resnet51'" "$atoll" profile resnet51 --device sim
expect_ok "bench pairs" "padding-concurrent .*x" "$atoll" bench pairs --models tiny_vgg,tiny_cnn \
  --modes rt-only,reset,streams,padding-concurrent --duration 0.005 --json "$work/pairs.json"
expect_ok "bench pairs JSON" '"throughput_vs_reset"' cat "$work/pairs.json"
expect_ok "bench pairs winners" '"winners_rt_budget_pct"' cat "$work/pairs.json"
expect_ok "bench serve" "RT p99 .*x alone" "$atoll" bench serve --device sim --rt tiny_cnn:100 --be tiny_vgg:2 \
  --duration 0.2 --warmup 0.05 --requests 10 --json "$work/serve_bench.json"
expect_ok "bench serve JSON" '"p50_overhead_us"' cat "$work/serve_bench.json"
expect_ok "bench serve server-side split" '"grpc_server"' cat "$work/serve_bench.json"
expect_ok "bench serve times HTTP too" '"p50_overhead_http_us"' cat "$work/serve_bench.json"
expect_error "bench serve unknown model" "--rt 'resnet51:5': unknown model" "$atoll" bench serve --device sim --rt resnet51:5
expect_error "bench serve fractional concurrency" "whole number" "$atoll" bench serve --device sim --be tiny_cnn:1.5
expect_error "bench serve window with no request due" "no request was due in the measured 0.1 s window" "$atoll" bench serve \
  --device sim --rt tiny_cnn:1 --be tiny_vgg:1 --duration 0.1 --warmup 0.5 --requests 10
sed 's/"name": "cli"/"name": "..\/..\/X"/' "$work/w.json" >"$work/escape.json"
expect_error "disb workload name with a path" "field 'name': '../../X' holds a path separator" \
  "$atoll" bench disb --workload "$work/escape.json" --modes rt-only --duration 0.01 --out "$work/escape"
expect_error "colocate RT L2 persistence on the simulator" "--rt-l2 arena needs --device cuda" \
  "$atoll" colocate --rt tiny_cnn --be tiny_vgg --rt-l2 arena --duration 0.01
expect_error "disb RT L2 persistence on the simulator" "--rt-l2 weights needs --device cuda" \
  "$atoll" bench disb --workload "$work/w.json" --modes rt-only --duration 0.01 --rt-l2 weights --out "$work/persist"
sed 's/"priority": "rt"/"priority": "rt", "dealine_ms": 5/' "$work/w.json" >"$work/typo.json"
expect_error "disb unknown key" "clients\[0\].dealine_ms': unknown key \(did you mean 'deadline_ms'\?\)" \
  "$atoll" bench disb --workload "$work/typo.json" --modes rt-only --duration 0.01 --out "$work/typo"
sed 's/"rate": 200/"rate": 1e400/' "$work/w.json" >"$work/huge_rate.json"
expect_error "disb rate 1e400" "huge_rate.json.*not valid JSON" \
  "$atoll" bench disb --workload "$work/huge_rate.json" --modes rt-only --duration 0.01 --out "$work/huge"
sed 's/"rate": 200/"rate": 100000/' "$work/w.json" >"$work/fast.json"
expect_error "disb too many arrivals before running" "client 'rt'.*limit of 10000000 per client" \
  "$atoll" bench disb --workload "$work/fast.json" --modes rt-only --duration 3600 --out "$work/fast"
expect_error "disb unwritable --out before running" "--out '/proc/atoll-x'" \
  "$atoll" bench disb --workload "$work/w.json" --modes rt-only --duration 3600 --out /proc/atoll-x

# Outputs: a failed write is an error, never a truncated file or a "wrote" and exit 0.
# full CMD...: runs CMD on a "disk" that takes 1 KiB per file (EFBIG), as a full disk would.
full() { (trap '' XFSZ; ulimit -f 1; exec "$@"); }
expect_error "l2 config to /dev/full" "/dev/full.*No space left" "$atoll" l2 config tiny_cnn --slices 0 --out /dev/full
expect_error "info --program to /dev/full" "/dev/full.*No space left" "$atoll" info tiny_cnn --program /dev/full
expect_error "stdout to /dev/full" "standard output" sh -c "'$atoll' info tiny_cnn --json >/dev/full"
"$atoll" info tiny_cnn --program "$work/program.json" >/dev/null
cp "$work/program.json" "$work/program.before"
expect_error "info --program on a full disk" "program.json" full "$atoll" info tiny_cnn --batch 2 --program "$work/program.json"
if cmp -s "$work/program.json" "$work/program.before" && ! ls "$work" | grep -q tmp; then
  pass "a failed write keeps the previous file and no temp"
else
  fail "a failed write keeps the previous file and no temp"
fi
expect_error "run --output on a full disk" "logits.npy" \
  full "$atoll" run resnet18 --device cpu --iters 1 --warmup 0 --output "$work/full_out"
if [ ! -e "$work/full_out/logits.npy" ]; then pass "no truncated logits.npy"; else fail "no truncated logits.npy"; fi

# bench disb writes its four files as one set: a failed run keeps the previous set whole.
disb() { "$atoll" bench disb --workload "$work/w.json" --modes rt-only,reset --duration 0.05 "$@"; }
disb --seed 1 --out "$work/set" >/dev/null 2>&1
cp "$work/set/results.json" "$work/set.before"
# (disb reports progress on stderr, so only its last line is the error.)
if ! full "$atoll" bench disb --workload "$work/w.json" --modes rt-only --duration 0.05 --seed 2 --out "$work/set" \
  >/dev/null 2>"$work/err" && tail -1 "$work/err" | grep -q "i/o error: writing '$work/set' (left as it was): cannot write .*File too large"; then
  pass "disb on a full disk fails"
else
  fail "disb on a full disk fails: $(cat "$work/err")"
fi
if cmp -s "$work/set/results.json" "$work/set.before" && [ -s "$work/set/trace.json" ] && [ -s "$work/set/report.html" ]; then
  pass "failed disb keeps the previous set"
else
  fail "failed disb keeps the previous set"
fi
disb --seed 3 --out "$work/set" >/dev/null 2>&1
if ! cmp -s "$work/set/results.json" "$work/set.before" && [ "$(ls -A "$work/set" | wc -l)" -eq 4 ] &&
  ! ls -A "$work" | grep -q '^\.set'; then
  pass "disb replaces the set, leaving no staging folder"
else
  fail "disb replaces the set, leaving no staging folder"
fi
echo mine >"$work/set/notes.txt"
expect_error "disb refuses a folder with other files" "notes.txt" disb --out "$work/set"

# Weights files must cover the model exactly; partial ones only with a flag, listing the rest.
/usr/bin/python3 - "$work" <<'PY'
import json, struct, sys
import numpy as np
def save(path, tensors):
    header, data = {}, b""
    for name, a in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [len(data), len(data) + a.nbytes]}
        data += a.astype("<f4").tobytes()
    h = json.dumps(header).encode()
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)
save(sys.argv[1] + "/bias.safetensors", {"fc.bias": np.zeros(10, np.float32)})
save(sys.argv[1] + "/nan_bias.safetensors", {"fc.bias": np.array([0, 0, 0, 0, 0, 0, 0, np.nan, 0, 0], np.float32)})
np.save(sys.argv[1] + "/nan.npy", np.full((1, 3, 32, 32), np.nan, dtype=np.float32))
PY
expect_error "partial weights file" "lacks 26 of the model's 27 weights: stem.conv.weight.*--allow-partial-weights" \
  "$atoll" run tiny_cnn --device cpu --iters 1 --weights "$work/bias.safetensors"
expect_ok "partial weights allowed, listed" "left seeded-random: .*fc.weight" \
  "$atoll" run tiny_cnn --device cpu --iters 1 --weights "$work/bias.safetensors" --allow-partial-weights

# NaN is reported, not hidden: a warning, per-output counts, and explicit strings in JSON.
expect_ok "NaN input warns" "warning: output 'logits' is not finite: 10 NaN" \
  "$atoll" run tiny_cnn --device cpu --iters 1 --input "input=$work/nan.npy"
expect_ok "NaN output in JSON" '"sum": "NaN"' "$atoll" run tiny_cnn --device cpu --iters 1 --json --input "input=$work/nan.npy"
expect_ok "top-5 ranks NaN first, as torch.topk" "top-5 +7:nan " \
  "$atoll" run tiny_cnn --device cpu --iters 1 --weights "$work/nan_bias.safetensors" --allow-partial-weights
expect_ok "NaN counted in JSON" '"nan_count": 10' "$atoll" run tiny_cnn --device cpu --iters 1 --json --input "input=$work/nan.npy"

# A fatal signal leaves a report naming it and the call stack, and still ends the process by it.
"$atoll" run vgg19 --device cpu --iters 1000 --warmup 0 >/dev/null 2>"$work/crash" &
crash_pid=$!
sleep 2
kill -SEGV "$crash_pid"
wait "$crash_pid"
crash_status=$?
if [ "$crash_status" -eq 139 ] && grep -q "^atoll: fatal signal SEGV; call stack" "$work/crash" &&
  grep -q "atoll(" "$work/crash"; then
  pass "fatal signal report"
else
  fail "fatal signal report: status $crash_status, $(head -c 400 "$work/crash")"
fi

[ "$failures" -eq 0 ]
