#!/usr/bin/env bash
# genfence compare explains a deliberately changed run: another thread count
# (and, with openblas here, another OpenBLAS kernel set via OPENBLAS_CORETYPE)
# shows up as audit differences, a moved metric is listed, and a verdict that
# regressed makes it exit 1 (the regression is made by editing B's report).
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}"
PY=${GF_PYTHON:-python3}
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init compare_runs
cd "$GF_SRC"
sel=(cases/golden.yaml cases/generation.yaml --filter '^(golden\.greedy\.sherlock|cache\.sherlock)$')
bk=(--backend ref)
openblas=0
"$GENFENCE" backends > "$tmp/backends.txt" || true
if grep -Eq "^openblas +available " "$tmp/backends.txt"; then bk+=(--backend openblas); openblas=1; fi
env -u OPENBLAS_CORETYPE "$GENFENCE" run "${sel[@]}" "${bk[@]}" --threads 1 --report-dir "$tmp/a" > "$tmp/a.txt" 2>&1 ||
    { cat "$tmp/a.txt"; fail "run A failed"; }
if [ "$openblas" = 1 ]; then
    OPENBLAS_CORETYPE=Haswell "$GENFENCE" run "${sel[@]}" "${bk[@]}" --threads 2 --oversubscribe --report-dir "$tmp/b" > "$tmp/b.txt" 2>&1 ||
        { cat "$tmp/b.txt"; fail "run B failed"; }
else
    "$GENFENCE" run "${sel[@]}" "${bk[@]}" --threads 2 --oversubscribe --report-dir "$tmp/b" > "$tmp/b.txt" 2>&1 ||
        { cat "$tmp/b.txt"; fail "run B failed"; }
fi

# same verdicts: exit 0, the thread counts explained
"$GENFENCE" compare "$tmp/a/run.json" "$tmp/b/run.json" > "$tmp/cmp.txt" || { cat "$tmp/cmp.txt"; fail "exit $? without a regression"; }
cat "$tmp/cmp.txt"
grep -q "^verdict changes: 0$" "$tmp/cmp.txt" || fail "verdict changes reported for equal verdicts"
grep -q "audit.threads.threads_per_job: 1 -> 2" "$tmp/cmp.txt" || fail "the thread count change is not explained"
grep -q "backends.ref.threads: 1 -> 2" "$tmp/cmp.txt" || fail "the backend's thread count change is not explained"
if [ "$openblas" = 1 ]; then
    grep -q "audit.numerics_env.OPENBLAS_CORETYPE: (absent) -> Haswell" "$tmp/cmp.txt" || fail "OPENBLAS_CORETYPE not explained"
    grep -q "backends.openblas.library: .*Haswell" "$tmp/cmp.txt" || fail "the OpenBLAS kernel change not explained"
else
    echo "skipped the OpenBLAS part: openblas unavailable here"
fi
# a run against itself: nothing at all
"$GENFENCE" compare --json "$tmp/a/run.json" "$tmp/a/run.json" > "$tmp/self.json"
"$PY" - "$tmp/self.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("verdict_changes", "moved", "audit_differences", "only_in_a", "only_in_b"):
    assert d[k] == [], (k, d[k])
assert d["regressions"] == 0
PY

# B edited: cache.sherlock@ref fails with a larger max |delta| and a later first divergence
"$PY" - "$tmp/b/run.json" "$tmp/bad.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
hit = 0
for r in d["results"]:
    if r["id"] == "cache.sherlock" and r["backend"] == "ref":
        r["verdict"], r["exit_status"], r["reason"] = "fail", 1, "edited to fail"
        c = r["metrics"]["comparisons"]["cached_vs_uncached"]
        c["max_abs_delta"], c["safety_factor"], c["first_divergence"] = 0.5, 0.01, 7
        hit = 1
assert hit
json.dump(d, open(sys.argv[2], "w"))
PY
set +e
"$GENFENCE" compare "$tmp/a/run.json" "$tmp/bad.json" > "$tmp/bad.txt"
rc=$?
"$GENFENCE" compare --json "$tmp/a/run.json" "$tmp/bad.json" > "$tmp/bad.json.out"
rcj=$?
"$GENFENCE" compare --html "$tmp/bad.html" "$tmp/a/run.json" "$tmp/bad.json" > /dev/null
rch=$?
"$GENFENCE" compare "$tmp/bad.json" "$tmp/a/run.json" > "$tmp/fixed.txt"
rcf=$?
"$GENFENCE" compare "$tmp/a/run.json" > /dev/null 2>&1
rcu=$?
"$GENFENCE" compare "$tmp/a/run.json" "$tmp/a.txt" > /dev/null 2>&1
rcn=$?
set -e
cat "$tmp/bad.txt"
[ "$rc" = 1 ] && [ "$rcj" = 1 ] && [ "$rch" = 1 ] || fail "exit $rc/$rcj/$rch on a regressed verdict, expected 1"
# the HTML page: the regression, the audit table, A's and B's plots overlaid for the changed result
grep -q "<b>REGRESSED</b>" "$tmp/bad.html" || fail "no regression in the HTML page"
grep -q "audit.threads.threads_per_job" "$tmp/bad.html" || fail "no audit differences in the HTML page"
grep -q "<h3>cache.sherlock@ref: A" "$tmp/bad.html" || fail "no plots of the changed result in the HTML page"
[ "$(grep -o '<svg' "$tmp/bad.html" | wc -l)" -ge 2 ] || fail "fewer than 2 plots in the HTML page"
if grep -qi '<script' "$tmp/bad.html"; then fail "the compare page has a script"; fi
[ "$rcf" = 0 ] || fail "exit $rcf when a verdict got better, expected 0"
[ "$rcu" = 2 ] && [ "$rcn" = 2 ] || fail "exit $rcu/$rcn on bad usage / a non-JSON file, expected 2"
grep -Eq "REGRESSED +cache.sherlock@ref +pass -> fail" "$tmp/bad.txt" || fail "the regression is not listed"
grep -Eq "cache.sherlock@ref +cached_vs_uncached +max_abs_delta +0 -> 0.5" "$tmp/bad.txt" || fail "max |delta| move not listed"
grep -Eq "cache.sherlock@ref +cached_vs_uncached +first_divergence +-1 -> 7" "$tmp/bad.txt" || fail "first divergence move not listed"
grep -Eq "cache.sherlock@ref +cached_vs_uncached +safety_factor +\+inf -> 0.01" "$tmp/bad.txt" || fail "safety factor move not listed"
"$PY" - "$tmp/bad.json.out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["regressions"] == 1, d
assert [c["result"] for c in d["verdict_changes"] if c["regression"]] == ["cache.sherlock@ref"], d["verdict_changes"]
PY
echo "1 passed, 0 failed"
