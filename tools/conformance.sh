#!/usr/bin/env bash
# Regenerate this machine's section of docs/conformance.md: the four runs
# behind the conformance table (the fp32 backends in one run, llama.cpp once
# per weight type) and `genfence scoreboard` over their reports, with
# docs/conformance_findings.md (the hand-written part) included after the
# table. The page holds one section per machine seen (a machine: its CPU model
# and ISA flags, from the runs' audit.cpu): this run adds its machine's section
# or replaces the one it had, keeps the others, and rewrites the page's head
# (the machines with each backend's CPU path, and how the tables differ)
# with tools/conformance_page.py.
#
#   tools/conformance.sh                 # build/genfence, reports/conformance/
#   GENFENCE=build-x/genfence tools/conformance.sh
#
# Environment: GENFENCE (default build/genfence), GF_CONFORMANCE_DIR (the
# reports, default reports/conformance; emptied first), GF_CONFORMANCE_DOC
# (the page, default docs/conformance.md). Each run's console output is kept
# beside its report (DIR/NAME.log). GF_CONFORMANCE_REUSE=1 skips the runs and
# makes the section from the reports already in DIR (from an earlier run of
# this script on this machine). GF_PYTHON: the Python for the page (default
# python3; standard library only).
#
# The page names the commit the runs were made from; run this in a clean
# checkout (no local changes) so that commit is what ran: a tree with local
# changes is reported here before the runs. Needs the llamacpp backend
# (tools/setup/setup_llamacpp.sh, then a build): without it the script stops
# (exit 2) instead of writing a table with empty llama.cpp columns.
#
# Exit status: 0 the page was written (findings in the runs are expected: a
# run that exits 1 is a table with findings), 2 a run or the scoreboard could
# not be made (bad input, a backend missing, an error).
set -euo pipefail
cd "$(dirname "$0")/.."
G=${GENFENCE:-build/genfence}
R=${GF_CONFORMANCE_DIR:-reports/conformance}
DOC=${GF_CONFORMANCE_DOC:-docs/conformance.md}
WEIGHTS=(f32 f16 q8_0)
PY=${GF_PYTHON:-python3}
REUSE=${GF_CONFORMANCE_REUSE:-0}

die() { echo "conformance: $*" >&2; exit 2; }
[[ -x "$G" ]] || die "no genfence at $G (build it: make, or set GENFENCE)"
for b in ref openblas onednn "${WEIGHTS[@]/#/llamacpp:}"; do
    line=$("$G" backends --backend "$b" | awk -v b="$b" '$1 == b' | tail -n 1)
    [[ "$line" == *" available "* ]] || die "backend $b is not available here: ${line:-not listed}"
done
if [[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
    echo "conformance: warning: the tree has local changes; the page will name $(git rev-parse --short HEAD)," \
        "which is not exactly what ran" >&2
fi

if [[ "$REUSE" != 1 ]]; then
    rm -rf "$R"
    mkdir -p "$R"
fi
run() { # NAME ARGS...: one run into $R/NAME; exit 0 or 1 (findings) is a report
    local name=$1 rc=0
    shift
    if [[ "$REUSE" == 1 ]]; then
        [[ -f "$R/$name/run.json" ]] || die "GF_CONFORMANCE_REUSE=1 but no $R/$name/run.json"
        echo "conformance: reuse $R/$name/run.json" >&2
        return 0
    fi
    echo "conformance: run $name" >&2
    "$G" run -q "$@" --report-dir "$R/$name" >"$R/$name.log" 2>&1 || rc=$?
    [[ $rc -le 1 && -f "$R/$name/run.json" ]] || { tail -n 20 "$R/$name.log" >&2; die "run $name exited $rc"; }
    tail -n 1 "$R/$name.log" | sed "s/^/conformance:   /" >&2
}
run fp32 --backend ref --backend openblas --backend onednn
reports=("$R/fp32/run.json")
for w in "${WEIGHTS[@]}"; do
    run "llamacpp-$w" --backend "llamacpp:$w"
    reports+=("$R/llamacpp-$w/run.json")
done
"$G" scoreboard "${reports[@]}" --include docs/conformance_findings.md -o "$R/scoreboard.md" ||
    die "scoreboard exited $?"
"$PY" tools/conformance_page.py "$DOC" "$R/scoreboard.md" "${reports[@]}" || die "the page could not be written"
echo "conformance: wrote this machine's section of $DOC from ${#reports[@]} runs in $R" >&2
