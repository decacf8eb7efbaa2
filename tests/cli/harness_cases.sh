#!/usr/bin/env bash
# Bad case files exit 2 with FILE:LINE:COLUMN: an unknown key, a wrong type,
# a missing key, a duplicate id (also across files), bad YAML; nothing runs.
set -euo pipefail
: "${GENFENCE:?set GENFENCE to the genfence binary}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init harness_cases

check() { # name, expected message, yaml text
  printf '%s' "$3" >"$tmp/$1.yaml"
  for cmd in run list; do
    set +e
    "$GENFENCE" $cmd "$tmp/$1.yaml" $( [[ $cmd == run ]] && echo --no-report ) >"$tmp/out" 2>"$tmp/err"
    rc=$?
    set -e
    [[ $rc == 2 ]] || fail "$cmd $1: exit $rc, expected 2"
    grep -qF "$tmp/$1.yaml:$2" "$tmp/err" || { cat "$tmp/err"; fail "$cmd $1: no '$2' on stderr"; }
  done
  grep -q 'passed' "$tmp/out" && fail "$1: something ran"
  return 0
}

check unknown_key "6:5: unknown key 'temprature'" 'cases:
  - id: a
    kind: top_k_fence
    probs: [0.5, 0.5]
    expect: [{k: 1, keep: [0]}]
    temprature: 0.5
'
check wrong_type "5:12: 'steps' must be an integer" 'cases:
  - id: a
    kind: cache_equals_recompute
    model: models/holmes-gpt
    steps: "64"
    prompt: x
'
check missing_key "2:5: missing required key 'expect'" 'cases:
  - id: a
    kind: top_p_fence
    probs: [0.5, 0.5]
'
check duplicate_id "3:9: duplicate id 'a'" 'cases:
  - {id: a, kind: top_k_fence, probs: [1], expect: [{k: 1, keep: [0]}]}
  - id: a
    kind: top_k_fence
    probs: [1]
    expect: [{k: 1, keep: [0]}]
'
check bad_yaml "3:" 'cases:
  - id: a
   kind: oops: [
'
check nan_where_int "5:18: 'k' must be an integer" 'cases:
  - id: a
    kind: top_k_fence
    probs: [0.5, 0.5]
    expect: [{k: .nan, keep: [0]}]
'

# a duplicate id across two files names the first one
printf 'cases:\n  - {id: same, kind: top_k_fence, probs: [1], expect: [{k: 1, keep: [0]}]}\n' >"$tmp/one.yaml"
printf 'cases:\n  - {id: same, kind: top_k_fence, probs: [1], expect: [{k: 1, keep: [0]}]}\n' >"$tmp/two.yaml"
set +e
"$GENFENCE" list "$tmp/one.yaml" "$tmp/two.yaml" >/dev/null 2>"$tmp/err"
rc=$?
set -e
[[ $rc == 2 ]] || fail "duplicate across files: exit $rc"
grep -qF "$tmp/two.yaml:2:10: duplicate id 'same' (first at $tmp/one.yaml:2:5)" "$tmp/err" || { cat "$tmp/err"; fail "cross-file duplicate message"; }

# core schema values work end to end: .inf in logits, .nan / .inf temperatures are errors
cat >"$tmp/good.yaml" <<'YAML'
cases:
  - id: core.schema
    kind: sampler_errors
    logits: [2.0, -.inf, 1.0, ~]
    calls:
      - {temperature: .nan, expect: error}
YAML
set +e
"$GENFENCE" list "$tmp/good.yaml" >/dev/null 2>"$tmp/err"
rc=$?
set -e
[[ $rc == 2 ]] || fail "null in logits accepted"
grep -q "good.yaml:4:31: 'logits' entry 3 must be a number, got null" "$tmp/err" || { cat "$tmp/err"; fail "null message"; }
sed -i 's/, ~\]/]/' "$tmp/good.yaml"
"$GENFENCE" run "$tmp/good.yaml" --backend ref --no-report | tail -n 1 | gf_grepq -Fqx 'ref: 0 passed, 0 failed, 0 skipped (reached no case); engine alone: 1 passed, 0 failed, 0 skipped' \
  || fail "core-schema case does not pass"
echo "harness_cases: ok"
