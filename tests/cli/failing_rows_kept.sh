#!/usr/bin/env bash
# The failure artifact of cache_equals_recompute and sliding_window holds the
# rows the engine compared at the failing step (gf_row_keep, engine.h), not a
# re-run of the backend: on ref-noise (seeded noise on every logit, keyed by
# the forward call's index, so a re-run gives other rows) the artifact's
# max |reference - test| equals the record's step_max_delta at the failing
# step (to the report's ten digits), and its reference row's argmax is the record's token.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}" "${GF_PYTHON:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init failing_rows_kept
be="$GF_BUILD/tests/backends/libgenfence_test_faulty_ref_noise.so"
[ -f "$be" ] || fail "test backend $be not built"
cat >"$tmp/cases.yaml" <<YAML
cases:
  - id: kept.cache
    kind: cache_equals_recompute
    model: $GF_SRC/models/holmes-gpt
    prompt: "Sherlock Holmes"
    steps: 6
  - id: kept.cache.chunked
    kind: cache_equals_recompute
    model: $GF_SRC/models/holmes-gpt
    prompt: "Sherlock Holmes"
    steps: 6
    prefill_chunks: [2, 1]
  - id: kept.sliding
    kind: sliding_window
    model: $GF_SRC/models/holmes-llama
    prompt: "Sherlock Holmes"
    window: 8
    steps: 12
    drift_tolerance: 100.0
    slide: {prompt_tokens: 12, max_new_tokens: 2}
YAML
rc=0
"$GENFENCE" run "$tmp/cases.yaml" --backend "$be" --report-dir "$tmp/rep" >"$tmp/run.out" 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat "$tmp/run.out"; fail "exit $rc, expected 1 (the noise fails the comparisons)"; }
"$GF_PYTHON" - "$tmp/rep/run.json" <<'PY' || fail "artifacts"
import json, sys
import numpy as np
from safetensors.numpy import load_file
doc = json.load(open(sys.argv[1]))
label = {"cache_equals_recompute": ("cached_vs_uncached", "tokens"),
         "sliding_window": ("evicted_vs_recompute_before_eviction", "recompute_tokens")}
seen = 0
for r in doc["results"]:
    cmp_name, tok_key = label[r["kind"]]
    c = r["metrics"]["comparisons"][cmp_name]
    assert r["verdict"] == "fail" and c["failing_step"] >= 0, (r["id"], r["verdict"], r["reason"])
    at = c["failing_step"]
    arts = [a for a in r["artifacts"] if isinstance(a, str) and f".{cmp_name}.step{at}." in a]
    assert len(arts) == 1, (r["id"], r["artifacts"])
    t = load_file(arts[0])
    ref, test = t["reference"].astype(np.float64), t["test"].astype(np.float64)
    d = float(np.abs(ref - test).max())
    want = r["metrics"]["step_max_delta"][at]
    assert abs(d - want) <= 1e-9 * want, f"{r['id']}: artifact max |delta| {d!r}, the record's step {at}: {want!r}"
    if r["kind"] == "sliding_window":  # the reference row is the one that chose the forced token
        assert int(np.argmax(ref)) == r["metrics"][tok_key][at], r["id"]
    print(f"ok   {r['id']}: step {at}, artifact max |delta| {d:.10g}, the record's {want:.10g}")
    seen += 1
assert seen == 3, seen
PY
echo "ok   the failure artifacts hold the compared rows (3 comparisons)"
