#!/usr/bin/env bash
# A user's own statistical case counts for skipping goldens on quantized
# weights (issue 26, item 4): a suite outside the repository whose root has
# no cases/statistical*.yaml, holding golden.greedy.sherlock and the user's
# distribution_match case mine.holmes-gpt over the same model. On
# ref-noise-q8_0 (weights q8_0, tests/backends/faulty_noise.c) the golden is
# a skip naming mine.holmes-gpt and its file, in the plan and in run.json,
# and the statistical case itself runs (and fails: that backend is a broken
# quantizer). Before, only the root's cases/statistical*.yaml counted: the
# golden ran strictly (and failed on the noise).
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init statistical_user_case
[[ -f $GF_SRC/models/holmes-gpt/model.safetensors ]] || { echo "statistical_user_case: SKIP: models/holmes-gpt not trained"; exit 0; }
root=$tmp/root
mkdir -p "$root/cases" "$root/models" "$tmp/suite"
ln -s "$GF_SRC/models/holmes-gpt" "$root/models/holmes-gpt"
cat >"$tmp/suite/goldens.yaml" <<YAML
cases:
  - id: golden.greedy.sherlock
    kind: golden_generation
    model: models/holmes-gpt
    golden: $GF_SRC/golden/golden.greedy.sherlock.safetensors
    prompts: ["Sherlock Holmes"]
    max_new_tokens: 64
YAML
cat >"$tmp/suite/mine.yaml" <<YAML
cases:
  - id: mine.holmes-gpt
    kind: distribution_match
    model: models/holmes-gpt
    goldens: [$GF_SRC/golden/golden.greedy.sherlock.safetensors]
    prompts: ["Sherlock Holmes"]
    steps: 8
YAML
be="$GF_BUILD/tests/backends/libgenfence_test_faulty_ref_noise_q8_0.so"
export GENFENCE_ROOT=$root
"$GENFENCE" run "$tmp/suite" --backend "$be" --plan >"$tmp/plan" 2>&1 || { cat "$tmp/plan"; fail "--plan exited non-zero"; }
cat "$tmp/plan"
grep -q "golden.greedy.sherlock .*weights q8_0: judged by the statistical tier (case mine.holmes-gpt) of $tmp/suite/mine.yaml" "$tmp/plan" ||
    fail "the plan does not skip the golden for the user's statistical case"
rc=0
"$GENFENCE" run "$tmp/suite" --backend "$be" --report-dir "$tmp/rep" >"$tmp/out" 2>&1 || rc=$?
cat "$tmp/out"
[[ $rc -eq 1 ]] || fail "exit $rc, want 1 (the broken quantizer fails the statistical case)"
"${GF_PYTHON:-python3}" - "$tmp/rep/run.json" "$tmp/suite/mine.yaml" <<'PY' || fail "run.json"
import json, sys
r = {x["id"]: x for x in json.load(open(sys.argv[1]))["results"]}
g = r["golden.greedy.sherlock"]
want = "weights q8_0: judged by the statistical tier (case mine.holmes-gpt) of " + sys.argv[2]
assert g["verdict"] == "skip" and g["reason"] == want, (g["verdict"], g["reason"])
assert r["mine.holmes-gpt"]["verdict"] == "fail", r["mine.holmes-gpt"]["verdict"]
PY
echo "ok   a user's own statistical case judges the quantized goldens, and the report names it"
