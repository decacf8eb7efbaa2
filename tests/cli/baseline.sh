#!/usr/bin/env bash
# Baselines of known findings (issue 24 item 2; docs/harness.md "Baselines"),
# on the project's own faulty backend ref-known (tests/backends/faulty.c,
# fault 30), never on an engine's numbers on this CPU:
#   - a run of ref-known fails (its known finding: logit 7 + 1e-3 in every
#     forward fails the four golden cases of cases/golden.yaml); genfence
#     baseline writes those four findings;
#   - run --baseline: the four are `known` (exit 0), JUnit skipped with the
#     finding's text, run.json's verdict known with baseline.was the failure;
#   - the fault switched off (GF_KNOWN_FAULT=0): `fixed`, exit 1; with
#     --baseline-allow-fixed exit 0, still reported fixed;
#   - a new bug (GF_NEW_FAULT=1) still fails (exit 1): a known case's new
#     reason is no known finding, and cases outside the baseline fail;
#   - a hand-written entry's reason pattern that the run does not match leaves
#     the failure a failure; an entry for a case not in the run is "not checked";
#   - bad baseline files exit 2 with FILE:LINE:COL, and nothing runs.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init baseline
cd "$GF_SRC"
BE="$GF_BUILD/tests/backends/libgenfence_test_faulty_ref_known.so"
CASES=(cases/golden.yaml cases/generation.yaml)
run() { # run OUTFILE ARGS...: genfence run on ref-known; prints the exit status
    local out=$1
    shift
    set +e
    "$GENFENCE" run "${CASES[@]}" --backend "$BE" --no-triangulate -j 2 --oversubscribe "$@" >"$out" 2>&1
    local rc=$?
    set -e
    echo $rc
}
summary() { gf_total "$1"; } # the whole run's figures (the line above the last)
py() { "${GF_PYTHON:-python3}" "$@"; }

# 1. the known finding, as a plain run
rc=$(run "$tmp/plain.out" --report-dir "$tmp/plain")
[[ $rc -eq 1 ]] || { cat "$tmp/plain.out"; fail "plain run: exit $rc, want 1"; }
n_fail=$(grep -c '^FAIL ' "$tmp/plain.out" || true)
[[ $n_fail -eq 4 ]] || { cat "$tmp/plain.out"; fail "plain run: $n_fail FAIL lines, want the 4 golden cases"; }
echo "ok   ref-known fails the 4 golden cases: $(summary "$tmp/plain.out")"

# 2. genfence baseline writes them
"$GENFENCE" baseline "$tmp/plain/run.json" -o "$tmp/bl.yaml" --see tests/cli/baseline.sh >"$tmp/w.out" 2>&1 ||
    { cat "$tmp/w.out"; fail "genfence baseline failed"; }
grep -q '^baseline: 4 findings of ' "$tmp/w.out" || { cat "$tmp/w.out"; fail "want 4 findings written"; }
[[ $(grep -c "^  - case: '^golden" "$tmp/bl.yaml") -eq 4 ]] || { cat "$tmp/bl.yaml"; fail "want 4 golden entries"; }
grep -q "^    backend: 'ref-known'$" "$tmp/bl.yaml" || fail "a plugin path is written as the backend's name"
grep -q 'max \\|delta\\| \[-+.0-9eE\]+ at step' "$tmp/bl.yaml" || { cat "$tmp/bl.yaml"; fail "reason pattern"; }
echo "ok   genfence baseline wrote 4 entries"

# 3. with the baseline: known, exit 0
rc=$(run "$tmp/known.out" --report-dir "$tmp/known" --baseline "$tmp/bl.yaml")
[[ $rc -eq 0 ]] || { cat "$tmp/known.out"; fail "--baseline: exit $rc, want 0"; }
grep -q '^baseline .*bl.yaml: 4 entries; 4 known, 0 fixed, 0 different findings, 0 not checked' "$tmp/known.out" ||
    { cat "$tmp/known.out"; fail "baseline line"; }
grep -q '^verdicts: .* 4 known, 0 fixed, 0 fail' "$tmp/known.out" || fail "verdicts line"
[[ $(summary "$tmp/known.out") == "8 passed, 0 failed, 4 skipped" ]] || fail "summary: $(summary "$tmp/known.out")"
[[ $(grep -c '<skipped message="known finding (.*bl.yaml:[0-9]*; see tests/cli/baseline.sh): fail: golden/row0: max |delta|' \
    "$tmp/known/junit.xml") -eq 4 ]] || fail "JUnit: want 4 skipped with the finding's text"
py - "$tmp/known/run.json" <<'EOF' || fail "run.json"
import json, sys
d = json.load(open(sys.argv[1]))
k = [r for r in d["results"] if r["verdict"] == "known"]
assert len(k) == 4, len(k)
for r in k:
    b = r["baseline"]
    assert b["status"] == "known" and b["was"]["verdict"] == "fail" and r["exit_status"] == 0, r
    assert b["was"]["reason"].startswith("golden/row0: max |delta|"), b
assert d["baseline"]["known"] == 4 and d["baseline"]["entries"] == 4, d["baseline"]
assert d["summary"]["by_verdict"]["known"] == 4 and d["summary"]["exit_status"] == 0
EOF
grep -q 'class="v v-known"' "$tmp/known/index.html" || fail "HTML: no known verdict"
echo "ok   --baseline: 4 known, exit 0 (console, JUnit skipped, run.json, HTML)"

# 4. the fault fixed: fixed, exit 1; allowed: exit 0
rc=$(GF_KNOWN_FAULT=0 run "$tmp/fixed.out" --report-dir "$tmp/fixed" --baseline "$tmp/bl.yaml")
[[ $rc -eq 1 ]] || { cat "$tmp/fixed.out"; fail "fixed: exit $rc, want 1"; }
grep -q '4 known\|0 known, 4 fixed' "$tmp/fixed.out" && grep -q '^verdicts: .* 0 known, 4 fixed, 0 fail' "$tmp/fixed.out" ||
    { cat "$tmp/fixed.out"; fail "want 4 fixed"; }
grep -q '^  FIXED    golden.greedy.sherlock \[ref-known\]: fixed: .*bl.yaml:[0-9]* expects fail, written up in tests/cli/baseline.sh, and it passed' \
    "$tmp/fixed.out" || { cat "$tmp/fixed.out"; fail "fixed line"; }
[[ $(grep -c '<failure type="fixed"' "$tmp/fixed/junit.xml") -eq 4 ]] || fail "JUnit: want 4 failures of type fixed"
rc=$(GF_KNOWN_FAULT=0 run "$tmp/allowed.out" --no-report --baseline "$tmp/bl.yaml" --baseline-allow-fixed)
[[ $rc -eq 0 ]] || { cat "$tmp/allowed.out"; fail "--baseline-allow-fixed: exit $rc, want 0"; }
grep -q '^verdicts: .* 4 fixed' "$tmp/allowed.out" || fail "allowed: still reported fixed"
echo "ok   fault switched off: 4 fixed, exit 1; --baseline-allow-fixed exit 0"

# 5. a new bug in the known-findings backend still fails
rc=$(GF_NEW_FAULT=1 run "$tmp/new.out" --report-dir "$tmp/new" --baseline "$tmp/bl.yaml")
[[ $rc -eq 1 ]] || { cat "$tmp/new.out"; fail "new bug: exit $rc, want 1"; }
grep -q '^verdicts: .* 0 known, 0 fixed, [1-9][0-9]* fail' "$tmp/new.out" || { cat "$tmp/new.out"; fail "new bug: want fails"; }
grep -q '^  FAIL     golden.greedy.sherlock \[ref-known\]: not the known finding (.*bl.yaml:[0-9]* expects fail' \
    "$tmp/new.out" || { cat "$tmp/new.out"; fail "new bug: a known case's new reason must say it is not the known finding"; }
py - "$tmp/new/run.json" <<'EOF' || fail "new bug: run.json"
import json, sys
d = json.load(open(sys.argv[1]))
r = [r for r in d["results"] if r["id"] == "golden.greedy.sherlock"][0]
assert r["verdict"] == "fail" and r["exit_status"] == 1 and r["baseline"]["status"] == "differs", r
assert "cache_length is 6" in r["reason"] and "cache_length is 6" in r["baseline"]["was"]["reason"], r
assert d["baseline"]["differ"] == 4, d["baseline"]
EOF
grep -q '^  FAIL     cache.sherlock \[ref-known\]: .*cache_length' "$tmp/new.out" || fail "new bug outside the baseline"
echo "ok   a new bug still fails: $(summary "$tmp/new.out")"

# 6. hand-written: a reason pattern that does not match; an entry not in the run
cat >"$tmp/hand.yaml" <<'EOF'
about: hand-written for tests/cli/baseline.sh
findings:
  - case: 'golden\.greedy\..*'
    backend: ref-known
    verdict: fail
    reason: 'at step 7 '
  - case: '^golden\.sampled\.(sherlock|batch)$'
    backend: ref-known
    verdict: fail
    reason: 'max \|delta\|'
    see: docs/harness.md
  - case: '^no\.such\.case$'
    backend: ref-known
    verdict: crash
EOF
rc=$(run "$tmp/hand.out" --no-report --baseline "$tmp/hand.yaml")
[[ $rc -eq 1 ]] || { cat "$tmp/hand.out"; fail "hand: exit $rc, want 1"; }
grep -q 'hand.yaml: 3 entries; 2 known, 0 fixed, 2 different findings, 1 not checked' "$tmp/hand.out" ||
    { cat "$tmp/hand.out"; fail "hand: counts"; }
echo "ok   unmatched reason stays a failure; an entry with no run is not checked"

# 7. bad baseline files: exit 2, FILE:LINE:COL, nothing run
bad() { # bad NAME 'YAML' 'expected message (ERE)'
    printf '%s\n' "$2" >"$tmp/$1.yaml"
    set +e
    "$GENFENCE" run cases/golden.yaml --backend "$BE" --no-report --baseline "$tmp/$1.yaml" >"$tmp/$1.out" 2>&1
    local rc=$?
    set -e
    [[ $rc -eq 2 ]] || { cat "$tmp/$1.out"; fail "$1: exit $rc, want 2"; }
    grep -Eq "$3" "$tmp/$1.out" || { cat "$tmp/$1.out"; fail "$1: want /$3/"; }
    ! grep -q '^pass \|^FAIL ' "$tmp/$1.out" || fail "$1: cases ran"
}
bad no_findings 'about: x' "$tmp/no_findings.yaml:1:1: .*findings"
bad bad_verdict $'findings:\n  - case: a\n    backend: ref\n    verdict: pass' "$tmp/bad_verdict.yaml:4:14: .*verdict"
bad bad_regex $'findings:\n  - case: \'(\'\n    backend: ref\n    verdict: fail' "$tmp/bad_regex.yaml:2:11: 'case' is not a POSIX extended regular expression"
bad unknown_key $'findings:\n  - case: a\n    backend: ref\n    verdict: fail\n    seee: x' "$tmp/unknown_key.yaml:5:5: .*seee"
bad yaml_syntax $'findings: [' "$tmp/yaml_syntax.yaml:[0-9]+:[0-9]+: "
set +e
"$GENFENCE" run cases/golden.yaml --no-report --baseline "$tmp/nope.yaml" >"$tmp/nope.out" 2>&1
rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q "$tmp/nope.yaml:0:0: cannot read" "$tmp/nope.out" || { cat "$tmp/nope.out"; fail "missing file"; }
echo "ok   bad baseline files exit 2 with FILE:LINE:COL"

# 8. genfence baseline: no finding to write -> exit 1, nothing written; bad report -> 2
set +e
"$GENFENCE" baseline "$tmp/known/run.json" -o "$tmp/none.yaml" --backend ref >"$tmp/none.out" 2>&1
rc=$?
echo '{' >"$tmp/broken.json"
"$GENFENCE" baseline "$tmp/broken.json" -o "$tmp/x.yaml" >"$tmp/broken.out" 2>&1
rc2=$?
set -e
[[ $rc -eq 1 && ! -e "$tmp/none.yaml" ]] || { cat "$tmp/none.out"; fail "no finding: exit $rc, want 1 and no file"; }
[[ $rc2 -eq 2 ]] && grep -q "broken.json:" "$tmp/broken.out" || { cat "$tmp/broken.out"; fail "broken report: exit $rc2"; }
# a report whose findings a baseline called known writes them again (from baseline.was)
"$GENFENCE" baseline "$tmp/known/run.json" -o "$tmp/again.yaml" >/dev/null
[[ $(grep -c "^  - case: " "$tmp/again.yaml") -eq 4 ]] || fail "known results are written again"
echo "ok   genfence baseline: exit 1 with nothing to write, 2 on a bad report"
# a must-fail case that got the verdict it declares passed: it is no finding
# (golden.declared.stale: stale as declared, exit 0; before, genfence baseline
# wrote it as a stale entry with this checkout's absolute golden path in it)
"$GENFENCE" run cases/paths.yaml --filter '^golden\.declared\.stale$' --backend ref --report-dir "$tmp/decl" >"$tmp/decl.out" 2>&1 ||
    { cat "$tmp/decl.out"; fail "golden.declared.stale on ref: want exit 0 (stale as declared)"; }
grep -q '"as_declared": true' "$tmp/decl/run.json" || fail "golden.declared.stale: run.json has no as_declared true"
set +e
"$GENFENCE" baseline "$tmp/decl/run.json" -o "$tmp/decl.yaml" >"$tmp/decl_w.out" 2>&1
rc=$?
set -e
[[ $rc -eq 1 && ! -e "$tmp/decl.yaml" ]] || { cat "$tmp/decl_w.out" "$tmp/decl.yaml" 2>/dev/null; fail "a result as declared was written as a finding (exit $rc)"; }
echo "ok   genfence baseline leaves out a must-fail case that failed as declared"
echo "baseline: all passed"
