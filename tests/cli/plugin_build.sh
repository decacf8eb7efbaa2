#!/usr/bin/env bash
# examples/plugin built out of tree, against nothing but a `cmake --install`
# of this build into a temporary prefix (headers + genfence.pc through
# pkg-config), from a clean copy of its sources; then loaded with
# --backend path/to/libgenfence_example.so and put through the suite checks
# against ref (tests/support/check_backend.sh: `genfence forward --against
# ref`, forward logits within 1e-4, greedy tokens equal, margin-gated;
# generate --verify and --batch-prompts), then the default suite (genfence run)
# through it (its sampler cases also run the plugin's own `sample` slot;
# tests/cli/plugin_sample_slot.sh checks those records).
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}" "${GF_PYTHON:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init plugin_build

cmake --install "$GF_BUILD" --prefix "$tmp/prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "install"; }
pc=$(find "$tmp/prefix" -name genfence.pc | head -1)
[ -n "$pc" ] || fail "no genfence.pc installed"
[ -f "$tmp/prefix/include/genfence/backend.h" ] || fail "backend.h not installed"
# include/genfence/ in the tree is the installed ABI and nothing more (the
# engine's own headers live in engine/include/genfence/): the two lists agree
tree_h=$(cd "$GF_SRC/include/genfence" && ls | sed 's/\.in$//' | sort | tr '\n' ' ')
inst_h=$(cd "$tmp/prefix/include/genfence" && ls | sort | tr '\n' ' ')
[ "$tree_h" = "$inst_h" ] \
    || fail "include/genfence/ holds $tree_h; the install puts out $inst_h (an in-tree header belongs in engine/include/genfence/)"
echo "ok   include/genfence/ is what is installed: $inst_h"
pcdir=$(dirname "$pc")
echo "installed: $(cd "$tmp/prefix" && find . -type f | sort | tr '\n' ' ')"
PKG_CONFIG_PATH="$pcdir" pkg-config --exists genfence || fail "pkg-config cannot read $pc"
echo "pkg-config: cflags '$(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags genfence)'," \
     "abi_version $(PKG_CONFIG_PATH="$pcdir" pkg-config --variable=abi_version genfence)"

# a clean copy of the sources, nothing of the tree on any include path
cp -r "$GF_SRC/examples/plugin" "$tmp/src"
rm -rf "$tmp/src/build"*
env -u CPATH -u C_INCLUDE_PATH PKG_CONFIG_PATH="$pcdir" \
    cmake -S "$tmp/src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release >"$tmp/cfg.log" 2>&1 \
    || { cat "$tmp/cfg.log"; fail "configure"; }
cmake --build "$tmp/build" -j2 >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "build"; }
if grep -q "$GF_SRC/include" "$tmp/build/compile_commands.json" 2>/dev/null \
   || gf_grepq -rq -- "-I$GF_SRC" "$tmp/build/CMakeFiles" 2>/dev/null; then
    fail "the plugin build used the source tree's headers"
fi
so="$tmp/build/libgenfence_example.so"
[ -f "$so" ] || fail "no $so"
exports=$(nm -D --defined-only "$so" | awk '{print $3}')
[ "$exports" = "genfence_backend_entry" ] || fail "plugin exports: $exports"
echo "ok   built $so (exports only genfence_backend_entry)"

"$GENFENCE" backends --backend "$so" | tee "$tmp/backends.txt"
grep -E "^$so +available +fp32" "$tmp/backends.txt" >/dev/null || fail "plugin not listed available"

model=$(gf_test_model)
"$GF_SRC/tests/support/check_backend.sh" "$GENFENCE" "$model" "$so" || fail "checks against ref"
gf_run_suite "$so" || fail "default suite through the plugin"
