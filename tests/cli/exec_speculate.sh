#!/usr/bin/env bash
# The protocol's speculate message end to end (docs/protocol.md, "speculate";
# docs/speculative.md): a client announcing hello feature bit 4 gives the
# exec backend the speculate slot, and genfence's speculative kinds judge the
# client's own rejection sampler over the wire.
#  1. cases/speculative_sampling.yaml passes on echo_ref (C) and on a Python
#     gfproto client (tests/backends/exec/spec_client.py), every case ON the
#     exec backend, round for round against the engine;
#  2. the Python client drawing the bonus token from row K-1 fails (verdict
#     fail, the round-for-round check names the rounds), and a short reply or
#     an accepted count past K is a protocol failure saying so;
#  3. a client without bit 4 gives the table no slot (the engine alone runs);
#  4. cases/speculative.yaml's scripted loops on echo_ref are decided by the
#     slot (metric loop_acceptance), each round checked against the argmax.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init exec_speculate
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
ECHO="$GF_BUILD/tools/echo_ref"
[[ -x "$ECHO" ]] || fail "$ECHO not built"
SC="$PY $GF_SRC/tests/backends/exec/spec_client.py"
cd "$GF_SRC"
n_cases=$("$GENFENCE" list cases/speculative_sampling.yaml --json | "$PY" -c 'import json,sys; print(len(json.load(sys.stdin)))')
[ "$n_cases" -ge 8 ] || fail "cases/speculative_sampling.yaml has $n_cases cases"

# check_ss RUN.json WANT: every speculative_sampling case ran on the exec
# backend through its speculate slot; WANT pass: each passed, round for round
check_ss() {
    "$PY" - "$1" "$n_cases" "$2" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1]))
n, want = int(sys.argv[2]), sys.argv[3]
SLOT = "backend speculate slot equals the engine's rejection sampler"
(be,) = r["backends"]
assert be["name"] == "exec" and be["speculate_slot"] is True, be
res = r["results"]
assert len(res) == n, (len(res), n)
fails = []
for x in res:
    assert x["backend"] == "exec" and x["backend_requested"].startswith("exec:"), (x["id"], x["backend"])
    assert x["metrics"]["rejection_sampler"] == "engine + backend speculate slot, round for round", x["metrics"]
    (c,) = [c for c in x["checks"] if c["name"] == SLOT]
    if want == "pass":
        assert x["verdict"] == "pass", (x["id"], x["verdict"], x["reason"])
        assert c["passed"] and re.match(r"0 of [1-9]\d* rounds differ, 0 failed", c["detail"]), (x["id"], c)
    elif x["verdict"] != "pass":
        assert x["verdict"] == "fail", (x["id"], x["verdict"], x["reason"])
        assert not c["passed"] and re.match(r"[1-9]\d* of \d+ rounds differ", c["detail"]), (x["id"], c)
        assert "the slot accepted" in c["detail"], c["detail"]
        fails.append(x["id"])
if want == "fail":
    assert "specsample.good.seed" in fails, fails
    assert len(fails) >= n - 1, fails  # greedy.deterministic never accepts all K: its bonus is never drawn
    print("bad bonus: %d of %d cases fail round for round" % (len(fails), n))
else:
    print("%d cases pass on the exec backend, round for round" % n)
PY
}

# 1. echo_ref and the Python client pass every case on the exec backend
for client in "$ECHO" "$SC"; do
    "$GENFENCE" run cases/speculative_sampling.yaml --backend "exec:$client" --report-dir "$tmp/ok" \
        >"$tmp/ok.out" 2>&1 || { cat "$tmp/ok.out"; fail "$client: exit $?, want 0"; }
    gf_grepq -q "^exec: $n_cases passed, 0 failed, 0 skipped\$" <"$tmp/ok.out" ||
        { cat "$tmp/ok.out"; fail "$client: not $n_cases passed on exec"; }
    check_ss "$tmp/ok/run.json" pass || fail "$client: the run's records"
done

# 2. the bonus from row K-1: caught round for round
set +e
"$GENFENCE" run cases/speculative_sampling.yaml --backend "exec:$SC --bad-bonus" --report-dir "$tmp/bad" \
    >"$tmp/bad.out" 2>&1
rc=$?
set -e
[ $rc -eq 1 ] || { cat "$tmp/bad.out"; fail "bad bonus: exit $rc, want 1"; }
check_ss "$tmp/bad/run.json" fail || fail "bad bonus: the run's records"
# ... and protocol failures: a short reply, an accepted count past K
for f in "--short:speculate: reply of 4 bytes, the protocol says 8 (wrong length)" \
    "--out-of-range:speculate: the client accepted 4 of K 3 draft tokens (out of range"; do
    set +e
    "$GENFENCE" run cases/speculative_sampling.yaml --filter '^specsample\.good\.seed$' \
        --backend "exec:$SC ${f%%:*}" --no-report >"$tmp/f.out" 2>&1
    rc=$?
    set -e
    [ $rc -eq 1 ] || { cat "$tmp/f.out"; fail "${f%%:*}: exit $rc, want 1"; }
    gf_grepq -q '^FAIL  *specsample\.good\.seed \[exec\]' <"$tmp/f.out" || { cat "$tmp/f.out"; fail "${f%%:*}: no fail"; }
    gf_grepq -qF "${f#*:}" <"$tmp/f.out" || { cat "$tmp/f.out"; fail "${f%%:*}: no '${f#*:}'"; }
done
echo "ok   the faults fail: bonus from row K-1, short reply, accepted past K"

# 3. a client without hello bit 4: no slot, the engine's reference alone is judged
"$GENFENCE" run cases/speculative_sampling.yaml --filter '^specsample\.greedy\.deterministic$' \
    --backend "exec:$PY $GF_SRC/tests/backends/exec/sampler_client.py" --report-dir "$tmp/none" >"$tmp/none.out" 2>&1 ||
    { cat "$tmp/none.out"; fail "sampler_client: exit $?"; }
"$PY" - "$tmp/none/run.json" <<'PY' || fail "sampler_client: the run's records"
import json, sys
r = json.load(open(sys.argv[1]))
(be,) = r["backends"]
assert be["speculate_slot"] is False, be
assert [x["backend"] for x in r["results"]] == ["engine"], [x["backend"] for x in r["results"]]
print("no bit 4: no speculate slot, the engine alone")
PY

# 4. the scripted greedy loops on echo_ref: every round decided by the slot
model=$(gf_test_model)
root="$GF_SRC"
if [ "$model" != "$GF_SRC/models/holmes-gpt" ]; then
    root="$tmp/root"
    mkdir -p "$root/cases" "$root/models"
    cp cases/speculative.yaml "$root/cases/"
    ln -sfn "$model" "$root/models/holmes-gpt"
fi
loops='^spec\.loop\.(all_accepted|none_accepted|reject_each_position|eos_in_draft|context_limit)$'
(cd "$root" && GENFENCE_ROOT="$root" "$GENFENCE" run cases/speculative.yaml --filter "$loops" \
    --backend "exec:$ECHO" --no-triangulate --report-dir "$tmp/loop") >"$tmp/loop.out" 2>&1 ||
    { cat "$tmp/loop.out"; fail "loops on echo_ref: exit $?, want 0"; }
"$PY" - "$tmp/loop/run.json" <<'PY' || { cat "$tmp/loop.out"; fail "loops on echo_ref: the run's records"; }
import json, re, sys
res = json.load(open(sys.argv[1]))["results"]
assert len(res) == 5, [x["id"] for x in res]
for x in res:
    assert x["backend"] == "exec" and x["verdict"] == "pass", (x["id"], x["backend"], x["verdict"], x["reason"])
    m = x["metrics"]
    assert m["loop_acceptance"].startswith("the backend's speculate slot"), (x["id"], m["loop_acceptance"])
    ks = [l["k"] for l in m["loop"]]
    slot = {c["name"]: c for c in x["checks"] if "speculate slot judges" in c["name"]}
    for k in ks:
        c = slot["K %d: the backend's speculate slot judges every round as the argmax does" % k]
        assert c["passed"] and re.match(r"0 of [1-9]\d* rounds differ", c["detail"]), (x["id"], c)
print("loops: %d cases, every round through the slot" % len(res))
PY
echo "exec_speculate: ok"
