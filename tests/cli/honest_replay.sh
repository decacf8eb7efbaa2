#!/usr/bin/env bash
# Replayable (issue 11, item 7): every reproduce line of a failing run is
# runnable as printed — the binary's absolute path, absolute case and plugin
# paths, --require-backend kept as such, --timeout and --threads kept — and,
# replayed from another directory, gives the same verdict. run.json records
# the exact argv, the binary's absolute path and the working directory.
# Before: "genfence run cases/... --backend PATH" (genfence not on PATH,
# relative paths, --timeout dropped, --require-backend turned into --backend).
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
PY=${GF_PYTHON:-python3}
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init honest_replay
cd "$GF_SRC"
T=tests/backends
B="$GF_BUILD/tests/backends"
rel=$(realpath --relative-to="$GF_SRC" "$B")
# a generous --timeout that is not the default (a default one is not
# printed): on a loaded machine no fail or crash becomes a timeout
TIMEOUT=$((90 * ${GF_TIME_SCALE:-1})) # times GF_TIME_SCALE (tests/CMakeLists.txt)
set +e
"$GENFENCE" run cases/detect/faults.yaml cases/detect/model.yaml --filter '^detect\.(fault\.|cache\.bad_cache$|crash)' \
    --backend "$rel/libgenfence_test_faulty_ref_nan.so" --backend "$rel/libgenfence_test_faulty_ref_oom.so" \
    --require-backend "$rel/libgenfence_test_faulty_ref_bad_length.so" --require-backend "$rel/libgenfence_test_ref_bad_cache.so" \
    --backend "$rel/libgenfence_test_ref_crash.so" --timeout "$TIMEOUT" --threads 1 -j 2 --oversubscribe --no-triangulate --raw-verdicts --report-dir "$tmp/rep" >"$tmp/out" 2>&1
rc=$?
set -e
cat "$tmp/out"
[[ $rc -eq 1 ]] || fail "the failing run exited $rc, want 1"
grep '^    reproduce: ' "$tmp/out" | sed 's/^    reproduce: //' >"$tmp/lines"
n=$(wc -l <"$tmp/lines")
[[ $n -ge 7 ]] || fail "only $n reproduce lines"
# verdict of each failing (id, backend) in the original run
grep -E '^(FAIL|CRASH|TIMEOUT|ERROR) ' "$tmp/out" | awk '{print $2, $3, $1}' >"$tmp/want"
[[ $(wc -l <"$tmp/want") -eq $n ]] || fail "$(wc -l <"$tmp/want") failures, $n reproduce lines"
i=0
while IFS= read -r line; do
    i=$((i + 1))
    [[ $line == /* || $line == \'/* ]] || fail "line $i does not start with an absolute binary path: $line"
    [[ $line == *"--timeout $TIMEOUT"* ]] || fail "line $i drops --timeout: $line"
    want=$(sed -n "${i}p" "$tmp/want")
    [[ $want != *"[ref-bad-length]"* && $want != *"[ref-bad-cache]"* ]] || [[ $line == *--require-backend* ]] \
        || fail "line $i turned --require-backend into --backend: $line"
    set +e
    (cd / && eval "$line --no-report") >"$tmp/replay" 2>&1
    set -e
    got=$(grep -E '^(FAIL|CRASH|TIMEOUT|ERROR|pass|skip) ' "$tmp/replay" | awk '{print $2, $3, $1}')
    [[ "$got" == "$want" ]] || { cat "$tmp/replay"; fail "line $i: replayed '$got', the run had '$want'"; }
    echo "ok   replayed from /: $want"
done <"$tmp/lines"
"$PY" - "$tmp/rep/run.json" "$GENFENCE" "$GF_SRC" "$TIMEOUT" <<'PY' || fail "run.json does not record the command"
import json, os, sys
d = json.load(open(sys.argv[1]))
inv = d["invocation"]
assert inv["binary"] == os.path.realpath(sys.argv[2]), inv["binary"]
assert inv["cwd"] == os.path.realpath(sys.argv[3]), inv["cwd"]
assert inv["argv"][1:3] == ["run", "cases/detect/faults.yaml"] and "--require-backend" in inv["argv"] and sys.argv[4] in inv["argv"], inv["argv"]
PY
echo "ok   $n reproduce lines replay to the same verdicts; run.json records argv, binary, cwd"
