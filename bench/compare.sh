#!/usr/bin/env bash
# bench/compare.sh: one workload (genfence bench's: a 16-token prompt, 100
# greedy tokens, warm-up + median of 5, prefill 128, decode B=8) on genfence's
# backends, on PyTorch (Debian's torch via the project venv, bench/torch_bench.py)
# and on llama.cpp (the llamacpp module: llama-cpp-python's bundled llama.cpp
# from tools/setup/setup_llamacpp.sh, the model converted to GGUF F32 in memory,
# f32 KV), runs interleaved round by round in a rotating order, then the
# medians and the ratios side by side, each ratio with its spread over the
# rounds (lowest and highest), and the load average before and after each
# run (bench/compare.py). A tool for people, not part of the test suite: its
# numbers are timings.
#
# usage: bench/compare.sh (--model DIR | --shape gpt2-small|llama-small)
#            [--threads N] [--rounds R] [--backends "ref openblas onednn"] [--build DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
build="$root/build" threads=1 rounds=3 backends="ref openblas onednn" src=()
python="$root/.venv/bin/python"
while [ $# -gt 0 ]; do
    case $1 in
    --model | --shape) src=("$1" "$2"); shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --backends) backends=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
    esac
done
[ ${#src[@]} -eq 2 ] || { echo "compare.sh: need --model DIR or --shape NAME" >&2; exit 2; }
genfence="$build/genfence"
[ -x "$genfence" ] || { echo "compare.sh: no $genfence (build first, or --build DIR)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

runners=($backends llamacpp pytorch)
probe=1
for ((r = 0; r < rounds; r++)); do
    n=${#runners[@]}
    for ((i = 0; i < n; i++)); do
        name=${runners[$(((i + r) % n))]}
        out="$tmp/r$r-$name.json"
        echo "compare: round $((r + 1))/$rounds: $name" >&2
        cat /proc/loadavg >"$tmp/r$r-$name.loadavg" 2>/dev/null || true # the machine's state, beside each figure
        if [ "$name" = pytorch ]; then
            "$python" "$here/torch_bench.py" "${src[@]}" --threads "$threads" >"$out" ||
                echo "{\"backend\": \"pytorch\", \"ok\": false, \"error\": \"torch_bench.py failed\"}" >"$out"
        else
            args=(--no-uncached --json --threads "$threads" --backend "$name")
            [ $probe -eq 1 ] || args+=(--no-probe)
            probe=0
            "$genfence" bench "${src[@]}" "${args[@]}" >"$out" || true
        fi
        cat /proc/loadavg >>"$tmp/r$r-$name.loadavg" 2>/dev/null || true
    done
done
"$python" "$here/compare.py" "$tmp"
