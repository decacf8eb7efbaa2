#!/usr/bin/env bash
# The Llama family on the llama.cpp backend (backends/llamacpp converts it to
# GGUF arch "llama", with conversion/llama.py's q/k row permutation, or
# "qwen2") against ref, at fp32's own bar: tests/support/check_backend.sh
# at atol 1e-4 (`genfence forward --against ref`, genfence's own gate, at
# every position up to max_position_embeddings: logits and greedy tokens;
# generate --verify, --batch-prompts with left padding), at
# --threads 1,2, on two random checkpoints written by transformers itself
# (the ones tests/cli/backend_llama_vs_ref.sh makes): a Llama with GQA
# (4 query heads, 2 kv heads), head_dim 24 (H head_dim 96 != hidden 64), an
# untied head and linear rope scaling; a Qwen2 with q/k/v biases and a tied
# head; and backends/llamacpp/test_llamacpp_abi on both at 1e-4 (padding
# queries, cache length and reset, the refusals). Plus: a rotary model whose q/k rows were NOT permuted must fail the
# same check (GENFENCE_LLAMACPP_NO_PERMUTE=1, a test-only switch), so the
# check can tell. Skipped (exit 0) when the module is not built.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}" "${GF_PYTHON:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export GENFENCE_MODULE_DIR="$GF_BUILD/backends"
# ggml's OpenMP workers sleep instead of spinning between calls (backend_vs_ref.sh)
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
if [ ! -f "$GF_BUILD/backends/libgenfence_backend_llamacpp.so" ]; then
    echo "skip: the llamacpp module is not built in this configuration (tools/setup/setup_llamacpp.sh, docs/llamacpp.md)"
    exit 0
fi
# the checkpoints of backend_llama_vs_ref.sh, made by the same Python block
sed -n '/^"\$GF_PYTHON" - "\$tmp"/,/^EOF$/p' "$GF_SRC/tests/cli/backend_llama_vs_ref.sh" | sed '1d;$d' >"$tmp/make.py"
[ -s "$tmp/make.py" ] || fail "could not find the model-making block in backend_llama_vs_ref.sh"
"$GF_PYTHON" "$tmp/make.py" "$tmp" "$GF_SRC/models/holmes-gpt/tokenizer.json"
status=0
for m in tiny-llama tiny-qwen2; do
    echo "== $m on llamacpp:f32"
    "$GF_SRC/tests/support/check_backend.sh" "$GENFENCE" "$tmp/$m" llamacpp:f32 --threads 1,2 || status=1
done
# the ABI mapping slot by slot (padding queries, cache, refusals) at 1e-4
abi="$GF_BUILD/backends/llamacpp/test_llamacpp_abi"
if [ -x "$abi" ]; then
    for m in tiny-llama tiny-qwen2; do
        echo "== $m: test_llamacpp_abi at 1e-4"
        "$abi" "$tmp/$m" "$GF_BUILD/backends/libgenfence_backend_llamacpp.so" 1e-4 || status=1
    done
else
    echo "note: $abi not built (GENFENCE_TESTS=OFF?)"
fi
echo "== tiny-llama without the q/k permutation (must fail)"
if GENFENCE_LLAMACPP_NO_PERMUTE=1 "$GF_SRC/tests/support/check_backend.sh" "$GENFENCE" \
        "$tmp/tiny-llama" llamacpp:f32 >"$tmp/noperm.out" 2>&1; then
    cat "$tmp/noperm.out"
    fail "unpermuted q/k passed: the check cannot see the rotary layout"
fi
grep -q '^FAIL .* against ref: .*exceeds atol' "$tmp/noperm.out" || { cat "$tmp/noperm.out"; fail "unpermuted q/k failed, but not on the logits"; }
echo "ok   unpermuted q/k fails on the logits: $(grep -m1 '^FAIL' "$tmp/noperm.out")"
exit $status
