#!/usr/bin/env bash
# Localization on failure (issue 28 item 2, docs/backends.md "The trace
# slot"): the project's faulty backends that break the cache (ref-bad-cache),
# the mask (ref-no-mask), the RoPE positions (ref-rope-chunk-pos), the GQA
# head map (ref-gqa-map) and the norms (ref-mlp-norm, ref-final-norm) each
# fail with a distinct first divergent layer and sublayer, read from the
# console line and run.json (every earlier point below its bound), and the
# printed `genfence trace ...` line replays one alone with the same reading.
# Issue 28's bugs 1 and 2 (ref-kv-at-zero: K/V written at [0, T) instead of
# after the cache; ref-mask-no-offset: the causal mask not offset by the cache
# length) diverge at different sublayers of the same call: the first at layer
# 0's keys and values (cache positions 0 and 5: the new key overwrote 0, 5
# holds none), the second, whose cache is right, at layer 0's attention
# output, where the key reach adds that it does not read the last cached
# position (ref does).
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init trace_faults
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
B="$GF_BUILD/tests/backends"
declare -A so=([ref-bad-cache]=ref_bad_cache [ref-no-mask]=ref_no_mask [ref-rope-chunk-pos]=faulty_ref_rope_chunk_pos
               [ref-gqa-map]=faulty_ref_gqa_map [ref-mlp-norm]=faulty_ref_mlp_norm [ref-final-norm]=faulty_ref_final_norm
               [ref-kv-at-zero]=ref_kv_at_zero [ref-mask-no-offset]=ref_mask_no_offset
               [example-kv-at-zero]=example_kv_at_zero [example-mask-no-offset]=example_mask_no_offset)
args=()
for n in "${!so[@]}"; do
  f="$B/libgenfence_test_${so[$n]}.so"
  [[ -f "$f" ]] || fail "test backend $f not built"
  args+=(--backend "$f")
done
cd "$GF_SRC"
# the golden case judges the weight faults (self-consistent: the cache kind
# cannot see them); cases/detect/trace.yaml the cache and the mask
rc=0
"$GENFENCE" run cases/golden_llama.yaml cases/detect/trace.yaml --filter '^(golden\.greedy\.sherlock\.llama|detect\.trace\..*)$' \
  "${args[@]}" --no-triangulate --report-dir "$tmp/rep" >"$tmp/out" 2>&1 || rc=$?
[[ $rc -eq 1 ]] || { cat "$tmp/out"; fail "run exited $rc, not 1"; }

# the reading each fault must give (case id, backend, pattern of its localized line)
expect() { # CASE BACKEND REGEX
  local line
  line=$(awk -v c="$1 [$2]" 'index($0, c) && /^FAIL/ {on = 1; next} on && /^[^ ]/ {exit} on && /^    localized: / {print; exit}' "$tmp/out")
  [[ -n "$line" ]] || { cat "$tmp/out"; fail "$1 [$2] did not fail"; }
  grep -Eq -- "$3" <<<"$line" || fail "$1 [$2]: localized as '$line', want /$3/"
  echo "ok   $2: ${line#*first divergence at }" | cut -c1-160
}
expect golden.greedy.sherlock.llama ref-bad-cache \
  'localized: first divergence at layer 0 keys and values, cache position 1, kv head 0, cached call \(forward call #1, B 1, T 5, cache length 0\)'
expect golden.greedy.sherlock.llama ref-rope-chunk-pos \
  'localized: first divergence at layer 0 keys and values, cache position 5, cached call \(forward call #2, B 1, T 1, cache length 5\)'
expect golden.greedy.sherlock.llama ref-gqa-map 'localized: first divergence at layer 0 keys and values, all cache positions, cached call'
expect golden.greedy.sherlock.llama ref-mlp-norm 'localized: first divergence at layer 0 MLP output, all positions'
expect golden.greedy.sherlock.llama ref-final-norm 'localized: first divergence at final norm, all positions'
expect detect.trace.mask.llama ref-no-mask \
  'localized: first divergence at layer 0 attention output, positions >= [0-9]+, rows 0, 1, uncached call'
expect detect.trace.cache.llama ref-bad-cache 'localized: first divergence at layer 0 keys and values, cache position 1, kv head 0, cached call'
expect detect.trace.cache.llama ref-rope-chunk-pos 'localized: first divergence at layer 0 keys and values, cache position 5, cached call'
expect golden.greedy.sherlock.llama ref-kv-at-zero \
  'localized: first divergence at layer 0 keys and values, cache positions 0, 5, cached call \(forward call #2, B 1, T 1, cache length 5\): '
reach0='localized: first divergence at layer 0 attention output, position 5, cached call \(forward call #2, B 1, T 1, cache length 5\): .*'
expect golden.greedy.sherlock.llama ref-mask-no-offset "${reach0}there the backend does not depend on cache position 4 \(ref does\)$"
# the same two bugs planted in the example plugin (an out-of-tree plugin's forward, its own trace slot)
expect golden.greedy.sherlock.llama example-kv-at-zero \
  'localized: first divergence at layer 0 keys and values, cache positions 0, 5, cached call \(forward call #2, B 1, T 1, cache length 5\): '
expect golden.greedy.sherlock.llama example-mask-no-offset "${reach0}there the backend does not depend on cache position 4 \(ref does\)$"
expect detect.trace.cache.llama ref-kv-at-zero 'localized: first divergence at layer 0 keys and values, cache positions 0, [0-9]+, cached call'
expect detect.trace.cache.llama ref-mask-no-offset \
  'localized: first divergence at layer 0 attention output, .*cached call.*there the backend does not depend on cache position [1-9][0-9]* \(ref does\)'
# a divergence in the keys and values carries no key-reach clause (the reach
# is asked only where the cache was right)
for be in ref-rope-chunk-pos ref-gqa-map ref-kv-at-zero; do
  ! awk -v c="golden.greedy.sherlock.llama [$be]" 'index($0, c) && /^FAIL/ {on = 1; next} on && /^[^ ]/ {exit} on && /localized/ {print}' "$tmp/out" |
    grep -q 'depend on cache position' || fail "$be: a key-reach clause where the keys are right"
done
# a passing run (ref-no-mask on the one-row golden: no padding to leak) is not localized
after=$(awk '/^pass .*golden\.greedy\.sherlock\.llama \[ref-no-mask\]/ {on = 1; getline; print; exit}' "$tmp/out")
gf_grepq -Eq '^pass .*golden\.greedy\.sherlock\.llama \[ref-no-mask\]' <"$tmp/out" || fail "ref-no-mask did not pass the one-row golden"
[[ "$after" != "    localized:"* ]] || fail "a passing case was localized: $after"

# the readings are pairwise distinct (point, positions, rows and call)
n=$(grep -o 'localized: first divergence at [^:]*' "$tmp/out" | sed 's/(forward call #[^)]*)//' | sort -u | wc -l)
[[ $n -ge 6 ]] || fail "only $n distinct localizations"
# with the key reach, every fault of the golden case reads differently
n=$(awk '/^FAIL .*golden\.greedy\.sherlock\.llama \[/ {on = 1; next} on && /^[^ ]/ {on = 0} on && /^    localized: / {print}' "$tmp/out" |
  sed -e 's/: NMSE [^;]*; worst [^;]*;//' -e 's/ [0-9]* earlier point[^;]*//' | sort -u | wc -l)
# (the plugin's bugs 1 and 2 read as ref's: 9 faults, 7 readings)
[[ $n -eq 7 ]] || fail "$n distinct readings of the golden case's 9 faults, want 7"

# run.json: the same, with every earlier point below its bound and the trace line
"$PY" - "$tmp/rep/run.json" <<'PY' || fail "run.json's localization"
import json, sys
doc = json.load(open(sys.argv[1]))
seen = {}
for r in doc["results"]:
    loc = r.get("localization")
    if r["verdict"] != "fail":
        assert loc is None, (r["id"], r["backend"], "localized but passed")
        continue
    assert loc and loc["status"] == "diverged", (r["id"], r["backend"], loc)
    f, pts = loc["first"], loc["points"]
    i = [p["point"] for p in pts].index(f["point"])
    assert f["nmse"] > f["bound"], f
    for p in pts[:i]:
        assert p["nmse"] is not None and p["nmse"] <= p["bound"], (r["backend"], p)
    assert {"row", "position", "channel", "backend", "ref"} <= set(f["worst"]), f
    assert " trace " in r["trace_command"] and "--filter" in r["trace_command"], r.get("trace_command")
    seen[(r["id"], r["backend"])] = (f["point"], f["positions"], loc["call"]["cache_length"])
want = {"example-kv-at-zero": ("layer 0 keys and values", "cache positions 0, 5", 5),
        "example-mask-no-offset": ("layer 0 attention output", "position 5", 5),
        "ref-bad-cache": ("layer 0 keys and values", "cache position 1, kv head 0", 0),
        "ref-rope-chunk-pos": ("layer 0 keys and values", "cache position 5", 5),
        "ref-gqa-map": ("layer 0 keys and values", "all cache positions", 0),
        "ref-mlp-norm": ("layer 0 MLP output", "all positions", 0),
        "ref-final-norm": ("final norm", "all positions", 0),
        "ref-kv-at-zero": ("layer 0 keys and values", "cache positions 0, 5", 5),
        "ref-mask-no-offset": ("layer 0 attention output", "position 5", 5)}
# bugs 1 and 2: a distinct first divergent sublayer
assert want["ref-kv-at-zero"][0] != want["ref-mask-no-offset"][0]
reach = {}
for r in doc["results"]:
    if r["id"] == "golden.greedy.sherlock.llama" and r.get("localization"):
        reach[r["backend"]] = {(k["cache_position"], k.get("backend"), k.get("ref")) for k in r["localization"].get("key_reach", [])}
assert reach["ref-mask-no-offset"] == {(0, True, True), (4, False, True)}, reach["ref-mask-no-offset"]
assert reach["example-mask-no-offset"] == {(0, True, True), (4, False, True)}, reach["example-mask-no-offset"]
for be in ("ref-kv-at-zero", "example-kv-at-zero", "ref-rope-chunk-pos", "ref-gqa-map", "ref-bad-cache"):
    assert not reach.get(be), (be, reach.get(be))  # diverged at the keys and values: no reach asked
# every point before the first, keys and values included, was compared and is below its bound
for r in doc["results"]:
    loc = r.get("localization")
    if r["id"] == "golden.greedy.sherlock.llama" and loc:
        assert loc["keys_and_values"] == "compared at every block", loc["keys_and_values"]
        kv = [p for p in loc["points"] if p["sublayer"] == "keys and values"]
        assert kv and all(p["nmse"] is not None for p in kv), (r["backend"], kv)
for be, w in want.items():
    assert seen[("golden.greedy.sherlock.llama", be)] == w, (be, seen.get(("golden.greedy.sherlock.llama", be)))
print("ok   run.json: %d localizations, earlier points below their bounds" % len(seen))
PY

# the trace line replays one alone: the same reading, every point printed
line=$(grep -F "[ref-gqa-map]" -A8 "$tmp/out" | grep -m1 '^    trace: ' | sed 's/^    trace: //')
[[ "$line" == *" trace "*"--filter"* ]] || fail "no trace line for ref-gqa-map: '$line'"
line=${line/--report-dir */--no-report}
rc=0
eval "$line --no-triangulate" >"$tmp/alone" 2>&1 || rc=$?
[[ $rc -eq 1 ]] || { cat "$tmp/alone"; fail "the trace line exited $rc, not 1"; }
gf_grepq -q 'localized: first divergence at layer 0 keys and values, all cache positions' <"$tmp/alone" ||
  fail "the trace line read otherwise: $(grep localized "$tmp/alone")"
gf_grepq -Eq '^ +layer 0 keys and values +NMSE .* OVER$' <"$tmp/alone" || fail "genfence trace printed no point table"
gf_grepq -Eq '^ +embedding +NMSE +0.00e\+00 .* ok$' <"$tmp/alone" || fail "genfence trace: the embedding is not below its bound"
echo "ok   genfence trace replays ref-gqa-map alone"

# --no-trace: no localization
rc=0
"$GENFENCE" run cases/golden_llama.yaml --filter '^golden\.greedy\.sherlock\.llama$' --backend "$B/libgenfence_test_faulty_ref_mlp_norm.so" \
  --no-triangulate --no-report --no-trace >"$tmp/nt" 2>&1 || rc=$?
[[ $rc -eq 1 ]] || fail "--no-trace run exited $rc"
! grep -q localized "$tmp/nt" || fail "--no-trace still localized"
echo "ok   --no-trace"

# over the protocol (docs/protocol.md, forward_trace): echo_ref behind the
# relay that drops the key mask (tests/backends/exec/faulty_client.py, copied
# so no .pyc lands in the tree) is localized through exec's trace slot
ECHO="$GF_BUILD/tools/echo_ref"
[[ -x "$ECHO" ]] || fail "$ECHO not built"
mkdir -p "$tmp/tools" "$tmp/tests/backends" && cp -r "$GF_SRC/tools/backends" "$tmp/tools/" &&
  cp -r "$GF_SRC/tests/backends/exec" "$tmp/tests/backends/exec"
rc=0
"$GENFENCE" run cases/generation.yaml --filter '^batch\.left_padded$' \
  --backend "exec:$PY $tmp/tests/backends/exec/faulty_client.py nomask $ECHO" --no-triangulate --no-report >"$tmp/ex" 2>&1 || rc=$?
[[ $rc -eq 1 ]] || { cat "$tmp/ex"; fail "exec nomask run exited $rc"; }
gf_grepq -Eq '^    localized: first divergence at layer 0 attention output, positions >= [0-9]+, rows 0, 1, ' <"$tmp/ex" ||
  { cat "$tmp/ex"; fail "exec: the dropped mask is not localized over the protocol"; }
echo "ok   exec: the dropped mask localized over the protocol (forward_trace)"

# the keys and values over the protocol (hello bit 5) are compared, not just
# carried: a relay that zeroes block 0's key at cache position 0 in every
# forward_trace reply (the logits right, the case passes) is localized there
# under `genfence trace`; one that sends the wrong block count is a protocol
# failure named "(wrong shape)"
rc=0
"$GENFENCE" trace cases/golden.yaml --filter '^golden\.greedy\.sherlock$' \
  --backend "exec:$PY $tmp/tests/backends/exec/faulty_client.py kvzero $ECHO" --no-triangulate --no-report >"$tmp/kz" 2>&1 || rc=$?
gf_grepq -Eq '^pass +golden\.greedy\.sherlock \[exec\]' <"$tmp/kz" || { cat "$tmp/kz"; fail "kvzero: the case itself did not pass"; }
gf_grepq -Eq '^    localized: first divergence at layer 0 keys and values, cache position 0, ' <"$tmp/kz" ||
  { cat "$tmp/kz"; fail "kvzero: the zeroed key is not localized over the protocol"; }
rc=0
"$GENFENCE" trace cases/golden.yaml --filter '^golden\.greedy\.sherlock$' \
  --backend "exec:$PY $tmp/tests/backends/exec/faulty_client.py kvshape $ECHO" --no-triangulate --no-report >"$tmp/ks" 2>&1 || rc=$?
gf_grepq -Eq 'forward_trace: keys and values of \(L 5, KVd [0-9]+, Tk [0-9]+\), the call has \(4, .*\(wrong shape\)' <"$tmp/ks" ||
  { cat "$tmp/ks"; fail "kvshape: the wrong block count is not a named protocol failure"; }
echo "ok   exec: the keys and values over the protocol are compared (kvzero localized), their shape checked (kvshape)"
