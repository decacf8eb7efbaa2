#!/usr/bin/env bash
# The golden hashes are defined once (docs/goldens.md) and computed by two
# implementations: genfence (harness/hash.c, over the case tree the C loader
# builds) and tools/reference/golden.py (over the same tree from `genfence list --json`).
# They must agree for every case in cases/ and cases/detect/, for awkward
# values (unicode, control characters, hex/octal ints, tagged floats, -0.0,
# subnormals, NaN / infinities), and for the model hash, also of an edited
# model. golden.py must refuse to write when genfence's hash disagrees.
set -euo pipefail
: "${GENFENCE:?set GENFENCE to the genfence binary}" "${GF_SRC:?set GF_SRC}"
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init golden_hash_agree
cd "$GF_SRC"
G="$PY $GF_SRC/tools/reference/golden.py"

# every case of the repository
n=$("$GENFENCE" list --json cases cases/detect | "$PY" -c 'import json,sys; print(len(json.load(sys.stdin)))')
out=$($G --genfence "$GENFENCE" --check-hashes cases cases/detect) || fail "hashes disagree: $out"
echo "$out"
grep -q "^golden.py: $n case hashes and [1-9][0-9]* model hash(es) checked, 0 disagreement(s)$" <<<"$out" \
  || fail "expected $n case hashes and a model hash: $out"

# awkward values
mkdir -p "$tmp/root/cases" "$tmp/root/models"
: >"$tmp/root/CMakeLists.txt"
cat >"$tmp/root/cases/odd.yaml" <<'YAML'
cases:
  - id: odd.unicode
    kind: golden_generation
    model: models/none
    prompts: ["é ünïcödé — \t tab \x01 \U0001F600 \"quoted\" back\\slash", 'single ''quoted''', [1, 0x1F, 0o17]]
    max_new_tokens: 0x10
    temperature: !!float 1
    top_k: ~
    top_p: 1
    seed: 18446744073709551
    description: not hashed
  - id: odd.floats
    kind: golden_generation
    model: models/none
    prompts: [plain text, "!!str 12"]
    temperature: -0.0
    top_p: 0.1
  - id: odd.tiny
    kind: golden_generation
    model: models/none
    prompts: [!!str 12]
    temperature: 5e-324
    top_p: 0.3333333333333333
  - id: odd.big
    kind: golden_generation
    model: models/none
    prompts: [x]
    temperature: 1.0e+300
  - id: odd.nonfinite
    kind: sampler_errors
    vocab: 512
    calls:
      - {temperature: .nan, expect: error}
      - {temperature: -.Inf, expect: error}
      - {top_p: .INF, expect: error}
      - {temperature: 0.1, top_k: 3, top_p: 0.9, expect: argmax}
  - id: odd.probs
    kind: top_p_fence
    probs: &p [0.1, 0.2, 0.30000000000000004, 0.4]
    expect: [{p: 0.05, keep: [3]}]
  - id: odd.alias
    kind: top_k_fence
    probs: *p
    expect: [{k: 1, keep: [3]}]
YAML
out=$(GENFENCE_ROOT="$tmp/root" $G --genfence "$GENFENCE" --check-hashes "$tmp/root/cases") || fail "odd values: $out"
grep -q '^golden.py: 7 case hashes and 0 model hash(es) checked, 0 disagreement(s)$' <<<"$out" || fail "odd values: $out"
GENFENCE_ROOT="$tmp/root" "$GENFENCE" list --json "$tmp/root/cases" | "$PY" -c '
import json, sys
d = {c["id"]: c for c in json.load(sys.stdin)}
u = d["odd.unicode"]["case"]
assert u["max_new_tokens"] == 16 and u["temperature"] == 1.0 and isinstance(u["temperature"], float), u
assert u["prompts"][2] == [1, 31, 15] and u["top_k"] is None and u["top_p"] == 1 and isinstance(u["top_p"], int)
assert "\U0001F600" in u["prompts"][0] and "\t" in u["prompts"][0] and "\x01" in u["prompts"][0]
assert d["odd.floats"]["case"]["prompts"][1] == "!!str 12" and d["odd.tiny"]["case"]["prompts"] == ["12"]
assert str(d["odd.floats"]["case"]["temperature"]) == "-0.0"
nf = d["odd.nonfinite"]["case"]["calls"]
assert nf[0]["temperature"] == {"$float": "NaN"} and nf[1]["temperature"] == {"$float": "-Infinity"}, nf
assert nf[2]["top_p"] == {"$float": "Infinity"}
assert d["odd.alias"]["case"]["probs"] == d["odd.probs"]["case"]["probs"]
' || fail "the case trees do not hold the values as the core schema resolves them"

# the model hash, of the model and of an edited copy
if [[ -f models/holmes-gpt/model.safetensors ]]; then
  cp -r models/holmes-gpt "$tmp/root/models/m"
  printf 'cases:\n  - id: m.g\n    kind: golden_generation\n    model: models/m\n    prompts: [x]\n' >"$tmp/root/cases/m.yaml"
  list_hash() { GENFENCE_ROOT="$tmp/root" "$GENFENCE" list --json "$tmp/root/cases/m.yaml" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)[0]["model_hash"])'; }
  h0=$(list_hash)
  [[ $h0 == $("$PY" -c 'import sys; sys.path.insert(0, "tools/reference"); import golden; print(golden.model_hash("models/holmes-gpt"))') ]] \
    || fail "model hash: genfence $h0 differs from Python's"
  # by hand: sha256 of the three sha256 lines
  [[ $h0 == $(cd models/holmes-gpt && sha256sum config.json model.safetensors tokenizer.json | cut -c1-64 | sha256sum | cut -c1-64) ]] \
    || fail "model hash is not the sha256 of the three files' sha256 lines"
  echo '' >>"$tmp/root/models/m/tokenizer.json"
  h1=$(list_hash)
  [[ $h1 != "$h0" ]] || fail "editing tokenizer.json did not change the model hash"
  out=$(GENFENCE_ROOT="$tmp/root" $G --genfence "$GENFENCE" --check-hashes "$tmp/root/cases/m.yaml") || fail "edited model: $out"
  echo "golden_hash_agree: model hash $h0, edited copy $h1: both implementations agree"
fi

# golden.py refuses when genfence's case hash (or model hash) is not its own
cat >"$tmp/fake-genfence" <<SH
#!/usr/bin/env bash
"$GENFENCE" "\$@" | "$PY" -c '
import json, os, sys
d = json.load(sys.stdin)
for c in d:
    c[os.environ["FIELD"]] = "0" * 64
json.dump(d, sys.stdout)'
SH
chmod +x "$tmp/fake-genfence"
for field in case_hash model_hash; do
  [[ $field == model_hash && ! -f models/holmes-gpt/model.safetensors ]] && continue
  set +e
  FIELD=$field $G --genfence "$tmp/fake-genfence" --out-dir "$tmp/out" cases/golden.yaml >"$tmp/o" 2>&1
  rc=$?
  set -e
  [[ $rc == 2 ]] || { cat "$tmp/o"; fail "golden.py accepted a wrong $field (exit $rc)"; }
  grep -q "refusing to write" "$tmp/o" || fail "golden.py did not say why it refused"
  [[ ! -e "$tmp/out" ]] || fail "golden.py wrote despite a wrong $field"
done
echo "golden_hash_agree: ok"
