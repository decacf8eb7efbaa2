#!/usr/bin/env bash
# Issue 25: counts per backend. A run on ref of sampler and generation cases
# ends with ref's own figures and the engine alone's apart on its last line
# (before: one total, the engine's passes counted as if they tested the
# backend; the total is the line above); several backends each get their own
# figures; run.json's summary holds the same groups; a backend named with
# --require-backend that no case reached fails the run (before: exit 0,
# "9 passed"), on its own figures; the must-fail cases are judged by their
# expect_verdict unless --raw-verdicts (as declared: exit 0; a case that is
# not: exit 1, named); merge writes junit.xml, creates its output folder and
# names why it cannot write.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
PY=${GF_PYTHON:-python3}
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init report_per_backend
cd "$GF_SRC"
bad="$GF_BUILD/tests/backends/libgenfence_test_ref_bad_cache.so"

# 1. ref's own figures and the engine alone's apart, on the last line
"$GENFENCE" run cases/sampler.yaml cases/generation.yaml --filter '^(cache\.sherlock|top_k\.fence|left_padding\.positions)$' \
    --backend ref --no-triangulate --report-dir "$tmp/a" >"$tmp/a.txt" 2>&1 || { cat "$tmp/a.txt"; fail "the passing run failed"; }
cat "$tmp/a.txt"
tail -n 1 "$tmp/a.txt" | gf_grepq -qx 'ref: 1 passed, 0 failed, 0 skipped; engine alone: 2 passed, 0 failed, 0 skipped' ||
    fail "last line: $(tail -n 1 "$tmp/a.txt")"
tail -n 2 "$tmp/a.txt" | head -n 1 | gf_grepq -qx 'total: 3 passed, 0 failed, 0 skipped' ||
    fail "the total above the last line: $(tail -n 2 "$tmp/a.txt" | head -n 1)"
grep -q "^reports: .*run.json, .*junit.xml, .*index.html$" "$tmp/a.txt" || fail "the reports line does not name index.html"
"$PY" - "$tmp/a/run.json" <<'PY' || fail "run.json's per-backend summary"
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
assert [(b["backend"], b["passed"], b["failed"], b["skipped"]) for b in s["by_backend"]] == [("ref", 1, 0, 0)], s["by_backend"]
assert (s["engine_alone"]["passed"], s["engine_alone"]["runs"]) == (2, 2), s["engine_alone"]
assert s["no_backend"]["runs"] == 0 and s["required_unreached"] == 0, s
PY

# 2. a required backend no case reached: exit 1, said, and counted on the last line
set +e
"$GENFENCE" run cases/sampler.yaml --filter '^(top_k\.fence|left_padding\.positions)$' --require-backend ref --no-report >"$tmp/b.txt" 2>&1
rc=$?
set -e
cat "$tmp/b.txt"
[[ $rc == 1 ]] || fail "--require-backend ref reaching no case: exit $rc, want 1"
grep -q "^backend ref reached no case" "$tmp/b.txt" || fail "the unreached backend is not said"
tail -n 1 "$tmp/b.txt" |
    gf_grepq -Fqx 'ref: 0 passed, 1 failed, 0 skipped (reached no case, --require-backend); engine alone: 2 passed, 0 failed, 0 skipped' ||
    fail "last line: $(tail -n 1 "$tmp/b.txt")"
# without --require-backend: said, not a failure
"$GENFENCE" run cases/sampler.yaml --filter '^top_k\.fence$' --backend ref --no-report >"$tmp/b2.txt" 2>&1 || fail "an unreached named backend failed the run"
grep -q "^backend ref reached no case" "$tmp/b2.txt" || fail "the unreached named backend is not said"
tail -n 1 "$tmp/b2.txt" | gf_grepq -Fqx 'ref: 0 passed, 0 failed, 0 skipped (reached no case); engine alone: 1 passed, 0 failed, 0 skipped' ||
    fail "unreached, not required, last line: $(tail -n 1 "$tmp/b2.txt")"

# 3. the must-fail case judged by its expect_verdict, by default: as declared exits 0 and counts as
#    passed; against a passing backend it is not (exit 1, named); --raw-verdicts: the verdict's exit 1
"$GENFENCE" run cases/detect/model.yaml --filter '^detect\.cache\.bad_cache$' --backend "$bad" \
    --report-dir "$tmp/c" >"$tmp/c.txt" 2>&1 || { cat "$tmp/c.txt"; fail "a must-fail case as declared did not exit 0"; }
cat "$tmp/c.txt"
grep -q "^as declared: 1 of 1 run" "$tmp/c.txt" || fail "no 'as declared' line"
tail -n 1 "$tmp/c.txt" | gf_grepq -qx 'ref-bad-cache: 1 passed, 0 failed, 0 skipped' || fail "as declared, last line: $(tail -n 1 "$tmp/c.txt")"
grep -q "^FAIL .*detect.cache.bad_cache.*as declared" "$tmp/c.txt" || fail "the verdict line does not keep FAIL and say as declared"
"$PY" - "$tmp/c/run.json" <<'PY' || fail "run.json of the as-declared run"
import json, sys
d = json.load(open(sys.argv[1]))
(r,) = d["results"]
assert r["verdict"] == "fail" and r["as_declared"] is True and r["expect_verdict"] == "fail", r
assert d["options"]["as_declared"] is True and d["summary"]["exit_status"] == 0, (d["options"], d["summary"])
PY
"$GENFENCE" run cases/detect/model.yaml --filter '^detect\.cache\.bad_cache$' --backend "$bad" --as-declared --no-report \
    >"$tmp/c2.txt" 2>&1 || { cat "$tmp/c2.txt"; fail "--as-declared (the default, said) did not exit 0"; }
sed 's/backends: \[ref-bad-cache\]/backends: [ref]/' cases/detect/model.yaml >"$tmp/on_ref.yaml"
set +e
"$GENFENCE" run "$tmp/on_ref.yaml" --filter '^detect\.cache\.bad_cache$' --backend ref --no-report >"$tmp/d.txt" 2>&1
rc=$?
set -e
cat "$tmp/d.txt"
[[ $rc == 1 ]] || fail "a must-fail case that passed: exit $rc, want 1"
grep -q "^not as declared: 1 of 1 run" "$tmp/d.txt" || fail "no 'not as declared' line"
grep -q "detect.cache.bad_cache \[ref\]: pass, declared fail" "$tmp/d.txt" || fail "the case not as declared is not named"
tail -n 1 "$tmp/d.txt" | gf_grepq -qx 'ref: 0 passed, 1 failed, 0 skipped' || fail "not as declared, last line: $(tail -n 1 "$tmp/d.txt")"
# --raw-verdicts: the verdicts decide (exit 1), the line still says how they compare
set +e
"$GENFENCE" run cases/detect/model.yaml --filter '^detect\.cache\.bad_cache$' --backend "$bad" --raw-verdicts --no-report >"$tmp/e.txt" 2>&1
rc=$?
set -e
[[ $rc == 1 ]] || fail "--raw-verdicts: exit $rc, want the verdict's 1"
grep -q "^as declared: 1 of 1 run.*--raw-verdicts" "$tmp/e.txt" || fail "--raw-verdicts: no comparison line"
tail -n 1 "$tmp/e.txt" | gf_grepq -qx 'ref-bad-cache: 0 passed, 1 failed, 0 skipped' || fail "--raw-verdicts, last line: $(tail -n 1 "$tmp/e.txt")"
# a case without expect_verdict beside it keeps its own verdict (a failure), the must-fail one its declaration
awk '/^  - id:/ { n++ } n <= 1' cases/detect/model.yaml | # its first case alone, undeclared
    sed -e '/^    expect_verdict: fail$/d' -e 's/id: detect\.cache\.bad_cache$/id: plain.bad_cache/' >"$tmp/plain.yaml"
set +e
"$GENFENCE" run "$tmp/plain.yaml" cases/detect/model.yaml --filter 'bad_cache$' --backend "$bad" --no-report \
    --no-triangulate >"$tmp/f.txt" 2>&1
rc=$?
set -e
cat "$tmp/f.txt"
[[ $rc == 1 ]] || fail "mixed run: exit $rc, want 1 (plain.bad_cache fails, the must-fail one is as declared)"
grep -q '^as declared: 1 of 1 run' "$tmp/f.txt" || fail "mixed: the must-fail case is not as declared"
grep -q '^  FAIL  *plain.bad_cache \[ref-bad-cache\]: ' "$tmp/f.txt" || fail "mixed: the plain case is not in the recap"
tail -n 1 "$tmp/f.txt" | gf_grepq -qx 'ref-bad-cache: 1 passed, 1 failed, 0 skipped' || fail "mixed, last line: $(tail -n 1 "$tmp/f.txt")"

# 4. several backends: each its own figures (ref's pass, ref-bad-cache's fail), in the order named
set +e
"$GENFENCE" run cases/generation.yaml --filter '^cache\.sherlock$' --backend ref --backend "$bad" --no-report \
    --no-triangulate >"$tmp/g.txt" 2>&1
rc=$?
set -e
[[ $rc == 1 ]] || { cat "$tmp/g.txt"; fail "ref and ref-bad-cache: exit $rc, want 1"; }
tail -n 1 "$tmp/g.txt" | gf_grepq -qx 'ref: 1 passed, 0 failed, 0 skipped; ref-bad-cache: 0 passed, 1 failed, 0 skipped' ||
    fail "two backends, last line: $(tail -n 1 "$tmp/g.txt")"

# 5. merge: junit.xml beside the output, a new folder created, a reason when it cannot write
XSD=$(bash "$GF_SRC/tools/setup/setup_junit_xsd.sh" --print-path)
"$GENFENCE" merge "$tmp/a/run.json" -o "$tmp/m/new/dir/merged.json" >"$tmp/m.txt" 2>&1 || { cat "$tmp/m.txt"; fail "merge failed"; }
[[ -s "$tmp/m/new/dir/merged.json" && -s "$tmp/m/new/dir/junit.xml" ]] || fail "merge wrote no merged.json / junit.xml in the new folder"
grep -q "junit.xml" "$tmp/m.txt" || fail "merge does not say where junit.xml went"
if [[ -f "$XSD" ]]; then
    xmllint --noout --schema "$XSD" "$tmp/m/new/dir/junit.xml" || fail "merge's junit.xml does not validate"
fi
touch "$tmp/afile"
set +e
"$GENFENCE" merge "$tmp/a/run.json" -o "$tmp/afile/sub/merged.json" >"$tmp/m2.txt" 2>&1
rc=$?
set -e
cat "$tmp/m2.txt"
[[ $rc == 2 ]] || fail "merge into a folder that cannot be made: exit $rc, want 2"
grep -q "cannot create the folder .*: Not a directory" "$tmp/m2.txt" || fail "merge does not name the reason"
echo "3 passed, 0 failed"
