#!/usr/bin/env bash
# Regenerate this machine's section of docs/conformance.md: the runs behind
# the conformance table (the fp32 backends in one run, llama.cpp once per
# weight type: f32, f16, q8_0, q6_k, q5_k_m, q4_k_m, q4_0) and `genfence scoreboard` over their reports, with
# docs/conformance_findings.md (the hand-written part) included after the
# table. The page holds one section per machine seen (a machine: its CPU model
# and ISA flags, from the runs' audit.cpu): this run adds its machine's section
# or replaces the one it had, keeps the others, and rewrites the page's head
# (the machines with each backend's CPU path, and how the tables differ)
# with tools/conformance_page.py.
#
#   tools/conformance.sh                 # build/genfence, reports/conformance/
#   GENFENCE=build-x/genfence tools/conformance.sh
#
# Environment: GENFENCE (default build/genfence), GF_CONFORMANCE_DIR (the
# reports, default reports/conformance; emptied first), GF_CONFORMANCE_DOC
# (the page, default docs/conformance.md). Each run's console output is kept
# beside its report (DIR/NAME.log). GF_CONFORMANCE_REUSE=1 skips the runs and
# makes the section from the reports already in DIR (from an earlier run of
# this script on this machine). GF_PYTHON: the Python for the page (default
# python3; standard library only).
#
# The page names the commit the runs were made from; run this in a clean
# checkout (no local changes) so that commit is what ran: a tree with local
# changes is reported here before the runs. Needs the llamacpp backend
# (tools/setup/setup_llamacpp.sh, then a build): without it the script stops
# (exit 2) instead of writing a table with empty llama.cpp columns.
#
# The served column (`http`, docs/http.md): the same llama.cpp through its
# own server, beside the C-ABI `llamacpp:f32` column. Per model (holmes-gpt,
# holmes-llama) one run of that model's cases of the default suite through
# --backend http:URL (the cases that need full logits are skipped by the plan,
# with the reason, and listed under the skips). The URLs come from
# GF_CONFORMANCE_HTTP ("holmes-gpt=URL holmes-llama=URL": any OpenAI-compatible
# server serving that model, e.g. a vLLM deployment); unset, the script starts
# llama-server itself (tools/setup/setup_llama_server.sh; F32 GGUFs from
# build/tools/gguf_write, f32 KV cache, no flash attention, as llamacpp:f32)
# on a free loopback port per model and stops it after. Neither given nor
# built: the column is left out, saying so (GF_CONFORMANCE_HTTP=off: left out
# quietly).
#
# Exit status: 0 the page was written (findings in the runs are expected: a
# run that exits 1 is a table with findings), 2 a run or the scoreboard could
# not be made (bad input, a backend missing, an error).
set -euo pipefail
cd "$(dirname "$0")/.."
G=${GENFENCE:-build/genfence}
R=${GF_CONFORMANCE_DIR:-reports/conformance}
DOC=${GF_CONFORMANCE_DOC:-docs/conformance.md}
# llama.cpp's weight types, one column each; past q8_0 (issue 31 item 5) with
# repack=off: ggml's AMX path crashes on those quantized weights on an AMX
# CPU (docs/llamacpp.md, "The AMX crash"), and the plain kernels are what the
# calibrated bands were measured on (docs/calibration.md)
WEIGHTS=(f32 f16 q8_0 q6_k q5_k_m q4_k_m q4_0)
spec() { # WEIGHT: its llamacpp backend spec
    case $1 in
    f32 | f16 | q8_0) echo "llamacpp:$1" ;;
    *) echo "llamacpp:$1,repack=off" ;;
    esac
}
PY=${GF_PYTHON:-python3}
REUSE=${GF_CONFORMANCE_REUSE:-0}

die() { echo "conformance: $*" >&2; exit 2; }
[[ -x "$G" ]] || die "no genfence at $G (build it: make, or set GENFENCE)"
for b in ref openblas onednn $(for w in "${WEIGHTS[@]}"; do spec "$w"; done); do
    line=$("$G" backends --backend "$b" | awk -v b="$b" '$1 == b' | tail -n 1)
    [[ "$line" == *" available "* ]] || die "backend $b is not available here: ${line:-not listed}"
done
if [[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]]; then
    echo "conformance: warning: the tree has local changes; the page will name $(git rev-parse --short HEAD)," \
        "which is not exactly what ran" >&2
fi

if [[ "$REUSE" != 1 ]]; then
    rm -rf "$R"
    mkdir -p "$R"
fi
run() { # NAME ARGS...: one run into $R/NAME; exit 0 or 1 (findings) is a report
    local name=$1 rc=0
    shift
    if [[ "$REUSE" == 1 ]]; then
        [[ -f "$R/$name/run.json" ]] || die "GF_CONFORMANCE_REUSE=1 but no $R/$name/run.json"
        echo "conformance: reuse $R/$name/run.json" >&2
        return 0
    fi
    echo "conformance: run $name" >&2
    "$G" run -q "$@" --report-dir "$R/$name" >"$R/$name.log" 2>&1 || rc=$?
    [[ $rc -le 1 && -f "$R/$name/run.json" ]] || { tail -n 20 "$R/$name.log" >&2; die "run $name exited $rc"; }
    tail -n 1 "$R/$name.log" | sed "s/^/conformance:   /" >&2
}
run fp32 --backend ref --backend openblas --backend onednn
reports=("$R/fp32/run.json")
for w in "${WEIGHTS[@]}"; do
    run "llamacpp-$w" --backend "$(spec "$w")"
    reports+=("$R/llamacpp-$w/run.json")
done

# the served column: each model's case files of the default suite, and its
# cases of the files several models share (a server serves one model)
served_files() { # MODEL: its case files
    if [[ $1 == holmes-llama ]]; then
        echo cases/generation_llama.yaml cases/golden_llama.yaml cases/stop_strings_llama.yaml cases/sliding_llama.yaml \
            cases/statistical.yaml cases/served.yaml
    else
        echo cases/generation.yaml cases/golden.yaml cases/stop_strings.yaml cases/statistical.yaml cases/served.yaml
    fi
}
served_filter() { # MODEL: a POSIX ERE for the ids of its cases in those files
    echo "^((statistical|served\.topk_kl)\.$1|(cache|batch|sampling|context|eos|stream|golden|stop|sliding)\..*)\$"
}
SERVED=${GF_CONFORMANCE_HTTP:-}
spids=()
stop_servers() { for p in "${spids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }
trap stop_servers EXIT
if [[ -z "$SERVED" && "$REUSE" != 1 ]]; then
    srv="$(bash tools/setup/setup_llama_server.sh --print-dir)/bin/llama-server"
    gw="$(dirname "$G")/tools/gguf_write"
    if [[ -x "$srv" && -x "$gw" ]]; then
        for m in holmes-gpt holmes-llama; do
            "$gw" "models/$m" "$R/$m.gguf" >/dev/null || die "gguf_write models/$m failed"
            ctx=$("$PY" -c 'import json,sys; c=json.load(open(sys.argv[1])); print(c.get("n_positions") or c["max_position_embeddings"])' "models/$m/config.json")
            port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
            "$srv" -m "$R/$m.gguf" --alias "$m" --host 127.0.0.1 --port "$port" -c "$ctx" -np 1 -t 1 -ctk f32 -ctv f32 \
                -fa off >"$R/$m.server.log" 2>&1 &
            spids+=($!)
            for _ in $(seq 1 240); do
                curl -sf --noproxy '*' "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break
                sleep 0.5
            done
            curl -sf --noproxy '*' "http://127.0.0.1:$port/health" >/dev/null 2>&1 ||
                die "llama-server for $m did not come up (log: $R/$m.server.log)"
            SERVED+="$m=http://127.0.0.1:$port "
        done
    else
        echo "conformance: no served column: no llama-server built (tools/setup/setup_llama_server.sh) and" \
            "GF_CONFORMANCE_HTTP unset" >&2
    fi
fi
if [[ "$REUSE" == 1 ]]; then
    for m in holmes-gpt holmes-llama; do [[ -f "$R/http-$m/run.json" ]] && reports+=("$R/http-$m/run.json"); done
elif [[ "$SERVED" != off ]]; then
    for pair in $SERVED; do
        m=${pair%%=*}
        url=${pair#*=}
        [[ -d "models/$m" && "$url" == http* ]] || die "GF_CONFORMANCE_HTTP: '$pair' is not MODEL=URL (holmes-gpt, holmes-llama)"
        # shellcheck disable=SC2046 # the file list splits on purpose
        run "http-$m" $(served_files "$m") --backend "http:$url,timeout=120" --filter "$(served_filter "$m")" \
            --no-triangulate
        reports+=("$R/http-$m/run.json")
    done
fi
stop_servers
spids=()
"$G" scoreboard "${reports[@]}" --include docs/conformance_findings.md -o "$R/scoreboard.md" ||
    die "scoreboard exited $?"
"$PY" tools/conformance_page.py "$DOC" "$R/scoreboard.md" "${reports[@]}" || die "the page could not be written"
echo "conformance: wrote this machine's section of $DOC from ${#reports[@]} runs in $R" >&2
