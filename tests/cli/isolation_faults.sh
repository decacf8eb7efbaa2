#!/usr/bin/env bash
# Isolation that holds, result integrity, crash context (issue 12, items 3
# and 5; issue 11, item 10). Each faulty backend of tests/backends/faulty.c
# (GF_FAULT 20-29; cases/detect/isolation/) costs only its own case, with its
# verdict and the reason named:
#   fork-probe, fork-load  a helper forked in probe / model_load holds the
#                          result pipe: pass (before: the run hung in read())
#   daemon                 a daemonised helper (setsid) holds it: pass (before: hung)
#   close-fds              crash, "could not write its result record"
#   busy-spin              timeout, killed by the parent (SIGALRM blocked)
#   exit0                  crash, "exited with status 0 without a result"
#   forged-record          crash, "result record rejected: ... no nonce" (before: pass)
#   abort                  crash, SIGABRT in forward call #1
#   huge-malloc            fail, out of memory (in AddressSanitizer builds also
#                          crash: its allocator may abort on a 2 TiB request;
#                          and exit0 may end in LeakSanitizer's report)
#   error-status           fail, forward call #2 backend failure
# Then: no helper outlives the run; ref-crash / ref-hang name the call they
# were in (console and run.json crash_context); SIGINT in the middle of a run
# kills every child's group and the run still ends; --in-process gives the
# forked run's verdicts and says isolation is off.
# The time bounds are hang guards, not speed checks; the --timeout of a run
# whose cases must pass, fail or crash is generous (a loaded machine, a
# sanitizer build), a short one is kept where a hang is what is tested.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init isolation_faults
# helpers started by this test's runs carry $tmp in their command line
strays() {
    local p
    for p in /proc/[0-9]*; do
        [[ "${p#/proc/}" == "$$" ]] && continue
        { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | gf_grepq -qF -- "$tmp" && echo "${p#/proc/}"
    done
    return 0
}
cleanup() {
    local p
    for p in $(strays); do kill -KILL "$p" 2>/dev/null || true; done
}
gf_on_exit cleanup
cd "$GF_SRC"
T="$GF_BUILD/tests/backends"
# the isolation run and the ref-crash run: every case that must pass, fail or
# crash ends so well within it on a loaded machine, a sanitizer build too
# (all three times GF_TIME_SCALE, tests/CMakeLists.txt: a slower machine)
TS=${GF_TIME_SCALE:-1}
TIMEOUT=$((60 * TS))
HANG_TIMEOUT=$((10 * TS)) # ref-hang, busy-spin alone: model load and forward call #1 under load
asan=0
grep -Eq '^GENFENCE_SANITIZE:BOOL=ON|fsanitize=[a-z,]*address' "$GF_BUILD/CMakeCache.txt" 2>/dev/null && asan=1

# busy-spin runs on its own, under the short timeout: in the main run it held
# a core for the whole --timeout (60 s of CPU spent spinning, in the Release
# and the ASan stage alike); its check is the same, on HANG_TIMEOUT
faults=(fork_probe fork_load daemon close_fds exit0 forged_record abort huge_malloc error_status)
args=()
for f in "${faults[@]}"; do
    [[ -f "$T/libgenfence_test_faulty_$f.so" ]] || fail "test backend libgenfence_test_faulty_$f.so not built"
    args+=(--backend "$T/libgenfence_test_faulty_$f.so")
done
# a hang guard well past the timeout + the parent's 5 s grace + the 2 s pipe
# drain, for each of the two runs
bound=$((480 * TS))
isolation_run() { # WHAT OUT REPORT-DIR ARGS...: a run of cases/detect/isolation, bounded; it must exit 1
    local what=$1 out=$2 rep=$3 rc
    shift 3
    set +e
    timeout -s KILL "$bound" "$GENFENCE" run --raw-verdicts cases/detect/isolation "$@" --no-triangulate --report-dir "$rep" >"$out" 2>&1
    rc=$?
    set -e
    cat "$out"
    [[ $rc -ne 137 ]] || fail "$what did not end within $bound s (a hang)"
    [[ $rc -eq 1 ]] || fail "$what: exit $rc, want 1"
}
isolation_run "the run" "$tmp/out" "$tmp/rep" "${args[@]}" --timeout "$TIMEOUT" -j 2 --oversubscribe
[[ -f "$T/libgenfence_test_faulty_busy_spin.so" ]] || fail "test backend libgenfence_test_faulty_busy_spin.so not built"
isolation_run "the busy-spin run" "$tmp/out-spin" "$tmp/rep-spin" --filter '^detect\.isolation\.busy_spin$' \
    --backend "$T/libgenfence_test_faulty_busy_spin.so" --timeout "$HANG_TIMEOUT" -j 1
sleep 1
left=$(strays)
[[ -z "$left" ]] || { ps -o pid,ppid,pgid,sid,etime,cmd -p $left >&2 || true; fail "helpers outlived the run: $left"; }
echo "ok   no helper outlived the run (process groups and the daemon killed)"

"$GENFENCE" list cases/detect/isolation --json >"$tmp/cases.json"
"$PY" - "$tmp/rep/run.json" "$tmp/cases.json" "$asan" "$HANG_TIMEOUT" "$tmp/rep-spin/run.json" <<'PY'
import json, re, sys
doc = json.load(open(sys.argv[1]))
cases = {c["id"]: c["case"] for c in json.load(open(sys.argv[2]))}
asan = sys.argv[3] == "1"
timeout = sys.argv[4]  # busy-spin's, its own run
got = {r["id"]: r for r in doc["results"]}
spin = [r for r in json.load(open(sys.argv[5]))["results"]]
assert [r["id"] for r in spin] == ["detect.isolation.busy_spin"], [r["id"] for r in spin]
main_spin = got.get("detect.isolation.busy_spin") or {}  # the main run names no busy-spin backend
assert main_spin.get("verdict") == "skip", f"busy-spin in the main run: {main_spin.get('verdict')}"
got.update({r["id"]: r for r in spin})
want_reason = {
    "fork_probe": r"",
    "fork_load": r"",
    "daemon": r"",
    "close_fds": r"^could not write its result record \(exit status 121\): the backend closed or reused file descriptors",
    "busy_spin": rf"^timed out after {timeout} s in forward call #1 \(B 1, T 2, cache length 0\) \(watchdog, killed\)$",
    "exit0": r"^exited with status 0 without a result in forward call #1 \(B 1, T 2, cache length 0\)$",
    "forged_record": r"^result record rejected: it carries no nonce",
    "abort": r"^killed by signal 6 \(SIGABRT, [^)]*\) in forward call #1 \(B 1, T 2, cache length 0\)$",
    "huge_malloc": r"could not allocate 2 TiB .*: out of memory$",
    "error_status": r"forward call #2 \(B 1, T 2, uncached, keys 2\): backend failure",
}
errors = []
for cid, case in cases.items():
    short = cid.rsplit(".", 1)[1]
    r = got.get(cid)
    if r is None:
        errors.append(f"{cid}: did not run")
        continue
    want = case["expect_verdict"]
    pattern = want_reason[short]
    if asan and short == "huge_malloc" and r["verdict"] == "crash":
        # ASan's allocator refuses 2 TiB itself and aborts (allocator_may_return_null=0)
        want, pattern = "crash", r"^exited with status|^killed by signal"
    if asan and short == "exit0" and r["verdict"] == "crash":
        pattern = r"^exited with status|^killed by signal 6"  # LeakSanitizer runs at exit()
    if r["verdict"] != want:
        errors.append(f"{cid}: verdict {r['verdict']} ({r['reason']}), want {want}")
    elif pattern and not re.search(pattern, r["reason"]):
        errors.append(f"{cid}: reason {r['reason']!r} does not match /{pattern}/")
    if r["verdict"] in ("pass", "pass-near-tie") and not r["checks"]:
        errors.append(f"{cid}: passed with no check")
# the crash context in run.json
cc = got["detect.isolation.abort"].get("crash_context")
if not cc or cc.get("slot") != "forward" or cc.get("call") != 1 or cc.get("in_call") is not True \
        or cc.get("B") != 1 or cc.get("T") != 2 or cc.get("cache_length") != 0:
    errors.append(f"abort: crash_context {cc}")
if "crash_context" in got["detect.isolation.fork_probe"]:
    errors.append("a passing case has a crash_context")
if errors:
    print("\n".join(errors), file=sys.stderr)
    sys.exit(1)
print(f"ok   {len(cases)} isolation faults: each its own verdict and reason")
PY

# the crash context on the existing crash and hang backends (two runs: the
# crash under the generous timeout, the hang under the short one)
set +e
timeout -s KILL 180 "$GENFENCE" run --raw-verdicts cases/detect/runner.yaml --filter '^detect\.runner\.crash$' \
    --backend "$T/libgenfence_test_ref_crash.so" --timeout "$TIMEOUT" \
    --no-triangulate --report-dir "$tmp/rep2" >"$tmp/out2" 2>&1
rc=$?
set -e
cat "$tmp/out2"
[[ $rc -eq 1 ]] || fail "ref-crash: exit $rc, want 1"
set +e
timeout -s KILL 120 "$GENFENCE" run --raw-verdicts cases/detect/runner.yaml --filter '^detect\.runner\.hang$' \
    --backend "$T/libgenfence_test_ref_hang.so" --timeout "$HANG_TIMEOUT" \
    --no-triangulate --report-dir "$tmp/rep2h" >"$tmp/out2h" 2>&1
rc=$?
set -e
cat "$tmp/out2h"
[[ $rc -eq 1 ]] || fail "ref-hang: exit $rc, want 1"
cat "$tmp/out2h" >>"$tmp/out2"
died='killed by signal 11 \(SIGSEGV, [^)]*\)'
# AddressSanitizer catches the SIGSEGV itself, reports and exits 1
[[ $asan -eq 0 ]] || died="($died|exited with status [0-9]+ without a result)"
grep -A1 '^CRASH .*detect\.runner\.crash' "$tmp/out2" | tail -n 1 \
    | gf_grepq -Eq "^    $died in forward call #1 \(B 1, T 2, cache length 0\)$" \
    || fail "ref-crash: no call named on the console"
grep -A1 '^TIMEOUT .*detect\.runner\.hang' "$tmp/out2" | tail -n 1 \
    | gf_grepq -Eq "^    timed out after $HANG_TIMEOUT s in forward call #1 \(B 1, T 2, cache length 0\)" \
    || fail "ref-hang: no call named on the console"
"$PY" - "$tmp/rep2/run.json" "$tmp/rep2h/run.json" <<'PY' || fail "ref-crash / ref-hang: crash_context in run.json"
import json, sys
res = [r for f in sys.argv[1:] for r in json.load(open(f))["results"]]
assert sorted(r["id"] for r in res) == ["detect.runner.crash", "detect.runner.hang"], res
for r in res:
    cc = r.get("crash_context") or {}
    assert cc.get("slot") == "forward" and cc.get("call") == 1 and cc.get("in_call") is True, (r["id"], cc)
    assert cc.get("calls_total", 0) >= 1 and "step" in cc, (r["id"], cc)
PY
echo "ok   crash context: ref-crash and ref-hang name forward call #1 (console, run.json)"

# SIGINT in the middle (fork_probe has passed, busy_spin spins): every
# child's group killed, the run ends, the interrupted case is no pass
set -m # job control: the background run's SIGINT is not ignored (genfence keeps an ignored one so)
"$GENFENCE" run --raw-verdicts cases/detect/isolation --filter 'busy_spin|fork_probe' --backend "$T/libgenfence_test_faulty_busy_spin.so" \
    --backend "$T/libgenfence_test_faulty_fork_probe.so" --timeout 300 -j 1 --no-triangulate \
    --report-dir "$tmp/rep3" >"$tmp/out3" 2>&1 &
gpid=$!
set +m
for _ in $(seq 1 1800); do # until fork_probe passed and busy_spin's child runs (up to 180 s: a hang guard)
    grep -q '^pass .*detect\.isolation\.fork_probe' "$tmp/out3" 2>/dev/null && [[ -n "$(pgrep -P "$gpid" || true)" ]] && break
    sleep 0.1
done
[[ -n "$(pgrep -P "$gpid" || true)" ]] || { cat "$tmp/out3"; fail "SIGINT: the busy-spin child did not start"; }
sleep 1
kill -INT "$gpid"
set +e
for _ in $(seq 1 600); do kill -0 "$gpid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$gpid" 2>/dev/null; then kill -KILL "$gpid"; fail "SIGINT: genfence did not end within 60 s"; fi
wait "$gpid"
rc=$?
set -e
cat "$tmp/out3"
[[ $rc -ne 0 ]] || fail "an interrupted run exited 0"
sleep 1
left=$(strays)
[[ -z "$left" ]] || fail "SIGINT: processes outlived the run: $left"
"$PY" - "$tmp/rep3/run.json" <<'PY' || fail "SIGINT: run.json verdicts"
import json, sys
res = {r["id"]: r for r in json.load(open(sys.argv[1]))["results"]}
r = res["detect.isolation.busy_spin"]
assert r["verdict"] == "error" and r["reason"].startswith("interrupted (SIGINT) while it ran"), r
assert res["detect.isolation.fork_probe"]["verdict"] == "pass", res["detect.isolation.fork_probe"]
PY
echo "ok   SIGINT: the running child's group killed, the run ended (exit $rc), the interrupted case is an error"

# --in-process: the same verdicts as forked, and it says isolation is off
sel=(cases/generation.yaml --filter '^cache\.sherlock(\.chunked)?$' --backend ref --no-triangulate)
"$GENFENCE" run "${sel[@]}" --report-dir "$tmp/fork" >"$tmp/out4" 2>&1 || { cat "$tmp/out4"; fail "forked run failed"; }
"$GENFENCE" run "${sel[@]}" --in-process --report-dir "$tmp/inproc" >"$tmp/out5" 2>&1 || { cat "$tmp/out5"; fail "--in-process run failed"; }
grep -q '^run: --in-process: isolation is off' "$tmp/out5" || fail "--in-process does not say isolation is off"
"$GENFENCE" run "${sel[@]}" --no-fork --plan >"$tmp/out6" 2>&1 || fail "--no-fork --plan failed"
grep -q '^run: --in-process: isolation is off' "$tmp/out6" || fail "--no-fork is not --in-process"
"$PY" - "$tmp/fork/run.json" "$tmp/inproc/run.json" <<'PY' || fail "--in-process verdicts differ"
import json, sys
a = {(r["id"], r["backend"]): r["verdict"] for r in json.load(open(sys.argv[1]))["results"]}
b = {(r["id"], r["backend"]): r["verdict"] for r in json.load(open(sys.argv[2]))["results"]}
assert len(a) >= 2 and a == b, (a, b)
print(f"ok   --in-process: {len(a)} runs, the forked run's verdicts")
PY
# captured first: grep -q stops reading at the match, and the rest of a help
# longer than a pipe's first write would die of SIGPIPE under pipefail
"$GENFENCE" run --help >"$tmp/help.txt"
grep -q -- '--in-process, --no-fork' "$tmp/help.txt" || fail "--help does not list --in-process"
echo "isolation_faults: ok"
