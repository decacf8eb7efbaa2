#!/usr/bin/env bash
# A pair the watchdog kills leaves no temporary files behind: every pool child
# runs with TMPDIR set to its own folder, which genfence removes once the
# child is reaped (harness/run/pool_scratch.c). A probe case writes its
# micro-model under TMPDIR; killed mid-forward (ref-hang, which never returns
# from a forward) it used to leave $TMPDIR/genfence-probe-* behind, one per
# timed-out probe, since SIGKILL runs no cleanup in the child. Also checked:
# an honest probe run leaves nothing, and a child sees a TMPDIR of its own.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init scratch_cleanup
cd "$GF_SRC"
HANG="$GF_BUILD/tests/backends/libgenfence_test_ref_hang.so"
[[ -f "$HANG" ]] || fail "test backend not built ($HANG)"
export GENFENCE_MODULE_DIR="$GF_BUILD/backends"
mkdir -p "$tmp/t1" "$tmp/t2"

# 1. killed mid-forward: timeout, and nothing left under TMPDIR
set +e
TMPDIR="$tmp/t1" "$GENFENCE" run cases/probes/head.yaml --backend "$HANG" --filter '^probe\.head\.big$' \
    --timeout 2 --no-triangulate --report-dir "$tmp/r1" >"$tmp/r1.txt" 2>&1
rc=$?
set -e
[[ $rc -eq 1 ]] || { cat "$tmp/r1.txt"; fail "ref-hang on a probe: exit $rc, want 1"; }
gf_grepq -Eq 'TIMEOUT +probe\.head\.big ' <"$tmp/r1.txt" || { cat "$tmp/r1.txt"; fail "ref-hang: no TIMEOUT line"; }
left=$(find "$tmp/t1" -mindepth 1 | head -5)
[[ -z "$left" ]] || fail "a killed probe left files under TMPDIR: $left"

# 2. an honest probe run on ref: passes, nothing left
"$GENFENCE" run cases/probes/head.yaml --backend ref --filter '^probe\.head\.big$' --no-triangulate \
    --report-dir "$tmp/r2" >"$tmp/r2.txt" 2>&1 || { cat "$tmp/r2.txt"; fail "ref on a probe failed"; }
left=$(TMPDIR="$tmp/t2" "$GENFENCE" run cases/probes/head.yaml --backend ref --filter '^probe\.head\.big$' \
    --no-triangulate --report-dir "$tmp/r3" >/dev/null 2>&1; find "$tmp/t2" -mindepth 1 | head -5)
[[ -z "$left" ]] || fail "an honest probe run left files under TMPDIR: $left"
echo "scratch_cleanup: ok"
