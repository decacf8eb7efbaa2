#!/usr/bin/env bash
# top_p_fence / top_k_fence under a sampler profile (docs/cases.md): what the
# loader takes and refuses. The passing profile fences are in
# cases/schema.yaml (fence.profile.*), the must-fail one in
# cases/detect/peers.yaml; here the load-time errors, each alone in its file
# (exit 2 naming FILE:LINE:COL and the reason), and the arguments a profile
# turns off, which load and pass.
set -euo pipefail
: "${GENFENCE:?set GENFENCE to the genfence binary}" "${GF_SRC:?set GF_SRC}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init fence_profile
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# case NAME BODY: a one-case file $tmp/NAME.yaml
case_file() {
    printf 'cases:\n  - id: t.%s\n%s\n' "$1" "$2" >"$tmp/$1.yaml"
}
run() { (cd "$tmp" && GENFENCE_ROOT="$GF_SRC" "$GENFENCE" run "$tmp/$1.yaml" --backend ref --no-report) >"$tmp/$1.out" 2>&1; }

# refused NAME LINE:COL MESSAGE-PART BODY
refused() {
    local name=$1 where=$2 msg=$3
    case_file "$name" "$4"
    local rc=0
    run "$name" || rc=$?
    if [ "$rc" -ne 2 ]; then
        fail "$name: exit $rc, expected 2 (refused at load)"
        sed 's/^/    /' "$tmp/$name.out" | head -n 5
    elif ! grep -qF "$name.yaml:$where: $msg" "$tmp/$name.out"; then
        fail "$name: no '$name.yaml:$where: $msg' in"
        sed 's/^/    /' "$tmp/$name.out" | head -n 5
    else
        echo "ok   $name refused: $(grep -F "$name.yaml:$where" "$tmp/$name.out" | head -n 1)"
    fi
}

# passes NAME BODY
passes() {
    case_file "$1" "$2"
    if run "$1"; then
        echo "ok   $1 passes"
    else
        fail "$1: did not pass"
        sed 's/^/    /' "$tmp/$1.out" | head -n 6
    fi
}

refused top_k_key 4:5 "'top_k' is not a fence key: give 'k' / 'p' in each 'expect' entry" \
'    kind: top_k_fence
    top_k: 3
    logits: [0, 1, 2, 3]
    expect:
      - {k: 2, keep: [2, 3]}'
refused bias_key 5:5 "'logit_bias' is not a fence key" \
'    kind: top_p_fence
    profile: vllm
    logit_bias: {1: 2.0}
    logits: [0, 1, 2, 3]
    expect:
      - {p: 0.5, keep: [3]}'
refused seed_k0 7:9 "invalid sampler: top_k must be >= 1, got 0" \
'    kind: top_k_fence
    logits: [0, 1, 2, 3]
    expect:
      - {k: 2, keep: [2, 3]}
      - {k: 0, keep: [0, 1, 2, 3]}'
refused vllm_p0 7:9 "invalid sampler: vllm: top_p must be in (0, 1], got 0" \
'    kind: top_p_fence
    profile: vllm
    logits: [0, 1, 2, 3]
    expect:
      - {p: 0, keep: [3]}'
refused seed_p0 6:13 "'p' must lie in (0, 1], got 0" \
'    kind: top_p_fence
    logits: [0, 1, 2, 3]
    expect:
      - {p: 0, keep: [3]}'
refused unknown_profile 4:14 "unknown sampler profile 'torch'" \
'    kind: top_k_fence
    profile: torch
    logits: [0, 1, 2, 3]
    expect:
      - {k: 1, keep: [3]}'

# what a profile turns off: hf's k 0, vllm's k -1, hf's top_p 0 keeps
# min_tokens_to_keep (1 by default: the top token)
passes hf_k0 \
'    kind: top_k_fence
    profile: hf
    logits: [0, 1, 2, 3]
    expect:
      - {k: 0, keep: [0, 1, 2, 3]}'
passes vllm_k_minus_1 \
'    kind: top_k_fence
    profile: vllm
    logits: [0, 1, 2, 3]
    expect:
      - {k: -1, keep: [0, 1, 2, 3]}'
passes hf_p0 \
'    kind: top_p_fence
    profile: hf
    logits: [0, 1, 2, 3]
    expect:
      - {p: 0, keep: [3]}'

# the profile reaches the check names
case_file named '    kind: top_k_fence
    profile: llamacpp
    logits: [5, 5, 5, 1]
    expect:
      - {k: 2, keep: [0, 1, 2]}'
rc=0
run named || rc=$?
if [ "$rc" -ne 1 ] || ! grep -qF 'llamacpp k=2 kept set: kept [0, 1], expected [0, 1, 2]' "$tmp/named.out"; then
    fail "named: exit $rc, expected 1 with 'llamacpp k=2 kept set: kept [0, 1], expected [0, 1, 2]'"
    sed 's/^/    /' "$tmp/named.out" | head -n 6
else
    echo "ok   llamacpp's exact top-k fails HF's tie expectation, the check named 'llamacpp k=2 kept set'"
fi

if [ "$failures" -ne 0 ]; then
    echo "fence_profile: $failures failure(s)"
    exit 1
fi
echo "ok   fence profile keys"
