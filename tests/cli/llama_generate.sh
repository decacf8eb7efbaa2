#!/usr/bin/env bash
# genfence generate on models/holmes-llama: default sampling works, greedy 64
# is the model card's transformers continuation (verify: cached == uncached),
# the CLI keeps the GPT rule at a full cache (context_limit at 256 + 1) unless
# --on-limit slide (== --no-cache's tokens), and the KV-cache line shows the
# grouped-query saving: (L, B, H_kv, max_len, d_head) with H_kv = 2 of H = 4,
# bytes = 2 x L x H_kv x max_len x d_head x 4 from config.json, max_len the
# prompt and its 64 new tokens (what the generation can feed).
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_PYTHON:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init llama_generate
m="$GF_SRC/models/holmes-llama"

"$GENFENCE" generate --model "$m" --prompt "Sherlock Holmes" >"$tmp/out" 2>"$tmp/err" || fail "generate exit $?"
head -c 15 "$tmp/out" | gf_grepq -qx "Sherlock Holmes" || fail "output does not start with the prompt: $(head -c 60 "$tmp/out")"
grep -q "^\[64 new tokens, stop_reason length," "$tmp/err" || fail "no 64-token summary: $(cat "$tmp/err")"
line=$(grep "^\[kv cache" "$tmp/err") || fail "no kv cache line: $(cat "$tmp/err")"
echo "$line"
n_prompt=$("$GENFENCE" generate --model "$m" --prompt "Sherlock Holmes" --max-new-tokens 1 --json |
    "$GF_PYTHON" -c 'import json, sys; g = json.load(sys.stdin); print(g["total_tokens"] - g["new_tokens"])')
want=$("$GF_PYTHON" -c '
import json, sys
c = json.load(open(sys.argv[1]))
L, Hkv, H, dh = c["num_hidden_layers"], c["num_key_value_heads"], c["num_attention_heads"], c["head_dim"]
P = min(c["max_position_embeddings"], int(sys.argv[2]) + 64)  # the prompt and 64 new tokens: what the cache can be fed
assert Hkv == 2 and H == 4, (Hkv, H)
n = 2 * L * Hkv * P * dh * 4
print(f"[kv cache (L {L}, B 1, H_kv {Hkv}, max_len {P}, d_head {dh}) k and v: {n} bytes ({n / 1024:.1f} KiB); H = {H}]")
' "$m/config.json" "$n_prompt")
[[ "$line" == "$want" ]] || fail "kv cache line '$line', expected '$want'"

# greedy 64 == the model card's transformers greedy tokens, and the cached decode verifies
"$GENFENCE" generate --model "$m" --prompt "Sherlock Holmes" --temperature 0 --no-eos --json >"$tmp/g.json"
"$GF_PYTHON" - "$tmp/g.json" "$m/README.md" <<'PY' || fail "greedy tokens differ from the model card"
import json, re, sys
got = json.load(open(sys.argv[1]))["tokens"]
card = open(sys.argv[2], encoding="utf-8").read()
want = json.loads(re.search(r"Greedy tokens: `(\[[0-9, ]+\])`", card).group(1))
assert got == want, (got, want)
print(f"greedy 64 == model card: {got[:8]}...")
PY
"$GENFENCE" generate --model "$m" --prompt "Sherlock Holmes" --temperature 0 --verify --max-new-tokens 64 >/dev/null \
    || fail "--verify failed"

# the CLI keeps the GPT rule at 256 positions: 250 prompt tokens + 20 -> 257 tokens, context_limit
toks=$("$GF_PYTHON" -c 'print(",".join(str((i * 31 + 7) % 511) for i in range(250)))')
"$GENFENCE" generate --model "$m" --tokens "$toks" --max-new-tokens 20 --temperature 0 --json >"$tmp/lim.json"
"$GF_PYTHON" -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert j["stop_reason"] == "context_limit" and j["total_tokens"] == 257, (j["stop_reason"], j["total_tokens"])
' "$tmp/lim.json" || fail "context limit at 256 positions"
# --on-limit slide: the cached loop slides by recompute and gives the uncached loop's 270 tokens
"$GENFENCE" generate --model "$m" --tokens "$toks" --max-new-tokens 20 --temperature 0 --json --on-limit slide >"$tmp/slide.json"
"$GENFENCE" generate --model "$m" --tokens "$toks" --max-new-tokens 20 --temperature 0 --json --no-cache >"$tmp/nocache.json"
"$GF_PYTHON" -c '
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert a["cached"] and not b["cached"]
assert a["stop_reason"] == b["stop_reason"] == "length" and a["total_tokens"] == b["total_tokens"] == 270, (a, b)
assert a["tokens"] == b["tokens"], (a["tokens"], b["tokens"])
' "$tmp/slide.json" "$tmp/nocache.json" || fail "--on-limit slide differs from --no-cache"
echo "llama_generate: ok"
