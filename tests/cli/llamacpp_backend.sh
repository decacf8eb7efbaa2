#!/usr/bin/env bash
# The llama.cpp backend (backends/llamacpp, docs/llamacpp.md) against ref
# through the CLI, on models/holmes-gpt (or a random GPT-2 of its shape):
#   1. `genfence backends` lists it available, fp32 by default, naming the
#      llama-cpp-python release and llama.cpp commit it was built from;
#   2. options: a bad one is refused naming it (exit 2);
#   3. forward (uncached, every position) at f32 vs ref: max |delta logit|
#      <= 1e-2 and the argmax equal wherever ref's margin exceeds twice the
#      delta; q8_0 must exceed that bound (so the bound can fail);
#   4. greedy generate (cached) of 32 tokens equal to ref's, and
#      --batch-prompts (left padding: pads never decoded) passing;
#   5. the default suite `genfence run --backend llamacpp:f32`: every case
#      passes except for the documented findings (docs/conformance.md), and
#      no crash, error, timeout or token mismatch: max-|delta| drift over
#      fp32's atol (also in the context limit's crop) and the statistical
#      tier's f32 KL bound with top-1 equal everywhere -- llama.cpp's F32 GELU
#      goes through an fp16 lookup table -- and the sample slot at tied or
#      exact-boundary logits (cases tagged ties / boundary / large_logits:
#      llama.cpp's top-k keeps exactly k).
# Skipped (exit 0, with the reason) when the module is not built here.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}" "${GF_PYTHON:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$GF_SRC/tests/support/test_lib.sh"
fail() { echo "FAIL: $*"; exit 1; }
export GENFENCE_MODULE_DIR="$GF_BUILD/backends"
# ggml's OpenMP workers sleep instead of spinning between calls (backend_vs_ref.sh)
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
if [ ! -f "$GF_BUILD/backends/libgenfence_backend_llamacpp.so" ]; then
    echo "skip: the llamacpp module is not built in this configuration (tools/setup/setup_llamacpp.sh, docs/llamacpp.md)"
    exit 0
fi
model=$(gf_test_model)

# 1. listed and available, with its provenance
line=$("$GENFENCE" backends | awk '$1 == "llamacpp"')
echo "$line"
case "$line" in *" available "*) ;; *) fail "llamacpp built but not available: $line" ;; esac
"$GENFENCE" backends --threads 2 --json | "$GF_PYTHON" -c '
import json, sys
e = next(x for x in json.load(sys.stdin) if x["name"] == "llamacpp")
assert e["available"] and e["dtype"] == "fp32" and e["threads"] == 2, e
assert "llama-cpp-python" in e["library"] and "llama.cpp commit" in e["library"], e
print("ok   info:", e["dtype"], "threads", e["threads"], e["library"])'

# 2. a bad option is refused, naming it
rc=0
"$GENFENCE" forward --model "$model" --tokens 1,2,3 --out "$tmp/x.st" --backend llamacpp:q3_bogus \
    >"$tmp/bad.out" 2>&1 || rc=$?
[ $rc -ne 0 ] || fail "llamacpp:q3_bogus accepted"
grep -q "q3_bogus" "$tmp/bad.out" || fail "the refusal does not name the option: $(cat "$tmp/bad.out")"
echo "ok   llamacpp:q3_bogus refused (exit $rc): $(head -n 1 "$tmp/bad.out")"

# 3. forward vs ref
"$GF_PYTHON" - "$GENFENCE" "$model" "$tmp" <<'EOF'
import subprocess, sys
import numpy as np
from safetensors.numpy import load_file
gf, model, tmp = sys.argv[1:4]
BOUND = 1e-2
inputs = [("--prompt", "Sherlock Holmes"), ("--prompt", "It was a dark night and"),
          ("--prompt", "My dear Watson, said he, I"),
          ("--tokens", ",".join(str((i * 37 + 11) % 512) for i in range(96)))]
def fwd(be, kind, val, out):
    subprocess.run([gf, "forward", "--model", model, kind, val, "--out", out, "--backend", be],
                   check=True, capture_output=True)
    return load_file(out)["logits"].astype(np.float64)
worst = {"llamacpp:f32": 0.0, "llamacpp:q8_0": 0.0}
for n, (kind, val) in enumerate(inputs):
    ref = fwd("ref", kind, val, f"{tmp}/ref{n}.st")
    srt = np.sort(ref, axis=1)
    margin = srt[:, -1] - srt[:, -2]
    for be in worst:
        got = fwd(be, kind, val, f"{tmp}/{n}.st")
        d = np.abs(got - ref).max(axis=1)
        worst[be] = max(worst[be], float(d.max()))
        if be.endswith("f32"):
            bad = (got.argmax(1) != ref.argmax(1)) & (margin > 2 * d)
            assert not bad.any(), f"{be} argmax differs at positions {np.nonzero(bad)[0]} of input {n}"
    print(f"ok   forward input {n} ({ref.shape[0]} positions): f32 max |delta| so far {worst['llamacpp:f32']:.3e}")
print(f"forward max |delta logit| vs ref: f32 {worst['llamacpp:f32']:.3e}, q8_0 {worst['llamacpp:q8_0']:.3e}")
assert worst["llamacpp:f32"] <= BOUND, f"f32 drifts {worst['llamacpp:f32']:.3e} > {BOUND}"
assert worst["llamacpp:q8_0"] > BOUND, f"q8_0 within {BOUND}: the bound cannot tell weights apart"
print(f"ok   f32 within {BOUND}, q8_0 outside it")
EOF

# 4. greedy cached generation equals ref's; left-padded batch equals single prompts
for p in "Sherlock Holmes" "It was a dark night and"; do
    a=$("$GENFENCE" generate --model "$model" --prompt "$p" --temperature 0 --max-new-tokens 32 --json --backend ref |
        "$GF_PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["tokens"])')
    b=$("$GENFENCE" generate --model "$model" --prompt "$p" --temperature 0 --max-new-tokens 32 --json \
        --backend llamacpp:f32 | "$GF_PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["tokens"])')
    [ "$a" = "$b" ] || fail "greedy tokens differ for '$p': ref $a, llamacpp $b"
    echo "ok   greedy 32 tokens equal to ref for '$p'"
done
"$GENFENCE" generate --model "$model" --batch-prompts "Holmes|It was a dark night and|My dear Watson, said he" \
    --max-new-tokens 16 --backend llamacpp:f32 >"$tmp/batch.out" 2>&1 ||
    fail "--batch-prompts on llamacpp:f32: $(cat "$tmp/batch.out")"
echo "ok   --batch-prompts (left padding) on llamacpp:f32"

# 5. the default suite
root="$GF_SRC"
args=()
if [ "$model" != "$GF_SRC/models/holmes-gpt" ]; then
    root="$tmp/root"
    mkdir -p "$root/cases" "$root/models"
    cp "$GF_SRC"/cases/*.yaml "$root/cases/"
    ln -sfn "$model" "$root/models/holmes-gpt"
    args=(--tag '!eos' --tag '!golden')
fi
# the case files whose models are all there (a model being trained or not yet
# committed leaves its cases out, said here)
files=()
for f in "$root"/cases/*.yaml; do
    missing=$(sed -n 's/^ *model: *//p' "$f" | sort -u | while read -r m; do
        [ -f "$root/$m/model.safetensors" ] || [ -f "$root/$m/model.safetensors.index.json" ] || echo "$m"; done)
    if [ -n "$missing" ]; then
        echo "note: leaving out $(basename "$f"): no weights for $(echo $missing)"
        continue
    fi
    files+=("cases/$(basename "$f")")
done
rc=0
(cd "$root" && GENFENCE_ROOT="$root" "$GENFENCE" run "${files[@]}" --require-backend llamacpp:f32 "${args[@]}" -q \
    --no-triangulate --report-dir "$tmp/rep") >"$tmp/suite.out" 2>&1 || rc=$?
tail -n 1 "$tmp/suite.out"
[ $rc -le 1 ] || fail "suite exit $rc: $(cat "$tmp/suite.out")"
"$GF_PYTHON" - "$tmp/rep/run.json" <<'EOF'
import json, re, sys
r = json.load(open(sys.argv[1]))
res = [x for x in r["results"] if x["backend"] == "llamacpp"]
assert res, "no llamacpp results"
npass = sum(x["verdict"] in ("pass", "pass-near-tie") for x in res)
for x in res:
    if x["verdict"] in ("pass", "pass-near-tie"):
        continue
    assert x["verdict"] == "fail", f"{x['id']}: {x['verdict']}: {x.get('reason')}"
    why = x["reason"]
    stat = x.get("metrics", {}).get("statistical")
    if x["kind"] == "distribution_match":  # the f32 KL bound, top-1 equal everywhere
        assert re.match(r"(kld_\w+|dp_max): measured \S+ > \S+ .*f32 thresholds$", why) and stat["top1_agreement"] == 1.0, \
            f"{x['id']}: unexpected failure: {why}"
    elif why.startswith("backend sample slot equals engine sampler:"):  # ties at the k-th value / exact top-p boundaries
        assert {"ties", "boundary", "large_logits"} & set(x["tags"]), f"{x['id']}: sample slot finding off ties: {why}"
    elif x["kind"] == "context_limit":  # the crop's drift is the same GELU drift
        m = re.search(r"max \|delta\| ([0-9.e-]+)", why)
        assert why.startswith("uncached crop keeps exactly n_positions tokens:") and m and float(m.group(1)) < 1e-2, \
            f"{x['id']}: unexpected failure: {why}"
    else:  # logits drift beyond fp32's atol, tokens equal
        assert re.fullmatch(r"\S+: max \|delta\| [0-9.e-]+ at step \d+ exceeds atol [0-9.e-]+", why), \
            f"{x['id']}: unexpected failure: {why}"
    for name, c in x.get("metrics", {}).get("comparisons", {}).items():
        assert c.get("mismatches", 0) == c.get("excused", 0), f"{x['id']}/{name}: token mismatch {c}"
    print(f"finding {x['id']}: {x['reason']}")
print(f"ok   suite on llamacpp:f32: {npass} of {len(res)} pass; the rest are the documented findings only")
EOF
