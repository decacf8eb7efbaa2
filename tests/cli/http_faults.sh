#!/usr/bin/env bash
# The http backend (backends/http, docs/http.md) against tests/http/fault_server.py:
# an OpenAI-compatible server over numpy_gpt2 on 127.0.0.1 (a free port),
# correct under its plain URL and faulty under /fault/NAME. One genfence run
# drives golden.greedy.sherlock through the correct URL and through every
# fault at once:
#   1. `genfence backends` shows what the server supports, probed: top-k
#      logprobs by id, no echo, streaming, seed honoured, raw logprobs (the
#      processed fault: after temperature, shown PROCESSED), and with
#      integrity=on whole-generation integrity ok; seed IGNORED for the
#      ignoreseed fault, integrity FAIL for late;
#   2. the correct URL passes (the server's top-k log-probabilities against
#      the golden: numpy's opinion within the golden's atol) -- and retries
#      get through a server that answers every other request with 429;
#   3. every fault fails its own case (verdict fail), with the fault named in
#      the reason: a timeout (slow, hang), truncated JSON, HTTP 500 and 429
#      after the retries, wrong logprobs, logprobs one position late (caught
#      per step, and with integrity=on in a greedy request of 8), seed ignored
#      (integrity=on), a stream cut inside
#      an event, text after data: [DONE], the streamed text short of its last
#      byte, a finish_reason that disagrees with the token;
#   4. bad options are refused naming them (exit 2); an over-long prompt is the
#      server's context error, named;
#   5. nothing is left listening: the server's port refuses connections after.
# What a real engine computes is not asserted here (tests/cli/http_live.sh).
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}" "${GF_PYTHON:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init http_faults
export GENFENCE_MODULE_DIR="$GF_BUILD/backends"
if [ ! -f "$GF_BUILD/backends/libgenfence_backend_http.so" ]; then
    echo "skip: the http module is not built in this configuration (libcurl4-openssl-dev, docs/http.md)"
    exit 0
fi
scale=${GF_TIME_SCALE:-1}
model="$GF_SRC/models/holmes-gpt"
[ -f "$model/model.safetensors" ] || { echo "skip: no models/holmes-gpt weights"; exit 0; }

"$GF_PYTHON" "$GF_SRC/tests/http/fault_server.py" --model "$model" --port-file "$tmp/port" --lifetime 1200 \
    > "$tmp/server.log" 2>&1 &
spid=$!
gf_on_exit "kill $spid 2>/dev/null; wait $spid 2>/dev/null"
for _ in $(seq 1 $((120 * scale))); do [ -s "$tmp/port" ] && break; sleep 0.5; done
[ -s "$tmp/port" ] || { cat "$tmp/server.log"; fail "the fault server did not start"; }
port=$(cat "$tmp/port")
base="http://127.0.0.1:$port"

# 1. the probe
"$GENFENCE" backends --backend "http:$base" > "$tmp/be.txt" 2>&1 || { cat "$tmp/be.txt"; fail "backends exit $?"; }
for want in "top-k logprobs by id: yes (20 of k=20 asked)" "prompt logprobs (echo): no" "streaming: yes" \
    "seed: honoured" "logprobs mode: raw (the top-k logprobs equal at temperature 0 and 0.5" "full logits: absent"; do
    gf_grepq -qF "$want" < "$tmp/be.txt" || { cat "$tmp/be.txt"; fail "genfence backends does not say '$want'"; }
done
"$GENFENCE" backends --backend "http:$base/fault/ignoreseed" 2>&1 | gf_grepq -qF "seed: IGNORED" \
    || fail "the ignoreseed fault is not shown as seed: IGNORED"
"$GENFENCE" backends --backend "http:$base/fault/processed" 2>&1 | gf_grepq -qF "logprobs mode: PROCESSED (after temperature" \
    || fail "the processed fault (logprobs after temperature) is not shown as logprobs mode: PROCESSED"
"$GENFENCE" backends --backend "http:$base,integrity=on" 2>&1 \
    | gf_grepq -qF "integrity: ok (8 greedy tokens in one request == 8 one-step requests" \
    || fail "integrity=on: the probe does not say integrity ok"
"$GENFENCE" backends --backend "http:$base/fault/late,integrity=on" 2>&1 \
    | gf_grepq -qF "integrity: FAIL: http: integrity: step 0" || fail "the late fault does not fail the probe's integrity"
echo "ok   genfence backends shows the probed capabilities (seed IGNORED for ignoreseed, logprobs PROCESSED for processed, integrity FAIL for late)"

# 2 + 3. one run, every fault beside the correct server. Rows: label, the
# fault (- for none), extra options, the text the reason must hold (- pass).
t=$((3 * scale))
plain=",timeout=$((5 * scale)),retries=1,retry_wait=0.05"
rows="ok - $plain -
ok-integrity - $plain,integrity=on -
http429once http429once $plain -
slow slow ,timeout=$t,retries=1 timed@out@after
hang hang ,timeout=$t,retries=1 timed@out@after
truncated truncated $plain is@not@valid@JSON
http500 http500 $plain HTTP@500@after@2@tries
http429 http429 $plain HTTP@429@after@2@tries
wronglogprobs wronglogprobs $plain integrity:@top_logprobs@are@not@in@descending@order
late late $plain integrity:@wrong@logprobs
late-integrity late $plain,integrity=on logprobs@out@of@step@with@the@tokens
ignoreseed-integrity ignoreseed $plain,integrity=on seed@ignored
streamcut streamcut $plain,stream=on the@stream@was@cut@inside@event
afterdone afterdone $plain,stream=on text@after@its@final@event
droplastbyte droplastbyte $plain,stream=on the@streamed@text
droplastbyte-integrity droplastbyte $plain,integrity=on the@streamed@text@of@8@tokens
badfinish badfinish $plain finish_reason@'stop'@for@token"
args=()
while read -r label fault opts want; do
    url=$base
    [ "$fault" = - ] || url=$base/fault/$fault
    args+=(--backend "http:$url$opts")
done <<<"$rows"
rc=0
"$GENFENCE" run "$GF_SRC/cases/golden.yaml" --filter '^golden\.greedy\.sherlock$' "${args[@]}" -j 2 --oversubscribe \
    --timeout $((300 * scale)) --report-dir "$tmp/rep" > "$tmp/run.txt" 2>&1 || rc=$?
[ $rc -eq 1 ] || { cat "$tmp/run.txt"; fail "the run exits $rc, want 1 (faults fail, nothing is bad input)"; }
"$GF_PYTHON" - "$tmp/rep/run.json" <<'PY' > "$tmp/verdicts.txt"
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    print(f"{r['backend_requested']}\t{r['verdict']}\t{r.get('reason', '')}")
PY
n=0
while read -r label fault opts want; do
    url=$base
    [ "$fault" = - ] || url=$base/fault/$fault
    line=$(awk -F'\t' -v b="http:$url$opts" '$1 == b' "$tmp/verdicts.txt")
    [ -n "$line" ] || { cat "$tmp/run.txt"; fail "no result for $label"; }
    verdict=$(cut -f2 <<<"$line")
    reason=$(cut -f3- <<<"$line")
    if [ "$want" = - ]; then
        [ "$verdict" = pass ] || fail "$label: verdict $verdict, want pass ($reason)"
    else
        [ "$verdict" = fail ] || fail "$label: verdict $verdict, want fail ($reason)"
        gf_grepq -qF "${want//@/ }" <<<"$reason" || fail "$label: the reason does not name the fault ('${want//@/ }'): $reason"
    fi
    echo "ok   $label: $verdict${reason:+ ($(cut -c1-160 <<<"$reason"))}"
    n=$((n + 1))
done <<<"$rows"
echo "ok   one run, $n backends: the correct server (with and without integrity=on) and http429once pass, every fault fails its own case, named"

# 4. options and the context limit
rc=0
"$GENFENCE" backends --backend "http:$base,frobnicate=1" > "$tmp/bad.txt" 2>&1 || rc=$?
[ $rc -eq 2 ] && gf_grepq -qF "unknown option 'frobnicate'" < "$tmp/bad.txt" \
    || { cat "$tmp/bad.txt"; fail "a bad option: exit $rc, want 2 naming it"; }
long=$(printf 'Holmes %.0s' $(seq 1 200))
rc=0
"$GENFENCE" generate --model "$model" --prompt "$long" --max-new 1 --backend "http:$base" > "$tmp/ctx.txt" 2>&1 || rc=$?
[ $rc -ne 0 ] && gf_grepq -qiE "context" < "$tmp/ctx.txt" || { cat "$tmp/ctx.txt"; fail "an over-long prompt: exit $rc"; }
echo "ok   a bad option is refused (exit 2); an over-long prompt is a context error, named"

# 5. nothing left listening
kill "$spid"
wait "$spid" 2>/dev/null || true
if "$GF_PYTHON" -c "import socket,sys; s=socket.create_connection(('127.0.0.1', int(sys.argv[1])), 2)" "$port" 2>/dev/null; then
    fail "port $port still accepts connections after the server was stopped"
fi
echo "ok   nothing is left listening on port $port"
