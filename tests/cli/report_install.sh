#!/usr/bin/env bash
# An installed genfence works from anywhere: `cmake --install` to a temporary
# prefix, then, from a directory outside the checkout and without
# GENFENCE_ROOT, the default suite (cases, models and goldens from
# <prefix>/share/genfence) passes on ref; find_package(genfence CONFIG) with
# that prefix gives genfence_add_suite and the installed executable.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
PY=${GF_PYTHON:-python3}
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init report_install # $tmp under /tmp: outside the checkout, as an installed user is
prefix="$tmp/prefix"
cmake --install "$GF_BUILD" --prefix "$prefix" > "$tmp/install.txt" 2>&1 || { cat "$tmp/install.txt"; fail "cmake --install failed"; }
gf="$prefix/bin/genfence"
for p in share/genfence/cases/generation.yaml share/genfence/golden/golden.greedy.sherlock.safetensors \
         share/genfence/models/holmes-gpt/model.safetensors share/genfence/cmake/GenfenceSuite.cmake; do
    [ -e "$prefix/$p" ] || fail "not installed: $p"
done
# the installed binary uses its installed modules, not the build tree's (which
# still exists), unless GENFENCE_MODULE_PATH (GENFENCE_MODULE_DIR: its older
# name) or --module-dir says otherwise; `genfence backends` says where each came from
inst="$prefix/bin/../lib/genfence/backends"
ls "$prefix/lib/genfence/backends/"libgenfence_backend_*.so >/dev/null 2>&1 || fail "no backend module installed"
origins() { # the (origin, folder) pairs of the module backends, from backends --json
    "$PY" -c 'import json, sys; print(sorted({(b["module_origin"], b["module_dir"]) for b in json.load(sys.stdin) if "module_origin" in b}))'
}
noenv=(env -u GENFENCE_MODULE_PATH -u GENFENCE_MODULE_DIR -u GENFENCE_ROOT)
got=$("${noenv[@]}" "$gf" backends --json | origins)
[[ $got == "[('installed with this genfence', '$inst')]" ]] || fail "installed genfence's modules: $got"
"${noenv[@]}" "$gf" backends >"$tmp/be.txt" 2>&1 || true
grep -q "^ *from $inst/libgenfence_backend_[a-z]*\.so (installed with this genfence)$" "$tmp/be.txt" ||
    { cat "$tmp/be.txt"; fail "genfence backends does not say the modules came from the installed tree"; }
! grep -q "$GF_BUILD" "$tmp/be.txt" || { cat "$tmp/be.txt"; fail "the installed genfence names the build tree"; }
mkdir -p "$tmp/mods"
got=$(env -u GENFENCE_MODULE_DIR GENFENCE_MODULE_PATH="$tmp/mods" "$gf" backends --json | origins)
[[ $got == "[('GENFENCE_MODULE_PATH', '$tmp/mods')]" ]] || fail "GENFENCE_MODULE_PATH: $got"
got=$(env -u GENFENCE_MODULE_PATH GENFENCE_MODULE_DIR="$tmp/mods" "$gf" backends --json | origins)
[[ $got == "[('GENFENCE_MODULE_DIR', '$tmp/mods')]" ]] || fail "GENFENCE_MODULE_DIR (the alias): $got"
got=$(GENFENCE_MODULE_PATH="$tmp/mods" GENFENCE_MODULE_DIR="$GF_BUILD/backends" "$gf" backends --json | origins)
[[ $got == "[('GENFENCE_MODULE_PATH', '$tmp/mods')]" ]] || fail "GENFENCE_MODULE_PATH beside GENFENCE_MODULE_DIR: $got"
got=$(env -u GENFENCE_MODULE_PATH GENFENCE_MODULE_DIR="$GF_BUILD/backends" "$gf" --module-dir "$tmp/mods" backends --json | origins)
[[ $got == "[('GENFENCE_MODULE_PATH', '$tmp/mods')]" ]] || fail "--module-dir: $got"
echo "ok   installed modules: $inst; GENFENCE_MODULE_PATH, GENFENCE_MODULE_DIR, --module-dir override"
mkdir -p "$tmp/work"
cd "$tmp/work"
case "$PWD" in "$GF_SRC"*) fail "the work directory is inside the checkout";; esac
n_src=$(cd "$GF_SRC" && "$GENFENCE" list | grep -c '^[^ ]' || true)
n_inst=$(env -u GENFENCE_ROOT "$gf" list | grep -c '^[^ ]' || true)
[ "$n_inst" = "$n_src" ] && [ "$n_inst" -gt 0 ] || fail "installed list: $n_inst lines, checkout: $n_src"
set +e
env -u GENFENCE_ROOT "$gf" run --backend ref --report-dir "$tmp/work/reports" > run.txt 2>&1
rc=$?
set -e
tail -3 run.txt
[ "$rc" = 0 ] || { cat run.txt; fail "the default suite on ref: exit $rc from $PWD"; }
"$PY" - "$tmp/work/reports/run.json" "$prefix" <<'PY'
import json, sys
d, prefix = json.load(open(sys.argv[1])), sys.argv[2]
share = prefix + "/share/genfence/"
assert d["case_files"] and all(f.startswith(share + "cases/") for f in d["case_files"]), d["case_files"]
goldens = [r["metrics"]["golden"]["path"] for r in d["results"] if "golden" in r["metrics"]]
assert goldens and all(g.startswith(share + "golden/") for g in goldens), goldens
assert d["summary"]["runs"] > 0 and d["summary"]["failed"] == 0, d["summary"]
print("installed default suite:", d["summary"]["passed"], "passed from", share)
PY
# the installed CMake package
mkdir -p "$tmp/proj"
cat > "$tmp/proj/CMakeLists.txt" <<EOF2
cmake_minimum_required(VERSION 3.19)
project(gf_installed_user NONE)
enable_testing()
find_package(genfence CONFIG REQUIRED)
genfence_add_suite(NAME s CASES "\${GENFENCE_DATA_DIR}/cases/sampler.yaml" BACKENDS ref)
EOF2
env -u GENFENCE_ROOT cmake -S "$tmp/proj" -B "$tmp/pb" -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/cfg.txt" 2>&1 ||
    { cat "$tmp/cfg.txt"; fail "find_package(genfence) project failed to configure"; }
grep -q "GENFENCE_EXECUTABLE:FILEPATH=$prefix/bin/genfence" "$tmp/pb/CMakeCache.txt" || fail "not the installed genfence"
n_cases=$(env -u GENFENCE_ROOT "$gf" list --json "$prefix/share/genfence/cases/sampler.yaml" | "$PY" -c 'import json,sys; print(len(json.load(sys.stdin)))')
got=$(ctest --test-dir "$tmp/pb" -N | sed -n 's/^Total Tests: //p')
[ "$got" = "$n_cases" ] || fail "$got CTest tests, expected $n_cases"
echo "1 passed, 0 failed"
