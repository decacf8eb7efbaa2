#!/usr/bin/env bash
# When backends disagree, the report names the one that is off against ref
# (issue 11, item 7). The probe runs an uncached forward, a cached decode, a
# chunked prefill, and a left-padded batch whose rows hold distinct tokens,
# uncached and through a cache, each against ref's single-row forwards.
#  - ref-bad-cache (one corrupted cache entry) fails cache.sherlock while ref
#    passes: the probe pins it on the cache parts, the disagree line names it;
#  - ref-row-mix (cached rows read row 0's keys) and ref-no-mask (padding
#    keys leak) fail batch.left_padded: the cached padded part sees row-mix
#    (the uncached padded row of the old probe did not: "agrees with ref"),
#    the padded parts see no-mask, and the disagree line names both;
#  - a hung probe (ref-hang) is reported as a timeout, not "crashed (signal 14)".
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
B="$GF_BUILD/tests/backends"
bad="$B/libgenfence_test_ref_bad_cache.so"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init triangulation
cd "$GF_SRC"
set +e
"$GENFENCE" run cases/generation.yaml --filter '^cache\.sherlock$' --backend ref --backend "$bad" \
    --report-dir "$tmp" > "$tmp/out.txt" 2>&1
rc=$?
set -e
cat "$tmp/out.txt"
[ "$rc" = 1 ] || fail "exit status $rc, expected 1 (a failing case)"
grep -Eq "ref-bad-cache .*-> OFF \((cached|chunked|padded_cached) differs by" "$tmp/out.txt" \
    || fail "no OFF line naming a cache part"
grep -Eq "case cache.sherlock: backends disagree: ref pass \(the reference\); ref-bad-cache fail \((cached|chunked|padded_cached) off ref by [^)]*this one is off\);.* -> off: ref-bad-cache \(" \
    "$tmp/out.txt" || fail "no line naming the backend that is off"
"$PY" - "$tmp/run.json" <<'PY'
import json, sys
tri = json.load(open(sys.argv[1]))["triangulation"]
assert len(tri) == 1, tri
t = tri[0]
assert t["backend"] == "ref-bad-cache", t
assert t["cached"]["max_abs_delta"] > 1e-3 and t["chunked"]["max_abs_delta"] > 1e-3, t
assert t["forward"]["max_abs_delta"] <= 1e-4 and t["padded"]["max_abs_delta"] <= 1e-4, t
print("triangulation JSON:", json.dumps(t))
PY

# rows: a row-mixing cache and an ignored key mask
for f in ref_row_mix ref_no_mask; do [[ -f "$B/libgenfence_test_$f.so" ]] || fail "test backend $f not built"; done
set +e
"$GENFENCE" run cases/generation.yaml --filter '^batch\.left_padded$' --backend ref \
    --backend "$B/libgenfence_test_ref_row_mix.so" --backend "$B/libgenfence_test_ref_no_mask.so" \
    --report-dir "$tmp/rows" > "$tmp/rows.txt" 2>&1
rc=$?
set -e
cat "$tmp/rows.txt"
[ "$rc" = 1 ] || fail "rows: exit status $rc, expected 1"
grep -Eq "ref-row-mix .*-> OFF \(padded_cached differs by" "$tmp/rows.txt" || fail "ref-row-mix not OFF on the cached padded batch"
grep -Eq "ref-no-mask .*-> OFF \(padded(_cached)? differs by" "$tmp/rows.txt" || fail "ref-no-mask not OFF on a padded batch"
grep -Eq "case batch.left_padded: backends disagree: ref pass \(the reference\);.* -> off: ref-row-mix, ref-no-mask \(" \
    "$tmp/rows.txt" || fail "no disagree line naming ref-row-mix and ref-no-mask"
"$PY" - "$tmp/rows/run.json" <<'PY'
import json, sys
tri = {t["backend"]: t for t in json.load(open(sys.argv[1]))["triangulation"]}
m = tri["ref-row-mix"]
assert m["padded_cached"]["max_abs_delta"] > 1e-3, m
# the uncached parts cannot see a cache that mixes rows: the cached batch is what sees it
assert all(m[p]["max_abs_delta"] <= 1e-4 for p in ("forward", "cached", "chunked", "padded")), m
n = tri["ref-no-mask"]
assert n["padded"]["max_abs_delta"] > 1e-3 and n["forward"]["max_abs_delta"] <= 1e-4, n
print("ok   rows: ref-row-mix off on padded_cached only, ref-no-mask on padded")
PY

# a hung probe is a timeout: the case on ref-hang waits out --timeout, then its
# probe waits out the same bound (10 s each, as isolation_faults' hang runs;
# 20 s each was 40 s of an idle ctest slot). Whenever the bound ends the probe,
# after or before its calls that precede the hang, it is a timeout.
hang="$B/libgenfence_test_ref_hang.so"
[[ -f "$hang" ]] || fail "test backend $hang not built"
set +e
"$GENFENCE" run cases/generation.yaml --filter '^cache\.sherlock$' --backend ref --backend "$hang" --timeout $((10 * ${GF_TIME_SCALE:-1})) \
    --report-dir "$tmp/hang" > "$tmp/hang.txt" 2>&1
rc=$?
set -e
cat "$tmp/hang.txt"
[ "$rc" = 1 ] || fail "hang: exit status $rc, expected 1"
grep -q "ref-hang .*: the probe timed out: timed out after" "$tmp/hang.txt" || fail "the hung probe is not reported as a timeout"
! grep -q "signal 14" "$tmp/hang.txt" || fail "a hung probe reads as a crash (signal 14)"
"$PY" - "$tmp/hang/run.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["triangulation"][0]
assert t["backend"] == "ref-hang" and t["status"] == "timeout" and t["error"].startswith("timed out"), t
print("ok   hang: the probe's record says timeout")
PY

# agreeing backends: no triangulation output marks anything OFF
if "$GENFENCE" backends | gf_grepq -Eq "^openblas +available "; then
    "$GENFENCE" run cases/generation.yaml --filter '^cache\.sherlock$' --backend ref --backend openblas \
        --report-dir "$tmp/ok" > "$tmp/ok.txt" 2>&1 || { cat "$tmp/ok.txt"; fail "ref + openblas failed"; }
    grep -q "openblas .*agrees with ref" "$tmp/ok.txt" || { cat "$tmp/ok.txt"; fail "openblas not reported as agreeing"; }
else
    echo "skipped the agreeing pair: openblas unavailable here"
fi
echo "1 passed, 0 failed"
