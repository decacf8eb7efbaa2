#!/usr/bin/env bash
# tokenizer.json has a size cap like the other files (GENFENCE_MAX_TOKENIZER_BYTES,
# default 64 MiB): a file over it is refused before it is read, with its
# size, the cap and the variable; under a memory cap (ulimit -v) a file the
# parser cannot hold is refused with a reason, not "cannot read '...': ".
#
# Environment (set by CTest): GENFENCE, GF_SRC, GF_PYTHON.
set -euo pipefail
: "${GENFENCE:?path to the genfence binary}" "${GF_SRC:?}" "${GF_PYTHON:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init tokenizer_size_cap
fail=0
bad() { echo "FAIL: $*"; fail=1; }
tok="$GF_SRC/models/holmes-gpt/tokenizer.json"

rc=0
GENFENCE_MAX_TOKENIZER_BYTES=1000 "$GENFENCE" tokenize --tokenizer "$tok" --text hi >"$tmp/out" 2>&1 || rc=$?
if [ $rc -eq 2 ] && grep -q "over the limit of 1000" "$tmp/out" && grep -q GENFENCE_MAX_TOKENIZER_BYTES "$tmp/out"; then
    echo "ok   a tokenizer.json over GENFENCE_MAX_TOKENIZER_BYTES: $(cat "$tmp/out")"
else bad "cap 1000: exit $rc: $(cat "$tmp/out")"; fi

# over the default cap: a 200 MB file (sparse) is refused at once, reading
# nothing: a 256 MB address-space cap would not hold it
# (a sanitizer build cannot run under ulimit -v, its shadow memory: there the
# cap is checked without the address-space limit, said so)
sanitized=0
if ldd "$GENFENCE" 2>/dev/null | gf_grepq -q -e libasan -e libtsan; then sanitized=1; fi
truncate -s 200M "$tmp/big.json"
rc=0
if [ $sanitized = 1 ]; then
    echo "note: sanitizer build: the 200 MB case runs without its 256 MB address-space limit"
    "$GENFENCE" tokenize --tokenizer "$tmp/big.json" --text hi >"$tmp/out" 2>&1 || rc=$?
else
    (ulimit -v 262144 2>/dev/null || true; "$GENFENCE" tokenize --tokenizer "$tmp/big.json" --text hi) >"$tmp/out" 2>&1 || rc=$?
fi
if [ $rc -eq 2 ] && grep -q "209715200 bytes, over the limit of 67108864" "$tmp/out"; then
    echo "ok   a 200 MB tokenizer.json under the default cap: $(cat "$tmp/out")"
else bad "200 MB file: exit $rc: $(cat "$tmp/out")"; fi

# under a memory cap: a 30 MB tokenizer.json (within the size cap; 3M merges
# as pairs) that jansson cannot parse in 512 MB of address space must say why
if [ $sanitized = 1 ]; then
    echo "SKIP the memory-cap case: a sanitizer build cannot run under ulimit -v (its shadow memory)"
else
    "$GF_PYTHON" - "$tmp/mem.json" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    f.write('{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [')
    f.write(",".join(['["a","b"]'] * 3_000_000))
    f.write("]}}")
PY
    rc=0
    (ulimit -v 524288; "$GENFENCE" tokenize --tokenizer "$tmp/mem.json" --text hi) >"$tmp/out" 2>&1 || rc=$?
    if [ $rc -eq 2 ] && grep -q "out of memory" "$tmp/out" && ! grep -q "': $" "$tmp/out"; then
        echo "ok   under a 512 MB memory cap: $(cat "$tmp/out")"
    else bad "memory cap: exit $rc: $(cat "$tmp/out")"; fi
fi
exit $fail
