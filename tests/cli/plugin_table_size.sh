#!/usr/bin/env bash
# ABI versioning by table length (include/genfence/backend.h, GF_OPS_HAS):
#   - a plugin whose ops table ends at `forward` (the version-2 baseline, as
#     built against an older backend.h without the optional trailing slots)
#     loads, runs a forward, a cached verify and the sampler-only cases, and
#     has no sample slot. The bytes after its table look like a set `sample`
#     slot that aborts, so a read past struct_size would crash the run;
#   - a plugin whose table is one slot longer than this genfence's (a newer
#     genfence's header) is refused with exit 2 and a message naming both sizes.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_PYTHON:?}" "${GF_BUILD:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init plugin_table_size
short="$GF_BUILD/tests/backends/libgenfence_test_abi_short.so"
long="$GF_BUILD/tests/backends/libgenfence_test_abi_long.so"
[[ -f $short && -f $long ]] || fail "test backends abi_short / abi_long not built"
model=$(gf_test_model)

# the shorter table: listed available, without a sample slot
"$GENFENCE" backends --backend "$short" --json >"$tmp/b.json"
"$GF_PYTHON" - "$tmp/b.json" "$short" <<'PY' || fail "backends --backend abi_short"
import json, sys
b = [x for x in json.load(open(sys.argv[1])) if x["name"] == sys.argv[2]]
assert b and b[0]["available"], b
PY
# a forward through it equals ref's, logit for logit
"$GENFENCE" forward --model "$model" --tokens 1,2,3,4,5 --out "$tmp/short.safetensors" --backend "$short" \
    || fail "forward on the shorter table"
"$GENFENCE" forward --model "$model" --tokens 1,2,3,4,5 --out "$tmp/ref.safetensors" --backend ref \
    || fail "forward on ref"
"$GF_PYTHON" - "$tmp/short.safetensors" "$tmp/ref.safetensors" <<'PY' || fail "the shorter table's logits differ from ref's"
import json, struct, sys
def tensors(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items() if k != "__metadata__"}
a, r = tensors(sys.argv[1]), tensors(sys.argv[2])
assert a and a == r, (sorted(a), sorted(r))
PY
# the cached path and the harness: verify, and the sampler-only cases (which
# would call the backend's sample slot if genfence believed it had one)
"$GENFENCE" generate --model "$model" --tokens 1,2,3 --max-new-tokens 8 --verify --backend "$short" \
    >"$tmp/verify" || { cat "$tmp/verify"; fail "generate --verify on the shorter table"; }
"$GENFENCE" run "$GF_SRC/cases/sampler.yaml" --backend "$short" --report-dir "$tmp/rep" >"$tmp/run" \
    || { cat "$tmp/run"; fail "the sampler cases on the shorter table"; }
"$GF_PYTHON" - "$tmp/rep/run.json" <<'PY' || fail "run report on the shorter table"
import json, sys
d = json.load(open(sys.argv[1]))
b = [x for x in d["backends"] if x["name"] == "ref-v2-short"]
assert b and b[0]["available"] and not b[0]["sample_slot"], b
assert d["results"] and all(r["verdict"] in ("pass", "pass-near-tie") for r in d["results"])
PY
echo "ok   a table ending at forward (the version-2 baseline) loads and works, with no sample slot"

# the longer table: refused, naming both sizes
set +e
"$GENFENCE" forward --model "$model" --tokens 1,2,3 --out "$tmp/x.safetensors" --backend "$long" 2>"$tmp/err"
rc=$?
set -e
cat "$tmp/err"
[[ $rc == 2 ]] || fail "the longer table: exit $rc, want 2"
grep -Eq "refused .*abi_long\.so.*built against a newer genfence: its table has [0-9]+ bytes, this genfence knows [0-9]+" "$tmp/err" \
    || fail "the longer table: no clear message"
# listed unavailable with the reason, exit 2 (a named backend that cannot be used)
set +e
"$GENFENCE" backends --backend "$long" >"$tmp/bl" 2>&1
rc=$?
set -e
[[ $rc == 2 ]] || fail "backends --backend the longer table: exit $rc, want 2"
grep -F "$long" "$tmp/bl" | gf_grepq -q "unavailable.*newer genfence" ||
    fail "backends does not list the longer table unavailable"
echo "ok   a table longer than this genfence's is refused with exit 2 and a clear message"
