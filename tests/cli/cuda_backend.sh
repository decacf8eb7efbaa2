#!/usr/bin/env bash
# The cuda backend module as genfence sees it (backends/cuda/README.md).
# Skipped where this configuration did not build the module. Otherwise:
#   1. the module links cudart and cuBLAS, not libcuda, and exports only
#      genfence_backend_entry; genfence itself links no CUDA library;
#   2. without a usable GPU: `genfence backends` (text and --json) lists cuda
#      and each option unavailable with the CUDA runtime's own text; `genfence
#      run` lists it unavailable and does not run it, --require-backend cuda
#      makes that a failure (exit 1), `forward --backend cuda:bf16` exits 2
#      with the reason; ref still runs;
#   3. with a GPU: each option declares its dtype (fp32, fp16 for tf32, bf16,
#      fp16), an unknown option is refused naming it (exit 2), and the
#      uncached logits of holmes-gpt match ref's within 1e-4 (fp32). The whole
#      suite on the GPU is tools/device/run-cuda.sh's job.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}" "${GF_PYTHON:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init cuda_backend

so="$GF_BUILD/backends/libgenfence_backend_cuda.so"
if [ ! -f "$so" ]; then
    echo "skip: the cuda module is not built in this configuration"
    exit 0
fi
model="$GF_SRC/models/holmes-gpt"

# 1
needed=$(readelf -d "$so" | awk '/NEEDED/{print $5}' | tr -d '[]')
grep -qx 'libcudart.so.[0-9]*' <<<"$needed" || fail "module does not link libcudart: $needed"
grep -qx 'libcublas.so.[0-9]*' <<<"$needed" || fail "module does not link libcublas: $needed"
if grep -q '^libcuda\.so' <<<"$needed"; then fail "module links the driver (libcuda)"; fi
exports=$(nm -D --defined-only "$so" | awk '$2 == "T" {print $3}')
[ "$exports" = "genfence_backend_entry" ] || fail "module exports more than the entry: $exports"
if ldd "$GENFENCE" | grep -E 'libcudart|libcublas|libcuda\.so'; then fail "genfence links a CUDA library"; fi
echo "ok   module: cudart + cuBLAS, no libcuda, one export; genfence links no CUDA"

line=$("$GENFENCE" backends | awk '$1 == "cuda"')
echo "$line"
specs=(cuda:tf32 cuda:bf16 cuda:fp16)
if [[ "$line" != *" available "* ]]; then
    # 2: the reason is the runtime's text and error name, e.g. "cuda: CUDA driver
    # version is insufficient ... (cudaGetDeviceCount: cudaErrorInsufficientDriver ...)"
    echo "$line" | grep -E '^cuda +unavailable +cuda: .+ \(cuda[A-Za-z]+: cudaError[A-Za-z]+' >/dev/null ||
        fail "cuda unavailable without the CUDA error text: $line"
    why=$(echo "$line" | sed -E 's/^cuda +unavailable +//')
    out=$("$GENFENCE" backends --backend cuda:tf32 --backend cuda:bf16 --backend cuda:fp16)
    for s in "${specs[@]}"; do
        echo "$out" | awk -v s="$s" '$1 == s' | grep -F "unavailable  $why" >/dev/null || fail "$s not unavailable with '$why'"
    done
    "$GENFENCE" backends --json | "$GF_PYTHON" -c '
import json, sys
e = next(x for x in json.load(sys.stdin) if x["name"] == "cuda")
assert not e["available"] and e["why"] == sys.argv[1], e
assert e["source"].endswith("libgenfence_backend_cuda.so"), e' "$why"
    echo "ok   backends: cuda and its options unavailable: $why"

    (cd "$GF_SRC" && "$GENFENCE" run --filter '^cache\.sherlock$' --no-report) >"$tmp/run" 2>&1 || true
    # named once, as the summary's skip line; not in the header nor the tested: line
    [ "$(grep -cF "$why" "$tmp/run")" = 1 ] && grep -qxF "backend cuda: unavailable here, not run: $why" "$tmp/run" ||
        { cat "$tmp/run"; fail "run does not list cuda once as unavailable with the reason"; }
    if grep -E '^tested:.*cuda' "$tmp/run"; then fail "the tested: line names cuda, which ran nothing"; fi
    if grep -E '\[cuda\]' "$tmp/run"; then fail "run ran a case on cuda"; fi
    grep -E '^pass +cache\.sherlock \[ref\]' "$tmp/run" >/dev/null || { cat "$tmp/run"; fail "ref did not pass"; }
    set +e
    (cd "$GF_SRC" && "$GENFENCE" run --filter '^cache\.sherlock$' --backend ref --require-backend cuda --no-report) \
        >"$tmp/req" 2>&1
    rc=$?
    set -e
    cat "$tmp/req"
    [ $rc -eq 1 ] || fail "--require-backend cuda without a GPU: exit $rc, want 1"
    grep -F "$why" "$tmp/req" >/dev/null || fail "--require-backend cuda: no reason"
    echo "ok   run: cuda listed unavailable with the reason and not run; --require-backend cuda exits 1"

    set +e
    "$GENFENCE" forward --model "$model" --tokens 1,2,3 --out "$tmp/x.safetensors" --backend cuda:bf16 2>"$tmp/err"
    rc=$?
    set -e
    cat "$tmp/err"
    [ $rc -eq 2 ] || fail "forward --backend cuda:bf16 without a GPU: exit $rc, want 2"
    grep -F "$why" "$tmp/err" >/dev/null || fail "forward: the reason is missing"
    echo "ok   forward --backend cuda:bf16: exit 2 with the reason"
    exit 0
fi

# 3: a GPU
"$GENFENCE" backends --json --backend cuda:tf32 --backend cuda:bf16 --backend cuda:fp16 | "$GF_PYTHON" -c '
import json, sys
d = {e["name"]: e for e in json.load(sys.stdin)}
want = {"cuda": "fp32", "cuda:tf32": "fp16", "cuda:bf16": "bf16", "cuda:fp16": "fp16"}
for name, dt in want.items():
    assert d[name]["available"] and d[name]["dtype"] == dt, (name, d[name])
    assert "cuBLAS" in d[name]["library"], d[name]
print("ok   dtypes:", ", ".join(f"{n} {d[n][\"dtype\"]}" for n in want))'
set +e
"$GENFENCE" forward --model "$model" --tokens 1,2,3 --out "$tmp/x.safetensors" --backend cuda:int8 2>"$tmp/err"
rc=$?
set -e
cat "$tmp/err"
[ $rc -eq 2 ] || fail "cuda:int8: exit $rc, want 2"
grep -F "'cuda:int8'" "$tmp/err" >/dev/null || fail "cuda:int8 not named"
tokens=$(seq -s, 7 3 300)
"$GENFENCE" forward --model "$model" --tokens "$tokens" --out "$tmp/ref.safetensors" --backend ref
"$GENFENCE" forward --model "$model" --tokens "$tokens" --out "$tmp/cuda.safetensors" --backend cuda
"$GF_PYTHON" -c '
import sys
from safetensors.numpy import load_file
r, c = (load_file(p)["logits"] for p in sys.argv[1:3])
d = float(abs(r.astype("float64") - c).max())
print(f"cuda vs ref: max |delta logit| {d:.3g} over {r.shape[0]} positions")
assert d < 1e-4, d' "$tmp/ref.safetensors" "$tmp/cuda.safetensors"
echo "ok   cuda on a GPU: dtypes declared, unknown option refused, fp32 logits within 1e-4 of ref"
