#!/usr/bin/env bash
# Named backends must be usable (issue 11, item 1). `genfence run` with a
# backend named by --backend that cannot be loaded is verdict error on every
# case and exit 2, with the reason on every line and in the summary, -q
# included:
#   - an unknown name (a typo), a plugin path that does not exist, a plugin
#     refused for its table (ABI), a plugin whose probe crashes (SIGSEGV) or
#     hangs (tests/backends/faulty.c; the probe gets --timeout when shorter);
#   - exec without a client command (its info says so);
# and not named: bare exec (needs exec:COMMAND) is not in the default list,
# only the built-in C echo client (exec:<build>/tools/echo_ref, opt-in: no
# case without `backends: [exec]` runs on it, docs/harness.md); a
# built-in unavailable here (cuda without a GPU) is not run, said so in the
# summary; --require-backend on it fails (exit 1).
# Before: each of the first five gave "0 passed, 0 failed, N skipped", exit 0.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init honest_backends
cd "$GF_SRC"
tb="$GF_BUILD/tests/backends"
# the default --timeout (a probe then gets 30 s): a loaded machine does not
# turn a crash or a refusal into a timeout; the hung probe alone gets 3 s
sel=(--kind top_k_fence --kind top_p_fence --no-report -q)
n_cases=$("$GENFENCE" list --kind top_k_fence --kind top_p_fence | grep -c '^[a-z]')
[[ $n_cases -ge 2 ]] || fail "expected at least 2 fence cases, list shows $n_cases"

check_error() { # backend spec, reason (grep -E), more run options
    local be=$1 want=$2 rc
    shift 2
    set +e
    "$GENFENCE" run --backend "$be" "${sel[@]}" "$@" >"$tmp/out" 2>&1
    rc=$?
    set -e
    cat "$tmp/out"
    [[ $rc -eq 2 ]] || fail "--backend $be: exit $rc, want 2"
    local n_err
    n_err=$(grep -c '^ERROR ' "$tmp/out" || true)
    [[ $n_err -eq $n_cases ]] || fail "--backend $be: $n_err ERROR lines, want one per case ($n_cases)"
    # the reason right under every ERROR line
    local n_reason
    n_reason=$(grep -A1 '^ERROR ' "$tmp/out" | grep -cE "^    backend '.*' cannot be used: .*$want" || true)
    [[ $n_reason -eq $n_cases ]] || fail "--backend $be: the reason /$want/ is under $n_reason of $n_cases lines"
    grep -Eq "^backend .* cannot be used .*$want" "$tmp/out" || fail "--backend $be: the summary does not name the reason"
    tail -n 1 "$tmp/out" | gf_grepq -Eq "^[^;]+: 0 passed, $n_cases failed, 0 skipped$" || fail "--backend $be: $(tail -n 1 "$tmp/out")"
    echo "ok   --backend $be: error x $n_cases, exit 2"
}
check_error openblass "unknown backend 'openblass' \(known: ref, "
check_error "$tmp/missing.so" "cannot load .*missing\.so"
check_error "$tb/libgenfence_test_abi_long.so" "refused .*abi_long\.so"
check_error "$tb/libgenfence_test_faulty_probe_crash.so" "the probe crashed \(signal 11"
check_error "$tb/libgenfence_test_faulty_probe_hang.so" "the probe did not answer within 3 s" --timeout 3
check_error exec "exec runs a protocol client, and none was named"

# a named usable backend beside an unusable one: still exit 2
set +e
"$GENFENCE" run cases/generation.yaml --filter '^cache\.sherlock$' --backend ref --backend openblass --no-report >"$tmp/out" 2>&1
rc=$?
set -e
[[ $rc -eq 2 ]] || fail "--backend ref --backend openblass: exit $rc, want 2"
grep -q '^pass .*\[ref\]' "$tmp/out" || fail "ref did not run beside the unusable backend"

# default list: no exec; an unavailable built-in is named in the summary (-q)
"$GENFENCE" run --kind top_k_fence --no-report >"$tmp/out" || fail "default run exited $?"
grep -Eq '^  backend exec +available +echo_ref \(C, libm\); .*/tools/echo_ref$' "$tmp/out" ||
    fail "the default list has no built-in echo client: $(grep '^  backend exec' "$tmp/out")"
[[ $(grep -c '^  backend exec ' "$tmp/out") == 1 ]] || fail "exec is in the default list twice"
! grep -q '\[exec\]' "$tmp/out" || fail "a case that does not name exec ran on the echo client by default"
if grep -Eq '^backend cuda: unavailable here' "$tmp/out"; then
    "$GENFENCE" run --kind top_k_fence --no-report -q >"$tmp/out" || fail "default run -q exited $?"
    grep -Eq '^backend cuda: unavailable here, not run: ' "$tmp/out" || fail "-q summary does not say cuda was not run"
    set +e
    "$GENFENCE" run --require-backend cuda --kind top_k_fence --no-report -q >"$tmp/out" 2>&1
    rc=$?
    set -e
    if grep -q 'cannot load .*libgenfence_backend_cuda' "$tmp/out"; then
        # this build has no cuda module (a sanitizer build skips it): a named
        # backend that cannot be loaded is an error, exit 2
        [[ $rc -eq 2 ]] || fail "--require-backend cuda without its module: exit $rc, want 2"
        echo "ok   cuda module not built here: not run by default, exit 2 when required"
    else
        [[ $rc -eq 1 ]] || fail "--require-backend cuda without a GPU: exit $rc, want 1"
        "$GENFENCE" run --backend cuda --kind top_k_fence --no-report -q >"$tmp/out" 2>&1 \
            || fail "--backend cuda without a GPU: exit $?, want 0 (a loud skip)"
        grep -Eq '^backend cuda: unavailable here, skipped: ' "$tmp/out" || fail "named unavailable cuda: not said in the summary"
        echo "ok   cuda unavailable: not run by default, skip when named, exit 1 when required"
    fi
fi
echo "ok   named backends must be usable"
