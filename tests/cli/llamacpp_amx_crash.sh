#!/usr/bin/env bash
# How genfence reports an engine that segfaults in forward, as llamacpp:q8_0
# does on an Intel AMX CPU (issue 24; docs/llamacpp.md, "The AMX crash"),
# judged on the project's own emulation of it (tests/backends/faulty_amx.c,
# ref-amx-crash: q8_0 declared, SIGSEGV on a forward of more than one new row
# when n_embd is a multiple of 32), so it runs the same on every CPU:
#   1. the statistical tier's holmes-llama case on it: exit 1, the console's
#      CRASH line names the backend, the signal and the forward call
#      ("killed by signal 11 (SIGSEGV, ...) in forward call #1 (step 0, B 1,
#      T 5, cache length 0)"), run.json has the same verdict and reason;
#   2. its reproduce line, replayed from /, gives the same verdict and reason;
#   3. `genfence forward` on it dies by SIGSEGV (exit 139) on the prompt, not
#      on a one-token batch (the shape matters);
#   4. :repack=off (the workaround's emulation) and the engine "fixed"
#      (GENFENCE_TEST_AMX_FIXED=1) run the case to a pass; a bad option is
#      exit 2 naming it;
#   5. with `genfence run --baseline` (issue 24 item 2): a baseline entry for
#      the crash turns it into known (exit 0), and the fixed engine reads
#      fixed (exit 1). Said and skipped where this genfence has no --baseline.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init llamacpp_amx_crash
cd "$GF_SRC"
A="$GF_BUILD/tests/backends/libgenfence_test_faulty_ref_amx_crash.so"
[[ -f $A ]] || fail "test backend $A not built"
WANT='killed by signal 11 (SIGSEGV, Segmentation fault) in forward call #1 (step 0, B 1, T 5, cache length 0)'

# 1. the crash, attributed and named
rc=0
"$GENFENCE" run cases/statistical.yaml --filter '^statistical\.holmes-llama$' --backend "$A" --report-dir "$tmp/a" >"$tmp/a.out" 2>&1 || rc=$?
cat "$tmp/a.out"
[[ $rc == 1 ]] || fail "the crashing run exited $rc, want 1"
grep -Eq '^CRASH +statistical\.holmes-llama \[ref-amx-crash\]' "$tmp/a.out" || fail "no CRASH line for ref-amx-crash"
grep -qxF "    $WANT" "$tmp/a.out" || fail "the crash's reason is not '$WANT'"
"$PY" - "$tmp/a/run.json" "$WANT" <<'EOF'
import json, sys
r = [x for x in json.load(open(sys.argv[1]))["results"] if x["id"] == "statistical.holmes-llama"]
assert len(r) == 1 and r[0]["backend"] == "ref-amx-crash", r
assert r[0]["verdict"] == "crash" and r[0]["reason"] == sys.argv[2], (r[0]["verdict"], r[0]["reason"])
EOF
echo "ok   1: CRASH statistical.holmes-llama [ref-amx-crash] $WANT"

# 2. the reproduce line replays to the same verdict
line=$(sed -n 's/^    reproduce: //p' "$tmp/a.out")
[[ $(printf '%s\n' "$line" | wc -l) == 1 && -n $line ]] || fail "want one reproduce line, got: $line"
[[ $line == *"$A"* ]] || fail "the reproduce line does not name the backend's path: $line"
rc=0
(cd / && eval "$line --no-report") >"$tmp/replay.out" 2>&1 || rc=$?
got=$(grep -E '^(FAIL|CRASH|TIMEOUT|ERROR|STALE|pass|skip) ' "$tmp/replay.out" | awk '{print $1, $2, $3}')
[[ $rc == 1 && $got == "CRASH statistical.holmes-llama [ref-amx-crash]" ]] && grep -qxF "    $WANT" "$tmp/replay.out" ||
    { cat "$tmp/replay.out"; fail "the replay (exit $rc) is not the same one crash: $got"; }
echo "ok   2: the reproduce line replays from / to the same crash"

# 3. genfence forward: the prompt dies by SIGSEGV, one token does not
rc=0
"$GENFENCE" forward --model models/holmes-gpt --prompt "Sherlock Holmes" --out "$tmp/x.st" --backend "$A" \
    >"$tmp/f.out" 2>&1 || rc=$?
[[ $rc == 139 ]] || { cat "$tmp/f.out"; fail "forward on the prompt exited $rc, want 139 (SIGSEGV)"; }
"$GENFENCE" forward --model models/holmes-gpt --tokens 5 --out "$tmp/one.st" --backend "$A" >"$tmp/f1.out" 2>&1 ||
    { cat "$tmp/f1.out"; fail "forward on one token failed: the fault is not shape-bound"; }
echo "ok   3: forward on the prompt killed by SIGSEGV (exit 139), on one token fine"

# 4. the workaround, the fixed engine, a bad option
for how in repack fixed; do
    be=$A env=()
    [[ $how == repack ]] && be="$A:repack=off"
    [[ $how == fixed ]] && env=(GENFENCE_TEST_AMX_FIXED=1)
    rc=0
    env "${env[@]}" "$GENFENCE" run -q cases/statistical.yaml --filter '^statistical\.holmes-llama$' --backend "$be" \
        --report-dir "$tmp/$how" >"$tmp/$how.out" 2>&1 || rc=$?
    v=$("$PY" -c 'import json, sys; print(*[(r["backend"], r["verdict"]) for r in json.load(open(sys.argv[1]))["results"]])' \
        "$tmp/$how/run.json" 2>/dev/null || true)
    [[ $rc == 0 && $v == "('ref-amx-crash', 'pass')" ]] ||
        { cat "$tmp/$how.out"; fail "$how: exit $rc, results $v: want the one case to pass"; }
done
rc=0
"$GENFENCE" forward --model models/holmes-gpt --tokens 5 --out "$tmp/x.st" --backend "$A:repack=of" >"$tmp/bad.out" 2>&1 || rc=$?
[[ $rc == 2 ]] && grep -q "unknown option 'repack=of'" "$tmp/bad.out" || { cat "$tmp/bad.out"; fail "a bad option: exit $rc"; }
echo "ok   4: :repack=off and the fixed engine pass; a bad option is exit 2 naming it"

# 5. the baseline: known, then fixed
if ! "$GENFENCE" run --help 2>&1 | gf_grepq -q -- '--baseline'; then
    echo "note: this genfence has no 'run --baseline' (issue 24 item 2): part 5 not run"
    echo "llamacpp_amx_crash: ok"
    exit 0
fi
rc=0
"$GENFENCE" baseline "$tmp/a/run.json" -o "$tmp/base.yaml" >"$tmp/base.out" 2>&1 || rc=$?
[[ $rc == 0 && -s "$tmp/base.yaml" ]] || { cat "$tmp/base.out"; fail "genfence baseline exited $rc"; }
cat "$tmp/base.yaml"
rc=0
"$GENFENCE" run cases/statistical.yaml --filter '^statistical\.holmes-llama$' --backend "$A" --baseline "$tmp/base.yaml" \
    --report-dir "$tmp/k" >"$tmp/k.out" 2>&1 || rc=$?
cat "$tmp/k.out"
[[ $rc == 0 ]] || fail "the known crash exited $rc, want 0"
"$PY" - "$tmp/k/run.json" <<'EOF'
import json, sys
r = [x for x in json.load(open(sys.argv[1]))["results"] if x["id"] == "statistical.holmes-llama"]
assert len(r) == 1 and r[0]["backend"] == "ref-amx-crash" and r[0]["verdict"] == "known", r
assert "signal 11" in r[0]["reason"], r[0]["reason"]
EOF
rc=0
GENFENCE_TEST_AMX_FIXED=1 "$GENFENCE" run cases/statistical.yaml --filter '^statistical\.holmes-llama$' --backend "$A" \
    --baseline "$tmp/base.yaml" --report-dir "$tmp/fx" >"$tmp/fx.out" 2>&1 || rc=$?
cat "$tmp/fx.out"
[[ $rc == 1 ]] || fail "the fixed crash exited $rc, want 1 (fixed without --baseline-allow-fixed)"
"$PY" - "$tmp/fx/run.json" <<'EOF'
import json, sys
r = [x for x in json.load(open(sys.argv[1]))["results"] if x["id"] == "statistical.holmes-llama"]
assert len(r) == 1 and r[0]["verdict"] == "fixed", r
EOF
echo "ok   5: the baseline turns the crash into known (exit 0); the fixed engine reads fixed (exit 1)"
echo "llamacpp_amx_crash: ok"
