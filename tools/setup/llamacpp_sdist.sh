# Sourced by tools/setup/setup_llamacpp.sh and setup_llama_server.sh: the one
# place that knows the pinned llama-cpp-python sdist (its version, the cache
# it is kept in, how its bundled llama.cpp is unpacked and which commit it is).
# gf_sdist_init NAME: sets ver, root (the cache) and dest="$root/NAME-$ver".
gf_sdist_init() {
    local spec
    spec=$(grep -E '^llama-cpp-python==' tools/setup/requirements-llamacpp.txt)
    ver=${spec#llama-cpp-python==}
    local home=${HOME:-$(cd ~ 2>/dev/null && pwd || echo /tmp)}   # ~ falls back to the passwd entry
    root=${GENFENCE_CACHE:-${XDG_CACHE_HOME:-$home/.cache}/genfence}
    dest="$root/$1-$ver"
}
# gf_sdist_begin LOCKNAME [--print-dir]: --print-dir prints $dest and exits;
# a built $dest (GENFENCE-BUILD in it) exits 0; else takes $root/LOCKNAME (one
# build at a time per cache: two setups racing would both build) and checks
# again under it.
gf_sdist_begin() {
    if [ "${2:-}" = --print-dir ]; then echo "$dest"; exit 0; fi
    if [ -f "$dest/GENFENCE-BUILD" ]; then exit 0; fi
    mkdir -p "$root"
    exec 9>"$root/$1"
    flock 9
    if [ -f "$dest/GENFENCE-BUILD" ]; then exit 0; fi
}
# gf_sdist_unpack WORK: the sdist (downloaded with pip once, into $root/dist)
# unpacked into WORK; sets src (its vendor/llama.cpp) and commit (the llama.cpp
# commit this release bundles, from the release's own changelog: the sdist
# carries no git metadata, so llama.cpp cannot find it itself).
gf_sdist_unpack() {
    local work=$1 pip=.venv/bin/pip
    [ -x "$pip" ] || pip="/usr/bin/python3 -m pip"
    mkdir -p "$root/dist"
    local sdist="$root/dist/llama_cpp_python-$ver.tar.gz"
    if [ ! -f "$sdist" ]; then
        echo "setup: downloading the llama-cpp-python $ver sdist (its bundled llama.cpp)"
        $pip download -q --disable-pip-version-check --no-deps --no-binary llama-cpp-python \
            "llama-cpp-python==$ver" -d "$root/dist"
    fi
    tar xzf "$sdist" -C "$work"
    src="$work/llama_cpp_python-$ver/vendor/llama.cpp"
    commit=$(awk -v v="## [$ver]" '$0==v{f=1;next} f&&/^## \[/{exit}
        f&&match($0,/llama\.cpp@[0-9a-f]+/){print substr($0,RSTART+10,RLENGTH-10);exit}' \
        "$work/llama_cpp_python-$ver/CHANGELOG.md")
    commit=${commit:-unknown}
}
