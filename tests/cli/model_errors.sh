#!/usr/bin/env bash
# genfence forward on broken model directories: each must exit 2 with a
# "genfence: <message>" on stderr that names the problem (docs/model-files.md).
# A good directory, written the same way, must load and run (exit 0).
set -euo pipefail
: "${GENFENCE:?set GENFENCE to the genfence binary}" "${GF_PYTHON:?set GF_PYTHON to the venv python}"
[[ -x "$GENFENCE" ]] || { echo "model_errors: GENFENCE=$GENFENCE is not an executable" >&2; exit 1; }

. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init model_errors

# Tiny GPT-2 (V=16, n_positions=8, D=8, L=2, H=2) with numpy + safetensors,
# then one broken copy per case, each differing from good/ in one thing.
"$GF_PYTHON" - "$tmp" <<'PY'
import json, os, shutil, struct, sys
import numpy as np
from safetensors.numpy import save_file

root = sys.argv[1]
V, P, D, L, H = 16, 8, 8, 2, 2
F = 4 * D
cfg = {"model_type": "gpt2", "vocab_size": V, "n_positions": P, "n_embd": D, "n_layer": L,
       "n_head": H, "n_inner": None, "activation_function": "gelu_new",
       "layer_norm_epsilon": 1e-5, "bos_token_id": 15, "eos_token_id": 15,
       "tie_word_embeddings": True}
rng = np.random.default_rng(0)
def r(*shape):
    return (rng.standard_normal(shape) * 0.1).astype(np.float32)
t = {"transformer.wte.weight": r(V, D), "transformer.wpe.weight": r(P, D),
     "transformer.ln_f.weight": np.ones(D, np.float32), "transformer.ln_f.bias": r(D)}
for l in range(L):
    p = f"transformer.h.{l}."
    t.update({p + "ln_1.weight": np.ones(D, np.float32), p + "ln_1.bias": r(D),
              p + "attn.c_attn.weight": r(D, 3 * D), p + "attn.c_attn.bias": r(3 * D),
              p + "attn.c_proj.weight": r(D, D), p + "attn.c_proj.bias": r(D),
              p + "ln_2.weight": np.ones(D, np.float32), p + "ln_2.bias": r(D),
              p + "mlp.c_fc.weight": r(D, F), p + "mlp.c_fc.bias": r(F),
              p + "mlp.c_proj.weight": r(F, D), p + "mlp.c_proj.bias": r(D)})

good = os.path.join(root, "good")
os.makedirs(good)
with open(os.path.join(good, "config.json"), "w") as f:
    json.dump(cfg, f, indent=2)
save_file(t, os.path.join(good, "model.safetensors"), metadata={"format": "pt"})

def copy(name):
    d = os.path.join(root, name)
    shutil.copytree(good, d)
    return d

def read_st(d):
    b = open(os.path.join(d, "model.safetensors"), "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]

def write_st(d, hdr, data):
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)

def edit_header(name, fn):
    d = copy(name)
    hdr, data = read_st(d)
    fn(hdr)
    write_st(d, hdr, data)

# header length past EOF: the u64 at offset 0 claims more than the file holds
d = copy("hdr_past_eof")
p = os.path.join(d, "model.safetensors")
b = bytearray(open(p, "rb").read())
b[:8] = struct.pack("<Q", len(b))
open(p, "wb").write(bytes(b))

# offsets past end: a truncated download (last 64 bytes missing)
d = copy("truncated")
p = os.path.join(d, "model.safetensors")
os.truncate(p, os.path.getsize(p) - 64)

# overlap: ln_f.bias points at ln_f.weight's bytes
def overlap(h):
    h["transformer.ln_f.bias"]["data_offsets"] = list(h["transformer.ln_f.weight"]["data_offsets"])
edit_header("overlap", overlap)

# wrong dtype size: F32 data labelled F16 (16 bytes claimed, 32 stored)
def wrong_dtype(h):
    h["transformer.h.0.ln_1.bias"]["dtype"] = "F16"
edit_header("wrong_dtype", wrong_dtype)

# missing tensor
def missing(h):
    del h["transformer.h.1.mlp.c_proj.bias"]
edit_header("missing_tensor", missing)

# shape mismatch: config says 16 positions, wpe has 8 rows
d = copy("shape_mismatch")
c = dict(cfg, n_positions=16)
with open(os.path.join(d, "config.json"), "w") as f:
    json.dump(c, f, indent=2)

# malformed config.json: trailing comma on line 3
d = copy("bad_config")
with open(os.path.join(d, "config.json"), "w") as f:
    f.write('{\n  "model_type": "gpt2",\n  "vocab_size": 16,,\n  "n_embd": 8\n}\n')

# unsupported model_type
d = copy("gemma2")
with open(os.path.join(d, "config.json"), "w") as f:
    json.dump(dict(cfg, model_type="gemma2"), f)
PY

failures=0

# run_case NAME WANT_RC SUBSTRING...: genfence forward on $tmp/NAME
run_case() {
    local name=$1 want_rc=$2
    shift 2
    local dir="$tmp/$name" rc=0 out="$tmp/$name.out.safetensors"
    "$GENFENCE" forward --model "$dir" --tokens 1,2 --out "$out" >"$tmp/$name.stdout" 2>"$tmp/$name.stderr" || rc=$?
    local err
    err=$(cat "$tmp/$name.stderr")
    local bad=""
    [[ $rc -eq $want_rc ]] || bad="exit status $rc, expected $want_rc"
    if [[ $want_rc -eq 2 ]]; then
        [[ "$err" == *"genfence: "* ]] || bad="${bad:+$bad; }stderr lacks the 'genfence: ' prefix"
        for sub in "$@"; do
            [[ "$err" == *"$sub"* ]] || bad="${bad:+$bad; }stderr lacks '$sub'"
        done
        [[ ! -e "$out" ]] || bad="${bad:+$bad; }an output file was written"
    else
        [[ -s "$out" ]] || bad="${bad:+$bad; }no output file $out"
    fi
    if [[ -n "$bad" ]]; then
        failures=$((failures + 1))
        echo "FAIL $name: $bad"
        echo "  expected: exit $want_rc${*:+, stderr containing:}"
        for sub in "$@"; do echo "    '$sub'"; done
        echo "  got: exit $rc, stderr:"
        sed 's/^/    /' "$tmp/$name.stderr"
    else
        echo "ok   $name: exit $rc${err:+ -- $err}"
    fi
}

run_case good 0
run_case hdr_past_eof 2 "hdr_past_eof/model.safetensors: header length" "runs past the end of the file"
run_case truncated 2 "truncated/model.safetensors: tensor '" "end past the data section" \
    "the file is truncated or the offsets are wrong"
run_case overlap 2 "overlap/model.safetensors: tensors 'transformer.ln_f." "overlap in data bytes"
run_case wrong_dtype 2 "wrong_dtype/model.safetensors: tensor 'transformer.h.0.ln_1.bias'" \
    "dtype F16 x shape [8] = 16 bytes" "span 32 bytes"
run_case missing_tensor 2 "missing_tensor/model.safetensors: tensor 'h.1.mlp.c_proj.bias' missing" \
    "'transformer.h.1.mlp.c_proj.bias'"
run_case shape_mismatch 2 "shape_mismatch/model.safetensors: tensor 'transformer.wpe.weight': shape [8, 8]" \
    "expected (n_positions, n_embd) = [16, 8]"
run_case bad_config 2 "bad_config/config.json: invalid JSON at line 3"
run_case gemma2 2 "gemma2/config.json: model_type 'gemma2' is not supported"
run_case no_such_dir 2 "no_such_dir" "No such file or directory"

if [[ $failures -ne 0 ]]; then
    echo "model_errors: $failures case(s) failed"
    exit 1
fi
echo "model_errors: all cases passed"
