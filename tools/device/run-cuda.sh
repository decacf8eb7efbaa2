#!/usr/bin/env bash
# The CUDA backend on a lent GPU, in one prepared run (issue 19, item 4).
#
#   tools/device/run-cuda.sh prepare     here (Debian, CUDA toolkit): build
#       build-cuda and pack what the device needs into build-cuda/device-bundle
#       (genfence, the cuda module, the non-system libraries they load, and a
#       glibc + loader to fall back on); carry that one folder.
#   tools/device/run-cuda.sh [run]       on the device machine (from the
#       repository root, $OUT set): find cuBLAS there, start the carried
#       genfence (directly, else through the carried loader), rebuild the cuda
#       module with the device's own nvcc if the carried one cannot run, then
#       run the default suite on ref + cuda + cuda:tf32 + cuda:bf16 + cuda:fp16
#       and time generation on each. Writes under $OUT (at most 8 files):
#         summary.md    verdicts, triangulation against ref, the timing table
#         run.json      the suite's report (genfence run)
#         bench.md      decode / prefill timing table; bench.json the numbers
#         backends.json `genfence backends --json` for every spec
#         env.txt       GPU, driver, libraries found, how genfence was started
#         log.txt       everything printed
#
# The device tool call, e.g.:
#   run(command="bash tools/device/run-cuda.sh", carry=["build-cuda/device-bundle"], timeout_s=420)
# Environment knobs: GF_FILTER (a case regex, for a short rehearsal),
# GF_JOBS (-j, default: genfence's, one per core), GF_BENCH_REPS (default 3), GF_BUNDLE (bundle dir);
# for rehearsals: GF_LAUNCH=loader (start through the carried loader),
# GF_REBUILD=1 (rebuild the module with the local nvcc even if it loads),
# GF_SPECS="ref" (the backends to run; the cuda gate applies when one is cuda).
#
# Exit status: 0 suite passed on every spec; 1 a case failed; 2 cuda
# unavailable (nothing verified on the GPU; the reason is in summary.md);
# 3 genfence could not be started at all.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
bundle=${GF_BUNDLE:-$root/build-cuda/device-bundle}
read -r -a specs <<<"${GF_SPECS:-ref cuda cuda:tf32 cuda:bf16 cuda:fp16}"

# ---------------------------------------------------------------- prepare
prepare() {
    set -e
    cd "$root"
    local b=build-cuda
    cmake -S . -B $b -DCMAKE_BUILD_TYPE=Release -DGENFENCE_WITH_CUDA=ON >/dev/null
    local t0=$SECONDS
    cmake --build $b -j2 --target genfence genfence_backend_cuda
    echo "built in $((SECONDS - t0)) s"
    local exe
    exe=$(ls $b/genfence $b/harness/genfence 2>/dev/null | head -n 1)
    [ -x "$exe" ] || { echo "no genfence binary under $b"; exit 2; }
    rm -rf "$bundle"
    mkdir -p "$bundle/bin" "$bundle/backends" "$bundle/lib/glibc"
    cp "$exe" "$bundle/bin/genfence"
    cp $b/backends/libgenfence_backend_cuda.so "$bundle/backends/"
    # every library the two load, but cuBLAS (too big: found on the device)
    # and the driver; glibc's own pieces apart, for the loader fallback only
    local lib name
    for lib in $( (ldd "$exe"; ldd $b/backends/libgenfence_backend_cuda.so) | awk '/=> \//{print $3} /^\t\/lib/{print $1}' | sort -u); do
        name=$(basename "$lib")
        case "$name" in
            libcublas*|libcuda.so*) continue ;;
            ld-linux*|libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*) cp -L "$lib" "$bundle/lib/glibc/$name" ;;
            *) cp -L "$lib" "$bundle/lib/$name" ;;
        esac
    done
    {
        echo "commit $(git rev-parse --short=12 HEAD)$(git diff --quiet HEAD -- backends/cuda || echo ' (+ local changes in backends/cuda)')"
        echo "built $(date -u +%FT%TZ) on $(. /etc/os-release; echo "$PRETTY_NAME"), $(ldd --version | head -n 1)"
        echo "nvcc: $(nvcc --version | tail -n 1)"
        grep -h "CUDA_FLAGS" $b/backends/cuda/CMakeFiles/genfence_backend_cuda.dir/flags.make
    } >"$bundle/BUILD_INFO"
    cat "$bundle/BUILD_INFO"
    du -sh "$bundle"
    echo "carry: [\"${bundle#"$root"/}\"]"
}

# ---------------------------------------------------------------- run
OUT=${OUT:-/tmp/genfence-cuda-out}
work=""
log=/dev/null
env_txt=/dev/null
say() { echo "$*" | tee -a "$log"; }
note() { echo "$*" >>"$env_txt"; }

# libcublas.so.13 (the soname the module links): $CUBLAS_DIR, the toolkit,
# the pip wheel (nvidia-cublas), the loader's cache
find_cublas() {
    local d py
    for d in ${CUBLAS_DIR:-} ${CUDA_HOME:+$CUDA_HOME/lib64} /usr/local/cuda/lib64 /usr/local/cuda/lib \
        /usr/local/cuda-13*/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu /usr/lib64; do
        [ -e "$d/libcublas.so.13" ] && { echo "$d"; return 0; }
    done
    for py in python3 /opt/torch/.venv/bin/python3; do
        d=$($py -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null) &&
            [ -e "$d/libcublas.so.13" ] && { echo "$d"; return 0; }
    done
    d=$(ldconfig -p 2>/dev/null | awk '/libcublas\.so\.13 /{print $NF; exit}')
    [ -n "$d" ] && { dirname "$d"; return 0; }
    d=$(find / -xdev -name 'libcublas.so.13' 2>/dev/null | head -n 1)
    [ -n "$d" ] && { dirname "$d"; return 0; }
    return 1
}

# G ARGS...: the carried genfence, started directly or through the carried loader
G() {
    if [ "$launch" = loader ]; then
        "$bundle/lib/glibc/ld-linux-x86-64.so.2" --library-path "$bundle/lib/glibc:$libpath" "$gf_exe" "$@"
    else
        LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$gf_exe" "$@"
    fi
}

# build the module with the device's own toolkit (no CMake needed)
rebuild_module() {
    local nvcc=${NVCC:-$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)}
    [ -x "$nvcc" ] || { say "no nvcc on this machine: cannot rebuild the cuda module"; return 1; }
    local cu_root; cu_root=$(dirname "$(dirname "$nvcc")")
    local cc=${CC:-$(command -v cc || command -v gcc || echo "$nvcc")}
    local arch="-arch=native"
    "$nvcc" -arch=native -x cu -c /dev/null -o "$work/probe.o" 2>/dev/null || arch="-gencode=arch=compute_90,code=[sm_90,compute_90]"
    say "rebuilding the cuda module with $nvcc ($("$nvcc" --version | tail -n 1)), $arch"
    local src=$root/backends/cuda o=$work/mod
    mkdir -p "$o"
    local cflags=(-O2 -std=c11 -fPIC -fvisibility=hidden -D_DEFAULT_SOURCE -D_POSIX_C_SOURCE=200809L
        -I"$root/include" -I"$src" -I"$cu_root/include" -DGFC_CUDA_ARCHS="\"device build\"")
    local f
    for f in cuda_backend cuda_forward cuda_pack; do
        "$cc" "${cflags[@]}" -c "$src/$f.c" -o "$o/$f.o" || return 1
    done
    "$cc" "${cflags[@]}" -c "$root/engine/status.c" -o "$o/status.o" || return 1
    "$nvcc" -O3 -std=c++17 $arch -Xcompiler=-fPIC,-fvisibility=hidden -I"$root/include" -I"$src" \
        -c "$src/cuda_kernels.cu" -o "$o/cuda_kernels.o" || return 1
    mkdir -p "$work/backends"
    "$nvcc" -shared $arch -o "$work/backends/libgenfence_backend_cuda.so" "$o"/*.o \
        -L"$cu_root/lib64" -L"$cu_root/lib" ${cublas_dir:+-L"$cublas_dir"} -lcublas -lcudart \
        -Xlinker=--no-undefined,--exclude-libs,ALL,-Bsymbolic || return 1
    export GENFENCE_MODULE_DIR="$work/backends"
    libpath="$work/backends:$cu_root/lib64:$libpath"
    say "rebuilt: $GENFENCE_MODULE_DIR/libgenfence_backend_cuda.so"
}

cuda_line() { G backends 2>/dev/null | awk '$1 == "cuda"'; }

run() {
    cd "$root"
    mkdir -p "$OUT"
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    log="$OUT/log.txt"
    env_txt="$OUT/env.txt"
    : >"$log"
    : >"$env_txt"
    say "run-cuda.sh: $(date -u +%FT%TZ) on $(hostname 2>/dev/null), out $OUT"
    note "== machine"
    note "$(uname -a)"
    note "$( (. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME") || echo '?'), $(ldd --version 2>/dev/null | head -n 1)"
    if command -v nvidia-smi >/dev/null 2>&1; then
        note "$(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 | head -n 4)"
    else
        note "nvidia-smi: not on PATH"
    fi
    note "nvcc: $( (command -v nvcc >/dev/null && nvcc --version | tail -n 1) || echo none)"
    [ -f "$bundle/BUILD_INFO" ] && { note "== bundle"; cat "$bundle/BUILD_INFO" >>"$env_txt"; }

    # genfence: the carried bundle, else a carried build dir
    gf_exe=""
    libpath=""
    if [ -x "$bundle/bin/genfence" ]; then
        gf_exe=$bundle/bin/genfence
        libpath=$bundle/lib
        export GENFENCE_MODULE_DIR=$bundle/backends
    else
        gf_exe=$(ls "$root"/build-cuda/genfence "$root"/build-cuda/harness/genfence 2>/dev/null | head -n 1)
        export GENFENCE_MODULE_DIR=$root/build-cuda/backends
    fi
    if [ -z "$gf_exe" ]; then
        say "no genfence: carry build-cuda/device-bundle (tools/device/run-cuda.sh prepare) or build-cuda"
        exit 3
    fi
    cublas_dir=$(find_cublas) || cublas_dir=""
    note "cuBLAS 13: ${cublas_dir:-not found}"
    [ -n "$cublas_dir" ] && libpath="$libpath:$cublas_dir"
    launch=${GF_LAUNCH:-direct}
    if [ "$launch" = loader ] || ! G --version >>"$log" 2>&1; then
        launch=loader
        if [ ! -x "$bundle/lib/glibc/ld-linux-x86-64.so.2" ] || ! G --version >>"$log" 2>&1; then
            say "genfence does not start here, directly or through the carried loader (see log.txt)"
            exit 3
        fi
    fi
    note "genfence: $gf_exe ($launch), modules $GENFENCE_MODULE_DIR"
    say "genfence $(G --version 2>&1 | head -n 1), started $launch"

    local line why
    line=$(cuda_line)
    if [ -n "${GF_REBUILD:-}" ] || ! [[ "$line" == *" available "* ]]; then
        say "carried cuda module: ${line:-not listed}"
        note "carried module: ${line:-not listed}"
        note "$(LD_LIBRARY_PATH=$libpath ldd "$GENFENCE_MODULE_DIR/libgenfence_backend_cuda.so" 2>&1)"
        if [ -n "${GF_REBUILD:-}" ] || command -v nvidia-smi >/dev/null 2>&1 || [ -e /dev/nvidiactl ]; then
            rebuild_module && line=$(cuda_line)
        fi
    fi
    local bargs=()
    for s in "${specs[@]}"; do bargs+=(--backend "$s"); done
    G backends --json "${bargs[@]}" >"$OUT/backends.json" 2>>"$log"
    G backends "${bargs[@]}" 2>&1 | tee -a "$log" | awk 'NR == 1 || /^cuda/' >>"$env_txt"
    if [[ " ${specs[*]}" == *" cuda"* ]] && ! [[ "$line" == *" available "* ]]; then
        why=${line#cuda*unavailable}
        why=$(echo "$why" | sed 's/^ *//')
        say "cuda unavailable: ${why:-not listed by genfence backends}"
        {
            echo "# CUDA backend on this machine: not verified"
            echo
            echo "cuda is unavailable here: ${why:-not listed}"
            echo
            echo '```'
            cat "$env_txt"
            echo '```'
        } >"$OUT/summary.md"
        exit 2
    fi

    # ---- the default suite on ref + every declared type
    local rargs=(--backend ref) filt=() jobs=() rc
    for s in "${specs[@]:1}"; do rargs+=(--require-backend "$s"); done
    [ -n "${GF_FILTER:-}" ] && filt=(--filter "$GF_FILTER")
    [ -n "${GF_JOBS:-}" ] && jobs=(-j "$GF_JOBS") # default: one child per core
    say "== genfence run ${rargs[*]} ${filt[*]}"
    # CUDA reserves far more address space than the runner's default 8G cap
    G run "${rargs[@]}" "${filt[@]}" "${jobs[@]}" --memory-limit 0 --timeout 300 \
        --report-dir "$work/report" 2>&1 | tee "$work/suite.txt" | tee -a "$log"
    rc=${PIPESTATUS[0]}
    cp "$work/report/run.json" "$OUT/run.json" 2>/dev/null || say "no run.json written"

    # ---- the module as genfence sees it, and fp32 logits against ref
    # (tests/cli/cuda_backend.sh, through a wrapper that starts genfence as above)
    local crc=skipped
    if [[ " ${specs[*]}" == *" cuda"* ]]; then
        {
            echo '#!/usr/bin/env bash'
            declare -p launch gf_exe libpath bundle GENFENCE_MODULE_DIR
            declare -f G
            echo 'export GENFENCE_MODULE_DIR; G "$@"'
        } >"$work/genfence"
        chmod +x "$work/genfence"
        say "== tests/cli/cuda_backend.sh"
        GENFENCE=$work/genfence GF_SRC=$root GF_BUILD=$(dirname "$GENFENCE_MODULE_DIR") \
            GF_PYTHON=${GF_PYTHON:-python3} bash "$root/tests/cli/cuda_backend.sh" 2>&1 | tee "$work/cli.txt" >>"$log"
        crc=${PIPESTATUS[0]}
    fi

    # ---- timing: greedy decode (cached and not) and a prefill, best of N
    bench
    {
        echo "# CUDA backend: default suite on ${specs[*]}"
        echo
        echo "exit status of genfence run: $rc; $(tail -n 1 "$work/suite.txt"); tests/cli/cuda_backend.sh: $crc"
        echo
        echo "| backend | runs | largest max\|d\| | smallest safety factor |"
        echo "|---|---|---|---|"
        # from lines like: pass  ID [BACKEND]  max|d| 1.3e-05 @9  margin 5.6e-03  sf 4.3e+02 ...
        awk '{ b = ""; for (i = 1; i <= NF; i++) if ($i ~ /^\[.*\]$/) b = substr($i, 2, length($i) - 2)
               if (b == "") next; n[b]++
               for (i = 1; i < NF; i++) {
                   if ($i == "max|d|" && (!(b in d) || $(i + 1) + 0 > d[b] + 0)) d[b] = $(i + 1)
                   if ($i == "sf" && (!(b in f) || $(i + 1) + 0 < f[b] + 0)) f[b] = $(i + 1) } }
             END { for (b in n) printf "| %s | %d | %s | %s |\n", b, n[b], (b in d) ? d[b] : "-", (b in f) ? f[b] : "-" }' \
            "$work/suite.txt" | sort
        echo
        echo '```'
        grep -iE '^(fail|stale|crash|timeout|error) ' -A3 "$work/suite.txt" | head -n 60
        sed -n '/^triangulation/,/^verdicts/p' "$work/suite.txt"
        grep -E '^(ok|FAIL|skip|cuda vs ref)' "$work/cli.txt" 2>/dev/null
        echo '```'
        echo
        cat "$OUT/bench.md"
        echo
        echo '```'
        cat "$env_txt"
        echo '```'
    } >"$OUT/summary.md"
    say "summary: $OUT/summary.md"
    [ "$rc" -eq 0 ] && exit 0
    exit 1
}

# best (smallest) "seconds" of N runs of `genfence generate ... --json`
best_seconds() {
    local best="" s i
    for ((i = 0; i < ${GF_BENCH_REPS:-3}; i++)); do
        s=$(G generate "$@" --json 2>>"$log" | sed -n 's/.*"seconds": \([0-9.eE+-]*\).*/\1/p')
        [ -z "$s" ] && { echo "-"; return; }
        best=$(awk -v a="$best" -v b="$s" 'BEGIN { print (a == "" || b + 0 < a + 0) ? b : a }')
    done
    echo "$best"
}

bench() {
    local model=$root/models/holmes-gpt prompt96 s dec nc pre
    prompt96=$(seq -s, 1 96)
    {
        echo "| backend | decode tok/s (cached, 120 tokens) | uncached tok/s (32 tokens) | prefill 96 tokens + 1 step (ms) |"
        echo "|---|---|---|---|"
    } >"$OUT/bench.md"
    echo "[" >"$OUT/bench.json"
    local first=1
    if G bench --help >/dev/null 2>&1; then
        say "genfence bench:"
        for s in "${specs[@]}"; do G bench --model "$model" --backend "$s" 2>&1 | tee -a "$log"; done
    fi
    for s in "${specs[@]}"; do
        dec=$(best_seconds --model "$model" --prompt "Sherlock Holmes" --max-new-tokens 120 --temperature 0 --no-eos --backend "$s")
        nc=$(best_seconds --model "$model" --prompt "Sherlock Holmes" --max-new-tokens 32 --temperature 0 --no-eos --no-cache --backend "$s")
        pre=$(best_seconds --model "$model" --tokens "$prompt96" --max-new-tokens 1 --temperature 0 --no-eos --backend "$s")
        awk -v s="$s" -v d="$dec" -v n="$nc" -v p="$pre" 'function r(t, x) { return x == "-" ? "-" : sprintf("%.0f", t / x) }
            BEGIN { printf "| %s | %s | %s | %s |\n", s, r(120, d), r(32, n), p == "-" ? "-" : sprintf("%.2f", 1000 * p) }' >>"$OUT/bench.md"
        [ $first -eq 1 ] || echo "," >>"$OUT/bench.json"
        first=0
        printf '{"backend": "%s", "decode_120_s": "%s", "uncached_32_s": "%s", "prefill_96_s": "%s"}' "$s" "$dec" "$nc" "$pre" >>"$OUT/bench.json"
    done
    echo "]" >>"$OUT/bench.json"
    cat "$OUT/bench.md" | tee -a "$log"
}

case "${1:-run}" in
    prepare) prepare ;;
    run) run ;;
    *) echo "usage: $0 [prepare|run]"; exit 2 ;;
esac
