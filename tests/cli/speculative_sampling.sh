#!/usr/bin/env bash
# The speculative_sampling kind and the speculate slot (issue 30): the cases
# of cases/speculative_sampling.yaml pass on the engine (ref has no slot: its
# reference is judged once), through the example plugin's own rejection
# sampler and through faulty_spec_slot.c's control (157), round for round;
# every position's chi-square prints alpha and power; ten harmless variants
# (the two slot backends under five seed shifts) pass; each of the four
# rejection-sampler faults (153-156) fails its twin and the shipped cases
# with the round, the position and what was accepted named; bad keys are
# refused with FILE:LINE.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init speculative_sampling
cd "$GF_SRC"
B="$GF_BUILD/tests/backends"
so() { # the test backend of fault NUM
    local stem
    stem=$(grep -o "^gf_test_fault($1 [a-z_0-9]*" "$GF_SRC/tests/backends/CMakeLists.txt" | awk '{print $2}')
    [ -f "$B/libgenfence_test_$stem.so" ] || fail "fault $1: test backend $B/libgenfence_test_$stem.so not built"
    echo "$B/libgenfence_test_$stem.so"
}
cases=cases/speculative_sampling.yaml
n_cases=$("$GENFENCE" list $cases --json | "$PY" -c 'import json,sys; print(len(json.load(sys.stdin)))')
[ "$n_cases" -ge 8 ] || fail "$cases has $n_cases cases"

# 1. the engine's reference, the plugin's slot and the control's slot pass every case
"$GENFENCE" run $cases --backend ref --backend "$(so 83)" --backend "$(so 157)" --report-dir "$tmp/ok" >"$tmp/ok.out" 2>&1 ||
    { cat "$tmp/ok.out"; fail "$cases: exit $?, want 0"; }
"$PY" - "$tmp/ok/run.json" "$n_cases" <<'PY' || fail "the honest run's records"
import json, sys
r = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
by = {}
for x in r["results"]:
    assert x["verdict"] == "pass", (x["id"], x["backend"], x["verdict"], x.get("reason"))
    by.setdefault(x["backend"], []).append(x)
assert sorted(by) == ["engine", "example", "ref-spec-slot"], sorted(by)  # ref has no slot: the engine stands for it
slot_backs = {b["name"]: b for b in r["backends"]} if isinstance(r.get("backends"), list) else {}
for b, xs in by.items():
    assert len(xs) == n, (b, len(xs))
    for x in xs:
        m = x["metrics"]
        checks = {c["name"]: c for c in x["checks"]}
        eq = "backend speculate slot equals the engine's rejection sampler"
        if b == "engine":
            assert eq not in checks and m["rejection_sampler"].startswith("engine ("), (b, m["rejection_sampler"])
        else:
            assert checks[eq]["passed"] and m["slot_rounds_differing"] == 0, (b, x["id"])
        assert 0 < m["alpha_per_test"] <= m["alpha"] <= 1e-4, m
        for p in m["positions"]:
            if p["rounds_reaching"] >= 50:
                assert "power" in p and 0 <= p["power"] <= 1 and p["p_value"] >= m["alpha_per_test"], (x["id"], p)
        pos = {p["position"]: p for p in m["positions"]}
        if x["id"] == "specsample.greedy.deterministic":  # argmax 0, 1 drafted, then 0 where the argmax is 3
            assert pos[0]["accepted"] == pos[1]["accepted"] == m["rounds"] and pos[2]["accepted"] == 0, pos
        if x["id"] == "specsample.adversarial.vllm":  # half the draft's mass is where top-k left the target none
            assert pos[0]["accepted_expected"] < 0.6 * m["rounds"], pos[0]
print("honest: %d runs on %s" % (len(r["results"]), ", ".join(sorted(by))))
PY

# 2. ten harmless variants: the two slot backends under five seed shifts
for off in 0 1 2 3 4; do
    sed -E "s/^    seed: ([0-9]+)/    seed: \1$off/" $cases >"$tmp/shift$off.yaml"
    [ $off = 0 ] || ! cmp -s $cases "$tmp/shift$off.yaml" || fail "seed shift $off changed nothing"
    "$GENFENCE" run "$tmp/shift$off.yaml" --backend "$(so 83)" --backend "$(so 157)" --report-dir "$tmp/v$off" \
        >"$tmp/v$off.out" 2>&1 || { cat "$tmp/v$off.out"; fail "harmless variant (seed shift $off): exit $?"; }
    grep -q "^total: $((2 * n_cases)) passed, 0 failed" "$tmp/v$off.out" || { cat "$tmp/v$off.out"; fail "seed shift $off"; }
done

# 3. each rejection-sampler fault fails its twin (as declared: exit 0) and the shipped cases
# (--raw-verdicts: exit 1), naming the round, the position and what was accepted
for f in 153 154 155 156; do
    "$GENFENCE" run cases/detect/speculative_sampling.yaml --backend "$(so $f)" --report-dir "$tmp/d$f" >"$tmp/d$f.out" 2>&1 ||
        { cat "$tmp/d$f.out"; fail "fault $f: its twin is not as declared"; }
    grep -Eq "^FAIL +detect\.specsample\.[a-z0-9_]+ .*as declared" "$tmp/d$f.out" || { cat "$tmp/d$f.out"; fail "fault $f: no FAIL"; }
    set +e
    "$GENFENCE" run $cases --backend "$(so $f)" --report-dir "$tmp/s$f" >"$tmp/s$f.out" 2>&1
    rc=$?
    set -e
    [ $rc = 1 ] || { cat "$tmp/s$f.out"; fail "fault $f on $cases: exit $rc, want 1"; }
done
"$PY" - "$tmp" <<'PY' || fail "the faults' messages"
import json, sys
t = sys.argv[1]
want = {  # the statistical check each fault fails besides the round-for-round one
    153: "acceptance where it is certain",
    154: "position 1: emitted tokens follow the target's distribution",
    155: "position 0: emitted tokens follow the target's distribution",
    156: "draft tokens accepted with probability min(1, p/q)",
}
for f, check in want.items():
    x = [x for x in json.load(open("%s/d%d/run.json" % (t, f)))["results"] if x["backend"] != "engine" and x["verdict"] == "fail"]
    assert len(x) == 1, (f, len(x))
    failed = {c["name"]: c["detail"] for c in x[0]["checks"] if not c["passed"]}
    eq = failed.get("backend speculate slot equals the engine's rejection sampler", "")
    assert "round " in eq and "accepted" in eq and ("position " in eq or "bonus" in eq), (f, eq)
    assert any(check in n for n in failed), (f, sorted(failed))
    runs = [x for x in json.load(open("%s/s%d/run.json" % (t, f)))["results"] if x["backend"] != "engine"]
    failing = [x["id"] for x in runs if x["verdict"] == "fail"]
    assert len(failing) >= 4, (f, failing)
print("faults 153-156: each fails its twin and %s" % "the shipped cases")
PY

# 4. bad keys: FILE:LINE, exit 2
bad() { # NAME YAML-BODY EXPECTED-TEXT
    printf 'cases:\n  - id: bad.%s\n    kind: speculative_sampling\n%s\n' "$1" "$2" >"$tmp/bad_$1.yaml"
    set +e
    "$GENFENCE" run "$tmp/bad_$1.yaml" --backend ref >"$tmp/bad_$1.out" 2>&1
    local rc=$?
    set -e
    [ $rc = 2 ] || { cat "$tmp/bad_$1.out"; fail "bad key $1: exit $rc, want 2"; }
    grep -q "bad_$1.yaml:[0-9]*:[0-9]*: .*$3" "$tmp/bad_$1.out" || { cat "$tmp/bad_$1.out"; fail "bad key $1: no FILE:LINE: $3"; }
}
T='    target: [[1, 0, 0], [0, 1, 0]]'
bad one_row '    target: [[1, 0, 0]]' "K + 1 rows"
bad probs_shape "$T
    draft: given
    draft_probs: [[0.5, 0.5]]" "'draft_probs' is 1 x 2"
bad tokens_kind "$T
    draft_tokens: [0]" "goes with draft: deterministic"
bad det_no_tokens "$T
    draft: deterministic" "needs 'draft_tokens'"
bad token_range "$T
    draft: deterministic
    draft_tokens: [3]" "outside \[0, V 3)"
bad profile_filter "$T
    min_p: 0.1" "'min_p' is no key of speculative_sampling"
bad alpha "$T
    alpha: 1.5" "'alpha' must lie in"
bad rule "$T
    rule: mlx" "rule"
bad nan_logit '    target: [[1, .nan, 0], [0, 1, 0]]' "logits are finite or -inf"
echo "ok: speculative_sampling"
