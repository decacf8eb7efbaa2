#!/usr/bin/env bash
# genfence generate's sampler-profile flags (issue 14 item 2: the filters in
# generate, harness/cli/gen_sampler.c). On models/holmes-gpt, each flag must
# change the output the way it should, against a run without it:
#   --logit-bias 300:+100 (greedy) makes 300 every token, -inf bans the greedy one;
#   --stop-token-ids 261 ends at the first 261 (stop_reason stop_token_id);
#   --stop "Holmes" cuts the --json completion, the plain text and the --stream
#     output exactly before the first "Holmes" of the unstopped continuation and
#     ends at the token completing it (stop_reason stop_string); a stop string
#     across a token boundary too;
#   --min-new-tokens 3 with --eos-id 11 (',' comes at step 2) bans it until 3;
#   --presence/--frequency/--repetition-penalty 1e4 / 1e4 / 1e9: no id repeats;
#   --profile llamacpp --penalty-last-n 1: no immediate repeat, but the greedy
#     loop's older ids return; 0: the unpenalised output;
#   --min-p 1 sampled at temperature 1 is greedy; --min-tokens-to-keep 50 with it is not;
#   --typical-p 1e-9: the same tokens under two seeds that differ without it;
#   --chain min_p,temperature under llamacpp (min-p 1): greedy;
#   --json's sampler object names the profile and the filters, ran: engine;
#     --backend ref-sample-ex-history (a sample_ex declaring every profile):
#     backend_sample_ex true, the same tokens as ref, the note on stderr.
# Bad values exit 2 naming the flag: --profile hf --temperature 0 (the hf
# message), --logit-bias 5 / 5:nan / x:1 / 99999:1, --chain without
# temperature or under seed, --profile nope, --stop "", --min-new-tokens with
# --no-eos, a sampler flag with --verify.
set -uo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}"
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init generate_sampler_flags
M="$GF_SRC/models/holmes-gpt"
fails=0
fail() { echo "generate_sampler_flags: FAIL: $*" >&2; fails=$((fails + 1)); }
gen() { "$GENFENCE" generate --model "$M" "$@"; }
# j FILE EXPR: a Python expression over the JSON object d
j() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }
check() { # check NAME FILE EXPR: EXPR must be True
    local r
    r=$(j "$2" "$3" 2>&1)
    [[ $r == True ]] || fail "$1: $3 is $r"
}
# bad NAME STDERR_REGEX ARGS...: exit 2 and the message
bad() {
    local name=$1 re=$2
    shift 2
    gen "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [[ $rc == 2 ]] || fail "$name: exit $rc, want 2 ($(cat "$tmp/err"))"
    grep -Eq -- "$re" "$tmp/err" || fail "$name: stderr '$(cat "$tmp/err")' does not match '$re'"
}
G0=(--prompt "Sherlock" --temperature 0 --max-new-tokens 12 --json)

# --logit-bias
gen "${G0[@]}" >"$tmp/plain.json" || fail "greedy run"
check "plain" "$tmp/plain.json" "d['tokens'][0] != 300 and d['sampler']['ran'] == 'engine' and d['sampler']['profile'] == 'seed'"
gen "${G0[@]}" --logit-bias 300:+100 >"$tmp/bias.json" || fail "--logit-bias run"
check "--logit-bias +100" "$tmp/bias.json" "d['tokens'][0] == 300 and set(d['tokens']) == {300}"
check "--logit-bias json" "$tmp/bias.json" "d['sampler']['logit_bias'] == {'300': 100.0}"
first=$(j "$tmp/plain.json" "d['tokens'][0]")
gen "${G0[@]}" --logit-bias "$first:-inf" >"$tmp/ban.json" || fail "--logit-bias -inf run"
check "--logit-bias -inf" "$tmp/ban.json" "$first not in d['tokens']"

# --stop-token-ids: the plain run's third token
sid=$(j "$tmp/plain.json" "d['tokens'][2]")
gen "${G0[@]}" --stop-token-ids "$sid" >"$tmp/sid.json" || fail "--stop-token-ids run"
"$PY" - "$tmp/plain.json" "$tmp/sid.json" "$sid" <<'EOF' || fail "--stop-token-ids: tokens/stop_reason"
import json, sys
p, s, sid = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
k = p['tokens'].index(sid)
assert s['tokens'] == p['tokens'][:k + 1], (s['tokens'], p['tokens'])
assert s['stop_reason'] == 'stop_token_id', s['stop_reason']
assert s['sampler']['stop_token_ids'] == [sid]
EOF

# --stop: seed 7 puts "Holmes" 40 tokens into the continuation (of 60)
S=(--prompt "Sherlock Holmes" --seed 7 --max-new-tokens 60)
gen "${S[@]}" --json >"$tmp/full.json" || fail "unstopped run"
for stop in "Holmes" "see, Mr"; do
    gen "${S[@]}" --json --stop "$stop" >"$tmp/stop.json" || fail "--stop '$stop' --json"
    gen "${S[@]}" --stream --stop "$stop" >"$tmp/stream.txt" 2>"$tmp/stream.err" || fail "--stop '$stop' --stream"
    gen "${S[@]}" --stop "$stop" >"$tmp/text.txt" 2>/dev/null || fail "--stop '$stop' plain"
    "$PY" - "$tmp/full.json" "$tmp/stop.json" "$tmp/stream.txt" "$tmp/text.txt" "$stop" <<'EOF' || fail "--stop '$stop'"
import json, sys
full, st = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
stream, text, stop = open(sys.argv[3], encoding='utf-8').read(), open(sys.argv[4], encoding='utf-8').read(), sys.argv[5]
c = full['completion']
assert stop in c, f"the unstopped continuation lacks {stop!r}"
want = c[:c.index(stop)]
assert st['completion'] == want, (st['completion'], want)
assert st['stop_reason'] == 'stop_string', st['stop_reason']
assert st['sampler']['stop'] == [stop]
# tokens: the unstopped run's, through the one that completed the stop string
toks = full['tokens']
assert st['tokens'] == toks[:len(st['tokens'])] and st['new_tokens'] == len(st['tokens']) < 60, st['tokens']
assert stream == full['prompt'] + want + '\n', (stream, want)
assert text == full['prompt'] + want + '\n', (text, want)
EOF
    grep -q "stop_reason stop_string" "$tmp/stream.err" || fail "--stop '$stop' --stream: stderr lacks stop_reason stop_string"
done
# two stop strings: the earliest in the text wins
gen "${S[@]}" --json --stop "Holmes" --stop "birds" >"$tmp/two.json" || fail "two --stop"
check "two --stop" "$tmp/two.json" "d['completion'].endswith('There are the ') and 'birds' not in d['completion']"
# absent: the whole continuation, stop_reason length
gen "${S[@]}" --json --stop "Zebra-never" >"$tmp/none.json" || fail "--stop absent"
"$PY" -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); assert a["completion"]==b["completion"] and b["stop_reason"]=="length"' \
    "$tmp/full.json" "$tmp/none.json" || fail "--stop absent: not the unstopped run"

# --min-new-tokens: ',' (11) would end the greedy run at step 2
gen "${G0[@]}" --max-new-tokens 40 --eos-id 11 >"$tmp/eos.json" || fail "--eos-id 11"
check "--eos-id 11" "$tmp/eos.json" "d['stop_reason'] == 'eos' and d['new_tokens'] == 2"
gen "${G0[@]}" --max-new-tokens 40 --eos-id 11 --min-new-tokens 3 >"$tmp/minnew.json" || fail "--min-new-tokens"
check "--min-new-tokens 3" "$tmp/minnew.json" "11 not in d['tokens'][:3] and d['new_tokens'] >= 3 and d['sampler']['min_new_tokens'] == 3"

# penalties: greedy "My dear" loops on "able to be"
norep="len(d['tokens']) == len(set(d['tokens'])) and not set(d['tokens']) & set(d['prompt_tokens'])"
P=(--prompt "My dear" --temperature 0 --max-new-tokens 20 --json)
gen "${P[@]}" >"$tmp/loop.json" || fail "penalty base"
check "the greedy loop repeats" "$tmp/loop.json" "len(d['tokens']) > len(set(d['tokens']))"
for f in "--presence-penalty 1e4" "--frequency-penalty 1e4" "--repetition-penalty 1e9"; do
    # shellcheck disable=SC2086
    gen "${P[@]}" $f >"$tmp/pen.json" || fail "$f"
    check "$f" "$tmp/pen.json" "$norep"
done
gen "${P[@]}" --profile llamacpp --top-k none --top-p none >"$tmp/lc.json" || fail "llamacpp greedy"
gen "${P[@]}" --profile llamacpp --top-k none --top-p none --presence-penalty 1e4 --penalty-last-n 1 >"$tmp/last1.json" ||
    fail "--penalty-last-n 1"
check "--penalty-last-n 1" "$tmp/last1.json" \
    "all(a != b for a, b in zip(d['tokens'], d['tokens'][1:])) and len(d['tokens']) > len(set(d['tokens'])) and d['tokens'][0] != d['prompt_tokens'][-1]"
gen "${P[@]}" --profile llamacpp --top-k none --top-p none --presence-penalty 1e4 --penalty-last-n 0 >"$tmp/last0.json" ||
    fail "--penalty-last-n 0"
"$PY" -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); assert a["tokens"]==b["tokens"]' \
    "$tmp/lc.json" "$tmp/last0.json" || fail "--penalty-last-n 0 is not the unpenalised llamacpp output"

# --min-p 1 keeps only the top: sampling at temperature 1 gives the greedy tokens
R=(--prompt "Sherlock" --max-new-tokens 20 --temperature 1 --top-k none --top-p none --json)
gen "${G0[@]}" --max-new-tokens 20 >"$tmp/greedy20.json"
same() { "$PY" -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:3]); assert (a["tokens"]==b["tokens"]) == (sys.argv[3]=="1")' "$@"; }
gen "${R[@]}" --seed 3 >"$tmp/t1.json" || fail "temperature 1"
same "$tmp/greedy20.json" "$tmp/t1.json" 0 || fail "temperature 1 seed 3 already gives the greedy tokens (the --min-p test would prove nothing)"
gen "${R[@]}" --seed 3 --min-p 1 >"$tmp/minp.json" || fail "--min-p 1"
same "$tmp/greedy20.json" "$tmp/minp.json" 1 || fail "--min-p 1 at temperature 1 is not greedy"
check "--min-p json" "$tmp/minp.json" "d['sampler']['min_p'] == 1.0"
gen "${R[@]}" --seed 3 --min-p 1 --min-tokens-to-keep 50 >"$tmp/keep.json" || fail "--min-tokens-to-keep"
same "$tmp/greedy20.json" "$tmp/keep.json" 0 || fail "--min-tokens-to-keep 50 with --min-p 1 still greedy"
# --typical-p tiny: one token kept, so the seed no longer matters
gen "${R[@]}" --seed 4 >"$tmp/t4.json"
same "$tmp/t1.json" "$tmp/t4.json" 0 || fail "seeds 3 and 4 agree without --typical-p"
gen "${R[@]}" --seed 3 --typical-p 1e-9 >"$tmp/ty3.json" || fail "--typical-p"
gen "${R[@]}" --seed 4 --typical-p 1e-9 >"$tmp/ty4.json" || fail "--typical-p"
same "$tmp/ty3.json" "$tmp/ty4.json" 1 || fail "--typical-p 1e-9: seeds 3 and 4 differ"
# --chain (llamacpp): min-p 1 before temperature keeps the top
gen "${R[@]}" --seed 3 --profile llamacpp --chain min_p,temperature --min-p 1 >"$tmp/chain.json" || fail "--chain"
same "$tmp/greedy20.json" "$tmp/chain.json" 1 || fail "--chain min_p,temperature with --min-p 1 is not greedy"
check "--chain json" "$tmp/chain.json" "d['sampler']['chain'] == ['min_p', 'temperature'] and d['sampler']['profile'] == 'llamacpp'"

# a backend whose sample_ex declares the profile: the engine still draws
EX="${GF_BUILD:-}/tests/backends/libgenfence_test_faulty_ref_sample_ex_history.so"
if [[ -f $EX ]]; then
    gen "${G0[@]}" --profile llamacpp --top-k none --top-p none >"$tmp/ref.json"
    gen "${G0[@]}" --profile llamacpp --top-k none --top-p none --backend "$EX" >"$tmp/ex.json" 2>"$tmp/ex.err" ||
        fail "--backend sample_ex"
    check "ref: no sample_ex" "$tmp/ref.json" "d['sampler']['backend_sample_ex'] is False"
    check "sample_ex backend" "$tmp/ex.json" "d['sampler']['backend_sample_ex'] is True and d['sampler']['ran'] == 'engine'"
    same "$tmp/ref.json" "$tmp/ex.json" 1 || fail "the sample_ex backend's tokens differ from ref's"
    gen --prompt "Sherlock" --temperature 0 --max-new-tokens 3 --profile llamacpp --top-k none --top-p none \
        --backend "$EX" >/dev/null 2>"$tmp/ex.err"
    grep -q "the engine's llamacpp sampler drew these tokens" "$tmp/ex.err" || fail "no note of the sampler on stderr"
else
    fail "test backend $EX not built (GF_BUILD=${GF_BUILD:-unset})"
fi

# bad values: exit 2, naming the flag
bad "hf temperature 0" "invalid sampler \(.*--temperature.*\): hf: temperature \(=0\) has to be a strictly positive float" \
    --prompt x --profile hf --temperature 0
bad "hf temperature 0 names --profile" "--profile" --prompt x --profile hf --temperature 0
bad "logit-bias no colon" "--logit-bias: '5' is not ID:BIAS" --prompt x --logit-bias 5
bad "logit-bias NaN" "--logit-bias for token 5 is NaN" --prompt x --logit-bias 5:nan
bad "logit-bias +inf" "--logit-bias for token 5 is \+inf" --prompt x --logit-bias 5:inf
bad "logit-bias id" "--logit-bias: 'x:1' is not ID:BIAS" --prompt x --logit-bias x:1
bad "logit-bias vocab" "--logit-bias: token 99999 is outside the vocabulary" --prompt x --logit-bias 99999:1
bad "logit-bias twice" "invalid sampler \(--logit-bias\): seed: logit_bias names token 5 twice" --prompt x --logit-bias 5:1,5:2
bad "profile unknown" "--profile: unknown sampler profile 'nope'" --prompt x --profile nope
bad "chain stage" "--chain: unknown chain stage 'top_q'" --prompt x --profile llamacpp --chain top_q,temperature
bad "chain no temperature" "invalid sampler \(.*--chain.*\): llamacpp: chain lacks 'temperature'" \
    --prompt x --profile llamacpp --top-k none --top-p none --chain min_p
bad "chain under seed" "invalid sampler \(.*--chain.*\): seed: an explicit chain is llamacpp's" --prompt x --chain temperature
bad "min-p range" "invalid sampler \(--min-p\): seed: min_p must lie in \[0, 1\]" --prompt x --min-p 1.5
bad "min-p value" "bad value 'abc' for --min-p" --prompt x --min-p abc
bad "vllm typical" "invalid sampler \(.*--typical-p.*\): vllm: vLLM has no typical_p" --prompt x --profile vllm --typical-p 0.5
bad "penalty-last-n" "bad value '-2' for --penalty-last-n" --prompt x --penalty-last-n -2
bad "stop empty" "--stop: a stop string must not be empty" --prompt x --stop ""
bad "stop ids" "--stop-token-ids" --prompt x --stop-token-ids 1,a
bad "min-new-tokens no eos" "--min-new-tokens needs an eos id" --prompt x --no-eos --min-new-tokens 2
bad "with --verify" "apply to a plain generation" --prompt x --verify --min-p 0.1

# --help names every flag
"$GENFENCE" generate --help >"$tmp/help" || fail "--help"
for f in --profile --chain --min-p --typical-p --repetition-penalty --frequency-penalty --presence-penalty \
    --penalty-last-n --min-tokens-to-keep --logit-bias --min-new-tokens --stop-token-ids --stop; do
    grep -q -- "^  $f " "$tmp/help" || fail "--help lacks $f"
done

[[ $fails == 0 ]] || { echo "generate_sampler_flags: $fails failures" >&2; exit 1; }
echo "generate_sampler_flags: ok"
