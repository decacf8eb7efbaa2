#!/usr/bin/env bash
# Messages that say it once, with the row (issue 25, items 5 and 7): each
# message's text is checked here, and each leftover of issue 25's item 8 has
# the check that failed before its fix.
#   - a prompt token outside the vocabulary is bad input (error, exit 2) on a
#     correct backend, in every kind and in `generate --verify`, and the reason
#     names the model (before: cache_equals_recompute and --verify sent it to
#     the backend, whose refusal was a FAIL, exit 1);
#   - a cache_reset that does nothing is the backend's fault (fail) wherever
#     it is met (before: sliding.window64.llama read the overflow it causes as
#     a context limit, error, exit 2);
#   - no reason repeats its own prefix ("cached: cached: batch of 3: generate:
#     generate: step 1", "... backend failure (backend failure)");
#   - a FAIL from a backend call says so in the metrics column (before: "4/4
#     checks" or max|d| 0);
#   - eos names the row, the step and the tokens it produced instead.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init messages
source "$GF_SRC/tests/support/test_lib.sh"
cd "$GF_SRC"
BE="$GF_BUILD/tests/backends"
model=$(gf_test_model)

# run_rc OUT ARGS...: genfence ARGS > OUT 2>&1; prints the exit status
run_rc() {
    local out=$1 rc=0
    shift
    "$GENFENCE" "$@" >"$out" 2>&1 || rc=$?
    echo "$rc"
}
has() { grep -qF -- "$2" "$1" || { cat "$1"; fail "$3: no '$2'"; }; }

# ---- out-of-vocabulary prompt tokens: error, exit 2, the model named ----
cat >"$tmp/oov.yaml" <<EOF
cases:
  - id: oov.cache
    kind: cache_equals_recompute
    model: $model
    prompt_tokens: [1, 2, 99999]
    steps: 4
  - id: oov.eos
    kind: eos
    model: $model
    prompts: [[1, 2, 99999]]
    max_new_tokens: 4
    eos_id: 3
  - id: oov.batch
    kind: batch_consistency
    model: $model
    prompts: [[1, 2, 99999], [1, 2]]
    max_new_tokens: 4
EOF
rc=$(run_rc "$tmp/oov.out" run "$tmp/oov.yaml" --backend ref --report-dir "$tmp/oov-r" --no-triangulate)
[[ $rc -eq 2 ]] || { cat "$tmp/oov.out"; fail "out-of-vocabulary prompts on ref: exit $rc, want 2"; }
for id in oov.cache oov.eos oov.batch; do
    v=$(jq -r --arg id "$id" '.results[] | select(.id == $id) | .verdict' "$tmp/oov-r/run.json")
    r=$(jq -r --arg id "$id" '.results[] | select(.id == $id) | .reason' "$tmp/oov-r/run.json")
    [[ $v == error ]] || fail "$id on ref: verdict $v, want error ($r)"
    [[ $r == *"99999"*"outside the model's vocabulary [0, 512)"* ]] || fail "$id: '$r' does not name the token and the vocabulary"
    [[ $r == *"(model $model)"* ]] || fail "$id: '$r' does not name the model"
    echo "ok   $id on ref: error: $r"
done
rc=$(run_rc "$tmp/v.out" generate --model "$model" --tokens 1,99999 --max-new-tokens 2 --verify)
[[ $rc -eq 2 ]] || { cat "$tmp/v.out"; fail "generate --verify with token 99999: exit $rc, want 2"; }
has "$tmp/v.out" "token 99999 at (row 0, position 1) is outside the model's vocabulary [0, 512); not sent to backend 'ref'" "generate --verify"
echo "ok   generate --verify --tokens 1,99999: exit 2: $(cat "$tmp/v.out")"

# ---- a cache_reset that does nothing: fail everywhere, never error ----
rc=$(run_rc "$tmp/nr.out" run cases/generation.yaml cases/sliding_llama.yaml --filter '^(cache\.sherlock|sliding\.window64\.llama)$' \
    --backend "$BE/libgenfence_test_faulty_ref_noop_reset.so" --report-dir "$tmp/nr-r" --no-triangulate)
[[ $rc -eq 1 ]] || { cat "$tmp/nr.out"; fail "ref-noop-reset: exit $rc, want 1"; }
for id in cache.sherlock sliding.window64.llama; do
    v=$(jq -r --arg id "$id" '.results[] | select(.id == $id) | .verdict' "$tmp/nr-r/run.json")
    r=$(jq -r --arg id "$id" '.results[] | select(.id == $id) | .reason' "$tmp/nr-r/run.json")
    [[ $v == fail ]] || fail "$id on ref-noop-reset: verdict $v, want fail ($r)"
    [[ $r == *"cache_reset returned GF_OK but cache_length is "*" after it; the contract says 0"* ]] ||
        fail "$id on ref-noop-reset: '$r' does not name the reset"
    echo "ok   $id on ref-noop-reset: fail: $r"
done

# ---- no repeated prefixes; a FAIL from a backend call says so ----
rc=$(run_rc "$tmp/es.out" run cases/generation.yaml cases/golden.yaml --filter '^(eos\.rows|batch\.left_padded|sampling\.seeded|golden\.greedy\.sherlock|oov\..*)$' \
    "$tmp/oov.yaml" --backend "$BE/libgenfence_test_faulty_error_status.so" --report-dir "$tmp/es-r" --no-triangulate)
[[ $rc -ne 0 ]] || fail "error-status: exit 0"
n=$(jq '.results | length' "$tmp/es-r/run.json")
[[ $n -ge 5 ]] || fail "error-status: $n results"
jq -r '.results[].reason' "$tmp/es-r/run.json" >"$tmp/reasons"
if grep -En '(^|: )([^:]+): \2: ' "$tmp/reasons"; then fail "a reason repeats its prefix"; fi
if grep -En '\(([a-z ]+)\) \(\1\)|([a-z][a-z ]+) \(\2\)$' "$tmp/reasons"; then fail "a reason repeats its status"; fi
has "$tmp/reasons" "cached: batch of 3: generate: step 1 (after token 0): backend 'error-status'" "batch.left_padded's reason"
echo "ok   no reason of $n repeats its prefix or its status"
for id in eos.rows batch.left_padded golden.greedy.sherlock; do
    line=$(grep -E "^FAIL +$id \[error-status\]" "$tmp/es.out") || { cat "$tmp/es.out"; fail "no FAIL line for $id"; }
    [[ $line == *"backend call failed"* ]] || fail "$id: '$line' does not say a backend call failed"
    [[ $line != *"checks "* || $line == *"(after "*" checks)"* ]] || fail "$id: '$line' reads as checks"
    [[ $line != *"max|d|"* ]] || fail "$id: '$line' shows a comparison"
    fc=$(jq -r --arg id "$id" '.results[] | select(.id == $id) | .failed_call // empty' "$tmp/es-r/run.json")
    [[ -n $fc ]] || fail "$id: run.json has no failed_call"
    echo "ok   $line"
done

# ---- eos: the row, the step, the tokens ----
cat >"$tmp/eos.yaml" <<EOF
cases:
  - id: msg.eos
    kind: eos
    model: $model
    prompts: ["Holmes", "It was a dark night and"]
    max_new_tokens: 4
    eos_id: 11
    require_eos: 2
EOF
rc=$(run_rc "$tmp/eos.out" run "$tmp/eos.yaml" --backend ref --no-report --no-triangulate)
[[ $rc -eq 1 ]] || { cat "$tmp/eos.out"; fail "eos short of its rows: exit $rc, want 1"; }
grep -Eq "rows finished by eos_id: [01] of 2 rows \(required 2\); row [01] stopped by length at step 3, no eos_id 11 in its 4 new tokens \[[0-9]+, [0-9]+, [0-9]+, [0-9]+\]" \
    "$tmp/eos.out" || { cat "$tmp/eos.out"; fail "eos: the reason does not name the row, the step and the tokens"; }
echo "ok   $(grep 'rows finished by eos_id' "$tmp/eos.out" | head -1 | sed 's/^ *//')"

# ---- --durations names a plugin by its registered name ----
rc=$(run_rc "$tmp/d.out" run cases/generation.yaml --filter '^eos\.rows$' --backend "$BE/libgenfence_test_sample_ok.so" \
    --durations 1 --no-report --no-triangulate)
[[ $rc -eq 0 ]] || { cat "$tmp/d.out"; fail "--durations run: exit $rc"; }
line=$(grep -A1 '^slowest ' "$tmp/d.out" | tail -n 1)
[[ $line == *"eos.rows"*"[ref-sample] pass" ]] || fail "--durations: '$line' does not name the plugin ref-sample"
echo "ok   --durations: $line"

# ---- genfence backends: exec needs a command; a named one that cannot run exits 2; where modules come from ----
rc=$(run_rc "$tmp/b.out" backends)
[[ $rc -eq 0 ]] || { cat "$tmp/b.out"; fail "backends: exit $rc"; }
line=$(awk '$1 == "exec"' "$tmp/b.out")
[[ $line == "exec"*"on request"*"none was named: --backend 'exec:PROGRAM ARGS...'"* ]] || fail "backends: exec reads '$line'"
grep -A1 '^ref ' "$tmp/b.out" | gf_grepq -q '^ *from built-in$' || { cat "$tmp/b.out"; fail "backends: ref does not say built-in"; }
echo "ok   backends: $line"
rc=$(run_rc "$tmp/b2.out" backends --backend exec:/nonexistent/prog)
[[ $rc -eq 2 ]] || { cat "$tmp/b2.out"; fail "backends --backend exec:/nonexistent/prog: exit $rc, want 2"; }
line=$(awk '$1 == "exec:/nonexistent/prog"' "$tmp/b2.out")
[[ $line == *"unavailable"*"cannot run '/nonexistent/prog'"* ]] || fail "backends: exec:/nonexistent/prog reads '$line'"
echo "ok   backends --backend exec:/nonexistent/prog: exit 2: $line"
# an installed genfence (bin/ beside lib/genfence/backends) uses its own modules
# while the build tree still exists; GENFENCE_MODULE_DIR and --module-dir win
if [ -f "$GF_BUILD/backends/libgenfence_backend_exec.so" ]; then
    mkdir -p "$tmp/prefix/bin" "$tmp/prefix/lib/genfence/backends" "$tmp/other"
    cp "$GENFENCE" "$tmp/prefix/bin/genfence"
    cp "$GF_BUILD/backends/libgenfence_backend_exec.so" "$tmp/prefix/lib/genfence/backends/"
    origin() { jq -r '.[] | select(.name == "exec") | "\(.module_origin) \(.module_dir)"' "$1"; }
    env -u GENFENCE_MODULE_DIR "$tmp/prefix/bin/genfence" backends --json >"$tmp/i.json" || true
    o=$(origin "$tmp/i.json")
    [[ $o == "installed with this genfence $tmp/prefix/bin/../lib/genfence/backends" ]] || fail "installed genfence: exec's modules from '$o'"
    grep -q "$tmp/prefix/bin/../lib/genfence/backends/libgenfence_backend_exec.so" <(env -u GENFENCE_MODULE_DIR "$tmp/prefix/bin/genfence" backends) \
        || fail "installed genfence: backends does not print the installed module's path"
    GENFENCE_MODULE_DIR="$tmp/other" "$tmp/prefix/bin/genfence" backends --json >"$tmp/i2.json" || true
    [[ $(origin "$tmp/i2.json") == "GENFENCE_MODULE_DIR $tmp/other" ]] || fail "GENFENCE_MODULE_DIR: '$(origin "$tmp/i2.json")'"
    env -u GENFENCE_MODULE_DIR "$tmp/prefix/bin/genfence" --module-dir "$tmp/other" backends --json >"$tmp/i3.json" || true
    [[ $(origin "$tmp/i3.json") == "GENFENCE_MODULE_PATH $tmp/other" ]] || fail "--module-dir: '$(origin "$tmp/i3.json")'"
    env -u GENFENCE_MODULE_DIR "$GENFENCE" backends --json >"$tmp/i4.json" || true
    [[ $(origin "$tmp/i4.json") == "the build tree $GF_BUILD/backends" ]] || fail "build tree genfence: '$(origin "$tmp/i4.json")'"
    echo "ok   modules: installed -> its own lib/genfence/backends; GENFENCE_MODULE_DIR / --module-dir win; the build tree's binary uses the build tree"
else
    echo "skip module origin: the exec module is not built"
fi

# ---- a reproduce line reports into <report folder>/reproduce/ID, never over the run's report ----
rc=$(run_rc "$tmp/rp.out" run cases/generation.yaml --filter '^(eos\.rows|cache\.sherlock)$' \
    --backend "$BE/libgenfence_test_faulty_ref_nan.so" --report-dir "$tmp/nightly" --no-triangulate)
[[ $rc -eq 1 ]] || { cat "$tmp/rp.out"; fail "ref-nan run: exit $rc"; }
line=$(grep -m1 "^    reproduce: .*eos" "$tmp/rp.out" | sed 's/^    reproduce: //')
[[ $line == *"--report-dir $(realpath "$tmp/nightly")/reproduce/eos.rows" ]] || fail "reproduce line: '$line'"
(cd / && eval "$line") >"$tmp/rp2.out" 2>&1 || true
[[ $(jq '.results | length' "$tmp/nightly/run.json") -eq 2 ]] || fail "the reproduce line replaced the run's report"
[[ $(jq '.results | length' "$tmp/nightly/reproduce/eos.rows/run.json") -eq 1 ]] || fail "no one-case report in reproduce/eos.rows"
line2=$(grep -m1 "^    reproduce: " "$tmp/rp2.out" | sed 's/^    reproduce: //')
[[ $line2 == "$line" ]] || fail "the reproduce line's own reproduce line moved: '$line2'"
rc=$(run_rc "$tmp/rp3.out" run cases/generation.yaml --filter '^eos\.rows$' --backend "$BE/libgenfence_test_faulty_ref_nan.so" \
    --no-report --no-triangulate)
grep -q "^    reproduce: .* --no-report$" "$tmp/rp3.out" || { cat "$tmp/rp3.out"; fail "a --no-report run's reproduce line writes a report"; }
echo "ok   reproduce: $line"

# ---- a context limit: exit 2 from every command that hits it (generate, forward, run) ----
long=$(printf 'Holmes %.0s' $(seq 200))
mid=$(printf 'Holmes %.0s' $(seq 60))
for args in "--prompt:$long:" "--prompt:$long:--verify" "--prompt:$mid:--on-limit raise" "--prompt:$mid:--verify"; do
    IFS=: read -r flag text extra <<<"$args"
    # shellcheck disable=SC2086
    rc=$(run_rc "$tmp/cl.out" generate --model "$model" $flag "$text" --max-new-tokens 80 $extra)
    [[ $rc -eq 2 ]] || { cat "$tmp/cl.out"; fail "generate ${extra:-(cached)} past the context: exit $rc, want 2"; }
    if grep -q 'verify: verify:' "$tmp/cl.out"; then fail "generate --verify repeats 'verify:'"; fi
    echo "ok   generate ${extra:-} past the context: exit 2: $(tail -n 1 "$tmp/cl.out")"
done
toks=$(seq -s, 1 300) # past holmes-gpt's 128 positions
for extra in "--out $tmp/cl.safetensors" "--against ref"; do
    # shellcheck disable=SC2086
    rc=$(run_rc "$tmp/cl.out" forward --model "$model" --tokens "$toks" $extra)
    [[ $rc -eq 2 ]] || { cat "$tmp/cl.out"; fail "forward ${extra%% *} past the context: exit $rc, want 2"; }
    grep -q "300 tokens exceed the model's 128 positions" "$tmp/cl.out" || { cat "$tmp/cl.out"; fail "forward: no reason"; }
    echo "ok   forward ${extra%% *} past the context: exit 2: $(tail -n 1 "$tmp/cl.out")"
done
printf 'cases:\n  - id: past.context\n    kind: cache_equals_recompute\n    model: %s\n    prompt: "%s"\n    steps: 4\n' \
    "$model" "$long" >"$tmp/cl.yaml"
rc=$(run_rc "$tmp/cl.out" run "$tmp/cl.yaml" --backend ref --no-report --no-triangulate)
[[ $rc -eq 2 ]] || { cat "$tmp/cl.out"; fail "run past the context: exit $rc, want 2"; }
grep -A1 '^ERROR  *past\.context ' "$tmp/cl.out" | gf_grepq -q 'positions; the model has 128' || { cat "$tmp/cl.out"; fail "run: no reason"; }
echo "ok   run past the context: exit 2 (error): $(grep -A1 '^ERROR  *past\.context ' "$tmp/cl.out" | tail -n 1 | sed 's/^ *//')"

# ---- a crash after model_free says a thread outlived it (tests/backends/faulty.c GF_FAULT 30) ----
# Under AddressSanitizer (make test-asan sets ASAN_OPTIONS) the late writer's
# fault does not end the process: the child hangs in the module's destructor
# and the watchdog ends it (seen in a CI rehearsal), so there a timeout with
# the same reason is what genfence must report; a short watchdog keeps it quick.
want_th=crash
[[ -n ${ASAN_OPTIONS:-} ]] && want_th=timeout
rc=$(run_rc "$tmp/th.out" run cases/generation.yaml --filter '^eos\.rows$' \
    --backend "$BE/libgenfence_test_faulty_thread_after_free.so" --report-dir "$tmp/th-r" --no-triangulate \
    --timeout $((30 * ${GF_TIME_SCALE:-1})))
[[ $rc -eq 1 ]] || { cat "$tmp/th.out"; fail "thread-after-free: exit $rc, want 1"; }
r=$(jq -r '.results[0].reason' "$tmp/th-r/run.json")
v=$(jq -r '.results[0].verdict' "$tmp/th-r/run.json")
[[ $v == "$want_th" ]] || fail "thread-after-free: $v, want $want_th: $r"
[[ $r == *"(after model_free call #1 had returned, with "*" threads still running: a thread the backend started outlived model_free)"* ]] ||
    fail "thread-after-free: '$r' does not say a thread outlived model_free"
[[ $(jq -r '.results[0].crash_context.threads_after' "$tmp/th-r/run.json") -ge 2 ]] || fail "crash_context has no threads_after"
echo "ok   thread-after-free: $r"

# ---- a write onto a guard page names the buffer, how far, and the logits mode ----
rc=$(run_rc "$tmp/gp.out" run --raw-verdicts cases/detect/guards.yaml --filter '^detect\.guard\.write_page$' \
    --backend "$BE/libgenfence_test_faulty_ref_write_page.so" --no-report --no-triangulate)
[[ $rc -eq 1 ]] || { cat "$tmp/gp.out"; fail "ref-write-page: exit $rc, want 1"; }
grep -Eq "killed by signal 11 \(SIGSEGV, Segmentation fault\) in forward call #2 \(B 1, T 5, uncached\): a write [0-9]+ bytes past logits_out \(\(B, T, V\) = \(1, 5, [0-9]+\) floats\) hit its guard page; logits mode all" \
    "$tmp/gp.out" || { cat "$tmp/gp.out"; fail "ref-write-page: the crash does not name the buffer and the logits mode"; }
echo "ok   $(grep -m1 'killed by signal 11' "$tmp/gp.out" | sed 's/^ *//')"

# ---- files a backend leaves in the report folder are listed as not genfence's ----
mkdir -p "$tmp/sr"
echo "kept" >"$tmp/sr/notes.txt" # there before the run: not the run's
rc=$(GF_TEST_STRAY_DIR="$tmp/sr" run_rc "$tmp/sr.out" run cases/generation.yaml --filter '^eos\.rows$' \
    --backend "$BE/libgenfence_test_faulty_stray_writer.so" --report-dir "$tmp/sr" --no-triangulate)
[[ $rc -eq 0 ]] || { cat "$tmp/sr.out"; fail "stray-writer: exit $rc, want 0"; }
strays=$(jq -r '.stray_files | join(" ")' "$tmp/sr/run.json")
[[ $strays == "$tmp/sr/stray-backend.log" ]] || fail "stray_files: '$strays', want $tmp/sr/stray-backend.log"
grep -q "^report folder $tmp/sr: 1 file genfence did not write .*: $tmp/sr/stray-backend.log$" "$tmp/sr.out" ||
    { cat "$tmp/sr.out"; fail "the console does not name the stray file"; }
[[ -f "$tmp/sr/stray-backend.log" && -f "$tmp/sr/notes.txt" ]] || fail "a file in the report folder was removed"
tail -n 1 "$tmp/sr.out" | gf_grepq -Eq '^stray-writer: [1-9][0-9]* passed, 0 failed, 0 skipped$' ||
    fail "the summary is not the last line: $(tail -n 1 "$tmp/sr.out")"
echo "ok   stray files: $strays"

echo "messages: all checks passed"
