#!/usr/bin/env bash
# onednn's one-row products (decode) are dnnl_sgemm in blocks fixed by the
# product's size and the CPU count, shared among a pool's threads, and it
# declares them bitwise across thread counts. The holmes models never reach
# the pool (their products are below 262K multiply-adds, one block on the
# caller), so this runs the threads axis with one row (decode on the one-row
# path, prefill on the matmul) on the gpt2-small shape, at 1 and 2 threads:
# onednn must be bitwise as declared; the case's control, ref-inv-threads
# (test fault 132: another seed on more than one thread), run on ref, must
# fail it, or the case could not fail.
set -euo pipefail
: "${GENFENCE:?set GENFENCE to the genfence binary}" "${GF_SRC:?}" "${GF_BUILD:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init onednn_one_row
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
if ! "$GENFENCE" backends 2>/dev/null | grep -q "^onednn .*available"; then
    echo "skip onednn: not available here ($("$GENFENCE" backends 2>/dev/null | grep "^onednn" || true))"
    exit 0
fi
"$GENFENCE" bench --shape gpt2-small --write-shape "$tmp/g2" >/dev/null
cat >"$tmp/case.yaml" <<YAML
cases:
  - id: invariance.threads.one_row
    kind: invariance
    model: $tmp/g2
    axis: threads
    batch: 1
    steps: 4
    sweep: [1, 2]
    prompt_tokens: [464, 3290, 286, 262, 1578, 318, 257, 1310]
    control: ref-inv-threads
YAML
fail=0
rc=0
"$GENFENCE" run "$tmp/case.yaml" --backend onednn --backend ref --no-triangulate --report-dir "$tmp/rep" >"$tmp/out" 2>&1 || rc=$?
[[ $rc -eq 0 ]] || { echo "FAIL run: exit $rc, want 0"; cat "$tmp/out"; fail=1; }
"$PY" - "$tmp/rep/run.json" <<'PY' || fail=1
import json, sys
doc = json.load(open(sys.argv[1]))
res = {r["backend"]: r for r in doc["results"]}
o = res["onednn"]
assert o["verdict"] == "pass", o["verdict"]
assert o["metrics"]["declared"] == "bitwise" and o["metrics"]["measured"] == "bitwise", (o["metrics"]["declared"], o["metrics"]["measured"])
print("ok   onednn: one row at 1 and 2 threads on gpt2-small, bitwise as declared")
r = res["ref"]
c = r["metrics"]["control"]
assert r["verdict"] == "pass" and c["backend"] == "ref-inv-threads" and c["ran"] and c["caught"], (r["verdict"], c)
print(f"ok   ref passes, and its control ref-inv-threads fails the case ({c['detail']})")
PY
exit $fail
