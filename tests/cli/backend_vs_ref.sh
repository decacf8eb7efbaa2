#!/usr/bin/env bash
# Every vendor backend module that is built and available here (openblas,
# onednn) against ref through `--backend NAME` (tests/support/check_backend.sh:
# `genfence forward --against ref`, genfence's own gate, logits within 1e-4
# at every position and greedy tokens equal to ref's, margin-gated),
# generate --verify and --batch-prompts passing, at --threads 1 and 2; then
# the default suite (genfence run) on it. Uses models/holmes-gpt when its
# weights are there, else a random GPT-2 of the same shape. A backend that is not built, or built but unavailable here, is
# reported and skipped (the availability test covers that path).
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}" "${GF_PYTHON:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init backend_vs_ref
model=$(gf_test_model)
export GENFENCE_MODULE_DIR="$GF_BUILD/backends"
# OpenMP workers (onednn at --threads 2) sleep instead of spinning between
# products: on a small shared machine spinning workers starve everything else,
# and results do not depend on it.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
# Sanitizer builds: LeakSanitizer (gcc 12, glibc 2.36) can crash walking the
# dynamic TLS of a dlopen'ed libdnnl ("Tracer caught signal 11"); this only
# turns off its __tls_get_addr interception, and is ignored without ASan.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}intercept_tls_get_addr=0"
status=0
ran=0
for be in openblas onednn; do
    if [ ! -f "$GF_BUILD/backends/libgenfence_backend_$be.so" ]; then
        echo "skip $be: module not built in this configuration"
        continue
    fi
    line=$("$GENFENCE" backends | awk -v b="$be" '$1 == b')
    echo "$line"
    case "$line" in
        *" available "*) ;;
        *) echo "skip $be: built but unavailable here"; continue ;;
    esac
    # info: fp32 and the thread count asked for
    "$GENFENCE" backends --threads 2 --json | "$GF_PYTHON" -c '
import json, sys
be = sys.argv[1]
e = next(x for x in json.load(sys.stdin) if x["name"] == be)
assert e["available"] and e["dtype"] == "fp32" and e["threads"] == 2, e
want = {"openblas": "OpenBLAS 0.", "onednn": "ISA "}[be]  # config string; version and ISA
assert want in e["library"], e
print("ok  ", be, "info:", e["dtype"], "threads", e["threads"], e["library"])' "$be"
    "$GF_SRC/tests/support/check_backend.sh" "$GENFENCE" "$model" "$be" --threads 1,2 \
        || status=1
    gf_run_suite "$be" || status=1
    ran=$((ran + 1))
done
echo "$ran vendor backend(s) checked"
exit $status
