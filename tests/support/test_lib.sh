# Sourced by tests/cli/backend_*.sh and plugin_*.sh (needs GENFENCE, GF_SRC,
# GF_PYTHON and a $tmp directory).

# gf_test_model: prints the model directory to test with: models/holmes-gpt
# when its weights are there, else a random GPT-2 of its shape made in $tmp
# (with holmes-gpt's tokenizer).
gf_test_model() {
    local model="$GF_SRC/models/holmes-gpt"
    if [ -f "$model/model.safetensors" ]; then
        echo "$model"
        return
    fi
    if [ ! -f "$tmp/model/model.safetensors" ]; then
        echo "models/holmes-gpt has no weights: using a random GPT-2 of its shape" >&2
        "$GF_PYTHON" "$GF_SRC/tests/support/make_test_model.py" "$tmp/model" \
            --tokenizer "$GF_SRC/models/holmes-gpt/tokenizer.json" >&2
    fi
    echo "$tmp/model"
}

# gf_run_suite BACKEND: `genfence run` of the default suite (cases/*.yaml) on
# BACKEND; 0 when every case passed (pass-near-tie counts as a pass) and none
# was skipped. Without holmes-gpt's weights the suite runs from a scratch
# root whose models/holmes-gpt is the random model, without the eos case
# (tuned to the trained model: it needs eos_id sampled within a few steps).
gf_run_suite() {
    local be=$1 model root args=()
    model=$(gf_test_model)
    if [ "$model" = "$GF_SRC/models/holmes-gpt" ]; then
        root="$GF_SRC"
    else
        root="$tmp/root"
        mkdir -p "$root/cases" "$root/models"
        cp "$GF_SRC"/cases/*.yaml "$root/cases/"
        ln -sfn "$model" "$root/models/holmes-gpt"
        args=(--tag '!eos')
    fi
    local out="$tmp/suite.out" rc=0
    (cd "$root" && GENFENCE_ROOT="$root" "$GENFENCE" run --require-backend "$be" "${args[@]}" --no-report) \
        >"$out" 2>&1 || rc=$?
    grep -v '^pass ' "$out" || true
    if [ $rc -ne 0 ] || ! tail -n 1 "$out" |
        grep -Eq '^[^;]+: [1-9][0-9]* passed, 0 failed, 0 skipped(; engine alone: [0-9]+ passed, 0 failed, 0 skipped)?$'; then
        echo "FAIL default suite on $be (exit $rc)"
        return 1
    fi
    echo "ok   default suite on $be: $(tail -n 1 "$out")"
}

# The run's last line (the one CI parses): each backend's own figures, then
# the engine alone's and those of cases no backend matched, apart:
#   "ref: 5 passed, 0 failed, 0 skipped; engine alone: 26 passed, 0 failed, 0 skipped"
GF_FIGURES_RE='[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped'
GF_GROUP_RE="[^;]+: $GF_FIGURES_RE( \\(reached no case(, --require-backend)?\\))?"
GF_LAST_LINE_RE="^($GF_GROUP_RE)(; $GF_GROUP_RE)*\$"
# gf_total FILE: the whole run's figures, from the "total:" line above the last
gf_total() { sed -n 's/^total: //p' "$1" | tail -n 1; }

# gf_test_init NAME: the preamble every CLI test shares. Makes $tmp (removed
# at exit, after the commands given to gf_on_exit, in reverse order) and
# fail(), which prints "NAME: FAIL: ..." to stderr and exits 1.
gf_test_init() {
    GF_TEST_NAME=$1
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/gf-$1.XXXXXX")
    GF_ON_EXIT=()
    trap gf_test_cleanup EXIT
}
gf_on_exit() { GF_ON_EXIT+=("$1"); }
gf_test_cleanup() {
    local rc=$? i
    for ((i = ${#GF_ON_EXIT[@]} - 1; i >= 0; i--)); do eval "${GF_ON_EXIT[$i]}" || true; done
    [ -n "${tmp:-}" ] && rm -rf "$tmp"
    exit $rc
}
fail() {
    echo "${GF_TEST_NAME:-test}: FAIL: $*" >&2
    exit 1
}

# gf_grepq ARGS...: `CMD | gf_grepq -q PATTERN` where a test would write
# `CMD | grep -q PATTERN`. Under `set -o pipefail` the plain form is racy:
# grep -q exits at its first match, and a CMD still writing (genfence --help,
# a long report) dies of SIGPIPE, so the pipeline reads as false. gf_grepq
# reads all of its input first, then greps it. Exported for `bash -c`.
gf_grepq() {
    local input
    input=$(cat)
    grep "$@" <<<"$input"
}
export -f gf_grepq
