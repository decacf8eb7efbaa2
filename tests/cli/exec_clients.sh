#!/usr/bin/env bash
# The protocol clients as backends (docs/protocol.md): the plain-C echo_ref
# (tools/backends/echo_ref) runs the default GPT-2 case files beside ref with
# every verdict a pass and triangulation agreeing; transformers
# (tools/backends/transformers_backend.py) runs the cache, padding, sampling
# and golden cases (and the Llama cases once models/holmes-llama exists)
# and generates ref's text; `genfence backends` reports
# each client's library, a command line's quotes and escapes are honoured,
# and bare `exec` (no command) is a skip with the reason.
set -euo pipefail
: "${GENFENCE:?set GENFENCE to the genfence binary}" "${GF_SRC:?set GF_SRC}" "${GF_BUILD:?set GF_BUILD}"
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init exec_clients
ECHO="$GF_BUILD/tools/echo_ref"
# the exec deadline is a hang guard, not a speed bound: the transformers
# client imports torch and transformers in model_load, which took over the
# 60 s default on a loaded 2-core machine (a ctest -j2 beside a build)
export GENFENCE_EXEC_TIMEOUT=${GENFENCE_EXEC_TIMEOUT:-$((600 * ${GF_TIME_SCALE:-1}))}
TF="$PY $GF_SRC/tools/backends/transformers_backend.py"
[[ -x "$ECHO" ]] || fail "$ECHO not built"
cd "$GF_SRC"

"$GENFENCE" backends --backend "exec:$ECHO" --backend "exec:$TF" >"$tmp/b" 2>&1 || fail "backends: exit $?"
cat "$tmp/b"
grep -Eq "^exec:.*echo_ref +available +fp32 +threads 1 +echo_ref \(C, libm\); client 'echo_ref'" "$tmp/b" ||
  fail "backends: no echo_ref line"
grep -Eq "^exec:.*transformers_backend.py +available +fp32 .*transformers [0-9.]+, torch" "$tmp/b" ||
  fail "backends: no transformers line"
# the invariance echo_ref declares travels in its info reply (hello feature bit 2); the transformers
# client declares none
"$GENFENCE" backends --json --backend "exec:$ECHO" --backend "exec:$TF" >"$tmp/bj" 2>&1 || fail "backends --json: exit $?"
"$PY" - "$tmp/bj" <<'PY' || fail "backends --json: the declared invariance did not travel"
import json, sys
got = {b["name"]: b.get("invariance") for b in json.load(open(sys.argv[1])) if b["name"].startswith("exec:")}
echo = [v for k, v in got.items() if k.endswith("echo_ref")]
tf = [v for k, v in got.items() if "transformers" in k]
assert echo == ["all=bitwise"] and tf == [None], got
PY
# ... and is judged: two invariance cases on echo_ref, declared and measured bitwise
rc=0
"$GENFENCE" run cases/invariance.yaml --filter '^invariance\.(split|prefix)$' --backend "exec:$ECHO" --no-triangulate \
  --report-dir "$tmp/rep_inv" >"$tmp/out_inv" 2>&1 || rc=$?
[[ $rc == 0 ]] || { cat "$tmp/out_inv"; fail "echo_ref invariance: exit $rc"; }
"$PY" - "$tmp/rep_inv/run.json" <<'PY' || fail "echo_ref invariance: see above"
import json, sys
res = json.load(open(sys.argv[1]))["results"]
assert len(res) == 2 and all((r["metrics"]["declared"], r["metrics"]["measured"]) == ("bitwise", "bitwise") for r in res), \
    [(r["id"], r["metrics"].get("declared"), r["metrics"].get("measured")) for r in res]
PY

# the command line is split into words like a shell would, without one
mkdir -p "$tmp/dir with space"
cp "$ECHO" "$tmp/dir with space/echo ref"
for spec in "exec:\"$tmp/dir with space/echo ref\"" "exec:'$tmp/dir with space/echo ref'" \
            "exec:$tmp/dir\ with\ space/echo\ ref" "exec:  '$tmp/dir with space'/\"echo ref\"  "; do
  "$GENFENCE" backends --backend "$spec" >"$tmp/q" 2>&1 || fail "quoting: exit $?"
  grep -Eq "available +fp32 +threads 1 +echo_ref \(C, libm\)" "$tmp/q" || fail "quoting: [$spec] $(cat "$tmp/q")"
done

# echo_ref: the default suite's GPT-2 case files (echo_ref is GPT-2 only)
set +e
"$GENFENCE" run cases/generation.yaml cases/golden.yaml cases/sampler.yaml --backend ref --backend "exec:$ECHO" -j 2 --oversubscribe --report-dir "$tmp/rep1" >"$tmp/out1" 2>&1
rc=$?
set -e
cat "$tmp/out1"
[[ $rc == 0 ]] || fail "echo_ref suite: exit status $rc"
grep -Eq "^  exec +.*-> agrees with ref" "$tmp/out1" || fail "echo_ref: triangulation does not agree with ref"
"$PY" - "$tmp/rep1/run.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
res = [r for r in doc["results"] if r["backend"] == "exec"]
ids = {r["id"] for r in doc["results"] if r["backend"] == "ref"}
bad = [(r["id"], r["verdict"]) for r in res if r["verdict"] != "pass"]
assert not bad, bad
assert {r["id"] for r in res} == ids and len(ids) >= 10, (len(ids), len(res))
# the kinds that reach no slot of either (echo_ref has no sample slot) ran once, on the engine
eng = [r for r in doc["results"] if r["backend"] == "engine"]
assert len(eng) >= 10 and not ids & {r["id"] for r in eng}, (len(eng),)
# the model cases really ran on the client: comparisons with measured deltas
model = [r for r in res if r.get("model")]
assert len(model) >= 8, len(model)
PY

# transformers: the cases where its cache, mask and positions matter
set +e
"$GENFENCE" run cases/generation.yaml cases/golden.yaml --filter '^(cache\.sherlock\.chunked|batch\.left_padded|sampling\.seeded|golden\.greedy\.batch|context\.limit)$' \
  --backend "exec:$TF" --timeout $((900 * ${GF_TIME_SCALE:-1})) -j 2 --oversubscribe --report-dir "$tmp/rep2" >"$tmp/out2" 2>&1
rc=$?
set -e
cat "$tmp/out2"
[[ $rc == 0 ]] || fail "transformers cases: exit status $rc"
tail -n 1 "$tmp/out2" | gf_grepq -qx "exec: 5 passed, 0 failed, 0 skipped" || fail "transformers: $(tail -n 1 "$tmp/out2")"

# transformers on the Llama cases, once models/holmes-llama exists
if [[ -f models/holmes-llama/config.json ]]; then
  set +e
  "$GENFENCE" run cases/generation_llama.yaml cases/golden_llama.yaml --backend "exec:$TF" --timeout $((900 * ${GF_TIME_SCALE:-1})) -j 2 --oversubscribe --report-dir "$tmp/rep4" >"$tmp/out4" 2>&1
  rc=$?
  set -e
  cat "$tmp/out4"
  [[ $rc == 0 ]] || fail "transformers on the llama cases: exit status $rc"
  grep -Eq "^exec: [1-9][0-9]* passed, 0 failed, 0 skipped; engine alone: [1-9][0-9]* passed, 0 failed, 0 skipped$" <(tail -n 1 "$tmp/out4") || fail "llama: $(tail -n 1 "$tmp/out4")"
else
  echo "exec_clients: models/holmes-llama not there: the Llama cases are not run"
fi

# the same greedy text as ref
"$GENFENCE" generate --model models/holmes-gpt --prompt "Sherlock Holmes" --max-new-tokens 24 --backend ref >"$tmp/g1" 2>/dev/null
"$GENFENCE" generate --model models/holmes-gpt --prompt "Sherlock Holmes" --max-new-tokens 24 --backend "exec:$TF" >"$tmp/g2" 2>/dev/null
[[ -s "$tmp/g1" ]] || fail "generate on ref printed nothing"
diff <(grep -v '^\[' "$tmp/g1") <(grep -v '^\[' "$tmp/g2") || fail "transformers generates other text than ref"

# bare exec: no client named: a named backend that cannot be used is an
# error (exit 2, issue 11), with the reason that says how to name one
set +e
"$GENFENCE" run cases/generation.yaml --filter '^cache\.sherlock$' --backend exec --no-report >"$tmp/out3" 2>&1
rc=$?
set -e
cat "$tmp/out3"
[[ $rc == 2 ]] || fail "bare exec: exit status $rc, expected 2 (a named backend that cannot be used)"
grep -q "exec runs a protocol client, and none was named: --backend 'exec:PROGRAM ARGS...'" "$tmp/out3" ||
  fail "bare exec: no reason"
echo "exec_clients: ok"
