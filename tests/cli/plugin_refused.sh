#!/usr/bin/env bash
# Plugins genfence must refuse, each with a clear message and exit status 2
# (and listed unavailable, with that message, by `genfence backends`, exit 0):
#   - a wrong abi_version (the message names both versions);
#   - a table missing a required slot (the message names the slot);
#   - a table shorter than the version-2 baseline (struct_size; the message
#     names both sizes; a longer one is in plugin_table_size.sh);
#   - a shared object without genfence_backend_entry;
#   - an entry function returning NULL;
#   - a path that does not exist (the loader's message).
# The bad plugins are built here from a few lines of C against include/.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_PYTHON:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init plugin_refused
CC=${CC:-cc}

cat >"$tmp/bad.c" <<'C'
#include <genfence/backend.h>
#ifndef SIZE
#define SIZE sizeof(gf_backend_ops)
#endif
static gf_status probe(char *why, size_t n) { (void)why; (void)n; return GF_OK; }
static gf_status load(const gf_model_desc *d, const gf_backend_options *o, void **m)
{ (void)d; (void)o; *m = 0; return GF_E_UNSUPPORTED; }
static void mfree(void *m) { (void)m; }
static gf_status cc(void *m, int32_t b, int32_t l, void **c) { (void)m; (void)b; (void)l; *c = 0; return GF_OK; }
static gf_status cr(void *c) { (void)c; return GF_OK; }
static void cf(void *c) { (void)c; }
static int32_t cl(const void *c) { (void)c; return 0; }
static size_t cb(const void *c) { (void)c; return 0; }
static gf_status fw(void *m, void *c, const gf_batch *in, float *out) { (void)m; (void)c; (void)in; (void)out; return GF_OK; }
static const gf_backend_ops ops = {
    .abi_version = ABI, .struct_size = SIZE, .name = "bad",
    .probe = probe, .model_load = load, .model_free = mfree, .cache_create = cc, .cache_reset = cr,
    .cache_free = cf, .cache_length = cl, .cache_bytes = cb,
#ifndef NO_FORWARD
    .forward = fw,
#endif
};
#ifndef NO_ENTRY
const gf_backend_ops *genfence_backend_entry(void) { return RET; }
#else
int not_the_entry(void) { return (int)sizeof ops; }
#endif
C
build() { # name, extra flags
    local name=$1
    shift
    "$CC" -std=c11 -shared -fPIC -Wall -I"$GF_SRC/include" -o "$tmp/$name.so" "$tmp/bad.c" "$@" \
        || fail "could not build $name"
}
build wrong_abi -DABI=99u -DRET='&ops'
build old_abi -DABI=1u -DRET='&ops'
build no_forward -DABI=GF_BACKEND_ABI_VERSION -DRET='&ops' -DNO_FORWARD -Wno-unused-function
build short_table -DABI=GF_BACKEND_ABI_VERSION -DRET='&ops' -DSIZE=16
build no_entry -DABI=GF_BACKEND_ABI_VERSION -DNO_ENTRY -Wno-unused-function
build null_table -DABI=GF_BACKEND_ABI_VERSION -DRET=0 -Wno-unused-variable -Wno-unused-function

model=$(gf_test_model)

check() { # plugin path, expected message (grep -E)
    local so=$1 want=$2 rc
    set +e
    "$GENFENCE" forward --model "$model" --tokens 1,2,3 --out "$tmp/x.safetensors" --backend "$so" 2>"$tmp/err"
    rc=$?
    set -e
    echo "$(basename "$so"): exit $rc: $(cat "$tmp/err")"
    [ $rc -eq 2 ] || fail "$so: exit $rc, want 2"
    grep -Eq "$want" "$tmp/err" || fail "$so: message does not match /$want/"
    # backends lists it unavailable with the reason, and exits 2: a named
    # backend that cannot be used is bad input (docs/harness.md)
    local out
    set +e
    out=$("$GENFENCE" backends --backend "$so" 2>&1)
    rc=$?
    set -e
    [ $rc -eq 2 ] || fail "backends --backend $so: exit $rc, want 2"
    grep -F "$so" <<<"$out" | grep -E "unavailable" | gf_grepq -Eq "$want" ||
        fail "backends does not list $so unavailable with /$want/"
}
V=$(sed -n 's/^#define GF_BACKEND_ABI_VERSION \([0-9]*\)u.*/\1/p' "$GF_SRC/include/genfence/backend.h")
check "$tmp/wrong_abi.so" "refused .*wrong_abi\.so.*built for ABI version 99; this genfence speaks version $V"
check "$tmp/old_abi.so" "refused .*old_abi\.so.*built for ABI version 1; this genfence speaks version $V"
check "$tmp/no_forward.so" "refused .*no_forward\.so.*lacks the required slot 'forward'"
check "$tmp/short_table.so" "refused .*short_table\.so.*table of 16 bytes, shorter than the version-$V baseline \([0-9]+ bytes"
check "$tmp/no_entry.so" "no_entry\.so does not export genfence_backend_entry"
check "$tmp/null_table.so" "refused .*null_table\.so.*table is NULL"
check "$tmp/missing.so" "cannot load .*missing\.so.*No such file"
echo "ok   all bad plugins refused with exit 2 and a clear message"
