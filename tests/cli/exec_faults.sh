#!/usr/bin/env bash
# A faulty protocol client costs only its own cases (docs/protocol.md, "Errors").
# tests/backends/exec/faulty_client.py relays echo_ref (tools/backends/echo_ref)
# with one fault: a crash, a hang, garbage, a short reply, a wrong shape, a
# wrong cache length, an engine error, a wrong protocol version, text on
# stdout; and one semantic fault, a key mask that never reaches the client.
# One run with ref, the good echo_ref and every faulty one over two cases
# with cached forwards (cache.sherlock, batch.left_padded) and two that load
# no model (the hanging client in a run of its own, the model cases under a
# 3 s reply deadline): the model cases fail on each wire fault with its own
# reason, the lost mask fails only the padded case, everything else passes,
# and no client process outlives the run. A program that cannot be
# started is a skip; a command line with an open quote is bad input (exit 2).
set -euo pipefail
: "${GENFENCE:?set GENFENCE to the genfence binary}" "${GF_SRC:?set GF_SRC}" "${GF_BUILD:?set GF_BUILD}"
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init exec_faults

ECHO="$GF_BUILD/tools/echo_ref"
[[ -x "$ECHO" ]] || fail "$ECHO not built"
# a private copy, so the process check below finds only this run's clients
cp -r "$GF_SRC/tests/backends/exec" "$tmp/fc"
mkdir -p "$tmp/tools" && cp -r "$GF_SRC/tools/backends" "$tmp/tools/"
mkdir -p "$tmp/tests/backends" && mv "$tmp/fc" "$tmp/tests/backends/exec"
FC="$tmp/tests/backends/exec/faulty_client.py"

# every client but the hanging one under the default reply deadline (60 s: a
# loaded machine does not make a slow reply a failure); the hanging one in a
# run of its own under GENFENCE_EXEC_TIMEOUT=3 (times GF_TIME_SCALE: the
# client's start and load replies must come within it), over the two model cases
HANG_S=$((3 * ${GF_TIME_SCALE:-1}))
faults=(crash garbage short shape length error version banner nomask)
backends=(--backend ref --backend "exec:$ECHO")
for f in "${faults[@]}"; do backends+=(--backend "exec:$PY $FC $f $ECHO"); done

cd "$GF_SRC"
set +e
"$GENFENCE" run cases/generation.yaml cases/sampler.yaml --filter '^(cache\.sherlock|batch\.left_padded|stream\.em_dash|top_k\.fence)$' \
  "${backends[@]}" -j 2 --oversubscribe --report-dir "$tmp/rep" >"$tmp/out" 2>&1
rc=$?
set -e
cat "$tmp/out"
[[ $rc == 1 ]] || fail "exit status $rc, expected 1 (failures, no errors)"
if pgrep -f "$tmp/" >/dev/null; then
  pgrep -af "$tmp/" >&2
  fail "client processes outlived the run"
fi
set +e
GENFENCE_EXEC_TIMEOUT=$HANG_S "$GENFENCE" run cases/generation.yaml --filter '^(cache\.sherlock|batch\.left_padded)$' \
  --backend "exec:$PY $FC hang $ECHO" -j 2 --oversubscribe --report-dir "$tmp/rep_hang" >"$tmp/out_hang" 2>&1
rc=$?
set -e
cat "$tmp/out_hang"
[[ $rc == 1 ]] || fail "hang: exit status $rc, expected 1 (failures, no errors)"
if pgrep -f "$tmp/" >/dev/null; then
  pgrep -af "$tmp/" >&2
  fail "hang: client processes outlived the run"
fi

"$PY" - "$tmp/rep/run.json" "$tmp/rep_hang/run.json" "$FC" "$HANG_S" <<'PY'
import json, sys
doc = {"results": [r for f in sys.argv[1:3] for r in json.load(open(f))["results"]]}
fc = sys.argv[3]
hang_s = sys.argv[4]
why = {
    "crash": "killed by signal 11",
    "hang": f"no reply within {hang_s} s",
    "garbage": "is not a status and a length",
    "short": "(wrong length)",
    "shape": "(wrong shape)",
    "length": "(length + T, once per call)",
    "error": "CUDA error: out of memory (injected by faulty_client.py)",
    "version": "the client speaks protocol version 99; this genfence speaks version 1",
    "banner": "the client wrote text to stdout",
    "nomask": "",
}
model_cases = {"cache.sherlock", "batch.left_padded"}
errors, seen = [], set()
for r in doc["results"]:
    spec = r["backend_requested"]
    fault = next((f for f in why if f" {f} " in spec and fc in spec), None)
    seen.add(fault if fault else spec)
    if fault == "nomask":  # a semantic fault: the harness's own check catches it, on the padded case only
        want = "fail" if r["id"] == "batch.left_padded" else "pass"
        if r["verdict"] != want:
            errors.append(f"{r['id']} on nomask: {r['verdict']} '{r['reason']}', expected {want}")
        continue
    want_fail = fault is not None and r["id"] in model_cases
    if want_fail:
        if r["verdict"] != "fail" or why[fault] not in r["reason"]:
            errors.append(f"{r['id']} on {fault}: {r['verdict']} '{r['reason']}', expected fail with '{why[fault]}'")
    elif r["verdict"] != "pass":
        errors.append(f"{r['id']} on {spec}: {r['verdict']} '{r['reason']}', expected pass")
missing = set(why) - seen
if missing:
    errors.append(f"no results for {sorted(missing)}")
# the model cases on every backend; the two that reach no slot of these
# backends (no client here has a sample slot) once, on the engine
n_engine = sum(r["backend"] == "engine" for r in doc["results"])
if n_engine != 2 or len(doc["results"]) != 2 * (2 + len(why)) + 2:
    errors.append(f"{len(doc['results'])} results ({n_engine} on the engine), expected {2 * (2 + len(why)) + 2} (2)")
for e in errors:
    print("exec_faults:", e, file=sys.stderr)
sys.exit(1 if errors else 0)
PY

# a program that does not exist: a named backend that cannot be used, an
# error (exit 2, issue 11) with the exec error
set +e
"$GENFENCE" run cases/generation.yaml --filter '^cache\.sherlock$' --backend "exec:$tmp/no-such-client --flag" --no-report >"$tmp/out2" 2>&1
rc=$?
set -e
cat "$tmp/out2"
[[ $rc == 2 ]] || fail "missing program: exit status $rc, expected 2 (a named backend that cannot be used)"
grep -q "^ERROR .*cache.sherlock \[exec\]" "$tmp/out2" || fail "missing program: no error line"
grep -q "cannot run '$tmp/no-such-client': No such file or directory" "$tmp/out2" || fail "missing program: no reason"

# an unterminated quote is bad input
set +e
"$GENFENCE" run cases/generation.yaml --filter '^cache\.sherlock$' --backend "exec:$ECHO \"open quote" --no-report >"$tmp/out3" 2>&1
rc=$?
set -e
cat "$tmp/out3"
[[ $rc == 2 ]] || fail "open quote: exit status $rc, expected 2"
grep -q 'unterminated " in the command' "$tmp/out3" || fail "open quote: no reason"
echo "exec_faults: ok"
