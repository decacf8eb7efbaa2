#!/usr/bin/env bash
# A tokenizer is read only by the commands that need it, and before the model:
# with an unusable tokenizer.json next to the weights, `forward --tokens` and
# `generate --tokens` work (generate says why it prints no text), while
# `forward --prompt` / `generate --prompt` are refused naming the component
# and its type, before the weights are read (here there are none: the
# tokenizer's reason must come first).
#
# Environment (set by CTest): GENFENCE, GF_SRC, GF_PYTHON.
set -euo pipefail
: "${GENFENCE:?path to the genfence binary}" "${GF_SRC:?}" "${GF_PYTHON:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init tokenizer_lazy_load
# shellcheck source=../support/test_lib.sh
source "$GF_SRC/tests/support/test_lib.sh"

model=$(gf_test_model)
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# the model with a tokenizer.json genfence refuses (an unknown normalizer)
m="$tmp/broken"
mkdir -p "$m"
ln -s "$model/config.json" "$m/config.json"
ln -s "$model/model.safetensors" "$m/model.safetensors"
"$GF_PYTHON" - "$model/tokenizer.json" "$m/tokenizer.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1], encoding="utf-8"))
j["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Foo"}]}
json.dump(j, open(sys.argv[2], "w", encoding="utf-8"))
PY
want="tokenizer.json: normalizer.normalizers[1]: type 'Foo' is not supported"

rc=0
"$GENFENCE" forward --model "$m" --tokens 1,2,3 --out "$tmp/f.safetensors" >"$tmp/out" 2>&1 || rc=$?
if [ $rc -eq 0 ] && [ -s "$tmp/f.safetensors" ]; then echo "ok   forward --tokens with a broken tokenizer.json: exit 0"
else bad "forward --tokens with a broken tokenizer.json: exit $rc: $(head -c 300 "$tmp/out")"; fi

rc=0
"$GENFENCE" generate --model "$m" --tokens 1,2,3 --max-new-tokens 3 --json >"$tmp/out" 2>"$tmp/err" || rc=$?
if [ $rc -eq 0 ] && grep -q '"tokens"' "$tmp/out" && grep -qF "$want" "$tmp/err"; then
    echo "ok   generate --tokens with a broken tokenizer.json: exit 0, and says why no text: $(head -c 200 "$tmp/err")"
else bad "generate --tokens with a broken tokenizer.json: exit $rc: $(head -c 300 "$tmp/out") / $(head -c 300 "$tmp/err")"; fi

# text prompts: refused before the weights are read (there are none here)
n="$tmp/noweights"
mkdir -p "$n"
ln -s "$model/config.json" "$n/config.json"
cp "$m/tokenizer.json" "$n/tokenizer.json"
for cmd in "forward --out $tmp/g.safetensors" "generate --max-new-tokens 2"; do
    rc=0
    # shellcheck disable=SC2086
    "$GENFENCE" $cmd --model "$n" --prompt "Hello" >"$tmp/out" 2>&1 || rc=$?
    if [ $rc -eq 2 ] && grep -qF "$want" "$tmp/out" && ! grep -q "safetensors" "$tmp/out"; then
        echo "ok   ${cmd%% *} --prompt: exit 2 before the model: $(head -c 200 "$tmp/out")"
    else bad "${cmd%% *} --prompt with a broken tokenizer.json: exit $rc: $(head -c 300 "$tmp/out")"; fi
done

# ids-only commands with no tokenizer.json at all still work, text ones say so
rm "$m/tokenizer.json"
rc=0
"$GENFENCE" generate --model "$m" --tokens 1,2,3 --max-new-tokens 2 >"$tmp/out" 2>"$tmp/err" || rc=$?
[ $rc -eq 0 ] && ! grep -q "note" "$tmp/err" && echo "ok   generate --tokens without tokenizer.json: exit 0, no note" ||
    bad "generate --tokens without tokenizer.json: exit $rc: $(head -c 300 "$tmp/err")"

exit $fail
