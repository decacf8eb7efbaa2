#!/usr/bin/env bash
# The run plan and its slices (issue 18, item 4): `run --plan` lists every
# (case, backend) pair the run would do, with why any is skipped, and runs
# nothing; `run --rerun-failed RUN.json` runs exactly the cases that did not
# pass in that report; `run --durations N` lists the N slowest runs; `list
# --shard I/N` cuts the same slices as `run --shard I/N`; `list --backend NAME`
# keeps the cases whose backends filter allows NAME.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "run_plan_rerun: FAIL: $*" >&2; exit 1; }
cd "$GF_SRC"
S=cases/sampler.yaml
D=cases/detect/sampler.yaml

# --plan: one line per pair, nothing run, no report written
"$GENFENCE" run "$S" "$D" --backend ref --backend ./no/such/plugin.so --plan --report-dir "$tmp/plan" >"$tmp/plan.txt" \
    || fail "--plan exited $?"
[[ ! -e "$tmp/plan/run.json" ]] || fail "--plan wrote a report"
n_cases=$("$GENFENCE" list "$S" "$D" | tail -n 1 | cut -d' ' -f1)
n_run=$(grep -c '^plan: run ' "$tmp/plan.txt" || true)
n_err=$(grep -c '^plan: error ' "$tmp/plan.txt" || true)
[[ $n_run -eq $n_cases ]] || fail "--plan: $n_run runs for $n_cases sampler cases (each once, on the engine)"
[[ $n_err -eq $n_cases ]] || fail "--plan: the missing plugin should be an error on all $n_cases cases, got $n_err"
grep -q 'cannot be used' "$tmp/plan.txt" || fail "--plan does not say why the plugin cannot be used"
tail -n 1 "$tmp/plan.txt" | grep -q 'nothing was run' || fail "--plan summary: $(tail -n 1 "$tmp/plan.txt")"

# a real run with failures, then --rerun-failed picks exactly those cases
set +e
"$GENFENCE" run "$S" "$D" --backend ref --report-dir "$tmp/r1" -q >/dev/null
rc=$?
set -e
[[ $rc -eq 1 ]] || fail "the detect cases should fail (exit 1), got $rc"
want=$("$GF_PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); print("\n".join(sorted({r["id"] for r in d["results"] if r["verdict"] not in ("pass","pass-near-tie","skip")})))' "$tmp/r1/run.json")
[[ -n $want ]] || fail "no failing case in the first run"
set +e
"$GENFENCE" run "$S" "$D" --backend ref --rerun-failed "$tmp/r1/run.json" --report-dir "$tmp/r2" --durations 3 >"$tmp/r2.txt"
rc=$?
set -e
[[ $rc -eq 1 ]] || fail "rerun of failures exited $rc, want 1"
got=$("$GF_PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); print("\n".join(sorted({r["id"] for r in d["results"]})))' "$tmp/r2/run.json")
[[ "$got" == "$want" ]] || fail "--rerun-failed ran [$got], want [$want]"
grep -q '^slowest 3 of ' "$tmp/r2.txt" || fail "--durations 3: no 'slowest 3 of' line"
[[ $(sed -n '/^slowest 3 of /,$p' "$tmp/r2.txt" | grep -c '^ .*s  ') -eq 3 ]] || fail "--durations 3 did not list 3 runs"
# a report where everything passed: nothing to rerun, exit 0
"$GENFENCE" run "$S" --backend ref --report-dir "$tmp/r3" -q >/dev/null || fail "the sampler suite should pass"
"$GENFENCE" run "$S" --backend ref --rerun-failed "$tmp/r3/run.json" --no-report >"$tmp/r3.txt" || fail "nothing to rerun exited $?"
grep -q 'nothing to rerun' "$tmp/r3.txt" || fail "no 'nothing to rerun' message"
# not a report: exit 2
echo '{"x": 1}' >"$tmp/bad.json"
set +e
"$GENFENCE" run "$S" --rerun-failed "$tmp/bad.json" --no-report 2>"$tmp/e"; rc=$?
set -e
[[ $rc -eq 2 ]] && grep -q 'not a genfence run report' "$tmp/e" || fail "a non-report for --rerun-failed: exit $rc, $(cat "$tmp/e")"

# list --shard: the same slices as run --shard, and together the whole list
ids() { grep -v '^[0-9]* cases\?$' | awk '{print $1}'; }
"$GENFENCE" list "$S" "$D" | ids | sort >"$tmp/all"
"$GENFENCE" list "$S" "$D" --shard 1/2 | ids >"$tmp/s1"
"$GENFENCE" list "$S" "$D" --shard 2/2 | ids >"$tmp/s2"
[[ -s $tmp/s1 && -s $tmp/s2 ]] || fail "an empty list shard"
sort "$tmp/s1" "$tmp/s2" | diff - "$tmp/all" >/dev/null || fail "list shards do not partition the list"
"$GENFENCE" run "$S" "$D" --backend ref --shard 1/2 --report-dir "$tmp/rs1" -q >/dev/null || true
"$GF_PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); print("\n".join(r["id"] for r in d["results"]))' "$tmp/rs1/run.json" \
    | sort -u | diff - <(sort "$tmp/s1") >/dev/null || fail "list --shard 1/2 differs from run --shard 1/2"
# the one --shard parser: trailing text, I > N and I = 0 are refused by both commands
for bad in 1/2x 3/2 0/2 /2; do
    for cmd in list "run --no-report"; do
        set +e
        # shellcheck disable=SC2086
        "$GENFENCE" $cmd "$S" --shard "$bad" >/dev/null 2>"$tmp/e" </dev/null; rc=$?
        set -e
        [[ $rc -eq 2 ]] && grep -q "for --shard" "$tmp/e" || fail "$cmd --shard $bad: exit $rc, $(cat "$tmp/e")"
    done
done
# list --backend: the golden cases run on every backend, a case with a backends filter only where it allows
n_gold=$("$GENFENCE" list cases/golden.yaml --backend ref | tail -n 1 | cut -d' ' -f1)
[[ $n_gold -gt 0 ]] || fail "list --backend ref kept no golden case"
printf 'cases:\n  - id: only.onednn\n    kind: top_k_fence\n    backends: [onednn]\n    probs: [0.5, 0.3, 0.2]\n    expect:\n      - {k: 1, keep: [0]}\n' >"$tmp/only.yaml"
"$GENFENCE" list "$tmp/only.yaml" --backend onednn | grep -q '^only.onednn ' || fail "list --backend onednn dropped a case for onednn"
set +e
"$GENFENCE" list "$tmp/only.yaml" --backend ref >/dev/null 2>&1; rc=$?
set -e
[[ $rc -eq 2 ]] || fail "list --backend ref kept a case for onednn only (exit $rc)"
echo "ok   run --plan / --rerun-failed / --durations, list --shard / --backend"
