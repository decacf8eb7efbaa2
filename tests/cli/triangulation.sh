#!/usr/bin/env bash
# When backends disagree, the report names the one that is off against ref:
# a backend that corrupts one cache entry fails cache.sherlock while ref passes,
# and the triangulation probe pins it on the cached decode.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
bad="$GF_BUILD/tests/backends/libgenfence_test_ref_bad_cache.so"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$GF_SRC"
set +e
"$GENFENCE" run cases/generation.yaml --filter '^cache\.sherlock$' --backend ref --backend "$bad" \
    --report-dir "$tmp" > "$tmp/out.txt" 2>&1
rc=$?
set -e
cat "$tmp/out.txt"
fail() { echo "triangulation: $*"; exit 1; }
[ "$rc" = 1 ] || fail "exit status $rc, expected 1 (a failing case)"
grep -q "ref-bad-cache .*cached differs by" "$tmp/out.txt" || fail "no OFF line naming the cached decode"
grep -q "case cache.sherlock: backends disagree: ref pass (the reference); ref-bad-cache fail (cached off ref by .*this one is off" \
    "$tmp/out.txt" || fail "no line naming the backend that is off"
"${GF_PYTHON:-python3}" - "$tmp/run.json" <<'PY'
import json, sys
tri = json.load(open(sys.argv[1]))["triangulation"]
assert len(tri) == 1, tri
t = tri[0]
assert t["backend"] == "ref-bad-cache", t
assert t["cached"]["max_abs_delta"] > 1e-3, t
assert t["forward"]["max_abs_delta"] <= 1e-4 and t["padded"]["max_abs_delta"] <= 1e-4, t
print("triangulation JSON:", json.dumps(t))
PY
# agreeing backends: no triangulation output marks anything OFF
if "$GENFENCE" backends | grep -Eq "^openblas +available "; then
    "$GENFENCE" run cases/generation.yaml --filter '^cache\.sherlock$' --backend ref --backend openblas \
        --report-dir "$tmp/ok" > "$tmp/ok.txt" 2>&1 || { cat "$tmp/ok.txt"; fail "ref + openblas failed"; }
    grep -q "openblas .*agrees with ref" "$tmp/ok.txt" || { cat "$tmp/ok.txt"; fail "openblas not reported as agreeing"; }
else
    echo "skipped the agreeing pair: openblas unavailable here"
fi
echo "1 passed, 0 failed"
