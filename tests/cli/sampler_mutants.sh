#!/usr/bin/env bash
# The sampler mutants (issue 34): examples/plugin built with one deliberate
# filter bug each (GF_PX_MUTANT, faults 250-263, 266-267 of tests/backends) must fail
# cases/detect/sampler_mutants.yaml as declared, each on exactly the check
# "backend sample slot equals engine sampler" with some of its 400 draws
# differing (the engine's own checks pass); the same cases on the plugin as
# it ships (fault 83, registered as "example") must pass with every draw
# through its slot equal to the engine's.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init sampler_mutants

args=()
n=0
for num in $(seq 250 263) 266 267; do
    stem=$(grep -o "^gf_test_fault($num [a-z_0-9]*" "$GF_SRC/tests/backends/CMakeLists.txt" | awk '{print $2}')
    so="$GF_BUILD/tests/backends/libgenfence_test_$stem.so"
    [ -f "$so" ] || fail "fault $num: test backend $so not built"
    args+=(--backend "$so")
    n=$((n + 1))
done
[ "$n" -eq 16 ] || fail "$n mutants, expected 16"
ok="$GF_BUILD/tests/backends/libgenfence_test_example_plugin.so"
[ -f "$ok" ] || fail "test backend $ok not built"

set +e
"$GENFENCE" run "$GF_SRC/cases/detect/sampler_mutants.yaml" "${args[@]}" -j 2 --oversubscribe \
    --report-dir "$tmp/bad" >"$tmp/bad.out" 2>&1
rc=$?
set -e
[ $rc -eq 0 ] || { cat "$tmp/bad.out"; fail "mutants: exit $rc, want 0 (every case failed as declared)"; }
grep -q 'as declared: 16 of 16 runs' "$tmp/bad.out" || { cat "$tmp/bad.out"; fail "not 16 of 16 as declared"; }

# the same cases on the plugin as it ships: every expectation dropped, its name
sed -e '/expect_verdict: fail/d' -e 's/backends: \[example-mut-[a-z0-9-]*\]/backends: [example]/' \
    "$GF_SRC/cases/detect/sampler_mutants.yaml" >"$tmp/ok.yaml"
"$GENFENCE" run "$tmp/ok.yaml" --backend "$ok" -j 1 --report-dir "$tmp/ok" >"$tmp/ok.out" 2>&1 \
    || { cat "$tmp/ok.out"; fail "the shipped plugin failed the mutant cases"; }

"$PY" - "$tmp/bad/run.json" "$tmp/ok/run.json" <<'PY'
import json, sys
SLOT = "backend sample slot equals engine sampler"
bad = []
for path, want in ((sys.argv[1], "fail"), (sys.argv[2], "pass")):
    doc = json.load(open(path))
    rs = doc["results"]
    if len(rs) != 16:
        bad.append(f"{path}: {len(rs)} results, want 16")
    for r in rs:
        s = r["metrics"].get("backend_sample_slot")
        failed = [c["name"] for c in r["checks"] if not c["passed"]]
        if r["verdict"] != want:
            bad.append(f"{r['id']} [{r['backend']}]: {r['verdict']}, want {want} ({r['reason']})")
        elif not isinstance(s, dict) or s["rows"] != 400:
            bad.append(f"{r['id']} [{r['backend']}]: slot record {s}")
        elif want == "fail" and (failed != [SLOT] or s["mismatches"] == 0):
            bad.append(f"{r['id']} [{r['backend']}]: failed {failed}, {s['mismatches']} mismatches")
        elif want == "pass" and s["mismatches"] != 0:
            bad.append(f"{r['id']}: the shipped plugin differs on {s['mismatches']} draws")
        else:
            print(f"ok   {r['id']} [{r['backend']}]: {r['verdict']}, {s['mismatches']} of {s['rows']} draws differ")
if bad:
    print("\n".join("FAIL: " + b for b in bad))
    sys.exit(1)
PY
echo "sampler_mutants: ok"
