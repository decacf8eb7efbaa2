#!/usr/bin/env bash
# Build llama.cpp's libraries (llama, ggml) from the llama-cpp-python sdist
# pinned in tools/setup/requirements-llamacpp.txt, into
#   ${GENFENCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/genfence}/llama.cpp-<version>
# (include/, lib/, GENFENCE-BUILD with the provenance). Idempotent: a built
# directory is left as it is. CMake finds the same directory by default
# (backends/llamacpp/CMakeLists.txt) or through -DGENFENCE_LLAMACPP_DIR=...
# Usage: tools/setup/setup_llamacpp.sh [--print-dir]
set -euo pipefail
cd "$(dirname "$0")/../.."

. tools/setup/llamacpp_sdist.sh
gf_sdist_init llama.cpp
gf_sdist_begin .lock "${1:-}"

jobs=${GENFENCE_LLAMACPP_JOBS:-2}
t0=$(date +%s)
work=$(mktemp -d "$root/build-$ver.XXXXXX")
trap 'rm -rf "$work"' EXIT
gf_sdist_unpack "$work"
echo "setup: building llama.cpp $commit (llama-cpp-python $ver) into $dest, -j$jobs"
# Library targets only: no tests, tools, examples, server, common, app, HTTPS.
# GGML_NATIVE=ON: the cache is per machine and the build compiles for it
# (-march=native); ggml's CPU kernels then use what this CPU has (AVX2, AVX-512 ...).
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$work/install" -DCMAKE_INSTALL_LIBDIR=lib \
    -DCMAKE_INSTALL_RPATH='$ORIGIN' \
    -DBUILD_SHARED_LIBS=ON -DGGML_NATIVE=ON -DGGML_CCACHE=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_TOOLS_INSTALL=OFF -DLLAMA_TESTS_INSTALL=OFF \
    -DLLAMA_BUILD_COMMIT="$commit" -DLLAMA_BUILD_NUMBER=0 \
    > "$work/configure.log" 2>&1 || { cat "$work/configure.log" >&2; exit 1; }
cmake --build "$work/build" --target llama -j"$jobs" > "$work/build.log" 2>&1 \
    || { tail -50 "$work/build.log" >&2; exit 1; }
cmake --install "$work/build" > "$work/install.log" 2>&1 \
    || { tail -50 "$work/install.log" >&2; exit 1; }
t1=$(date +%s)
cat > "$work/install/GENFENCE-BUILD" <<INFO
llama-cpp-python $ver
llama.cpp commit $commit
cc $(cc --version | head -1)
flags GGML_NATIVE=ON BUILD_SHARED_LIBS=ON CMAKE_BUILD_TYPE=Release
built $(date -u +%FT%TZ) in $((t1 - t0)) s with -j$jobs on $(nproc) cores
INFO
rm -rf "$dest"
mv "$work/install" "$dest"
echo "setup: llama.cpp built in $((t1 - t0)) s ($dest)"
