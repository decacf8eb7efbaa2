#!/usr/bin/env bash
# What a served backend can and cannot be judged on (docs/http.md), against
# tests/http/fault_server.py (numpy GPT-2 on 127.0.0.1, correct under its
# plain URL, faulty under /fault/NAME):
#   1. the plan skips what needs full logits, with the kind's reason, in the
#      console (--plan and the run), run.json and junit.xml: the sampled
#      goldens and the full-row KL (statistical.holmes-gpt); the greedy golden
#      and the top-k KL case run, and a served backend is not triangulated
#      against ref's logits (not probed, saying why);
#   2. the top-k KL (distribution_match with topk: 20, cases/served.yaml):
#      the correct server passes; a server reporting the log-probabilities of
#      logits / 1.5 (fault tempered: consistent, the same argmax) fails it with
#      the KL named; on ref the bound is checked to be at most the full KL;
#   3. api=chat (POST /v1/chat/completions, the prompt's text from the
#      server's /detokenize): the probe says so; the correct server passes the
#      greedy golden; a chat template that adds a token (chattemplate) fails
#      naming it; the reply faults fail through the chat route too (truncated,
#      late, wronglogprobs, streamcut and droplastbyte with stream=on, late
#      with integrity=on), each named;
#   4. nothing is left listening.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}" "${GF_PYTHON:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init http_served
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
plain=",timeout=$((10 * scale)),retries=1,retry_wait=0.05"
cases=("$GF_SRC/cases/golden.yaml" "$GF_SRC/cases/statistical.yaml" "$GF_SRC/cases/served.yaml")
filter='^(golden\.(greedy|sampled)\.sherlock|statistical\.holmes-gpt|served\.topk_kl\.holmes-gpt)$'

# 1. the plan
"$GENFENCE" run "${cases[@]}" --filter "$filter" --backend "http:$base$plain" --plan > "$tmp/plan.txt" 2>&1 \
    || { cat "$tmp/plan.txt"; fail "run --plan exit $?"; }
for id in golden.sampled.sherlock statistical.holmes-gpt; do
    gf_grepq -qE "^plan: skip +$id +\[http:[^]]*\] +served backend: " \
        < "$tmp/plan.txt" || { cat "$tmp/plan.txt"; fail "--plan does not skip $id on the served backend, saying why"; }
done
for id in golden.greedy.sherlock served.topk_kl.holmes-gpt; do
    gf_grepq -qE "^plan: run +$id +\[http:" < "$tmp/plan.txt" || { cat "$tmp/plan.txt"; fail "--plan does not run $id"; }
done
gf_grepq -qF "sampled golden (temperature > 0) needs full logits" < "$tmp/plan.txt" || fail "the sampled golden's reason"
gf_grepq -qF "needs full logits, and a server reports its top-k log-probabilities only" < "$tmp/plan.txt" \
    || fail "the full-row KL's reason"
"$GENFENCE" run "$GF_SRC/cases/sliding_llama.yaml" --backend "http:$base$plain" --plan > "$tmp/plan_sl.txt" 2>&1 \
    || { cat "$tmp/plan_sl.txt"; fail "run --plan (sliding) exit $?"; }
gf_grepq -qE "^plan: skip +sliding\.window64\.llama +\[http:[^]]*\] +served backend: the evicting cache masks" \
    < "$tmp/plan_sl.txt" || { cat "$tmp/plan_sl.txt"; fail "--plan does not skip the sliding window on the served backend"; }
echo "ok   --plan: the sampled golden and the full-row KL skip on the served backend, saying why (the sliding window too); the rest runs"

# 1 + 2 + 3: one run. Rows: label, the fault (- for none), extra options, the
# text the reason of golden.greedy.sherlock must hold (- pass), the same for
# served.topk_kl.holmes-gpt.
rows="ok - $plain - -
tempered tempered $plain max@|delta| kld_mean:@measured
chat - $plain,api=chat - -
chat-template chattemplate $plain,api=chat chat@template@made@a@prompt@of chat@template@made@a@prompt@of
chat-truncated truncated $plain,api=chat is@not@valid@JSON is@not@valid@JSON
chat-late late $plain,api=chat integrity:@wrong@logprobs integrity:@wrong@logprobs
chat-wronglogprobs wronglogprobs $plain,api=chat not@in@descending@order not@in@descending@order
chat-streamcut streamcut $plain,api=chat,stream=on the@stream@was@cut@inside@event the@stream@was@cut@inside@event
chat-droplastbyte droplastbyte $plain,api=chat,stream=on the@streamed@text the@streamed@text
chat-late-integrity late $plain,api=chat,integrity=on logprobs@out@of@step@with@the@tokens logprobs@out@of@step@with@the@tokens"
args=(--backend ref)
while read -r label fault opts w1 w2; do
    url=$base
    [ "$fault" = - ] || url=$base/fault/$fault
    args+=(--backend "http:$url$opts")
done <<<"$rows"
rc=0
"$GENFENCE" run "${cases[@]}" --filter "$filter" "${args[@]}" -j 2 --oversubscribe --timeout $((600 * scale)) \
    --report-dir "$tmp/rep" > "$tmp/run.txt" 2>&1 || rc=$?
[ $rc -eq 1 ] || { cat "$tmp/run.txt"; fail "the run exits $rc, want 1 (faults fail, nothing is bad input)"; }
"$GF_PYTHON" - "$tmp/rep/run.json" <<'PY' > "$tmp/verdicts.txt"
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    print(f"{r['id']}\t{r['backend_requested']}\t{r['verdict']}\t{r.get('reason', '')}")
PY
verdict_of() { awk -F'\t' -v id="$1" -v b="$2" '$1 == id && $2 == b' "$tmp/verdicts.txt"; }
n=0
while read -r label fault opts w1 w2; do
    url=$base
    [ "$fault" = - ] || url=$base/fault/$fault
    be="http:$url$opts"
    for pair in "golden.greedy.sherlock $w1" "served.topk_kl.holmes-gpt $w2"; do
        read -r id want <<<"$pair"
        line=$(verdict_of "$id" "$be")
        [ -n "$line" ] || { cat "$tmp/run.txt"; fail "no result for $id on $label"; }
        verdict=$(cut -f3 <<<"$line")
        reason=$(cut -f4- <<<"$line")
        if [ "$want" = - ]; then
            [ "$verdict" = pass ] || fail "$label: $id: verdict $verdict, want pass ($reason)"
        else
            [ "$verdict" = fail ] || fail "$label: $id: verdict $verdict, want fail ($reason)"
            gf_grepq -qF "${want//@/ }" <<<"$reason" || fail "$label: $id: the reason does not say '${want//@/ }': $reason"
        fi
        echo "ok   $label: $id $verdict${reason:+ ($(cut -c1-150 <<<"$reason"))}"
        n=$((n + 1))
    done
    # the plan's skips, on every served backend
    for id in golden.sampled.sherlock statistical.holmes-gpt; do
        line=$(verdict_of "$id" "$be")
        [ "$(cut -f3 <<<"$line")" = skip ] && gf_grepq -qF "served backend: " <<<"$line" \
            || fail "$label: $id is not a skip saying why in run.json: $line"
    done
done <<<"$rows"
# ref: the same cases pass, the bound checked against the full KL
for id in golden.greedy.sherlock golden.sampled.sherlock statistical.holmes-gpt served.topk_kl.holmes-gpt; do
    [ "$(verdict_of "$id" ref | cut -f3)" = pass ] || fail "ref: $id: $(verdict_of "$id" ref)"
done
"$GF_PYTHON" - "$tmp/rep/run.json" "$tmp/rep/junit.xml" <<'PY' || fail "run.json / junit.xml"
import json, sys
import xml.etree.ElementTree as ET
res = json.load(open(sys.argv[1]))["results"]
r = [x for x in res if x["id"] == "served.topk_kl.holmes-gpt" and x["backend"] == "ref"][0]
chk = [c for c in r["checks"] if c["name"] == "top-k KL is a lower bound"]
assert chk and chk[0]["passed"], r["checks"]
st = r["metrics"]["statistical"]
assert st["kld_max"] <= st["kld_full_max"], st
assert r["metrics"]["restricted_to"]["topk"] == 20, r["metrics"]
s = [x for x in res if x["id"] == "served.topk_kl.holmes-gpt" and "/fault/tempered," in x["backend_requested"]]
assert s and s[0]["metrics"]["statistical"]["kld_mean"] > 1e-3, s
skipped = 0
for tc in ET.parse(sys.argv[2]).getroot().iter("testcase"):
    sk = tc.find("skipped")
    if tc.get("name").split(" [")[0] in ("golden.sampled.sherlock", "statistical.holmes-gpt") and "http" in tc.get("classname"):
        assert sk is not None and sk.get("message", "").startswith("served backend: ") and "needs full logits" in sk.get("message", ""), ET.tostring(tc)
        skipped += 1
assert skipped == 2 * 10, skipped
PY
gf_grepq -qF "not probed: a served backend's rows are its top-k log-probabilities" < "$tmp/run.txt" \
    || fail "the served backends are triangulated against ref's logits"
gf_grepq -qE "^skip +golden\.sampled\.sherlock +\[http\] +" < "$tmp/run.txt" || fail "the console shows no skip line"
echo "ok   one run, $n (case, served backend) pairs as expected; the skips say why in the console, run.json and junit.xml; ref's top-k KL is at most its full KL"

# the default suite's holmes-gpt cases on the correct server (the files and ids
# tools/conformance.sh runs for its served column): nothing fails (what
# cannot be judged is a skip saying why: context.limit too)
rc=0
"$GENFENCE" run -q "$GF_SRC"/cases/{generation,golden,stop_strings,statistical,served}.yaml --backend "http:$base$plain" \
    --filter '^((statistical|served\.topk_kl)\.holmes-gpt|(cache|batch|sampling|context|eos|stream|golden|stop|sliding)\..*)$' \
    -j 2 --oversubscribe \
    --no-triangulate --timeout $((600 * scale)) --report-dir "$tmp/suite" > "$tmp/suite.txt" 2>&1 || rc=$?
[ $rc -eq 0 ] || { cat "$tmp/suite.txt"; fail "the default suite's holmes-gpt cases on the correct server exit $rc"; }
"$GF_PYTHON" - "$tmp/suite/run.json" <<'PY' || fail "the suite's report"
import json, sys
res = [r for r in json.load(open(sys.argv[1]))["results"] if r["backend"] == "http"]
skips = {r["id"] for r in res if r["verdict"] == "skip"}
assert {"golden.sampled.sherlock", "golden.sampled.batch", "statistical.holmes-gpt", "context.limit"} <= skips, skips
assert all(r["reason"].startswith("served backend: ") for r in res if r["verdict"] == "skip" and r["kind"] != "probe"), res
cache = [r for r in res if r["id"] == "cache.sherlock"][0]
assert cache["verdict"] == "pass" and cache["metrics"]["cache_bytes_check"].startswith("not judged"), cache
print(f"ok   the default suite's holmes-gpt cases on the correct server: {sum(r['verdict'] == 'pass' for r in res)} pass, "
      f"{len(skips)} skip ({', '.join(sorted(skips))})")
PY

# 3. the probe through the chat route
"$GENFENCE" backends --backend "http:$base,api=chat" > "$tmp/be.txt" 2>&1 || { cat "$tmp/be.txt"; fail "backends exit $?"; }
for want in "api=chat (POST /v1/chat/completions" "top-k logprobs by id: yes (20 of k=20 asked)" \
    "prompt logprobs (echo): no (http: chat completions have no echo" "streaming: yes" "seed: honoured"; do
    gf_grepq -qF "$want" < "$tmp/be.txt" || { cat "$tmp/be.txt"; fail "genfence backends (api=chat) does not say '$want'"; }
done
echo "ok   genfence backends --backend http:URL,api=chat shows the chat route's capabilities, probed"

# 4. nothing left listening
kill "$spid"
wait "$spid" 2>/dev/null || true
if "$GF_PYTHON" -c "import socket,sys; s=socket.create_connection(('127.0.0.1', int(sys.argv[1])), 2)" "$port" 2>/dev/null; then
    fail "port $port still accepts connections after the server was stopped"
fi
echo "ok   nothing is left listening on port $port"
