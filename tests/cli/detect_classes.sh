#!/usr/bin/env bash
# The bug classes the default suite let through (issue 32 items 1 and 2),
# each with a default-suite case and a must-fail twin:
#  1. Each fault (tests/backends/CMakeLists.txt 170-178, 180) fails exactly
#     the default-suite cases of its class, with the reason its class gives,
#     and passes the rest of those files: the family goldens
#     (cases/golden_family.yaml: biases dropped, rope_scaling ignored), the
#     sampler profiles (cases/sampler_profiles.yaml: five sample_ex mistakes
#     and the race in float), the model description kept (every model case
#     crashes, naming gf_model_desc).
#  2. The same files pass (or get their declared verdict) on the honest
#     backends: ref, and the example plugin with its sample_ex.
#  3. The twins (cases/detect/desc.yaml, golden_family.yaml,
#     sampler_profiles.yaml, paths.yaml) get their declared verdicts.
#  4. With --no-desc-poison the description faults pass: the poisoning, not
#     something else, is what catches them.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init detect_classes
B="$GF_BUILD/tests/backends"
so() { local f="$B/libgenfence_test_$1.so"; [[ -f $f ]] || fail "test backend $f not built"; echo "$f"; }
EX=$(so example_plugin)
C="$GF_SRC/cases"

# 1. each fault against the default-suite files: the ids that must fail (all others pass)
check_fault() { # STEM FILE EXPECTED_FAILING_IDS_RE REASON_RE
  local stem=$1 file=$2 want=$3 why=$4
  set +e
  "$GENFENCE" run "$file" --backend "$(so "$stem")" --no-triangulate --report-dir "$tmp/r_$stem" -j 1 >"$tmp/o_$stem" 2>&1
  local rc=$?
  set -e
  [[ $rc == 1 ]] || { cat "$tmp/o_$stem"; fail "$stem on $file: exit $rc, expected 1"; }
  "$PY" - "$tmp/r_$stem/run.json" "$want" "$why" "$stem" <<'PY' || { cat "$tmp/o_$stem"; fail "$stem: wrong verdicts"; }
import json, re, sys
res = json.load(open(sys.argv[1]))["results"]
want, why, stem = re.compile(sys.argv[2]), re.compile(sys.argv[3]), sys.argv[4]
bad = []
for r in res:
    failing = r["verdict"] not in ("pass", "pass-near-tie") and r.get("as_declared") is not True
    if bool(want.fullmatch(r["id"])) != failing:
        bad.append(f"{r['id']}: {r['verdict']} ({r['reason']})")
    elif failing and not why.search(r["reason"]):
        bad.append(f"{r['id']}: reason {r['reason']!r} does not match {sys.argv[3]!r}")
if not any(want.fullmatch(r["id"]) for r in res):
    bad.append("no case of the class ran")
if bad:
    print(f"{stem}:", *bad, sep="\n  ", file=sys.stderr)
    sys.exit(1)
PY
}
SLOT='backend sample slot equals engine sampler: [1-9][0-9]* of 400 rows differ'
check_fault family_no_qkv_bias "$C/golden_family.yaml" 'golden\.greedy\.batch\.qwen2' 'max \|delta\|'
check_fault family_rope_unscaled "$C/golden_family.yaml" 'golden\.greedy\.rope_(linear|llama3)' 'max \|delta\|'
check_fault example_min_p_one "$C/sampler_profiles.yaml" 'profile\.(vllm\.min_p_top_k_top_p|seed\.min_p)' "$SLOT"
check_fault example_typical_no_lse "$C/sampler_profiles.yaml" 'profile\.hf\.typical_p\.raw_logits' "$SLOT"
check_fault example_eos_ban_late "$C/sampler_profiles.yaml" 'profile\.hf\.min_new_tokens\.at' "$SLOT"
check_fault example_penalty_window "$C/sampler_profiles.yaml" 'profile\.llamacpp\.penalty_window' "$SLOT"
check_fault example_vllm_seed_order "$C/sampler_profiles.yaml" 'profile\.vllm\.min_p_top_k_top_p' "$SLOT"
check_fault sample_race_float "$C/sampler_profiles.yaml" 'sampler\.hot_logits\.race' "$SLOT"
DESC="it read the model description model_load was given .*kept a pointer into gf_model_desc"
check_fault faulty_ref_keeps_desc "$C/golden_family.yaml" 'golden\.greedy\..*' "killed by signal 11 .*$DESC"
check_fault faulty_ref_keeps_weights "$C/golden_family.yaml" 'golden\.greedy\..*' "killed by signal 11 .*$DESC"

# 2. the honest backends: every case passes or gets its declared verdict
"$GENFENCE" run "$C/golden_family.yaml" "$C/sampler_profiles.yaml" "$C/paths.yaml" --backend ref --backend "$EX" \
    -j 1 --no-triangulate --no-report >"$tmp/honest" 2>&1 || { cat "$tmp/honest"; fail "the class cases do not pass on ref and the example plugin"; }
gf_grepq -q 'profile\.vllm\.min_p_top_k_top_p \[example\]' "$tmp/honest" || fail "the profile cases did not run through the example plugin's slot"

# 3. the twins, as declared
backends=()
for f in faulty_ref_keeps_desc faulty_ref_keeps_weights family_no_qkv_bias family_rope_unscaled rope_window_wide example_min_p_one \
         example_typical_no_lse example_eos_ban_late example_penalty_window example_vllm_seed_order sample_race_float; do
  backends+=(--backend "$(so "$f")")
done
"$GENFENCE" run "$C/detect/desc.yaml" "$C/detect/golden_family.yaml" "$C/detect/sampler_profiles.yaml" "$C/detect/paths.yaml" \
    --backend ref "${backends[@]}" -j 1 --no-triangulate --no-report >"$tmp/twins" 2>&1 || { cat "$tmp/twins"; fail "a twin is not as declared"; }
n=$("$GENFENCE" list "$C/detect/desc.yaml" "$C/detect/golden_family.yaml" "$C/detect/sampler_profiles.yaml" "$C/detect/paths.yaml" --json |
    "$PY" -c 'import json, sys; print(len(json.load(sys.stdin)))')
gf_grepq -Eq "^as declared: $n of $n runs of must-fail cases" "$tmp/twins" || { cat "$tmp/twins"; fail "not all $n twins ran as declared"; }

# 4. without the poisoning the kept pointers read the caller's live description: ref's numbers
set +e
"$GENFENCE" run "$C/detect/desc.yaml" --backend "$(so faulty_ref_keeps_desc)" --backend "$(so faulty_ref_keeps_weights)" \
    --no-desc-poison --raw-verdicts -j 1 --no-triangulate --no-report >"$tmp/nopoison" 2>&1
rc=$?
set -e
[[ $rc == 0 ]] || { cat "$tmp/nopoison"; fail "--no-desc-poison: exit $rc, expected 0 (the faults compute ref's numbers)"; }
echo "detect_classes: ok"
