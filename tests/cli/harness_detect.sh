#!/usr/bin/env bash
# The harness's power to catch bugs (issue: detection tests). Every must-fail
# case in cases/detect/ fails with its expected verdict: wrong kept sets and
# positions, faulty test backends (tests/backends: a corrupted cache entry, an
# ignored key mask, a crash, a hang), a missing model (error, exit 2). Every
# kind has a failing case; failures print a reproduce line that fails alone
# and write the logits of both sides; the same model cases pass on `ref`.
# Judged by their declarations (the default), the run of cases/detect is "as
# declared", exit 0; --raw-verdicts gives the verdicts' own exit status.
set -euo pipefail
: "${GENFENCE:?set GENFENCE to the genfence binary}" "${GF_SRC:?set GF_SRC}" "${GF_BUILD:?set GF_BUILD}"
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init harness_detect

# The model: models/holmes-gpt, or (before it is trained) a random GPT-2 of
# the same shape with the project's tokenizer.
if [[ ! -f "$GF_SRC/models/holmes-gpt/model.safetensors" ]]; then
  mkdir -p "$tmp/root/models/holmes-gpt"
  "$PY" - "$tmp/root/models/holmes-gpt" <<'PY'
import sys, torch
from transformers import GPT2Config, GPT2LMHeadModel
torch.manual_seed(0)
c = GPT2Config(vocab_size=512, n_positions=128, n_embd=128, n_layer=4, n_head=4,
               activation_function="gelu_new", bos_token_id=511, eos_token_id=511)
GPT2LMHeadModel(c).save_pretrained(sys.argv[1], safe_serialization=True)
PY
  cp "$GF_SRC/models/holmes-gpt/tokenizer.json" "$tmp/root/models/holmes-gpt/"
  ln -s "$GF_SRC/cases" "$tmp/root/cases"
  export GENFENCE_ROOT="$tmp/root"
  echo "harness_detect: models/holmes-gpt not trained yet; using a random model of its shape"
fi

B="$GF_BUILD/tests/backends"
for f in ref_bad_cache ref_no_mask ref_crash ref_hang ref_short_window ref_row_mix; do
  [[ -f "$B/libgenfence_test_$f.so" ]] || fail "test backend $B/libgenfence_test_$f.so not built"
done
# ref-hang runs its case (detect.runner.hang) alone, below
backends=(--backend ref --backend "$B/libgenfence_test_ref_bad_cache.so" --backend "$B/libgenfence_test_ref_no_mask.so"
          --backend "$B/libgenfence_test_ref_crash.so"
          --backend "$B/libgenfence_test_ref_short_window.so" --backend "$B/libgenfence_test_ref_row_mix.so")
# the one fault model (cases/detect/faults.yaml) and the declared dtype
# (cases/detect/dtype.yaml), tests/backends/faulty.c
for f in ref_nan ref_bad_length ref_oom ref_bf16_as_fp32 ref_noop_reset ref_bad_bytes ref_half_bytes ref_no_own_key \
         ref_write_past ref_write_before ref_write_page ref_write_tokens ref_sample_past ref_sample_ex_history ref_write_desc; do # + guards.yaml (faulty_write.c)
  [[ -f "$B/libgenfence_test_faulty_$f.so" ]] || fail "test backend $B/libgenfence_test_faulty_$f.so not built"
  backends+=(--backend "$B/libgenfence_test_faulty_$f.so")
done
# the mechanism probes' faults (cases/detect/probes.yaml): patches 47-49, 81; the refusal 82 (faulty.c); the
# silent fallback 212 (faulty_path.c). (210, 211 share detect.trace.cache.llama with ref-bad-cache: trace_faults runs them)
for f in ref_attn_no_max ref_rope_off_by_one ref_rms_eps_outside ref_head_dim_80 faulty_ref_refuse_dh80 \
         faulty_ref_fallback_dh80; do
  [[ -f "$B/libgenfence_test_$f.so" ]] || fail "test backend $B/libgenfence_test_$f.so not built"
  backends+=(--backend "$B/libgenfence_test_$f.so")
done
# logit noise under fp32 and q8_0 declarations, under the calibrated KL-mean test, and at a few positions only
# (the tails' exceedance tests) (cases/detect/statistical.yaml, tests/backends/faulty_noise.c)
for f in ref_noise ref_noise_q8_0 ref_noise_small ref_spike; do
  [[ -f "$B/libgenfence_test_faulty_$f.so" ]] || fail "test backend $B/libgenfence_test_faulty_$f.so not built"
  backends+=(--backend "$B/libgenfence_test_faulty_$f.so")
done
# the invariance kind's negative controls (cases/detect/invariance.yaml, tests/backends/faulty_invariance.c)
for f in batch position mixed threads split process prefix; do
  [[ -f "$B/libgenfence_test_ref_inv_$f.so" ]] || fail "test backend $B/libgenfence_test_ref_inv_$f.so not built"
  backends+=(--backend "$B/libgenfence_test_ref_inv_$f.so")
done
# the speculative kinds' twins (cases/detect/speculative.yaml, speculative_sampling.yaml): faulty_spec.c's
# drift and argmax faults, faulty_spec_slot.c's rejection samplers
for f in ref_spec_late_drift ref_spec_top_down ref_spec_draft0_unverified ref_spec_bonus_row ref_spec_no_renorm \
         ref_spec_ratio_inverted; do
  [[ -f "$B/libgenfence_test_$f.so" ]] || fail "test backend $B/libgenfence_test_$f.so not built"
  backends+=(--backend "$B/libgenfence_test_$f.so")
done
# a backend sample slot with one bug each (cases/detect/sample_slot.yaml, multi_sample.yaml: one_stream;
# tests/backends/faulty_sample.c)
for f in top_p_gt tie_high no_max topk_ties temp_late one_stream; do
  [[ -f "$B/libgenfence_test_sample_$f.so" ]] || fail "test backend $B/libgenfence_test_sample_$f.so not built"
  backends+=(--backend "$B/libgenfence_test_sample_$f.so")
done
# issue 32's classes (cases/detect/desc.yaml, golden_family.yaml, sampler_profiles.yaml;
# faulty_desc.c, faulty_family.c, the example plugin's sample_ex bugs, the race in float)
for f in faulty_ref_keeps_desc faulty_ref_keeps_weights family_no_qkv_bias family_rope_unscaled rope_window_wide example_min_p_one \
         example_typical_no_lse example_eos_ban_late example_penalty_window example_vllm_seed_order sample_race_float; do
  [[ -f "$B/libgenfence_test_$f.so" ]] || fail "test backend $B/libgenfence_test_$f.so not built"
  backends+=(--backend "$B/libgenfence_test_$f.so")
done

# a backend logprobs slot reporting before temperature (cases/detect/logprobs.yaml, fault 264); an uncached
# prefill's logits one position late (cases/detect/prompt_logprobs.yaml, fault 265)
for f in example_lp_before_t faulty_ref_prefill_late; do
  [[ -f "$B/libgenfence_test_$f.so" ]] || fail "test backend $B/libgenfence_test_$f.so not built"
  backends+=(--backend "$B/libgenfence_test_$f.so")
done

# the precision fingerprint's twins (cases/detect/precision.yaml, faults 240-241) and the early-garbage
# guard's (detect.statistical.kv_bad_k_scale, fault 243)
for f in ref_gelu_f16 faulty_ref_kv_declared_q8 ref_kv_q8_bad_k_scale; do
  [[ -f "$B/libgenfence_test_$f.so" ]] || fail "test backend $B/libgenfence_test_$f.so not built"
  backends+=(--backend "$B/libgenfence_test_$f.so")
done

# the example plugin's sampler with one filter bug each (cases/detect/sampler_mutants.yaml, faults 250-263)
for f in $(grep -o '^gf_test_fault(2[56][0-9] example_mut_[a-z_0-9]*' "$GF_SRC/tests/backends/CMakeLists.txt" | awk '{print $2}'); do
  [[ -f "$B/libgenfence_test_$f.so" ]] || fail "test backend $B/libgenfence_test_$f.so not built"
  backends+=(--backend "$B/libgenfence_test_$f.so")
done

# Every case but the hang under the default --timeout (a loaded machine, a
# sanitizer build: no fail, crash or error may turn into a timeout); the hang
# (the one case whose verdict is timeout) in a run of its own under a short one.
# No triangulation: this test does not read it (tests/cli/triangulation.sh
# does), and without the short timeout its probes of every backend on every
# model take minutes.
"$GENFENCE" list "$GF_SRC/cases/detect" --json >"$tmp/detect.json"
hang_id='detect.runner.hang'
not_hang=$("$PY" - "$tmp/detect.json" "$hang_id" <<'PY'
import json, re, sys
ids = [c["id"] for c in json.load(open(sys.argv[1]))]
assert sys.argv[2] in ids, sys.argv[2]
assert all(re.fullmatch(r"[A-Za-z0-9_.-]+", i) for i in ids), ids
print("^(" + "|".join(i.replace(".", "\\.") for i in ids if i != sys.argv[2]) + ")$")
PY
)
set +e
"$GENFENCE" run "$GF_SRC/cases/detect" "${backends[@]}" --filter "$not_hang" -j 1 --no-triangulate --report-dir "$tmp/rep" >"$tmp/out" 2>&1
rc=$?
set -e
cat "$tmp/out"
# judged by their declarations (the default): every case as declared, exit 0
[[ $rc == 0 ]] || fail "exit status $rc, expected 0 (every must-fail case as declared)"
grep -Eq '^as declared: ([0-9]+) of \1 runs of must-fail cases got the verdict their case declares' "$tmp/out" ||
  fail "no 'as declared' line"
gf_total "$tmp/out" | gf_grepq -Eqx '[1-9][0-9]* passed, 0 failed, 0 skipped' || fail "bad total: $(gf_total "$tmp/out")"
tail -n 1 "$tmp/out" | gf_grepq -Eq "$GF_LAST_LINE_RE" || fail "bad summary line: $(tail -n 1 "$tmp/out")"
! tail -n 1 "$tmp/out" | gf_grepq -Eq ' [1-9][0-9]* failed' || fail "a failure on the last line: $(tail -n 1 "$tmp/out")"
set +e
"$GENFENCE" run "$GF_SRC/cases/detect" --backend "$B/libgenfence_test_ref_hang.so" --filter '^detect\.runner\.hang$' --raw-verdicts \
    --timeout $((10 * ${GF_TIME_SCALE:-1})) -j 1 --report-dir "$tmp/rep_hang" >"$tmp/out_hang" 2>&1
rc=$?
set -e
cat "$tmp/out_hang"
[[ $rc == 1 ]] || fail "$hang_id: exit status $rc, expected 1"
tail -n 1 "$tmp/out_hang" | gf_grepq -qx 'ref-hang: 0 passed, 1 failed, 0 skipped' || fail "$hang_id: bad summary line: $(tail -n 1 "$tmp/out_hang")"

"$GENFENCE" list --kinds | grep -o '^[a-z_][a-z_]* ' | tr -d ' ' >"$tmp/kinds"
"$PY" - "$tmp/rep" "$tmp/kinds" "$tmp/detect.json" "$tmp/rep_hang" <<'PY'
import json, os, re, struct, sys
import xml.etree.ElementTree as ET
reps = [sys.argv[1], sys.argv[4]]
all_kinds = set(open(sys.argv[2]).read().split())
doc = {"results": [r for rep in reps for r in json.load(open(os.path.join(rep, "run.json")))["results"]]}
errors = []
# each must-fail case declares its verdict (expect_verdict:) and the faulty
# backend it runs on (backends:) in cases/detect/*.yaml
expected, backend_of = {}, {}
for c in json.load(open(sys.argv[3])):
    case = c["case"]
    if "expect_verdict" not in case:
        errors.append(f"{c['id']}: declares no expect_verdict")
    expected[c["id"]] = case.get("expect_verdict")
    backend_of[c["id"]] = case.get("backends", ["ref"])
got = {}
for r in doc["results"]:
    if r["id"] in got:
        errors.append(f"{r['id']} ran twice ({got[r['id']]['backend']}, {r['backend']})")
    got[r["id"]] = r
for cid, verdict in expected.items():
    r = got.get(cid)
    if r is None:
        errors.append(f"{cid}: did not run")
        continue
    if r["verdict"] != verdict:
        errors.append(f"{cid}: verdict {r['verdict']} ({r['reason']}), expected {verdict}")
    if r.get("expect_verdict") != verdict:
        errors.append(f"{cid}: the report's expect_verdict is {r.get('expect_verdict')}, the case's {verdict}")
    # ref has no sample slot: a kind that reaches no slot of it runs on the engine
    if r["backend"] not in backend_of[cid] and not (r["backend"] == "engine" and "ref" in backend_of[cid]):
        errors.append(f"{cid}: ran on {r['backend']}")
    # runnable as printed: the binary's absolute path (tests/cli/honest_replay.sh replays them)
    if not re.match(r"^'?/\S*genfence'? run ", r.get("reproduce", "")):
        errors.append(f"{cid}: no reproduce line")
for cid in got:
    if cid not in expected:
        errors.append(f"{cid}: not a case of cases/detect")
if not all_kinds:
    errors.append("genfence list --kinds listed no kinds")
# every kind can fail
kinds = {r["kind"] for r in doc["results"] if r["verdict"] == "fail"}
if all_kinds - kinds:
    errors.append(f"kinds without a failing detection case: {sorted(all_kinds - kinds)}")
# failing comparisons carry both sides' logits
compared = [cid for cid, r in got.items() if r["verdict"] == "fail" and r["backend"] in ("ref-bad-cache", "ref-no-mask")
            and "summary" in r.get("metrics", {})]
if not compared:
    errors.append("no comparison failed on a faulty backend")
for cid in compared:
    r = got.get(cid, {})
    arts = [a for a in r.get("artifacts", []) if isinstance(a, str)]
    if not arts:
        errors.append(f"{cid}: no logits written")
    for a in arts:
        with open(a, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            hdr = json.loads(f.read(n))
        for t in ("reference", "test"):
            if t not in hdr or hdr[t]["dtype"] != "F32" or hdr[t]["shape"] != [512]:
                errors.append(f"{a}: tensor {t} missing or not F32 (512)")
        if "step" not in hdr.get("__metadata__", {}):
            errors.append(f"{a}: no step in the metadata")
    s = r.get("metrics", {}).get("summary", {})
    for key in ("max_abs_delta", "max_delta_step", "min_margin", "safety_factor", "near_ties"):
        if key not in s:
            errors.append(f"{cid}: summary metric {key} missing")
# JUnit agrees (the two runs' files together)
roots = [ET.parse(os.path.join(rep, "junit.xml")).getroot() for rep in reps]
cases = [c for root in roots for c in root.findall(".//testcase")]
if len(cases) != len(doc["results"]):
    errors.append(f"junit has {len(cases)} testcases, the JSON report {len(doc['results'])}")
# judged by their declarations, the main run's cases are passing testcases (each as declared);
# the hang's run (--raw-verdicts) keeps the verdict's element: a timeout is <error>
if (roots[0].get("failures"), roots[0].get("errors")) != ("0", "0"):
    errors.append(f"junit of the run as declared: failures {roots[0].get('failures')}, errors {roots[0].get('errors')}")
if (roots[1].get("failures"), roots[1].get("errors")) != ("0", "1"):
    errors.append(f"junit of the hang (--raw-verdicts): failures {roots[1].get('failures')}, errors {roots[1].get('errors')}")
main = json.load(open(os.path.join(reps[0], "run.json")))["results"]
not_declared = [r["id"] for r in main if r.get("as_declared") is not True]
if not_declared:
    errors.append(f"results not as declared in run.json: {not_declared}")
if errors:
    print("\n".join(errors), file=sys.stderr)
    sys.exit(1)
print(f"harness_detect: {len(expected)} detection cases, verdicts as expected; every kind fails somewhere")
PY

# A reproduce line runs that failure alone: the same FAIL, as declared (exit 0); with --raw-verdicts exit 1.
rep_line=$(grep -m1 "reproduce: .*detect\\\\.cache\\\\.bad_cache\\$" "$tmp/out" | sed 's/^ *reproduce: //')
[[ -n "$rep_line" ]] || fail "no reproduce line for detect.cache.bad_cache"
rep_line=${rep_line/#genfence /\"\$GENFENCE\" }
set +e
eval "$rep_line --no-report" >"$tmp/out2" 2>&1
rc=$?
eval "$rep_line --no-report --raw-verdicts" >"$tmp/out2r" 2>&1
rc_raw=$?
set -e
[[ $rc == 0 ]] || { cat "$tmp/out2"; fail "reproduce line exited $rc, expected 0 (as declared)"; }
grep -q '^FAIL .*detect\.cache\.bad_cache .*as declared' "$tmp/out2" || { cat "$tmp/out2"; fail "the reproduce line's verdict is not FAIL"; }
tail -n 1 "$tmp/out2" | gf_grepq -qx 'ref-bad-cache: 1 passed, 0 failed, 0 skipped' || fail "reproduce summary: $(tail -n 1 "$tmp/out2")"
[[ $rc_raw == 1 ]] || { cat "$tmp/out2r"; fail "reproduce line with --raw-verdicts exited $rc_raw, expected 1"; }
tail -n 1 "$tmp/out2r" | gf_grepq -qx 'ref-bad-cache: 0 passed, 1 failed, 0 skipped' || fail "reproduce summary: $(tail -n 1 "$tmp/out2r")"

# Specificity: the same model cases pass on the correct backend.
sed -e 's/backends: \[ref-bad-cache\]/backends: [ref]/' -e 's/backends: \[ref-no-mask\]/backends: [ref]/' \
    "$GF_SRC/cases/detect/model.yaml" >"$tmp/model_on_ref.yaml"
sed -e 's/backends: \[ref-bad-cache\]/backends: [ref]/' -e 's/backends: \[ref-no-mask\]/backends: [ref]/' \
    "$GF_SRC/cases/detect/golden.yaml" >"$tmp/golden_on_ref.yaml"
spec=(--filter '^detect\.(cache|batch|seeded|golden)\.')
n_spec=$("$GENFENCE" list "$tmp/model_on_ref.yaml" "$tmp/golden_on_ref.yaml" "${spec[@]}" --json | "$PY" -c 'import json, sys; print(len(json.load(sys.stdin)))')
[[ $n_spec -gt 0 ]] || fail "no faulty-backend cases to run on ref"
"$GENFENCE" run "$tmp/model_on_ref.yaml" "$tmp/golden_on_ref.yaml" --backend ref --no-report --raw-verdicts \
    "${spec[@]}" >"$tmp/out3" 2>&1 || { cat "$tmp/out3"; fail "the faulty-backend cases do not pass on ref"; }
tail -n 1 "$tmp/out3" | gf_grepq -qx "ref: $n_spec passed, 0 failed, 0 skipped" || fail "on ref: $(tail -n 1 "$tmp/out3")"
echo "harness_detect: ok"
