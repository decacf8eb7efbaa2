#!/usr/bin/env bash
# The bad-input catalogue (tests/bad-inputs/README.md): every entry of
# tests/bad-inputs/CATALOGUE is fed to genfence the way its HOW column says; the
# exit status must be the one listed and the output (stdout + stderr) must
# match the message (grep -E). Every file under tests/bad-inputs/ must be named
# by an entry (or be a helper an entry uses), so no input sits there untested.
set -uo pipefail
: "${GENFENCE:?set GENFENCE to the genfence binary}" "${GF_SRC:?set GF_SRC to the source tree}"
[[ -x "$GENFENCE" ]] || { echo "bad_inputs: GENFENCE=$GENFENCE is not an executable" >&2; exit 1; }
dir="$GF_SRC/tests/bad-inputs"
cat="$dir/CATALOGUE"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init bad_inputs
model="$GF_SRC/models/holmes-gpt"

# run HOW PATH: the genfence command line for one entry (output in $tmp/out)
run() {
    local how=$1 p=$2
    case $how in
    list)      "$GENFENCE" list "$p" ;;
    list-cap)  GENFENCE_CASE_MAX_BYTES=256 GENFENCE_MAX_CASES=2 "$GENFENCE" list "$p" ;;
    run)       GENFENCE_ROOT="$GF_SRC" "$GENFENCE" run --backend ref --no-report -j 1 "$p" ;;
    fifo)      mkfifo "$tmp/fifo.yaml" && "$GENFENCE" list "$tmp/fifo.yaml" ;;
    tokenize)  "$GENFENCE" tokenize --tokenizer "$p" --text "Holmes and Watson" ;;
    model)     "$GENFENCE" forward --model "$p" --tokens 1,2 --out "$tmp/out.safetensors" ;;
    model-cap) GENFENCE_MAX_TENSOR_BYTES=256 "$GENFENCE" forward --model "$p" --tokens 1,2 --out "$tmp/out.safetensors" ;;
    forward-prompt)  "$GENFENCE" forward --model "$model" --prompt "$(cat "$p")" --out "$tmp/out.safetensors" ;;
    generate-prompt) "$GENFENCE" generate --model "$model" --prompt "$(cat "$p")" --max-new-tokens 2 ;;
    generate-batch)  "$GENFENCE" generate --model "$model" --batch-prompts "$(cat "$p")|Holmes" --max-new-tokens 2 ;;
    *) echo "unknown HOW '$how'"; return 99 ;;
    esac
}

fails=0 n=0
declare -A named=()
while IFS= read -r line; do
    [[ -z $line || $line == \#* ]] && continue
    IFS='|' read -r path how want msg covers <<<"$line"
    path=$(echo "$path" | xargs) how=$(echo "$how" | xargs) want=$(echo "$want" | xargs)
    msg=$(echo "$msg" | sed 's/^ *//; s/ *$//')
    named[$path]=1
    p="$dir/$path"
    [[ $how == fifo || -e $p || -L $p ]] || { echo "FAIL $path: no such entry"; fails=$((fails + 1)); continue; }
    n=$((n + 1))
    (cd "$tmp" && timeout 60 bash -c "$(declare -f run); GENFENCE='$GENFENCE' GF_SRC='$GF_SRC' model='$model' tmp='$tmp' run '$how' '$p'") \
        >"$tmp/out" 2>&1 </dev/null
    rc=$?
    rm -f "$tmp/fifo.yaml"
    if [[ $rc != "$want" ]] || ! grep -Eq -- "$msg" "$tmp/out"; then
        echo "FAIL $path ($how): exit $rc (want $want), message /$msg/ $(grep -Eq -- "$msg" "$tmp/out" && echo found || echo 'not found'):"
        head -c 1500 "$tmp/out" | sed 's/^/    /'
        fails=$((fails + 1))
    else
        echo "ok   $path ($how): exit $rc"
    fi
done <"$cat"

# every file is an entry, or inside an entry's directory, or a documented helper
while IFS= read -r f; do
    rel=${f#"$dir"/}
    case $rel in CATALOGUE | README.md | make_inputs.py | model/_tiny/*) continue ;; esac
    hit=
    for k in "${!named[@]}"; do
        [[ $rel == "$k" || $rel == "$k"/* ]] && { hit=1; break; }
    done
    [[ -n $hit ]] || { echo "FAIL $rel is in tests/bad-inputs/ but not in CATALOGUE"; fails=$((fails + 1)); }
done < <(find "$dir" \( -type f -o -type l \) | sort)

echo "bad_inputs: $n entries, $fails failed"
[[ $fails == 0 ]]
