#!/usr/bin/env bash
# Run each libFuzzer target for FUZZ_SECONDS (default 60) seconds, one after
# another (`make fuzz`; tests/fuzz/README.md). Usage:
#   tests/fuzz/run.sh BUILD_DIR [TARGET...]      (default: every target)
# The working corpus of each target grows under BUILD_DIR/fuzz/corpus/<t>
# (seeded from tests/fuzz/corpus/<t>); a crash lands in
# BUILD_DIR/fuzz/artifacts/<t>/ and makes the script exit 1 -- copy it to
# tests/fuzz/regressions/<t>/ with the fix. Extra libFuzzer flags: FUZZ_FLAGS.
set -u
build=${1:?usage: run.sh BUILD_DIR [TARGET...]}
shift
src=$(cd "$(dirname "$0")" && pwd)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(cases safetensors config tokenizer golden)
secs=${FUZZ_SECONDS:-60}
declare -A maxlen=([cases]=8192 [safetensors]=4096 [config]=4096 [tokenizer]=32768 [golden]=4096)
status=0
for t in "${targets[@]}"; do
    bin="$build/fuzz/fuzz_$t"
    [ -x "$bin" ] || { echo "no $bin (configure with -DCMAKE_C_COMPILER=clang -DGENFENCE_SANITIZE=ON -DGENFENCE_FUZZ=ON)"; exit 2; }
    work="$build/fuzz/corpus/$t" art="$build/fuzz/artifacts/$t"
    mkdir -p "$work" "$art"
    log="$build/fuzz/$t.log"
    echo "fuzz_$t: ${secs}s, corpus $work, log $log"
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
        -max_len="${maxlen[$t]:-4096}" -print_final_stats=1 -artifact_prefix="$art/" ${FUZZ_FLAGS:-} \
        "$work" "$src/corpus/$t" "$src/regressions/$t" >"$log" 2>&1
    rc=$?
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added)|^#[0-9]+ *DONE' "$log" | sed "s/^/  /"
    if [ $rc -ne 0 ]; then
        echo "  fuzz_$t FAILED (exit $rc): $(grep -m1 -E 'ERROR|SUMMARY|property failed' "$log")"
        ls "$art" | sed "s/^/  artifact: /"
        status=1
    fi
done
exit $status
