#!/usr/bin/env bash
# The run's watchdog judges stalls, not the machine's speed (issue 24 item 6):
# --timeout S kills a (case, backend) pair after S s without progress (no
# backend call started or returned), and a pair that keeps making calls is
# capped at GF_RUN_TOTAL_FACTOR (10) x S. Before, --timeout capped the whole
# pair, so a case of many short calls timed out on a loaded machine
# (plugin_build's default suite through the example plugin: TIMEOUT
# sliding.window64.llama after 120 s in forward call #270, at load 28 on 2
# cores) although no call was slow.
# ref-slow-calls (tests/backends: every forward sleeps GF_SLOW_MS ms after
# ref's) runs cache.sherlock (about 150 forward calls):
# 1. 100 ms a call under --timeout 10: the pair sleeps about 15 s, more than
#    --timeout, and passes (it failed before this rule; 200 ms under 20 s
#    before, the same ratios at half the idle wait);
# 2. 250 ms a call under --timeout 2: about 37 s of sleep, past the 20 s cap,
#    timeout, named as the cap, with the call it was in;
# 3. a stall is still caught at --timeout: ref-hang (never returns from a
#    forward) times out after its --timeout in forward call #1.
# The sleeps set lower bounds on the pair's time, so load only lengthens it,
# and they dominate the compute: (2) cannot finish inside its cap, and (1)'s
# cap (100 s) leaves room for compute 6x slower than this test's first
# version met under ASan beside two busy loops (14 s for the case's ~150
# calls; with 50 ms sleeps and --timeout 2 it ran into the 20 s cap there).
# A stall needs one call to take --timeout (10 s, 2 s): a 100 ms (250 ms)
# sleep plus one tiny-model forward.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
PY=${GF_PYTHON:-python3}
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init watchdog_progress
cd "$GF_SRC"
B="$GF_BUILD/tests/backends"
SLOW="$B/libgenfence_test_faulty_ref_slow_calls.so"
HANG="$B/libgenfence_test_ref_hang.so"
[[ -f "$SLOW" && -f "$HANG" ]] || fail "test backends not built ($SLOW, $HANG)"
export GENFENCE_MODULE_DIR="$GF_BUILD/backends"

set +e
GF_SLOW_MS=100 "$GENFENCE" run --backend "$SLOW" --filter '^cache\.sherlock$' --timeout 10 --no-triangulate \
    --report-dir "$tmp/r1" >"$tmp/r1.txt" 2>&1
rc=$?
set -e
[[ $rc -eq 0 ]] || { cat "$tmp/r1.txt"; fail "slow but progressing: exit $rc, want 0 (a pass)"; }
"$PY" - "$tmp/r1/run.json" <<'PY' || fail "slow but progressing: run.json"
import json, sys
r = json.load(open(sys.argv[1]))
res = [x for x in r["results"] if x["id"] == "cache.sherlock"]
assert len(res) == 1 and res[0]["verdict"] == "pass", res
# the precondition that makes (1) mean something: the pair outlasted --timeout
assert res[0]["seconds"] > 10, res[0]["seconds"]
PY

set +e
GF_SLOW_MS=250 "$GENFENCE" run --backend "$SLOW" --filter '^cache\.sherlock$' --timeout 2 --no-triangulate \
    --report-dir "$tmp/r2" >"$tmp/r2.txt" 2>&1
rc=$?
set -e
[[ $rc -eq 1 ]] || { cat "$tmp/r2.txt"; fail "past the pair's cap: exit $rc, want 1"; }
gf_grepq -Eq "TIMEOUT +cache\.sherlock \[ref-slow-calls\]: timed out: still making backend calls after 20 s, 10 x --timeout \(the pair's cap\) in forward call #[0-9]+ " \
    <"$tmp/r2.txt" || { cat "$tmp/r2.txt"; fail "the cap's timeout does not say so"; }

set +e
"$GENFENCE" run --backend "$HANG" --filter '^cache\.sherlock$' --timeout $((5 * ${GF_TIME_SCALE:-1})) --no-triangulate \
    --report-dir "$tmp/r3" >"$tmp/r3.txt" 2>&1
rc=$?
set -e
[[ $rc -eq 1 ]] || { cat "$tmp/r3.txt"; fail "a stall: exit $rc, want 1"; }
gf_grepq -Eq "TIMEOUT +cache\.sherlock \[ref-hang\]: timed out after [0-9]+ s in forward call #1 " <"$tmp/r3.txt" \
    || { cat "$tmp/r3.txt"; fail "the stall is not a timeout in forward call #1"; }
echo "watchdog_progress: ok"
