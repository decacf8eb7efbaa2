#!/usr/bin/env bash
# genfence run's plan (harness/run/plan.c, issue 23 item 1; issue 25 items 3
# and 9):
#   1. run --plan prints exactly what the run then does: every (case, backend)
#      pair, run / skip / error, the reason of each skip and error, on the
#      default suite, on cases/detect and on a llamacpp:q8_0 run (whose golden
#      cases the statistical tier judges: skips the plan already names);
#   2. --plan exits 2 when a pair is an error (an unknown backend) and 1 when a
#      --require-backend one would skip (unavailable here);
#   3. --rerun-failed RUN.json reruns each failing pair on the backend it
#      failed on (a plugin path, NAME:CONFIG), without --backend, and fails
#      again; --backend narrows the pairs to the named backends;
#   4. --maxfail N / -x start nothing after N failures, the rest are skips
#      saying so; --limit N keeps the first N cases of each kind.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
# shellcheck source=../support/test_lib.sh
source "$GF_SRC/tests/support/test_lib.sh"
gf_test_init run_plan_rerun
cd "$GF_SRC"
N="$GF_BUILD/tests/backends/libgenfence_test_faulty_ref_noise.so"
[[ -f $N ]] || fail "test backend $N not built"

# plan_vs_run NAME ARGS...: --plan and the run with the same arguments agree
# pair for pair (the run's report against the plan's lines)
plan_vs_run() {
  local name=$1
  shift
  local rc=0
  "$GENFENCE" run "$@" --plan >"$tmp/$name.plan" 2>&1 || rc=$?
  [[ $rc != 2 ]] || { cat "$tmp/$name.plan"; fail "$name: --plan exited 2"; }
  rc=0
  "$GENFENCE" run -q "$@" --report-dir "$tmp/$name" >"$tmp/$name.out" 2>&1 || rc=$?
  [[ -f "$tmp/$name/run.json" ]] || { cat "$tmp/$name.out"; fail "$name: no report (exit $rc)"; }
  "$PY" - "$tmp/$name.plan" "$tmp/$name/run.json" "$name" <<'PY'
import json, re, sys
plan, doc, name = open(sys.argv[1]).read().splitlines(), json.load(open(sys.argv[2])), sys.argv[3]
want = []
for l in plan:
    m = re.match(r"plan: (run|skip|error) +(\S+) +\[([^\]]*)\](?:  (.*))?$", l)
    if m:
        want.append((m.group(2), m.group(3), m.group(1), (m.group(4) or "").replace(" (required: a failure)", "")))
got = []
for x in doc["results"]:
    v = x["verdict"]
    # a pair the plan left to the run: whatever the child said; a decided one: the plan's verdict and reason
    got.append((x["id"], x["backend_requested"] or "-", v, x["reason"]))
assert len(want) == len(got), f"{name}: the plan has {len(want)} pairs, the run {len(got)}"
bad = []
for w, g in zip(sorted(want), sorted(got)):
    if w[:2] != g[:2]:
        bad.append(f"pair {w[:2]} planned, {g[:2]} run")
    elif w[2] == "run" and g[2] in ("skip", "error") and g[3].startswith(("weights ", "backend ", "no selected backend")):
        bad.append(f"{w[:2]}: planned to run, the run says {g[2]}: {g[3]}")
    elif w[2] != "run" and (w[2], w[3]) != (g[2], g[3]):
        bad.append(f"{w[:2]}: planned {w[2]} ({w[3]}), the run says {g[2]} ({g[3]})")
assert not bad, f"{name}: " + "; ".join(bad[:5])
print(f"ok   1: {name}: --plan and the run agree on {len(got)} pairs "
      f"({sum(1 for w in want if w[2] == 'run')} run, {sum(1 for w in want if w[2] == 'skip')} skip, "
      f"{sum(1 for w in want if w[2] == 'error')} error)")
PY
}

# 1. the default suite, cases/detect, llamacpp:q8_0
plan_vs_run default
plan_vs_run detect cases/detect --backend ref --raw-verdicts # (its failing pairs rerun in 3)
if [[ -f "$GF_BUILD/backends/libgenfence_backend_llamacpp.so" ]]; then
  export GENFENCE_MODULE_DIR="$GF_BUILD/backends" OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
  plan_vs_run q8 cases/golden_llama.yaml cases/statistical.yaml cases/sampler.yaml --filter 'llama|^top_p' \
    --backend llamacpp:q8_0
  grep -q "plan: skip  golden.*\[llamacpp:q8_0\]  weights q8_0: judged by the statistical tier (case statistical.holmes-llama)" \
    "$tmp/q8.plan" || { cat "$tmp/q8.plan"; fail "the q8_0 plan does not name the statistical tier's skips"; }
else
  echo "note: the llamacpp module is not built here: the llamacpp:q8_0 part of 1 not run"
fi

# 2. --plan's exit status
rc=0
"$GENFENCE" run cases/sampler.yaml --backend no-such-backend --plan >"$tmp/p2.out" 2>&1 || rc=$?
[[ $rc == 2 ]] || { cat "$tmp/p2.out"; fail "--plan with an unknown backend exited $rc, expected 2"; }
grep -q "^plan: error " "$tmp/p2.out" || fail "--plan with an unknown backend names no error"
rc=0
"$GENFENCE" run cases/sampler.yaml --plan >"$tmp/p0.out" 2>&1 || rc=$?
[[ $rc == 0 ]] || { cat "$tmp/p0.out"; fail "--plan of a runnable suite exited $rc"; }
if "$GENFENCE" backends 2>/dev/null | gf_grepq -q '^cuda .*unavailable\|^cuda: .*unavailable\|cuda.*not available'; then :; fi
rc=0
"$GENFENCE" run cases/golden.yaml --require-backend cuda --plan >"$tmp/p1.out" 2>&1 || rc=$?
if grep -q "^plan: skip .*\[cuda\]  backend unavailable" "$tmp/p1.out"; then
  [[ $rc == 1 ]] || { cat "$tmp/p1.out"; fail "--plan with a required backend that skips exited $rc, expected 1"; }
  echo "ok   2: --plan exits 2 on an error pair, 1 when a required backend would skip, 0 otherwise"
else
  echo "ok   2: --plan exits 2 on an error pair, 0 otherwise (cuda runs here: the required-skip part not run)"
fi

# 3. --rerun-failed remembers the backend of each failing pair
rc=0
"$GENFENCE" run -q cases/golden.yaml --filter '^golden\.greedy\.sherlock$' --backend ref --backend "$N" \
  --report-dir "$tmp/r1" >"$tmp/r1.out" 2>&1 || rc=$?
[[ $rc == 1 ]] || { cat "$tmp/r1.out"; fail "the faulty run exited $rc, expected 1"; }
rc=0
"$GENFENCE" run -q --rerun-failed "$tmp/r1/run.json" --report-dir "$tmp/r2" >"$tmp/r2.out" 2>&1 || rc=$?
[[ $rc == 1 ]] || { cat "$tmp/r2.out"; fail "--rerun-failed without --backend exited $rc, expected 1 (the plugin still fails)"; }
"$PY" - "$tmp/r2/run.json" "$N" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
assert [(x["id"], x["backend_requested"], x["verdict"]) for x in r] == [("golden.greedy.sherlock", sys.argv[2], "fail")], r
PY
rc=0
"$GENFENCE" run -q --rerun-failed "$tmp/r1/run.json" --backend ref --no-report >"$tmp/r3.out" 2>&1 || rc=$?
[[ $rc == 2 ]] && grep -q "none of the 1 (case, backend) pair(s) that did not pass" "$tmp/r3.out" \
  || { cat "$tmp/r3.out"; fail "--rerun-failed narrowed to ref (which passed) exited $rc"; }
# without PATHS: the case files the failing pairs came from (cases/detect, not the default suite)
"$GENFENCE" run --rerun-failed "$tmp/detect/run.json" --plan >"$tmp/r4.out" 2>&1 || { cat "$tmp/r4.out"; fail "--rerun-failed of the detect run"; }
want=$("$PY" -c 'import json, sys; print(sum(x["verdict"] not in ("pass", "pass-near-tie", "skip") for x in json.load(open(sys.argv[1]))["results"]))' "$tmp/detect/run.json")
grep -q "^plan: $want (case, backend) pairs over [0-9]* cases: $want to run" "$tmp/r4.out" \
  || { tail -3 "$tmp/r4.out"; fail "--rerun-failed of the detect run does not plan its $want failing pairs"; }
echo "ok   3: --rerun-failed reruns the failing plugin's pair and fails; --backend ref narrows it away; the detect run's $want failing pairs come back from their own case files"

# 4. --maxfail, -x, --limit
for opt in "--maxfail 2" "-x"; do
  rc=0
  # shellcheck disable=SC2086
  "$GENFENCE" run -q cases/detect --backend ref -j 1 $opt --raw-verdicts --report-dir "$tmp/m" >"$tmp/m.out" 2>&1 || rc=$?
  [[ $rc != 0 ]] || fail "$opt: exit 0 after failures"
  n=$([[ $opt == -x ]] && echo 1 || echo 2)
  "$PY" - "$tmp/m/run.json" "$n" <<'PY'
import json, sys
r, n = json.load(open(sys.argv[1]))["results"], int(sys.argv[2])
ran_failed = [x for x in r if x["verdict"] not in ("pass", "pass-near-tie", "skip") and x.get("process")]
not_run = [x for x in r if x["reason"].startswith("not run: --maxfail %d: the run stopped after %d failure" % (n, n))]
assert len(ran_failed) == n, [(x["id"], x["verdict"]) for x in ran_failed]
assert not_run and all(x["verdict"] == "skip" for x in not_run), len(not_run)
PY
  grep -q "^run: --maxfail $n reached: [0-9]* (case, backend) runs* not started" "$tmp/m.out" \
    || { cat "$tmp/m.out"; fail "$opt: the console does not say how many were not run"; }
done
# judged by their declarations (the default), a must-fail case as declared is no failure for -x
rc=0
"$GENFENCE" run -q cases/detect --backend ref -j 1 -x --report-dir "$tmp/mx" >"$tmp/mx.out" 2>&1 || rc=$?
[[ $rc == 0 ]] || { cat "$tmp/mx.out"; fail "-x on cases/detect as declared: exit $rc, want 0"; }
! grep -q "^run: --maxfail" "$tmp/mx.out" || { cat "$tmp/mx.out"; fail "-x stopped a run whose cases were as declared"; }
# and --rerun-failed of it has nothing to rerun
"$GENFENCE" run --rerun-failed "$tmp/mx/run.json" --plan >"$tmp/mx2.out" 2>&1 || { cat "$tmp/mx2.out"; fail "--rerun-failed of a run as declared"; }
grep -q "^run: every case passed in $tmp/mx/run.json; nothing to rerun" "$tmp/mx2.out" || { cat "$tmp/mx2.out"; fail "--rerun-failed reruns cases that were as declared"; }
"$GENFENCE" run cases/detect --backend ref --limit 1 --plan >"$tmp/l.out"
"$GENFENCE" list cases/detect --json >"$tmp/l.json"
"$PY" - "$tmp/l.out" "$tmp/l.json" <<'PY'
import json, re, sys
ids = {m.group(2) for l in open(sys.argv[1]) for m in [re.match(r"plan: (run|skip|error) +(\S+) ", l)] if m}
cases = json.load(open(sys.argv[2]))
kind = {c["id"]: c["kind"] for c in cases}
first = {}
for c in cases:
    first.setdefault(c["kind"], c["id"])
assert ids == set(first.values()), (sorted(ids), sorted(first.values()))
PY
rc=0
"$GENFENCE" run --limit 0 --plan >"$tmp/l0.out" 2>&1 || rc=$?
[[ $rc == 2 ]] || fail "--limit 0 exited $rc, expected 2"
echo "ok   4: --maxfail 2 and -x stop after 2 / 1 failures, the rest skips saying so; --limit 1 keeps each kind's first case"
echo "run_plan_rerun: ok"
