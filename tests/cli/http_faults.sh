#!/usr/bin/env bash
# The http backend (backends/http, docs/http.md) against tests/http/fault_server.py:
# an OpenAI-compatible server over numpy_gpt2 on 127.0.0.1 (a free port),
# correct under its plain URL and faulty under /fault/NAME. One genfence run
# drives golden.greedy.sherlock through the correct URL and through every
# fault at once:
#   1. `genfence backends` shows what the server supports, probed: top-k
#      logprobs by id, no echo, streaming, seed honoured; and seed IGNORED
#      for the ignoreseed fault;
#   2. the correct URL passes (the server's top-k log-probabilities against
#      the golden: numpy's opinion within the golden's atol) -- and retries
#      get through a server that answers every other request with 429;
#   3. every fault fails its own case (verdict fail), with the fault named in
#      the reason: a timeout (slow, hang), truncated JSON, HTTP 500 and 429
#      after the retries, wrong logprobs, logprobs one position late (the
#      tokens differ from the golden's beyond the gate), a stream cut inside
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
    "seed: honoured" "full logits: absent"; do
    gf_grepq -qF "$want" < "$tmp/be.txt" || { cat "$tmp/be.txt"; fail "genfence backends does not say '$want'"; }
done
"$GENFENCE" backends --backend "http:$base/fault/ignoreseed" 2>&1 | gf_grepq -qF "seed: IGNORED" \
    || fail "the ignoreseed fault is not shown as seed: IGNORED"
echo "ok   genfence backends shows the probed capabilities (and seed IGNORED for ignoreseed)"

# 2 + 3. one run, every fault beside the correct server
t=$((1 * scale))
declare -A want=(
    [ok]=""
    [http429once]=""
    [slow]="timed out after"
    [hang]="timed out after"
    [truncated]="is not valid JSON"
    [http500]="HTTP 500 after 2 tries"
    [http429]="HTTP 429 after 2 tries"
    [wronglogprobs]="integrity: top_logprobs are not in descending order"
    [late]="token differs at step"
    [streamcut]="the stream was cut inside event"
    [afterdone]="text after its final event"
    [droplastbyte]="the streamed text"
    [badfinish]="finish_reason 'stop' for token"
)
args=()
for f in "${!want[@]}"; do
    url=$base/fault/$f
    [ "$f" = ok ] && url=$base
    opts=",timeout=$((5 * scale)),retries=1,retry_wait=0.05"
    case $f in
        slow | hang) opts=",timeout=$t,retries=1" ;;
        streamcut | afterdone | droplastbyte) opts="$opts,stream=on" ;;
    esac
    args+=(--backend "http:$url$opts")
done
rc=0
"$GENFENCE" run "$GF_SRC/cases/golden.yaml" --filter '^golden\.greedy\.sherlock$' "${args[@]}" -j 2 \
    --timeout $((300 * scale)) --report-dir "$tmp/rep" > "$tmp/run.txt" 2>&1 || rc=$?
[ $rc -eq 1 ] || { cat "$tmp/run.txt"; fail "the run exits $rc, want 1 (faults fail, nothing is bad input)"; }
"$GF_PYTHON" - "$tmp/rep/run.json" "$base" <<'PY' > "$tmp/verdicts.txt"
import json, sys
doc = json.load(open(sys.argv[1]))
for r in doc["results"]:
    b = r["backend_requested"]
    url = b.split(":", 1)[1].split(",")[0]
    f = url.rsplit("/fault/", 1)[1] if "/fault/" in url else "ok"
    print(f"{f}\t{r['verdict']}\t{r.get('reason', '')}")
PY
cat "$tmp/verdicts.txt" | cut -c1-220
n=0
for f in "${!want[@]}"; do
    line=$(awk -F'\t' -v f="$f" '$1 == f' "$tmp/verdicts.txt")
    [ -n "$line" ] || { cat "$tmp/run.txt"; fail "no result for $f"; }
    verdict=$(cut -f2 <<<"$line")
    reason=$(cut -f3- <<<"$line")
    if [ -z "${want[$f]}" ]; then
        [ "$verdict" = pass ] || fail "$f: verdict $verdict, want pass ($reason)"
    else
        [ "$verdict" = fail ] || fail "$f: verdict $verdict, want fail ($reason)"
        gf_grepq -qF "${want[$f]}" <<<"$reason" || fail "$f: the reason does not name the fault ('${want[$f]}'): $reason"
    fi
    n=$((n + 1))
done
echo "ok   one run, $n backends: the correct server and http429once pass, every fault fails its own case, named"

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
