#!/usr/bin/env bash
# The uncached crop at exactly n_positions (issue 11, item 6): context_limit
# checks that at every step of the uncached loop whose sequence holds
# n_positions tokens or more, the loop's logits are those of exactly its last
# n_positions tokens (renumbered from 0), computed through a fresh cache.
# ref-short-window (tests/backends: an uncached forward over T = n_positions
# sees one key fewer, a window one position short) passed every check before
# (stop reasons and token counts cannot see it) and must fail it now; ref
# passes, and the delta a one-short window would have on this model is far
# above the tolerance (the check can see it).
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init uncached_crop
[[ -f "$GF_SRC/models/holmes-gpt/model.safetensors" ]] || { echo "uncached_crop: models/holmes-gpt not trained; nothing to run"; exit 0; }
short="$GF_BUILD/tests/backends/libgenfence_test_ref_short_window.so"
[[ -f "$short" ]] || fail "test backend $short not built"
sed 's/backends: \[ref-short-window\]/backends: [ref]/' "$GF_SRC/cases/detect/crop_rows.yaml" >"$tmp/on_ref.yaml"
"$GENFENCE" run --raw-verdicts "$GF_SRC/cases/generation.yaml" "$tmp/on_ref.yaml" --filter '^(context\.limit|detect\.context_limit\..*)$' \
    --backend ref --no-triangulate --report-dir "$tmp/ok" >"$tmp/ok.out" 2>&1 || { cat "$tmp/ok.out"; fail "ref does not pass"; }
set +e
"$GENFENCE" run --raw-verdicts "$GF_SRC/cases/detect/crop_rows.yaml" --filter '^detect\.context_limit\.' --backend "$short" \
    --no-triangulate --report-dir "$tmp/bad" >"$tmp/bad.out" 2>&1
rc=$?
set -e
cat "$tmp/bad.out"
[[ $rc == 1 ]] || fail "ref-short-window: exit $rc, expected 1"
"$PY" - "$tmp" <<'PY'
import json, sys
CHECK = "uncached crop keeps exactly n_positions tokens"
errors = []
ok = json.load(open(sys.argv[1] + "/ok/run.json"))["results"]
if len(ok) != 2:
    errors.append(f"{len(ok)} runs on ref, expected 2")
for r in ok:
    m, c = r["metrics"], {c["name"]: c for c in r["checks"]}
    if r["verdict"] != "pass" or not c.get(CHECK, {}).get("passed") or m.get("crop_steps_checked", 0) < 1:
        errors.append(f"{r['id']} [ref]: {r['verdict']}, check {c.get(CHECK)}, metrics {m.get('crop_steps_checked')}")
    elif not m.get("one_short_delta", 0) > 1e-2:
        errors.append(f"{r['id']}: a one-short window moves the logits by only {m.get('one_short_delta')}")
    else:
        print(f"ok   {r['id']} [ref]: {m['crop_steps_checked']} crop steps equal the cached decode; "
              f"a one-short window would move them by {m['one_short_delta']:.3g}")
for r in json.load(open(sys.argv[1] + "/bad/run.json"))["results"]:
    failed = [c["name"] for c in r["checks"] if not c["passed"]]
    if r["verdict"] != "fail" or failed != [CHECK] or not r["reason"].startswith(CHECK):
        errors.append(f"{r['id']} [ref-short-window]: {r['verdict']}, failed {failed}, reason {r['reason']!r}")
    else:
        print(f"ok   {r['id']} [ref-short-window]: fails the crop check")
if errors:
    print("\n".join("FAIL: " + e for e in errors), file=sys.stderr)
    sys.exit(1)
PY
echo "uncached_crop: ok"
