#!/usr/bin/env bash
# A backend's own logprobs slot (issue 34 item 2; include/genfence/backend.h,
# docs/sampler.md "Logprobs"), judged by the logprobs kind row for row
# against the engine's values:
#  1. the example plugin (its own implementation) passes cases/logprobs.yaml
#     with every entry through the slot; fault 264 (example-lp-before-t:
#     processed values before temperature) fails the shipped cases on the slot
#     check, and its twin detect.logprobs.slot_before_temperature is as declared;
#  2. over the pipe (op 14, hello bit 6): echo_ref (C) and sampler_client.py
#     (Python) pass the plain-parameter case, and say the profile case was
#     declined (the protocol carries plain parameters); sampler_client.py
#     --bad-logprobs fails naming the slot; the relay faults lpshort (a reply
#     one double short: a named protocol failure) and lpshift (one value off
#     by 1e-3) fail.
set -euo pipefail
: "${GENFENCE:?set GENFENCE}" "${GF_SRC:?set GF_SRC}" "${GF_BUILD:?set GF_BUILD}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init logprobs_slot
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
B="$GF_BUILD/tests/backends"
ECHO="$GF_BUILD/tools/echo_ref"
SC="$PY $GF_SRC/tests/backends/exec/sampler_client.py"
FC="$PY $GF_SRC/tests/backends/exec/faulty_client.py"
for f in "$B/libgenfence_test_example_plugin.so" "$B/libgenfence_test_example_lp_before_t.so" "$ECHO"; do
  [[ -e "$f" ]] || fail "$f not built"
done

# run NAME BACKEND [CASE FILES...]: exit status in $rc, output in $tmp/NAME.out, report in $tmp/NAME/
run() {
  local name=$1 be=$2
  shift 2
  rc=0
  "$GENFENCE" run "$@" --backend "$be" --no-triangulate --report-dir "$tmp/$name" >"$tmp/$name.out" 2>&1 || rc=$?
}
# slots NAME CASE: "source calls declined" of CASE's record
slots() {
  "$PY" - "$tmp/$1/run.json" "$2" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    if r["id"] == sys.argv[2]:
        m = r["metrics"]
        print(r["verdict"], m.get("logprobs_source", "").split(" ")[0] + ("+slot" if "slot, row" in m.get("logprobs_source", "") else ""),
              m.get("slot_calls", 0), m.get("slot_declined", 0))
PY
}

# 1. the example plugin, as it ships and with the fault
run plugin "$B/libgenfence_test_example_plugin.so" "$GF_SRC/cases/logprobs.yaml"
[[ $rc == 0 ]] || { cat "$tmp/plugin.out"; fail "example plugin: exit $rc"; }
for c in logprobs.modes logprobs.profiles; do
  read -r v src calls declined <<<"$(slots plugin $c)"
  [[ $v == pass && $src == engine+slot && $calls -gt 0 && $declined == 0 ]] ||
    fail "example plugin, $c: verdict $v, source $src, $calls slot calls, $declined declined"
done
run lpbt "$B/libgenfence_test_example_lp_before_t.so" "$GF_SRC/cases/logprobs.yaml" --raw-verdicts
[[ $rc == 1 ]] || { cat "$tmp/lpbt.out"; fail "example-lp-before-t: exit $rc, expected 1"; }
gf_grepq -Eq "FAIL +logprobs\.modes \[example-lp-before-t\]: line [0-9]+: mode=processed T=0\.5 backend logprobs slot equals the engine's: max \|slot - engine\|" <"$tmp/lpbt.out" ||
  { cat "$tmp/lpbt.out"; fail "example-lp-before-t: logprobs.modes does not fail on the slot check"; }
run lpbt_twin "$B/libgenfence_test_example_lp_before_t.so" "$GF_SRC/cases/detect/logprobs.yaml" --filter '^detect\.logprobs\.slot_before_temperature$'
[[ $rc == 0 ]] && gf_grepq -Eq '^as declared: 1 of 1 run' <"$tmp/lpbt_twin.out" ||
  { cat "$tmp/lpbt_twin.out"; fail "the twin is not as declared (exit $rc)"; }

# 2. over the pipe
for name in echo sc; do
  be="exec:$ECHO"
  [[ $name == sc ]] && be="exec:$SC"
  run "$name" "$be" "$GF_SRC/cases/logprobs.yaml"
  [[ $rc == 0 ]] || { cat "$tmp/$name.out"; fail "$be: exit $rc"; }
  read -r v src calls declined <<<"$(slots "$name" logprobs.modes)"
  [[ $v == pass && $src == engine+slot && $calls -gt 0 && $declined == 0 ]] ||
    fail "$be, logprobs.modes: verdict $v, source $src, $calls slot calls, $declined declined"
  read -r v src calls declined <<<"$(slots "$name" logprobs.profiles)"
  [[ $v == skip && $calls == 0 && $declined -gt 0 ]] ||
    fail "$be, logprobs.profiles: verdict $v, $calls slot calls, $declined declined (expected a skip: every entry declined)"
  gf_grepq -q "carries plain sampler parameters" <"$tmp/$name/run.json" || fail "$be: the decline does not say why"
done
run scbad "exec:$SC --bad-logprobs" "$GF_SRC/cases/logprobs.yaml" --raw-verdicts
[[ $rc == 1 ]] && gf_grepq -Eq "FAIL +logprobs\.modes \[exec\]: .*backend logprobs slot equals the engine's" <"$tmp/scbad.out" ||
  { cat "$tmp/scbad.out"; fail "sampler_client --bad-logprobs: not caught (exit $rc)"; }
run lpshort "exec:$FC lpshort $ECHO" "$GF_SRC/cases/logprobs.yaml" --raw-verdicts
[[ $rc == 1 ]] && gf_grepq -q "logprobs: reply of [0-9]* bytes, the protocol says [0-9]* (wrong length)" <"$tmp/lpshort/run.json" ||
  { cat "$tmp/lpshort.out"; fail "lpshort: not a named protocol failure (exit $rc)"; }
run lpshift "exec:$FC lpshift $ECHO" "$GF_SRC/cases/logprobs.yaml" --raw-verdicts
[[ $rc == 1 ]] && gf_grepq -Eq "max \|slot - engine\| 0\.001 " <"$tmp/lpshift.out" ||
  { cat "$tmp/lpshift.out"; fail "lpshift: a value 1e-3 off not caught (exit $rc)"; }
echo "logprobs_slot: ok"
