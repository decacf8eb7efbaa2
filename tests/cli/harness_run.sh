#!/usr/bin/env bash
# genfence run / list: the default suite on ref (when models/holmes-gpt is
# trained), the summary line CI parses, the JSON and JUnit reports, the
# options (backends, required backends, filters, shards, limits) and usage
# errors (exit 2).
set -euo pipefail
: "${GENFENCE:?set GENFENCE to the genfence binary}" "${GF_SRC:?set GF_SRC}"
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init harness_run
summary_re=$GF_LAST_LINE_RE
cd "$GF_SRC"

# list: the default suite, no detection cases; --json; --kinds
"$GENFENCE" list >"$tmp/list"
grep -q '^cache.sherlock ' "$tmp/list" || fail "list lacks cache.sherlock"
! grep -q '^detect\.' "$tmp/list" || fail "the default suite includes cases/detect"
"$GENFENCE" list --json | "$PY" -c 'import json,sys; d=json.load(sys.stdin); assert len(d) >= 12 and all("id" in c and "kind" in c and "line" in c for c in d)' \
  || fail "list --json"
"$GENFENCE" list --kinds | grep -o '^[a-z_][a-z_]* ' | tr -d ' ' >"$tmp/kinds"
[[ -s "$tmp/kinds" ]] || fail "list --kinds shows no kinds"
"$GENFENCE" list cases/detect --tag detect --kind eos | gf_grepq -q '^detect.eos.wrong_stop ' || fail "list with filters"

# the sampler-only part of the suite (no model needed)
"$GENFENCE" run --backend ref --kind top_p_fence --kind top_k_fence --kind temperature_limits \
  --kind sampler_errors --kind sampling_distribution --kind left_padding_positions --report-dir "$tmp/s" >"$tmp/out"
tail -n 1 "$tmp/out" | gf_grepq -Eq "$summary_re" || fail "summary line: $(tail -n 1 "$tmp/out")"
# (the sampler kinds reach no slot of ref: the engine alone's, ref reached none)
tail -n 1 "$tmp/out" | gf_grepq -Eq '^ref: 0 passed, 0 failed, 0 skipped \(reached no case\); engine alone: [1-9][0-9]* passed, 0 failed, 0 skipped$' ||
  fail "sampler cases: $(tail -n 1 "$tmp/out")"

# the whole default suite on ref
if [[ -f models/holmes-gpt/model.safetensors ]]; then
  start=$(date +%s)
  jobs=$(( $(nproc) > 1 ? 2 : 1 ))
  "$GENFENCE" run --backend ref -j "$jobs" --report-dir "$tmp/rep" >"$tmp/out" || { cat "$tmp/out"; fail "default suite on ref"; }
  cat "$tmp/out"
  echo "harness_run: default suite on ref in $(( $(date +%s) - start )) s"
  tail -n 1 "$tmp/out" | gf_grepq -Eq '^ref: [1-9][0-9]* passed, 0 failed, 0 skipped; engine alone: [1-9][0-9]* passed, 0 failed, 0 skipped$' ||
    fail "summary: $(tail -n 1 "$tmp/out")"
  "$PY" - "$tmp/rep" "$tmp/kinds" <<'PY' || fail "report contents"
import json, os, sys
import xml.etree.ElementTree as ET
rep = sys.argv[1]
d = json.load(open(os.path.join(rep, "run.json")))
assert d["schema_version"] == 1
assert d["genfence"]["version"] and d["genfence"]["commit"]
env = d["environment"]
for k in ("cpu_model", "isa", "nproc", "jobs", "threads_per_job", "libraries", "env"):
    assert k in env, k
for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE", "GENFENCE_MODULE_DIR"):
    assert v in env["env"], v
assert d["backends"][0]["name"] == "ref" and d["backends"][0]["dtype"] == "fp32"
kinds = {r["kind"] for r in d["results"]}
listed = set(open(sys.argv[2]).read().split())
assert kinds == listed, ("the default suite does not run every kind genfence lists", sorted(listed ^ kinds))
declared = 0
for r in d["results"]:
    if r.get("expect_verdict"):  # the declared stale and tampered goldens of cases/paths.yaml
        assert r["verdict"] == r["expect_verdict"] and r.get("as_declared") is True, (r["id"], r["verdict"], r["reason"])
        declared += 1
        continue
    assert r["verdict"] in ("pass", "pass-near-tie"), (r["id"], r["verdict"], r["reason"])
    if r["kind"] in ("cache_equals_recompute", "batch_consistency", "seeded_reproducibility", "golden_generation"):
        s = r["metrics"]["summary"]
        for k in ("max_abs_delta", "max_delta_step", "min_margin", "safety_factor", "near_ties"):
            assert k in s, (r["id"], k)
        # a non-finite safety factor is null with a reason
        if s["safety_factor"] is None:
            assert s["safety_factor_reason"], r["id"]
    if r["kind"] in ("seeded_reproducibility", "sampling_distribution", "temperature_limits"):
        assert r["seeds"], r["id"]
j = ET.parse(os.path.join(rep, "junit.xml")).getroot()
assert len(j.findall(".//testcase")) == len(d["results"])
assert j.get("failures") == "0" and j.get("errors") == "0"
assert declared == 2, ("the default suite's declared stale and error goldens", declared)
print("harness_run: report ok:", len(d["results"]), "results,", declared, "judged as declared")
PY
else
  echo "harness_run: models/holmes-gpt/model.safetensors missing; skipping the model cases"
fi

# a named backend that cannot load: an error (exit 2), named or required
# (issue 11; tests/cli/honest_backends.sh has the other ways to be unusable)
for opt in --backend --require-backend; do
  set +e
  "$GENFENCE" run $opt /nonexistent/libnothing.so --filter '^top_p\.fence$' --no-report >"$tmp/out"
  rc=$?
  set -e
  [[ $rc == 2 ]] || fail "$opt on a backend that cannot load exits $rc, expected 2"
  tail -n 1 "$tmp/out" | gf_grepq -qx '/nonexistent/libnothing.so: 0 passed, 1 failed, 0 skipped' || fail "unloadable backend: $(tail -n 1 "$tmp/out")"
  grep -q "backend '/nonexistent/libnothing.so' cannot be used: .*cannot load" "$tmp/out" || fail "the error does not say why"
done

# shards partition the cases
n_all=$("$GENFENCE" run --backend ref --kind sampler_errors --kind top_k_fence --kind top_p_fence --no-report | sed -n 's/^total: //p' | cut -d' ' -f1)
n1=$("$GENFENCE" run --backend ref --kind sampler_errors --kind top_k_fence --kind top_p_fence --shard 1/2 --no-report | sed -n 's/^total: //p' | cut -d' ' -f1)
n2=$("$GENFENCE" run --backend ref --kind sampler_errors --kind top_k_fence --kind top_p_fence --shard 2/2 --no-report | sed -n 's/^total: //p' | cut -d' ' -f1)
[[ $((n1 + n2)) == "$n_all" && $n1 -gt 0 && $n2 -gt 0 ]] || fail "shards: $n1 + $n2 != $n_all"
# tags exclude
"$GENFENCE" run --backend ref --kind top_p_fence --tag '!seed' --no-report | gf_grepq -q 'top_p.fence ' && fail "--tag '!seed' kept top_p.fence"

# usage errors: exit 2
usage() {
  set +e
  "$GENFENCE" run "$@" --no-report >"$tmp/out" 2>&1
  local rc=$?
  set -e
  [[ $rc == 2 ]] || { cat "$tmp/out"; fail "run $* exited $rc, expected 2"; }
}
cores=$(nproc)
usage -j "$((cores + 1))"
grep -q -- '--oversubscribe' "$tmp/out" || fail "no hint about --oversubscribe"
usage -j 1 --threads "$((cores + 1))"
usage --filter '(['
usage --filter '^no such case$'
usage --kind no_such_kind
usage --shard 3/2
usage --timeout -1
usage --memory-limit lots
usage --bogus-option
usage cases/no-such-file.yaml
# --oversubscribe lifts the core limit
"$GENFENCE" run --backend ref --filter '^top_k\.fence$' -j "$((cores + 1))" --oversubscribe --no-report >/dev/null \
  || fail "--oversubscribe"
# --help states the defaults
"$GENFENCE" run --help | gf_grepq -q 'default 120' || fail "--help does not state the default timeout"
echo "harness_run: ok"
