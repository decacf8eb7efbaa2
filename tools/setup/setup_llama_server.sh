#!/usr/bin/env bash
# Build llama.cpp's own OpenAI-compatible server (llama-server) from the
# llama-cpp-python sdist pinned in tools/setup/requirements-llamacpp.txt (the
# same llama.cpp the llamacpp backend links), into
#   ${GENFENCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/genfence}/llama-server-<version>
# (bin/llama-server with its libraries beside it, GENFENCE-BUILD with the
# provenance). The http backend's live target (tests/cli/http_live.sh,
# docs/http.md). Idempotent: a built directory is left as it is.
# Slow (ggml, llama, common, the server: ~10 min on 2 cores): run it in the
# background with a log. Usage: tools/setup/setup_llama_server.sh [--print-dir]
set -euo pipefail
cd "$(dirname "$0")/../.."

. tools/setup/llamacpp_sdist.sh
gf_sdist_init llama-server
gf_sdist_begin .lock-server "${1:-}"

jobs=${GENFENCE_LLAMACPP_JOBS:-2}
t0=$(date +%s)
work=$(mktemp -d "$root/build-server-$ver.XXXXXX")
trap 'rm -rf "$work"' EXIT
gf_sdist_unpack "$work"
echo "setup: building llama-server $commit (llama-cpp-python $ver) into $dest, -j$jobs"
# The same flags as setup_llamacpp.sh, plus the server; no web UI (nothing is
# fetched), no HTTPS, no curl.
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=ON -DGGML_NATIVE=ON -DGGML_CCACHE=OFF \
    -DCMAKE_BUILD_RPATH='$ORIGIN' -DCMAKE_SKIP_BUILD_RPATH=OFF -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON \
    -DCMAKE_INSTALL_RPATH='$ORIGIN' \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_COMMON=ON -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_COMMIT="$commit" -DLLAMA_BUILD_NUMBER=0 \
    > "$work/configure.log" 2>&1 || { cat "$work/configure.log" >&2; exit 1; }
cmake --build "$work/build" --target llama-server -j"$jobs" > "$work/build.log" 2>&1 \
    || { tail -50 "$work/build.log" >&2; exit 1; }
mkdir -p "$work/install/bin"
cp -a "$work/build/bin/llama-server" "$work/install/bin/"
find "$work/build/bin" -maxdepth 1 -name 'lib*.so*' -exec cp -a {} "$work/install/bin/" \;
t1=$(date +%s)
cat > "$work/install/GENFENCE-BUILD" <<INFO
llama-cpp-python $ver (vendor/llama.cpp tools/server)
llama.cpp commit $commit
cc $(cc --version | head -1)
flags GGML_NATIVE=ON BUILD_SHARED_LIBS=ON CMAKE_BUILD_TYPE=Release
built $(date -u +%FT%TZ) in $((t1 - t0)) s with -j$jobs on $(nproc) cores
INFO
rm -rf "$dest"
mv "$work/install" "$dest"
echo "setup: llama-server built in $((t1 - t0)) s ($dest)"
