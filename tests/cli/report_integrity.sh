#!/usr/bin/env bash
# Report integrity (issue 12, item 7; docs/harness.md, "Reports"):
#  1. text that is not valid UTF-8 (a backend's error text, its stderr, whose
#     kept tail is cut at a byte offset) is repaired (\xNN), never dropped:
#     the failure reason survives in run.json and junit.xml, both valid
#     (python's json, xmllint against the public junit-10.xsd);
#     tests/backends/faulty_text.c (ref-bad-text). Before: run.json had an
#     empty reason and no stderr_tail, junit.xml did not parse.
# (sections 2.. below: the report directory's lock, replacement and interruption)
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init report_integrity
XSD=$(bash "$GF_SRC/tools/setup/setup_junit_xsd.sh" --print-path) # the public junit-10.xsd (tests/cli/honest_junit.sh)
[[ -f "$XSD" ]] || fail "no $XSD: run tools/setup/setup.sh (or tools/setup/setup_junit_xsd.sh) once"
command -v xmllint >/dev/null || fail "xmllint not installed (apt-get install libxml2-utils)"
cd "$GF_SRC"
B="$GF_BUILD/tests/backends"
BAD="$B/libgenfence_test_faulty_ref_bad_text.so"
[[ -f "$BAD" ]] || fail "$BAD not built"

# ---- 1. invalid UTF-8 from a backend ----
cat >"$tmp/text.yaml" <<'EOF'
cases:
  - id: integrity.bad_text
    kind: cache_equals_recompute
    expect_verdict: fail
    description: "must fail: the backend's 2nd forward fails with an error text that is not UTF-8"
    backends: [ref-bad-text]
    model: models/holmes-gpt
    prompt: "Sherlock Holmes"
    steps: 4
EOF
set +e
"$GENFENCE" run --raw-verdicts "$tmp/text.yaml" --backend "$BAD" --no-triangulate -j 1 --report-dir "$tmp/r1" >"$tmp/out1" 2>&1
rc=$?
set -e
cat "$tmp/out1"
[[ $rc -eq 1 ]] || fail "bad text: exit $rc, want 1 (a backend failure)"
xmllint --noout --schema "$XSD" "$tmp/r1/junit.xml" || fail "junit.xml does not validate"
"$PY" - "$tmp/r1" <<'PY' || fail "bad text: the reason did not survive"
import json, os, sys
import xml.etree.ElementTree as ET
rep = sys.argv[1]
want = r"bad bytes \xFF|\x80|\xE2\x82|café (injected by tests/backends/faulty_text.c)"
with open(os.path.join(rep, "run.json"), encoding="utf-8", errors="strict") as f:
    doc = json.load(f)
(r,) = doc["results"]
assert r["verdict"] == "fail", r["verdict"]
assert want in r["reason"], "run.json reason: %r" % r["reason"]
tail = r["process"]["stderr_tail"]
assert isinstance(tail, str), "stderr_tail dropped: %r" % (tail,)
assert tail.startswith("€"), "the tail does not start at a whole character: %r" % tail[:12]
assert r"stderr: \xFE\xFF end" in tail, "stderr's invalid bytes: %r" % tail[-40:]
assert "\\x" not in tail[:-40], "a valid character was escaped in the tail"
root = ET.parse(os.path.join(rep, "junit.xml")).getroot()
(tc,) = root.findall("testsuite/testcase")
(fl,) = tc.findall("failure")
assert want in fl.get("message"), "junit message: %r" % fl.get("message")
assert want in fl.text, "junit text: %r" % fl.text
err = tc.find("system-err").text
assert err.startswith("€") and r"\xFE\xFF end" in err, "junit system-err: %r ... %r" % (err[:12], err[-40:])
with open(os.path.join(rep, "index.html"), encoding="utf-8", errors="strict") as f:
    assert "injected by tests/backends/faulty_text.c" in f.read(), "index.html lost the reason"
PY
echo "ok   invalid UTF-8 from a backend: repaired in run.json, junit.xml and index.html"

# ---- 2-4. the report directory: lock, staged replacement, interruption ----
HANG="$B/libgenfence_test_ref_hang.so"
CACHE="$B/libgenfence_test_ref_bad_cache.so"
[[ -f "$HANG" && -f "$CACHE" ]] || fail "$HANG or $CACHE not built"
R="$tmp/rep"
old_report() { # the previous report: one failure with its logits in failures/
    set +e
    "$GENFENCE" run --raw-verdicts cases/detect/model.yaml --filter '^detect\.cache\.bad_cache$' --backend "$CACHE" --no-triangulate \
        -j 1 --report-dir "$R" >"$tmp/old.out" 2>&1
    local rc=$?
    set -e
    [[ $rc -eq 1 ]] || { cat "$tmp/old.out"; fail "previous report: exit $rc, want 1"; }
    ls "$R"/failures/*.safetensors >/dev/null 2>&1 || fail "previous report wrote no failures/*.safetensors"
    old_sum=$(cat "$R/run.json" "$R/junit.xml" "$R/index.html" "$R"/failures/* | sha256sum)
}
cat >"$tmp/hang.yaml" <<'EOF'
cases:
  - id: integrity.quick
    kind: cache_equals_recompute
    backends: [ref]
    model: models/holmes-gpt
    prompt: "Holmes"
    steps: 2
  - id: integrity.hang
    kind: cache_equals_recompute
    backends: [ref-hang]
    model: models/holmes-gpt
    prompt: "Holmes"
    steps: 2
  - id: integrity.after
    kind: cache_equals_recompute
    backends: [ref]
    model: models/holmes-gpt
    prompt: "Holmes"
    steps: 2
EOF
# wait (at most $2 s) for a line matching $1 in file $3
wait_for() {
    for _ in $(seq 1 $(($2 * 10))); do
        grep -Eq "$1" "$3" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}
# wait (at most $1 s) until process $2 has a child: with -j 1, after the first
# result, that is integrity.hang's (the probes are done by then)
wait_child() {
    for _ in $(seq 1 $(($1 * 10))); do
        [[ -n "$(pgrep -P "$2")" ]] && return 0
        sleep 0.1
    done
    return 1
}
interrupt_run() { # $1: signal name without SIG, $2: expected exit status
    # in a process group of its own (setsid), so the signal can go to the whole
    # group as a terminal's Ctrl-C does, without reaching this script
    setsid "$GENFENCE" run "$tmp/hang.yaml" --backend ref --backend "$HANG" --timeout 120 --no-triangulate -j 1 \
        --report-dir "$R" >"$tmp/int.out" 2>&1 &
    pid=$!
    bail() { kill -KILL $pid 2>/dev/null || true; cat "$tmp/int.out"; fail "$*"; }
    wait_for '^pass +integrity\.quick ' $((60 * ${GF_TIME_SCALE:-1})) "$tmp/int.out" || bail "no first result"
    wait_child $((60 * ${GF_TIME_SCALE:-1})) $pid || bail "integrity.hang never started"
    [[ "$(ps -o pgid= -p $pid | tr -d ' ')" == "$pid" ]] || bail "genfence is not the leader of its own process group"
    # 3. the old report is whole while the new one is staged
    [[ "$(cat "$R/run.json" "$R/junit.xml" "$R/index.html" "$R"/failures/* | sha256sum)" == "$old_sum" ]] \
        || bail "the previous report changed before the new one was complete"
    [[ -d "$R/.staging.$pid" ]] || bail "no staging folder $R/.staging.$pid"
    # 2. a second run into the same folder is refused at once
    set +e
    "$GENFENCE" run "$tmp/hang.yaml" --filter quick --backend ref --report-dir "$R" >"$tmp/second.out" 2>&1
    local rc2=$?
    set -e
    cat "$tmp/second.out"
    [[ $rc2 -eq 2 ]] || bail "second run into a locked folder: exit $rc2, want 2"
    grep -q "in use by another genfence run (pid $pid)" "$tmp/second.out" || bail "second run's message"
    ! grep -q '^pass ' "$tmp/second.out" || bail "the refused run ran something"
    kill "-$1" -- "-$pid" # the process group, as Ctrl-C (SIGINT) would
    set +e
    wait $pid
    local rc=$?
    set -e
    cat "$tmp/int.out"
    [[ $rc -eq $2 ]] || fail "SIG$1: exit $rc, want $2"
    grep -q "^interrupted by SIG$1: 1 run stopped, 1 not run" "$tmp/int.out" || fail "SIG$1: no interruption line"
    tail -n 1 "$tmp/int.out" | gf_grepq -qx 'ref: 1 passed, 1 failed, 0 skipped; ref-hang: 0 passed, 1 failed, 0 skipped' ||
        fail "SIG$1: last line $(tail -n 1 "$tmp/int.out")"
    gf_total "$tmp/int.out" | gf_grepq -qx '1 passed, 2 failed, 0 skipped' || fail "SIG$1: total $(gf_total "$tmp/int.out")"
    # which were not run, by name
    grep -q "^interrupted by SIG$1: .*; not run: integrity\.after \[ref\]$" "$tmp/int.out" ||
        fail "SIG$1: the interruption line does not name the run not started"
    grep -q "^  ERROR    integrity\.after \[ref\]: not run: the run was interrupted (SIG$1)$" "$tmp/int.out" ||
        fail "SIG$1: the recap does not name the run not started with why"
    local left
    left=$(find "$R" -name '*.tmp*' -o -name '.staging.*')
    [[ -z "$left" ]] || fail "SIG$1: left behind: $left"
    xmllint --noout --schema "$XSD" "$R/junit.xml" || fail "SIG$1: junit.xml does not validate"
    "$PY" - "$R" "SIG$1" "$2" <<'PY' || fail "SIG$1: the interrupted report"
import json, os, sys
rep, sig, status = sys.argv[1], sys.argv[2], int(sys.argv[3])
doc = json.load(open(os.path.join(rep, "run.json")))
assert doc["interrupted"] is True and doc["interrupted_by"] == sig, (doc["interrupted"], doc["interrupted_by"])
got = {r["id"]: r for r in doc["results"]}
assert set(got) == {"integrity.quick", "integrity.hang", "integrity.after"}, sorted(got)
q, h, a = got["integrity.quick"], got["integrity.hang"], got["integrity.after"]
assert q["verdict"] == "pass" and "interrupted" not in q, q
assert h["interrupted"] is True and h["not_run"] is False and h["verdict"] == "error", h
assert "interrupted (%s)" % sig in h["reason"], h["reason"]
assert a["interrupted"] is True and a["not_run"] is True and a["verdict"] == "error", a
assert "not run" in a["reason"], a["reason"]
s = doc["summary"]
assert s["exit_status"] == status and s["failed"] == 2 and s["passed"] == 1, s
assert doc["options"]["report_dir"] == rep, doc["options"]["report_dir"]
# the old report's failure logits went with it (replaced: this run failed no comparison)
assert not os.listdir(os.path.join(rep, "failures")), os.listdir(os.path.join(rep, "failures"))
PY
}
old_report
interrupt_run INT 130
echo "ok   SIGINT mid-run: folder locked, old report whole until replaced, report marked interrupted, exit 130, no .tmp"
old_report
interrupt_run TERM 143
echo "ok   SIGTERM mid-run: the same, exit 143"
# an interrupted run whose finished pairs wrote failing-step logits: every
# artifact its report and console name exists (issue 25: one named file did not)
cat >"$tmp/hang2.yaml" <<'EOF'
cases:
  - id: integrity.bad
    kind: cache_equals_recompute
    backends: [ref-bad-cache]
    model: models/holmes-gpt
    prompt: "Sherlock Holmes"
    steps: 4
  - id: integrity.hang
    kind: cache_equals_recompute
    backends: [ref-hang]
    model: models/holmes-gpt
    prompt: "Holmes"
    steps: 2
EOF
setsid "$GENFENCE" run "$tmp/hang2.yaml" --backend "$CACHE" --backend "$HANG" --timeout 120 --no-triangulate -j 1 \
    --report-dir "$R" >"$tmp/int2.out" 2>&1 &
pid=$!
wait_for '^FAIL +integrity\.bad ' $((60 * ${GF_TIME_SCALE:-1})) "$tmp/int2.out" || { kill -KILL $pid; cat "$tmp/int2.out"; fail "no failure"; }
wait_child $((60 * ${GF_TIME_SCALE:-1})) $pid || { kill -KILL $pid; cat "$tmp/int2.out"; fail "integrity.hang never started"; }
kill -INT -- "-$pid"
set +e
wait $pid
rc=$?
set -e
[[ $rc -eq 130 ]] || { cat "$tmp/int2.out"; fail "interrupted after a failure: exit $rc, want 130"; }
"$PY" - "$R" <<'PY' || { cat "$tmp/int2.out"; fail "an interrupted report names an artifact that is not there"; }
import json, os, sys
rep = sys.argv[1]
doc = json.load(open(os.path.join(rep, "run.json")))
assert doc["interrupted"] is True
arts = [a for r in doc["results"] for a in r.get("artifacts") or []]
assert arts, "the finished failure wrote no artifact"
for a in arts:
    assert a.startswith(rep + "/failures/") and os.path.isfile(a), a
PY
grep '^    logits: ' "$tmp/int2.out" | sed 's/^    logits: //' | while read -r f; do
    [[ $f == "$R/failures/"* && -f $f ]] || fail "the interrupted run's console names $f, which is not there"
done
echo "ok   SIGINT after a failure: its $(ls "$R/failures" | wc -l) logits files are where the report says"
# a complete run's artifacts are named where they end up, not in the staging folder
old_report
"$PY" - "$R" <<'PY' || fail "artifact paths"
import json, os, sys
rep = sys.argv[1]
doc = json.load(open(os.path.join(rep, "run.json")))
arts = [a for r in doc["results"] for a in r["artifacts"]]
assert arts, "no artifacts"
for a in arts:
    assert isinstance(a, str) and a.startswith(rep + "/failures/") and os.path.isfile(a), a
PY
grep -q '^    logits: ' "$tmp/old.out" || fail "the console names no logits file"
grep '^    logits: ' "$tmp/old.out" | sed 's/^    logits: //' | while read -r f; do
    [[ $f == "$R/failures/"* && -f $f ]] || fail "the console names $f"
done
[[ -z "$(find "$R" -name '*.tmp*' -o -name '.staging.*')" ]] || fail "a complete run left temporary files"
echo "ok   artifacts named where they end up ($R/failures/)"
# a run that starts no child (its one case a skip) still replaces failures/: no stale logits survive
UNAV="$B/libgenfence_test_faulty_ref_unavailable.so"
"$GENFENCE" run cases/generation.yaml --filter '^cache\.sherlock$' --backend "$UNAV" --no-triangulate \
    --report-dir "$R" >"$tmp/skip.out" 2>&1 || { cat "$tmp/skip.out"; fail "skip-only run failed"; }
[[ -d "$R/failures" && -z "$(ls -A "$R/failures")" ]] || fail "stale logits survived a run with no failure: $(ls "$R/failures")"
echo "ok   a run with nothing to run replaces the old failures/ too"
