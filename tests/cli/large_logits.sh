#!/usr/bin/env bash
# Logits and attention scores in the thousands (issue 11, item 6): a softmax
# that skips the max subtraction overflows there (exp(710) = inf, inf / inf =
# NaN) and nowhere on the trained model. tests/support/scale_head.py writes a
# variant of models/holmes-gpt into this test's folder (nothing large is
# committed): every logit + 3000 (their differences unchanged) and ln_1 x 30
# (attention scores x ~900). Golden-free checks on it (cache_equals_recompute,
# batch_consistency) and a golden blessed here on ref (sampled, top-p):
#  - ref and ref-sample (a correct sample slot) pass every case;
#  - ref-attn-no-max (test fault 47: the attention softmax without the max)
#    fails each with NaN logits named as a backend failure, and passes the
#    same cases on the trained model (the fault needs large magnitudes);
#  - ref-sample-no-max (a slot whose top-p softmax skips the max) fails the
#    sampled golden through the slot check, and passes it on the trained
#    model's sampled goldens.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init large_logits
[[ -f "$GF_SRC/models/holmes-gpt/model.safetensors" ]] || { echo "large_logits: models/holmes-gpt not trained; nothing to run"; exit 0; }
B="$GF_BUILD/tests/backends"
for f in ref_attn_no_max sample_ok sample_no_max; do
  [[ -f "$B/libgenfence_test_$f.so" ]] || fail "test backend $B/libgenfence_test_$f.so not built"
done
root="$tmp/root"
mkdir -p "$root/cases" "$root/golden"
touch "$root/CMakeLists.txt"
"$PY" "$GF_SRC/tests/support/scale_head.py" "$GF_SRC/models/holmes-gpt" "$root/models/holmes-gpt-hot" \
    --ln-f 1 --shift 3000 --ln-1 30
cat >"$root/cases/large.yaml" <<'YAML'
cases:
  - id: large.cache
    kind: cache_equals_recompute
    model: models/holmes-gpt-hot
    prompt: "Sherlock Holmes"
    steps: 16
  - id: large.cache.chunked
    kind: cache_equals_recompute
    model: models/holmes-gpt-hot
    prompt: "Sherlock Holmes sat by the fire"
    steps: 8
    prefill_chunks: [2, 3]
  - id: large.batch
    kind: batch_consistency
    model: models/holmes-gpt-hot
    prompts: ["Holmes", "It was a dark night and", "My dear Watson, said he, I"]
    max_new_tokens: 8
  - id: large.golden.sampled
    kind: golden_generation
    model: models/holmes-gpt-hot
    prompts: ["Sherlock Holmes", "It was a dark night and", "My dear Watson, said he, I"]
    max_new_tokens: 32
    temperature: 1.5
    top_p: 0.6
    seed: 5
YAML
export GENFENCE_ROOT="$root"
"$GENFENCE" bless --backend ref "$root/cases/large.yaml" >"$tmp/bless.out" 2>&1 || { cat "$tmp/bless.out"; fail "bless on ref"; }
run() { # name, report dir, backends...
  local dir=$1; shift
  set +e
  "$GENFENCE" run "$root/cases/large.yaml" "$@" --no-triangulate -j 2 --oversubscribe --report-dir "$tmp/$dir" >"$tmp/$dir.out" 2>&1
  echo $? >"$tmp/$dir.rc"
  set -e
  cat "$tmp/$dir.out"
}
run ok --backend ref --backend "$B/libgenfence_test_sample_ok.so"
[[ $(cat "$tmp/ok.rc") == 0 ]] || fail "ref / ref-sample do not pass on the large-logit model"
run attn --backend "$B/libgenfence_test_ref_attn_no_max.so"
[[ $(cat "$tmp/attn.rc") == 1 ]] || fail "ref-attn-no-max: exit $(cat "$tmp/attn.rc"), expected 1"
run slot --filter '^large\.golden\.' --backend "$B/libgenfence_test_sample_no_max.so"
[[ $(cat "$tmp/slot.rc") == 1 ]] || fail "ref-sample-no-max: exit $(cat "$tmp/slot.rc"), expected 1"
unset GENFENCE_ROOT
# specificity: the same faults pass on the trained model
"$GENFENCE" run "$GF_SRC/cases/generation.yaml" --filter '^(cache\.sherlock(\.chunked)?|batch\.left_padded)$' \
    --backend "$B/libgenfence_test_ref_attn_no_max.so" --no-triangulate --no-report >"$tmp/attn_small.out" 2>&1 \
    || { cat "$tmp/attn_small.out"; fail "ref-attn-no-max fails on the trained model too (not a large-logit test)"; }
"$GENFENCE" run "$GF_SRC/cases/golden.yaml" --filter '^golden\.sampled\.' --backend "$B/libgenfence_test_sample_no_max.so" \
    --no-triangulate --no-report >"$tmp/slot_small.out" 2>&1 \
    || { cat "$tmp/slot_small.out"; fail "ref-sample-no-max fails the trained model's goldens too"; }
"$PY" - "$tmp" "$root/golden/large.golden.sampled.safetensors" <<'PY'
import json, struct, sys, array
tmp, golden = sys.argv[1], sys.argv[2]
errors = []
# the golden's logits are in the thousands
with open(golden, "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    hdr = json.loads(f.read(n))
    data = f.read()
t = hdr["logits.0"]
v = array.array("f")
v.frombytes(data[t["data_offsets"][0]:t["data_offsets"][1]])
if not min(abs(x) for x in v) > 1000:
    errors.append(f"the variant's logits are not in the thousands: min |logit| {min(abs(x) for x in v)}")
else:
    print(f"ok   logits in [{min(v):.1f}, {max(v):.1f}]")
def res(d):
    return json.load(open(f"{tmp}/{d}/run.json"))["results"]
ok = res("ok")
if len(ok) != 8 or any(r["verdict"] != "pass" for r in ok):
    errors.append("ok: " + ", ".join(f"{r['id']} [{r['backend']}] {r['verdict']}" for r in ok))
for r in ok:
    s = r["metrics"].get("backend_sample_slot")
    if r["backend"] == "ref-sample" and r["kind"] == "golden_generation" and not (isinstance(s, dict) and s["rows"] == 96):
        errors.append(f"{r['id']} [ref-sample]: slot record {s}")
for r in res("attn"):
    if r["verdict"] != "fail" or "is NaN (backend failure)" not in r["reason"]:
        errors.append(f"{r['id']} [ref-attn-no-max]: {r['verdict']} {r['reason']!r}")
    else:
        print(f"ok   {r['id']} [ref-attn-no-max]: fails, NaN logits")
SLOT = "backend sample slot equals engine sampler"
for r in res("slot"):
    failed = [c["name"] for c in r["checks"] if not c["passed"]]
    if r["verdict"] != "fail" or failed != [SLOT]:
        errors.append(f"{r['id']} [ref-sample-no-max]: {r['verdict']}, failed {failed}")
    else:
        print(f"ok   {r['id']} [ref-sample-no-max]: fails the slot check ({r['metrics']['backend_sample_slot']['mismatches']} rows)")
if errors:
    print("\n".join("FAIL: " + e for e in errors), file=sys.stderr)
    sys.exit(1)
PY
echo "large_logits: ok"
