#!/usr/bin/env bash
# The vendor backends are modules: genfence itself links neither OpenBLAS nor
# oneDNN, starts without them, and reports a backend whose module or vendor
# library cannot be loaded as unavailable, with the loader's reason, while
# `genfence backends` exits 0 and ref keeps working.
#   1. ldd genfence: no libopenblas / libdnnl;
#   2. GENFENCE_MODULE_DIR = an empty directory: openblas and onednn listed
#      unavailable with dlopen's message; forward --backend openblas fails with
#      that message (exit 2);
#   3. a built module whose vendor library is not installed (a copy with its
#      DT_NEEDED entry renamed to a library that does not exist, which is what
#      uninstalling the runtime looks like to the loader): unavailable, the
#      loader naming the missing library; ref still runs.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}" "${GF_PYTHON:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init backend_unavailable

# 1
if ldd "$GENFENCE" | grep -E 'libopenblas|libdnnl'; then
    fail "genfence links a vendor library itself"
fi
echo "ok   ldd genfence: no libopenblas, no libdnnl"

model=$(gf_test_model)

# 2
mkdir "$tmp/empty"
out=$(GENFENCE_MODULE_DIR="$tmp/empty" "$GENFENCE" backends) || fail "backends exited $? with no modules"
echo "$out"
for be in openblas onednn; do
    echo "$out" | grep -E "^$be +unavailable .*cannot load .*libgenfence_backend_$be\.so.*No such file" >/dev/null \
        || fail "$be not reported unavailable with the loader's reason"
done
echo "$out" | grep -E '^ref +available' >/dev/null || fail "ref not available"
json=$(GENFENCE_MODULE_DIR="$tmp/empty" "$GENFENCE" backends --json)
echo "$json" | "$GF_PYTHON" -c '
import json, sys
d = {e["name"]: e for e in json.load(sys.stdin)}
for be in ("openblas", "onednn"):
    assert not d[be]["available"] and "cannot load" in d[be]["why"], d[be]
assert d["ref"]["available"]'
set +e
GENFENCE_MODULE_DIR="$tmp/empty" "$GENFENCE" forward --model "$model" --tokens 1,2,3 --out "$tmp/x.safetensors" \
    --backend openblas 2>"$tmp/err"
rc=$?
set -e
cat "$tmp/err"
[ $rc -eq 2 ] || fail "forward --backend openblas without its module: exit $rc, want 2"
grep -q "cannot load" "$tmp/err" || fail "no loader message"
"$GENFENCE" forward --model "$model" --tokens 1,2,3 --out "$tmp/x.safetensors" --backend ref \
    || fail "ref forward failed"
echo "ok   missing modules: unavailable with the loader's reason, exit 0; ref runs"

# 3
declare -A needed=([openblas]=libopenblas.so.0 [onednn]=libdnnl.so.2)
for be in openblas onednn; do
    so="$GF_BUILD/backends/libgenfence_backend_$be.so"
    if [ ! -f "$so" ]; then
        echo "skip $be: module not built"
        continue
    fi
    lib=${needed[$be]}
    gone=$(echo "$lib" | sed 's/^lib/gfx/')   # same length: libopenblas.so.0 -> gfxopenblas.so.0
    mkdir -p "$tmp/uninstalled"
    "$GF_PYTHON" - "$so" "$tmp/uninstalled/libgenfence_backend_$be.so" "$lib" "$gone" <<'PY'
import sys
src, dst, old, new = sys.argv[1], sys.argv[2], sys.argv[3].encode() + b"\0", sys.argv[4].encode() + b"\0"
data = open(src, "rb").read()
assert len(old) == len(new) and data.count(old) == 1, (old, data.count(old))
open(dst, "wb").write(data.replace(old, new))
PY
    out=$(GENFENCE_MODULE_DIR="$tmp/uninstalled" "$GENFENCE" backends) || fail "backends exited $?"
    echo "$out" | grep -E "^$be "
    echo "$out" | grep -E "^$be +unavailable .*$gone: cannot open shared object file" >/dev/null \
        || fail "$be without $lib: not reported unavailable with the loader's reason"
done
"$GENFENCE" forward --model "$model" --tokens 1,2,3 --out "$tmp/x.safetensors" --backend ref \
    || fail "ref forward failed"
echo "ok   vendor runtime missing: unavailable, the loader naming the library; ref runs"
