#!/usr/bin/env bash
# The default run's built-in protocol client (issue 32; docs/harness.md,
# "Backends"), and the seed shift of docs/harness.md ("The catalogue of
# planted bugs"):
#   - a run without --backend runs cases/exec.yaml's six cases on exec with
#     the build's tools/echo_ref, each a pass, and no untagged case there;
#   - a framing bug of the client beside genfence fails them (the C client
#     relayed through faulty_client.py short: a forward reply one float
#     short), exit 1;
#   - a genfence with no echo_ref beside it: the six are skips that say why,
#     the summary names it, exit 0;
#   - GENFENCE_SEED_SHIFT moves the seeds a statistical case records; a
#     malformed value is bad input (exit 2).
set -euo pipefail
: "${GENFENCE:?set GENFENCE to the genfence binary}" "${GF_SRC:?set GF_SRC}" "${GF_BUILD:?set GF_BUILD}"
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init echo_default
cd "$GF_SRC"
[[ -x "$GF_BUILD/tools/echo_ref" ]] || fail "$GF_BUILD/tools/echo_ref not built"

# 1. the build's genfence: the six cases on exec, all passing
"$GENFENCE" run cases/exec.yaml cases/sampler.yaml --filter '^(exec\.|top_p\.fence$)' \
  --report-dir "$tmp/rep" >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "default run: exit $?"; }
"$PY" - "$tmp/rep/run.json" <<'PY' || { cat "$tmp/out"; fail "the echo client's cases"; }
import json, sys
res = json.load(open(sys.argv[1]))["results"]
on_exec = sorted((r["id"], r["verdict"]) for r in res if r["backend"] == "exec")
assert [i for i, _ in on_exec] == ["exec.batch", "exec.cache", "exec.logprobs", "exec.precision",
                                   "exec.speculate", "exec.statistical"], on_exec
assert all(v == "pass" for _, v in on_exec), on_exec
# a case not tagged exec never runs on it; the exec cases run on the other backends too
assert not [r for r in res if r["id"] == "top_p.fence" and r["backend"] == "exec"]
assert {r["id"] for r in res if r["backend"] == "ref"} >= {"exec.cache", "exec.batch"}, res
PY
echo "ok   default run: the six exec cases pass on the built echo client"

# 2. a copy of genfence beside a client with a framing bug: the cases fail
mkdir -p "$tmp/bad/tools"
cp "$GENFENCE" "$tmp/bad/genfence"
printf '#!/bin/sh\nexec "%s" "%s" short "%s"\n' "$PY" "$GF_SRC/tests/backends/exec/faulty_client.py" \
  "$GF_BUILD/tools/echo_ref" >"$tmp/bad/tools/echo_ref"
chmod +x "$tmp/bad/tools/echo_ref"
set +e
"$tmp/bad/genfence" run cases/exec.yaml --no-report >"$tmp/out_bad" 2>&1
rc=$?
set -e
[[ $rc == 1 ]] || { cat "$tmp/out_bad"; fail "a client one float short: exit $rc, want 1"; }
grep -Eq '^(FAIL|CRASH) +exec\.cache \[exec\]' "$tmp/out_bad" || { cat "$tmp/out_bad"; fail "exec.cache did not fail"; }
grep -q 'wrong length\|length' "$tmp/out_bad" || { cat "$tmp/out_bad"; fail "no reply-length reason"; }
echo "ok   a framing bug of the client beside genfence: exit 1"

# 3. no client beside genfence: skips with the reason, exit 0
mkdir -p "$tmp/none"
cp "$GENFENCE" "$tmp/none/genfence"
"$tmp/none/genfence" run cases/exec.yaml --no-report >"$tmp/out_none" 2>&1 ||
  { cat "$tmp/out_none"; fail "no echo client: exit $?"; }
[[ $(grep -c '^skip .*exec\..*\[exec:echo_ref\]' "$tmp/out_none") == 6 ]] || { cat "$tmp/out_none"; fail "not six skips"; }
grep -q "^    backend unavailable: the C echo client is not beside this genfence ($tmp/none/tools/echo_ref)" \
  "$tmp/out_none" || { cat "$tmp/out_none"; fail "the skips do not say why"; }
grep -q '^backend exec: unavailable here, not run: the C echo client is not beside this genfence' "$tmp/out_none" ||
  { cat "$tmp/out_none"; fail "the summary does not name the missing client"; }
echo "ok   no echo client: six skips with the reason, exit 0"

# 4. the seed shift: recorded, and bad input when malformed
GENFENCE_SEED_SHIFT=5 "$GENFENCE" run cases/sampler.yaml --filter '^sampling\.distribution$' \
  --report-dir "$tmp/rep5" >"$tmp/out5" 2>&1 || { cat "$tmp/out5"; fail "shift 5: exit $?"; }
"$GENFENCE" run cases/sampler.yaml --filter '^sampling\.distribution$' --report-dir "$tmp/rep0" >"$tmp/out0" 2>&1 ||
  fail "shift 0: exit $?"
"$PY" - "$tmp/rep0/run.json" "$tmp/rep5/run.json" <<'PY' || fail "the shift is not in the record"
import json, sys
s0, s5 = (json.load(open(p))["results"][0]["seeds"]["sampler"] for p in sys.argv[1:3])
assert s5 == s0 + 5, (s0, s5)
PY
set +e
GENFENCE_SEED_SHIFT=x "$GENFENCE" run cases/sampler.yaml --filter '^sampling\.distribution$' --no-report >"$tmp/outx" 2>&1
rc=$?
set -e
[[ $rc == 2 ]] && grep -q "GENFENCE_SEED_SHIFT='x' is not an integer" "$tmp/outx" ||
  { cat "$tmp/outx"; fail "GENFENCE_SEED_SHIFT=x: exit $rc, want 2 with the reason"; }
echo "ok   GENFENCE_SEED_SHIFT: the recorded seed moves by the shift; x is bad input"
echo "echo_default: PASS"
