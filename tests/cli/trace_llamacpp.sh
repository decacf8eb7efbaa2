#!/usr/bin/env bash
# llamacpp's trace slot over ggml's graph callback (backends/llamacpp/
# lc_trace.c, docs/llamacpp.md "The trace slot"): `genfence trace` on the
# golden batch cases (left padding, a cache) of a GPT-2 and a Llama model.
# What is asserted is the mapping, not llama.cpp's numbers on this CPU: the
# replay reaches a verdict on the trace (matched or diverged, never "not
# localized"), every point the graph names (all but Llama's unnamed
# embedding; GPT-2's "inpL" is its embedding) comes back with an NMSE, and
# the Llama embedding is said to be not given. The NMSE values and the
# localization of llama.cpp's known GPT-2 finding (its fp16 GELU table,
# docs/conformance_findings.md finding 1: at layer 0 MLP output) are printed.
# Skipped (exit 0, with the reason) when the module is not built here.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init trace_llamacpp
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
export GENFENCE_MODULE_DIR="$GF_BUILD/backends"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
if [ ! -f "$GF_BUILD/backends/libgenfence_backend_llamacpp.so" ]; then
  echo "skip: the llamacpp module is not built in this configuration (tools/setup/setup_llamacpp.sh, docs/llamacpp.md)"
  exit 0
fi
cd "$GF_SRC"
rc=0
"$GENFENCE" trace cases/golden.yaml cases/golden_llama.yaml --filter '^golden\.greedy\.batch(\.llama)?$' --backend llamacpp \
  --no-triangulate --report-dir "$tmp/rep" >"$tmp/out" 2>&1 || rc=$?
[[ $rc -le 1 ]] || { cat "$tmp/out"; fail "genfence trace exited $rc"; }
grep -E '^(pass|FAIL)|localized' "$tmp/out" | cut -c1-200
"$PY" - "$tmp/rep/run.json" <<'PY' || fail "llamacpp's trace"
import json, sys
doc = json.load(open(sys.argv[1]))
runs = {r["id"]: r for r in doc["results"] if r["backend"] == "llamacpp"}
assert set(runs) == {"golden.greedy.batch", "golden.greedy.batch.llama"}, sorted(runs)
for cid, r in runs.items():
    loc = r["localization"]
    assert loc["status"] in ("matched", "diverged"), (cid, loc["summary"])
    want_missing = ["embedding"] if cid.endswith(".llama") else []
    assert loc["not_given"] == want_missing, (cid, loc["not_given"])
    pts = loc["points"]
    if loc["status"] == "diverged":  # the divergent call's points up to the first past its bound
        pts = pts[: [p["point"] for p in pts].index(loc["first"]["point"]) + 1]
    for p in pts:
        if p["point"] in want_missing:
            assert p["nmse"] is None, (cid, p)
        else:
            assert p["nmse"] is not None, (cid, "point not given", p["point"])
    print("ok   %s: %s, %d points given" % (cid, loc["status"], sum(p["nmse"] is not None for p in pts)))
PY
