#!/usr/bin/env bash
# The CPU path is an option and part of the record (issue 24 item 3). Checks
# what genfence does with the options, never the libraries' numbers:
#   - openblas:coretype=NAME and plain openblas in one run: two backends, each
#     named in the header, the live lines, run.json (backends, audit) and the
#     scoreboard's columns, each with its CPU path; OpenBLAS really runs NAME;
#   - a bad coretype / isa / repack value is refused naming the valid ones (exit 2);
#   - onednn:isa=avx2 runs and says so; llamacpp's info names its kernel path and
#     repack=off turns the extra buffer types off;
#   - compare names a changed CPU path as what explains changed figures.
# A library that is not built here is skipped, saying so.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init cpu_paths
cd "$GF_SRC"
have() { "$GENFENCE" backends | awk -v b="$1" '$1 == b && $2 == "available"' | gf_grepq -q .; }
CASE=(cases/golden.yaml --filter '^golden\.greedy\.sherlock$' --no-triangulate)
run() { # OUT ARGS...: prints the exit status
    local out=$1
    shift
    set +e
    "$GENFENCE" run "${CASE[@]}" "$@" >"$out" 2>&1
    local rc=$?
    set -e
    echo $rc
}

if have openblas; then
    core=Nehalem
    grep -qw avx2 /proc/cpuinfo && core=Haswell
    rc=$(run "$tmp/ob.out" --backend "openblas:coretype=$core" --backend openblas --report-dir "$tmp/ob")
    [[ $rc -eq 0 ]] || { cat "$tmp/ob.out"; fail "openblas two paths: exit $rc"; }
    grep -q "^  backend openblas:coretype=$core available .*core $core (coretype option).*; cpu path $core (coretype)$" \
        "$tmp/ob.out" || { cat "$tmp/ob.out"; fail "header: the coretype backend and its path"; }
    grep -q '^  backend openblas  *available .*; cpu path ' "$tmp/ob.out" || fail "header: plain openblas and its path"
    grep -q '^  cpu .*; flags ' "$tmp/ob.out" || fail "header: the cpu line"
    grep -q "^pass .*golden.greedy.sherlock \[openblas:coretype=$core\]" "$tmp/ob.out" || fail "live line names the config"
    grep -q '^tested: .*openblas:coretype=.* on 1 case.*openblas on 1 case\|^tested: .*openblas on 1 case.*openblas:coretype=' \
        "$tmp/ob.out" || fail "tested: line names both"
    "${GF_PYTHON:-python3}" - "$tmp/ob/run.json" "$core" <<'EOF' || fail "run.json"
import json, sys
d, core = json.load(open(sys.argv[1])), sys.argv[2]
bs = {b["requested"]: b for b in d["backends"]}
assert bs["openblas:coretype=" + core]["cpu_path"] == core + " (coretype)", bs
assert core in bs["openblas:coretype=" + core]["library"], bs  # OpenBLAS's own config names the core it runs
assert bs["openblas"]["cpu_path"] and "coretype" not in bs["openblas"]["cpu_path"], bs
a = d["audit"]
assert set(a["backends"]) == {"openblas", "openblas:coretype=" + core}, a["backends"].keys()
assert a["backends"]["openblas:coretype=" + core]["cpu_path"] == core + " (coretype)"
assert a["cpu"]["flags"] and "model" in a["cpu"], a["cpu"]
res = {r["backend_requested"] for r in d["results"]}
assert res == {"openblas", "openblas:coretype=" + core}, res
EOF
    "$GENFENCE" scoreboard "$tmp/ob/run.json" -o "$tmp/sb.md" >/dev/null
    grep -q "^| case | kind | .*openblas:coretype=$core (fp32; cpu path $core (coretype)) |" "$tmp/sb.md" ||
        { grep '^| case' "$tmp/sb.md"; fail "scoreboard: the coretype column"; }
    grep -q '^| case | kind | .*| openblas (fp32; cpu path [^)]*) |\|^| case | kind | openblas (fp32; cpu path' "$tmp/sb.md" ||
        { grep '^| case' "$tmp/sb.md"; fail "scoreboard: the plain column"; }
    echo "ok   openblas:coretype=$core and openblas in one run: two backends, each with its path"

    rc=$(run "$tmp/bad.out" --backend openblas:coretype=NoSuchCore --no-report)
    [[ $rc -eq 2 ]] || { cat "$tmp/bad.out"; fail "bad coretype: exit $rc, want 2"; }
    grep -q "coretype 'NoSuchCore' is not a core this OpenBLAS has kernels for .*valid here: .*Haswell" "$tmp/bad.out" ||
        { cat "$tmp/bad.out"; fail "bad coretype: the valid names"; }
    rc=$(run "$tmp/bad2.out" --backend openblas:speed=max --no-report)
    [[ $rc -eq 2 ]] && grep -q "the one option is coretype=NAME" "$tmp/bad2.out" || fail "unknown openblas option"
    echo "ok   a bad coretype is refused naming the valid ones (exit 2)"

    # compare: the same backend on another core (the environment's override),
    # another than the one run A took (the machine may set OPENBLAS_CORETYPE
    # itself: this AMD EPYC sets Haswell)
    "$GENFENCE" run "${CASE[@]}" --backend openblas -q --report-dir "$tmp/ca" >/dev/null
    path_a=$("${GF_PYTHON:-python3}" -c 'import json,sys; print(json.load(open(sys.argv[1]))["backends"][0]["cpu_path"])' "$tmp/ca/run.json")
    alt=Nehalem
    [[ $core == Nehalem ]] && alt=Core2
    other=$core
    [[ "$path_a" == "$core"* ]] && other=$alt
    OPENBLAS_CORETYPE=$other "$GENFENCE" run "${CASE[@]}" --backend openblas -q --report-dir "$tmp/cb" >/dev/null
    "$GENFENCE" compare "$tmp/ca/run.json" "$tmp/cb/run.json" >"$tmp/cmp.out" || true
    grep -q "^  explains: backends.openblas.cpu_path .* -> $other (.* of openblas may come from it)" "$tmp/cmp.out" ||
        { cat "$tmp/cmp.out"; fail "compare: the changed path"; }
    echo "ok   compare names the changed CPU path"
else
    echo "skip openblas: not available here"
fi

if have onednn; then
    rc=$(run "$tmp/dn.out" --backend onednn:isa=avx2 --backend onednn --report-dir "$tmp/dn")
    if grep -qw avx2 /proc/cpuinfo; then
        [[ $rc -eq 0 ]] || { cat "$tmp/dn.out"; fail "onednn:isa=avx2: exit $rc"; }
        grep -q '^  backend onednn:isa=avx2 available   oneDNN .*, ISA avx2;.*max ISA isa=avx2.*; cpu path .* (isa)$' \
            "$tmp/dn.out" || { cat "$tmp/dn.out"; fail "onednn header"; }
        echo "ok   onednn:isa=avx2 beside onednn"
    fi
    rc=$(run "$tmp/dbad.out" --backend onednn:isa=avx9000 --no-report)
    [[ $rc -eq 2 ]] && grep -q "isa 'avx9000' is not a oneDNN ISA name; valid here: sse41, avx" "$tmp/dbad.out" ||
        { cat "$tmp/dbad.out"; fail "bad isa"; }
    echo "ok   a bad isa is refused naming the valid ones (exit 2)"
else
    echo "skip onednn: not available here"
fi

if have llamacpp; then
    "$GENFENCE" backends --backend llamacpp:q8_0 --backend llamacpp:q8_0,repack=off >"$tmp/lc.out"
    grep -q '^llamacpp:q8_0 available .*kernel path \(AMX\|repack\|plain\) (.*), extra buffer types .*; cpu path ' \
        "$tmp/lc.out" || { cat "$tmp/lc.out"; fail "llamacpp info: the kernel path"; }
    grep -q '^llamacpp:q8_0,repack=off available .*kernel path plain (.*, repack=off), extra buffer types off (repack=off)' \
        "$tmp/lc.out" || { cat "$tmp/lc.out"; fail "llamacpp repack=off"; }
    rc=$(run "$tmp/lbad.out" --backend llamacpp:f32,repack=maybe --no-report)
    [[ $rc -eq 2 ]] && grep -q "unknown option 'repack=maybe'.*repack=on|off" "$tmp/lbad.out" ||
        { cat "$tmp/lbad.out"; fail "bad repack"; }
    echo "ok   llamacpp names its kernel path; repack=off turns the extra buffer types off"
else
    echo "skip llamacpp: not available here"
fi
echo "cpu_paths: all passed"
