#!/usr/bin/env bash
# A correct backend's trace matches ref everywhere below its bounds (issue 28
# item 2, docs/backends.md "The trace slot"): `genfence trace` on the golden
# batch cases (left padding, a cache, GPT-2 and Llama) over openblas, onednn
# (when they run here), echo_ref over the protocol (exec) and the example plugin (built as a test backend: its
# forward is honest, its sampler slot is not, which these greedy golden cases
# teacher-force past) reads "matches ref below every bound" with every point
# printed "ok", and exits 0. The same command on a faulty backend does not
# (trace_faults.sh): a trace that cannot fail is not a check.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init trace_honest
cd "$GF_SRC"
ex="$GF_BUILD/tests/backends/libgenfence_test_example_bad_sample.so"
[[ -f "$ex" ]] || fail "test backend $ex not built"
bes=(--backend "$ex")
# echo_ref over the protocol (forward_trace, docs/protocol.md); GPT-2 only, so its Llama case is a skip
[[ -x "$GF_BUILD/tools/echo_ref" ]] || fail "$GF_BUILD/tools/echo_ref not built"
bes+=(--backend "exec:$GF_BUILD/tools/echo_ref")
for be in openblas onednn; do
  if "$GENFENCE" backends --backend "$be" 2>/dev/null | gf_grepq -Eq "^$be +available"; then
    bes+=(--backend "$be")
  else
    echo "note: $be does not run here; its trace is not checked"
  fi
done
rc=0
"$GENFENCE" trace cases/golden.yaml cases/golden_llama.yaml --filter '^golden\.greedy\.batch(\.llama)?$' "${bes[@]}" \
  --no-triangulate --no-report >"$tmp/out" 2>&1 || rc=$?
[[ $rc -eq 0 ]] || { cat "$tmp/out"; fail "genfence trace on correct backends exited $rc"; }
n_runs=$(grep -c '^pass ' "$tmp/out" || true)
gf_grepq -Eq '^pass +golden\.greedy\.batch \[exec\]' <"$tmp/out" || fail "echo_ref over exec did not pass"
n_match=$(grep -c '^    localized: the trace matches ref below every bound in all [0-9]* calls replayed' "$tmp/out" || true)
[[ $n_runs -ge 2 && $n_match -eq $n_runs ]] || { cat "$tmp/out"; fail "$n_match of $n_runs runs matched ref"; }
! grep -Eq ' OVER$| not given$' "$tmp/out" || fail "a point over its bound or not given on a correct backend"
n_ok=$(grep -cE '^ +(embedding|layer [0-9]+ .*|final norm) +NMSE .* ok$' "$tmp/out" || true)
# holmes-gpt and holmes-llama have 4 blocks: 18 points each, and 4 of keys and
# values (every backend here gives them, echo_ref over the protocol too)
! grep -q '^    keys and values: not given by the backend' "$tmp/out" || { cat "$tmp/out"; fail "a run without keys and values"; }
n_kv=$(grep -cE '^ +layer [0-9]+ keys and values +NMSE .* ok$' "$tmp/out" || true)
[[ $n_kv -eq $((4 * n_runs)) ]] || fail "$n_kv keys-and-values points printed ok, want $((4 * n_runs))"
[[ $n_ok -eq $((18 * n_runs + n_kv)) ]] || fail "$n_ok points printed ok, want $((18 * n_runs + n_kv))"
grep '^    localized:' "$tmp/out" | sed 's/: the divergence.*//' | sort | uniq -c
echo "ok   $n_runs correct-backend traces match ref below every bound"
