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

[ "$failures" -eq 0 ]
