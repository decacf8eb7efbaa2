#!/usr/bin/env bash
# The Llama family on the vendor backends (openblas, onednn) and on the
# example plugin (built out of tree against a `cmake --install` of this build)
# against ref through the CLI: tests/support/check_backend.sh per model and
# backend (`genfence forward --against ref`, genfence's own gate: logits
# within 1e-4 at every position of the prompts and of an id sequence reaching
# max_position_embeddings - 1, each position's argmax equal to ref's unless
# ref's margin is below the gate; generate --verify, --batch-prompts with
# left padding), at --threads 1,2 for the vendor backends.
#
# Models: models/holmes-llama when its weights are there, and always two
# random checkpoints written here by transformers itself (save_pretrained, so
# the files are what Hugging Face writes): a Llama with GQA (4 query heads, 2
# key/value heads, head_dim 24, so H head_dim 96 is not hidden 64), an untied
# head and linear rope scaling, and a Qwen2 with q/k/v biases and a tied head. Weights are
# N(0, 0.1) (norm weights 1 + N(0, 0.1)) so logits spread over several nats
# and the 1e-4 bar means something. A vendor backend not built or not
# available here is reported and skipped (backend_vs_ref.sh's rule).
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}" "${GF_PYTHON:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init backend_llama_vs_ref
export GENFENCE_MODULE_DIR="$GF_BUILD/backends"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"          # see backend_vs_ref.sh
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}intercept_tls_get_addr=0"

"$GF_PYTHON" - "$tmp" "$GF_SRC/models/holmes-gpt/tokenizer.json" <<'EOF'
import os, shutil, sys
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

out, tok = sys.argv[1], sys.argv[2]
common = dict(vocab_size=512, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=160,
              rms_norm_eps=1e-5, hidden_act="silu", bos_token_id=511, eos_token_id=511)
models = {
    "tiny-llama": (LlamaForCausalLM, LlamaConfig(**common, head_dim=24, rope_theta=10000.0,
                                                 tie_word_embeddings=False, attention_bias=False,
                                                 rope_scaling={"rope_type": "linear", "factor": 2.0})),
    "tiny-qwen2": (Qwen2ForCausalLM, Qwen2Config(**common, rope_theta=1000000.0, tie_word_embeddings=True,
                                                 use_sliding_window=False)),
}
for seed, (name, (cls, cfg)) in enumerate(models.items()):
    torch.manual_seed(100 + seed)
    m = cls(cfg).eval()
    with torch.no_grad():
        for pname, p in m.named_parameters():
            if pname.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(0.1 * torch.randn_like(p))
    d = os.path.join(out, name)
    m.save_pretrained(d, safe_serialization=True)
    if os.path.exists(tok):
        shutil.copy(tok, os.path.join(d, "tokenizer.json"))
    print(f"made {name}: {cfg.model_type}, H {cfg.num_attention_heads}, H_kv {cfg.num_key_value_heads}, "
          f"tied {cfg.tie_word_embeddings}")
EOF
models=("$tmp/tiny-llama" "$tmp/tiny-qwen2")
if [ -f "$GF_SRC/models/holmes-llama/model.safetensors" ]; then
    models=("$GF_SRC/models/holmes-llama" "${models[@]}")
else
    echo "models/holmes-llama has no weights here: random checkpoints only"
fi

# the example plugin, out of tree, against the installed headers only
cmake --install "$GF_BUILD" --prefix "$tmp/prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "install"; }
pc=$(find "$tmp/prefix" -name genfence.pc | head -1)
[ -n "$pc" ] || fail "no genfence.pc installed"
cp -r "$GF_SRC/examples/plugin" "$tmp/plugin-src"
rm -rf "$tmp/plugin-src/build"*
env -u CPATH -u C_INCLUDE_PATH PKG_CONFIG_PATH="$(dirname "$pc")" \
    cmake -S "$tmp/plugin-src" -B "$tmp/plugin-build" -DCMAKE_BUILD_TYPE=Release >"$tmp/cfg.log" 2>&1 \
    || { cat "$tmp/cfg.log"; fail "plugin configure"; }
cmake --build "$tmp/plugin-build" -j2 >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "plugin build"; }
plugin="$tmp/plugin-build/libgenfence_example.so"
[ -f "$plugin" ] || fail "no $plugin"

backends=()
for be in openblas onednn; do
    if [ ! -f "$GF_BUILD/backends/libgenfence_backend_$be.so" ]; then
        echo "skip $be: module not built in this configuration"
        continue
    fi
    case "$("$GENFENCE" backends | awk -v b="$be" '$1 == b')" in
        *" available "*) backends+=("$be") ;;
        *) echo "skip $be: built but unavailable here" ;;
    esac
done
backends+=("$plugin")

status=0
checked=0
for model in "${models[@]}"; do
    for be in "${backends[@]}"; do
        threads=1
        [ "$be" = "$plugin" ] || threads=1,2
        echo "== $(basename "$model") on $(basename "$be")"
        "$GF_SRC/tests/support/check_backend.sh" "$GENFENCE" "$model" "$be" --threads "$threads" \
            || status=1
        checked=$((checked + 1))
    done
done
echo "$checked (model, backend) pairs checked"
exit $status
