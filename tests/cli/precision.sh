#!/usr/bin/env bash
# The precision fingerprint (issue 31 item 4, docs/cases.md "precision"):
# cases/precision.yaml passes on the correct backends (ref against a second
# ref session, openblas and onednn where they run here, the example plugin) and on
# an honest q8_0 KV cache (ref-kv-q8: its rows stored through q8_0 blocks,
# declared); cases/detect/precision.yaml fails its two twins as declared,
# each with its reading: a GPT-2 GELU through fp16 under a declared fp32
# (ref-gelu-f16) computes like f16 at layer 0's MLP output, and an f32 cache
# declared q8_0 (ref-kv-declared-q8) stores finer than declared. The
# fingerprint (every point's NMSE as an effective unit roundoff) is in
# run.json.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init precision
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
B="$GF_BUILD/tests/backends"
for f in example_plugin ref_kv_q8 ref_gelu_f16 faulty_ref_kv_declared_q8; do
  [[ -f "$B/libgenfence_test_$f.so" ]] || fail "test backend $B/libgenfence_test_$f.so not built"
done
cd "$GF_SRC"
bes=(--backend ref --backend "$B/libgenfence_test_example_plugin.so" --backend "$B/libgenfence_test_ref_kv_q8.so")
for be in openblas onednn; do
  if "$GENFENCE" backends --backend "$be" 2>/dev/null | gf_grepq -Eq "^$be +available"; then
    bes+=(--backend "$be")
  else
    echo "note: $be does not run here; its precision is not checked"
  fi
done
rc=0
"$GENFENCE" run cases/precision.yaml "${bes[@]}" --no-triangulate --report-dir "$tmp/ok" >"$tmp/ok.out" 2>&1 || rc=$?
[[ $rc -eq 0 ]] || { cat "$tmp/ok.out"; fail "correct backends: exit $rc, not 0"; }
n=$(grep -cE '^pass +precision\.' "$tmp/ok.out" || true)
[[ $n -eq $((2 * ${#bes[@]} / 2)) ]] || { cat "$tmp/ok.out"; fail "$n precision passes, want $((2 * ${#bes[@]} / 2))"; }
gf_grepq -Eq '^pass +precision\.holmes-llama \[ref-kv-q8\] +2/2 checks' <"$tmp/ok.out" ||
  fail "the honest q8_0 cache was not judged on its floor (2 checks)"
"$PY" - "$tmp/ok/run.json" <<'PY' || fail "run.json: the fingerprint"
import json, sys
doc = json.load(open(sys.argv[1]))
for r in doc["results"]:
    if r["verdict"] != "pass":
        continue
    m = r["metrics"]
    fp = m["fingerprint"]
    assert fp and all("point" in p for p in fp), (r["backend"], fp)
    ue = [p["u_effective"] for p in fp if "u_effective" in p]
    assert ue, r["backend"]
    # u_effective reads a point's NMSE as the unit roundoff of (p + 1) W roundings
    # (the bound's model, localize.h): one storage rounding reads far finer
    if r["backend"] == "ref-kv-q8":  # its keys and values carry q8_0's rounding: far above any fp32 point's
        kv = [p["u_effective"] for p in fp if "keys and values" in p["point"]]
        assert kv and min(kv) > 2 ** -20, kv
        assert m["kv_floor"]["largest_nmse"] >= m["kv_floor"]["floor"], m["kv_floor"]
    else:  # fp32 backends: every point at most a quarter of fp32's u (1/16 of its bound)
        assert max(ue) < 2 ** -26, (r["backend"], max(ue))
print("ok   run.json: the fingerprint of %d passing results" % sum(r["verdict"] == "pass" for r in doc["results"]))
PY
echo "ok   correct backends and the honest q8_0 cache pass"

rc=0
"$GENFENCE" run cases/detect/precision.yaml --backend "$B/libgenfence_test_ref_gelu_f16.so" \
  --backend "$B/libgenfence_test_faulty_ref_kv_declared_q8.so" --no-triangulate --report-dir "$tmp/bad" >"$tmp/bad.out" 2>&1 || rc=$?
[[ $rc -eq 0 ]] || { cat "$tmp/bad.out"; fail "the twins: exit $rc, not 0 (each fails as declared)"; }
line() { awk -v c="$1" 'index($0, c) && /^FAIL/ {on = 1; next} on && /^[^ ]/ {exit} on {print}' "$tmp/bad.out"; }
line "detect.precision.gelu_f16 [ref-gelu-f16]" |
  gf_grepq -Eq 'declared fp32 .*: layer 0 MLP output computes like f16 / tf32 or coarser \(NMSE [0-9.e+-]+ > bound' ||
  { cat "$tmp/bad.out"; fail "ref-gelu-f16: not read as f16 at layer 0's MLP output"; }
line "detect.precision.gelu_f16 [ref-gelu-f16]" | gf_grepq -q 'localized: first divergence at layer 0 MLP output' ||
  fail "ref-gelu-f16: the localization line is missing"
line "detect.precision.kv_declared_q8 [ref-kv-declared-q8]" |
  gf_grepq -q 'declared KV cache q8_0 .*the cache stores finer than declared' || { cat "$tmp/bad.out"; fail "ref-kv-declared-q8: not read as stored finer"; }
! line "detect.precision.kv_declared_q8 [ref-kv-declared-q8]" | grep -q 'localized:' ||
  fail "ref-kv-declared-q8: a localization line where no point is past its bound"
echo "ok   the twins fail as declared, each with its reading"
