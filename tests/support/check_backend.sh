#!/usr/bin/env bash
# Check one genfence backend against ref through the CLI, with genfence's own
# margin gate (harness/verdict/compare.c) doing every judgement (used by
# tests/cli/backend_vs_ref.sh, backend_llama_vs_ref.sh and plugin_build.sh;
# llamacpp_llama.sh judges genfence's driving of llama.cpp, not its figures):
#
#     check_backend.sh GENFENCE MODEL_DIR BACKEND [--threads 1,2]
#
# For every prompt (the texts when the model has a tokenizer, a 16-id
# sequence, and one reaching n_positions - 1), at each thread count:
#   1. ref decodes 32 greedy tokens (`generate --json`; the script only reads
#      the ids out of it);
#   2. `genfence forward --against ref` runs the prompt + those tokens on
#      BACKEND and on ref and gates every position, teacher-forced: max
#      |delta logit| <= 1e-4 and BACKEND's argmax equal to ref's (so its
#      greedy tokens are ref's), a mismatch excused only where ref's top-1
#      minus top-2 is below the gate;
#   3. `generate --verify` on BACKEND: its cached greedy decode of 32 steps
#      against its own uncached forward, the same gate (so the cached path
#      BACKEND's `generate` takes is the uncached one step 2 judged).
# Then `generate --batch-prompts` (left-padded batch vs single prompts).
# Prints one line per check; exit 0 all passed, 1 not, 2 bad usage.
set -uo pipefail
if [ $# -lt 3 ]; then
    echo "usage: check_backend.sh GENFENCE MODEL_DIR BACKEND [--threads 1,2]" >&2
    exit 2
fi
gf=$1 model=$2 be=$3
shift 3
threads=1
while [ $# -gt 0 ]; do
    case $1 in
        --threads) threads=$2; shift 2 ;;
        *) echo "check_backend.sh: unknown option '$1'" >&2; exit 2 ;;
    esac
done
: "${GF_PYTHON:?GF_PYTHON must name a Python (it reads ids out of JSON)}"
GREEDY=32
fails=0
failed() { echo "FAIL $*"; fails=$((fails + 1)); }

# V and n_positions (GPT-2 | Llama), and the id prompts
read -r V NP < <("$GF_PYTHON" -c '
import json, sys
c = json.load(open(sys.argv[1]))
print(c["vocab_size"], c.get("n_positions") or c["max_position_embeddings"])' "$model/config.json")
ids16=$("$GF_PYTHON" -c 'import sys; V = int(sys.argv[1]); print(",".join(str((7 * i + 3) % V) for i in range(16)))' "$V")
idslong=$("$GF_PYTHON" -c '
import sys
V, n = int(sys.argv[1]), int(sys.argv[2])
print(",".join(str((11 * i + 5) % V) for i in range(n)))' "$V" "$((NP - GREEDY))")
labels=() sels=()
if [ -f "$model/tokenizer.json" ]; then
    for t in "Sherlock Holmes" "It was a dark night and" "My dear Watson, said he, I" \
             $'\u201cYou have been in Afghanistan, I perceive.\u201d'; do
        labels+=("'$t'") sels+=("--prompt"$'\t'"$t")
    done
fi
labels+=("ids x16") sels+=("--tokens"$'\t'"$ids16")
labels+=("ids x$((NP - GREEDY))") sels+=("--tokens"$'\t'"$idslong")

IFS=',' read -r -a thread_list <<<"$threads"
for i in "${!sels[@]}"; do
    label=${labels[$i]}
    IFS=$'\t' read -r flag value <<<"${sels[$i]}"
    if ! out=$("$gf" generate --model "$model" "$flag" "$value" --temperature 0 --no-eos \
                 --max-new-tokens "$GREEDY" --json 2>&1); then
        failed "$label: ref generate: $out"
        continue
    fi
    # the prompt and ref's greedy tokens but the last: the positions that chose them
    full=$("$GF_PYTHON" -c '
import json, sys
g = json.loads(sys.stdin.read())
print(",".join(map(str, g["prompt_tokens"] + g["tokens"][:-1])))' <<<"$out") || { failed "$label: ref generate --json unreadable"; continue; }
    for t in "${thread_list[@]}"; do
        if line=$("$gf" forward --model "$model" --tokens "$full" --backend "$be" --threads "$t" --against ref 2>&1); then
            echo "$line (threads $t, $label)"
        else
            failed "${line#FAIL } (threads $t, $label)"
        fi
        if v=$("$gf" generate --model "$model" "$flag" "$value" --verify --max-new-tokens "$GREEDY" \
                 --backend "$be" --threads "$t" 2>&1); then
            echo "ok   $be threads $t $label: generate --verify: $(grep -m1 'max |delta logit|' <<<"$v" | sed 's/^ *//')"
        else
            failed "$be threads $t $label: generate --verify: $(tr '\n' ' ' <<<"$v")"
        fi
    done
done
if [ -f "$model/tokenizer.json" ]; then
    for t in "${thread_list[@]}"; do
        if out=$("$gf" generate --model "$model" --batch-prompts "Holmes|It was a dark night and|My dear Watson, said he, I" \
                   --max-new-tokens 24 --backend "$be" --threads "$t" 2>&1); then
            echo "ok   $be threads $t batch-prompts: left-padded batch equals single prompts"
        else
            failed "$be threads $t --batch-prompts: $(tr '\n' ' ' <<<"$out")"
        fi
    done
fi
echo "$be: $([ $fails = 0 ] && echo "all passed" || echo "$fails failed")"
[ $fails = 0 ]
