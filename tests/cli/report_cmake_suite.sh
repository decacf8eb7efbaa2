#!/usr/bin/env bash
# cmake/GenfenceSuite.cmake: a tiny project using genfence_add_suite gets one
# CTest test per (case, backend) the cases' backends filters allow, with
# labels; the tests run: a pass passes, a failing backend fails, an
# unavailable backend is a CTest skip. Issue 25: a plugin's tests are named by
# its registered name (ref-bad-cache, before: libgenfence_test_ref_bad_cache.so);
# a case that reaches no backend slot is one test NAME/<id>@engine labelled
# engine (before: one per backend, labelled with a backend it never touches);
# each test prints <DartMeasurement> lines (max |delta|, margin, safety factor)
# for CDash.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
PY=${GF_PYTHON:-python3}
bad="$GF_BUILD/tests/backends/libgenfence_test_ref_bad_cache.so"
slot="$GF_BUILD/tests/backends/libgenfence_test_sample_ok.so" # ref-sample: ref with a (correct) sampler slot
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init report_cmake_suite
mkdir -p "$tmp/proj"
cat > "$tmp/proj/filtered.yaml" <<'YAML'
cases:
  - id: ck.only_ref
    kind: top_k_fence
    backends: [ref]
    tags: [sampler, mine]
    probs: [0.5, 0.3, 0.2]
    expect:
      - {k: 1, keep: [0]}
  - id: ck.not_ref
    kind: top_k_fence
    backends: ["!ref"]
    probs: [0.5, 0.3, 0.2]
    expect:
      - {k: 2, keep: [0, 1]}
YAML
unavail=$("$GENFENCE" backends | awk '$2 == "unavailable" && !/cannot load/ { print $1; exit }') # a module this build lacks (cuda in a sanitizer build) is an error, not a skip
extra=""
[ -n "$unavail" ] && extra="genfence_add_suite(NAME skip CASES $GF_SRC/cases/sampler.yaml FILTER [[^top_k\\.fence\$]] BACKENDS $unavail
                   GENFENCE \"$GENFENCE\" WORKING_DIRECTORY \"$GF_SRC\")"
cat > "$tmp/proj/CMakeLists.txt" <<EOF2
cmake_minimum_required(VERSION 3.19)
project(gf_suite_user NONE)
enable_testing()
include("$GF_SRC/cmake/GenfenceSuite.cmake")
genfence_add_suite(NAME fences CASES cases/sampler.yaml "$tmp/proj/filtered.yaml" BACKENDS ref "$slot"
                   GENFENCE "$GENFENCE" WORKING_DIRECTORY "$GF_SRC" LABELS nightly)
genfence_add_suite(NAME gen CASES cases/generation.yaml FILTER [[^cache\\.sherlock\$]] BACKENDS ref "$bad"
                   GENFENCE "$GENFENCE" WORKING_DIRECTORY "$GF_SRC")
$extra
EOF2
cmake -S "$tmp/proj" -B "$tmp/b" > "$tmp/cfg.txt" 2>&1 || { cat "$tmp/cfg.txt"; fail "configure failed"; }
cat "$tmp/cfg.txt" | grep "genfence suite"
read -r n_sampler n_engine < <(cd "$GF_SRC" && "$GENFENCE" list --json cases/sampler.yaml |
    "$PY" -c 'import json,sys; d=json.load(sys.stdin); assert all(not c["backends"] for c in d); e=sum(c["reaches"]=="none" for c in d); print(len(d)-e, e)')
[ "$n_sampler" -gt 1 ] || fail "sampler.yaml lists $n_sampler cases that reach a backend"
[ "$n_engine" -ge 1 ] || fail "sampler.yaml has no engine-alone case (left_padding_positions): the engine part tests nothing"
count() { ctest --test-dir "$tmp/b" -N "$@" | sed -n 's/^Total Tests: //p'; }
# ref has no sampler slot: there the sampler cases run on the engine alone (one NAME/ID@engine test each,
# labelled engine); ref-sample has one: a test each on it. The engine-alone kinds (left_padding) once on the
# engine. ck.only_ref ([ref]): on the engine only; ck.not_ref (["!ref"]): on ref-sample only.
want=$((2 * n_sampler + n_engine + 2))
got=$(count -R '^fences/')
[ "$got" = "$want" ] || { ctest --test-dir "$tmp/b" -N; fail "$got tests in suite fences, expected $want"; }
[ "$(count -R '^gen/')" = 2 ] || fail "suite gen: not 2 tests"
ctest --test-dir "$tmp/b" -N > "$tmp/list.txt" # (a file: grep -q on a pipe can SIGPIPE ctest under pipefail)
grep -q "fences/ck.only_ref@engine$" "$tmp/list.txt" || fail "no fences/ck.only_ref@engine"
grep -q "fences/ck.not_ref@ref-sample$" "$tmp/list.txt" || fail "no ck.not_ref on ref-sample by its registered name"
grep -q "gen/cache.sherlock@ref-bad-cache$" "$tmp/list.txt" || fail "no cache.sherlock on ref-bad-cache by its registered name"
if grep -q "@libgenfence" "$tmp/list.txt"; then fail "a plugin's tests named by its path, not its registered name"; fi
if grep -Eq "ck.only_ref@ref-sample|ck.not_ref@engine" "$tmp/list.txt"; then fail "a case's backends filter ignored"; fi
if grep -Eq "fences/.*@ref$" "$tmp/list.txt"; then fail "a sampler case named for ref, which has no sampler slot"; fi
grep -q "fences/left_padding.positions@engine$" "$tmp/list.txt" || fail "no engine test for left_padding.positions"
grep -q "fences/top_k.fence@engine$" "$tmp/list.txt" || fail "no engine test for top_k.fence (ref has no sampler slot)"
grep -q "fences/top_k.fence@ref-sample$" "$tmp/list.txt" || fail "no top_k.fence on ref-sample's sampler slot"
# labels
[ "$(count -L '^engine$' -R '^fences/')" = $((n_sampler + n_engine + 1)) ] || fail "label engine"
[ "$(count -L '^backend:ref$' -R '^fences/')" = 0 ] || fail "a sampler case labelled backend:ref, which it never touches"
[ "$(count -L '^backend:ref-sample$' -R '^fences/')" = $((n_sampler + 1)) ] || fail "label backend:ref-sample"
[ "$(count -L '^backend:ref-bad-cache$' -R '^gen/')" = 1 ] || fail "label backend:ref-bad-cache"
[ "$(count -L '^tag:mine$')" = 1 ] || fail "label tag:mine"
[ "$(count -L '^kind:top_k_fence$' -R '^fences/ck\.')" = 2 ] || fail "label kind:"
[ "$(count -L '^nightly$')" = "$want" ] || fail "LABELS not applied"
# they run: ref passes, the bad backend fails cache.sherlock
ctest --test-dir "$tmp/b" -R '^(fences/ck\.only_ref@engine|fences/ck\.not_ref@ref-sample|gen/cache\.sherlock@ref|fences/left_padding\.positions@engine)$' \
    --output-on-failure -V > "$tmp/ok.txt" 2>&1 || { cat "$tmp/ok.txt"; fail "passing tests failed under ctest"; }
# CDash measurements from the model case's report (ctest -V shows the test's output)
# (on ref the sides are identical: the safety factor is +inf, said as text)
for m in max_abs_delta min_margin safety_factor; do
    grep -Eq "<DartMeasurement name=\"$m\" type=\"(numeric/double\">[-+0-9.eE]+|text/string\">inf)</DartMeasurement>" "$tmp/ok.txt" ||
        { cat "$tmp/ok.txt"; fail "no DartMeasurement $m"; }
done
# and CTest took them (its Test.xml with -T Test): the measurement under the test's results
ctest --test-dir "$tmp/b" -R '^gen/cache\.sherlock@ref$' -T Test > "$tmp/t.txt" 2>&1 || { cat "$tmp/t.txt"; fail "ctest -T Test"; }
grep -q 'name="max_abs_delta"' "$tmp"/b/Testing/*/Test.xml || fail "CTest's Test.xml has no max_abs_delta measurement"
set +e
ctest --test-dir "$tmp/b" -R '^gen/cache\.sherlock@ref-bad-cache$' > "$tmp/bad.txt" 2>&1
rc=$?
set -e
[ "$rc" != 0 ] || { cat "$tmp/bad.txt"; fail "the bad backend's failure passed under ctest"; }
grep -q "0 tests failed\|100% tests passed" "$tmp/bad.txt" && fail "ctest counted the failure as a pass"
if [ -n "$unavail" ]; then
    ctest --test-dir "$tmp/b" -R '^skip/' > "$tmp/skip.txt" 2>&1 || { cat "$tmp/skip.txt"; fail "a skip failed under ctest"; }
    grep -q "Skipped" "$tmp/skip.txt" || { cat "$tmp/skip.txt"; fail "backend $unavail unavailable, yet no CTest skip"; }
else
    echo "skipped the CTest-skip part: every backend is available here"
fi
echo "1 passed, 0 failed"
