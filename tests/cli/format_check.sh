#!/usr/bin/env bash
# The house format (.clang-format, docs/architecture.md "Code style") holds
# for every C source and header under harness/, engine/, backends/,
# include/, examples/ and tests/: `clang-format --dry-run --Werror` over each
# file, the misformatted ones named (fix: `clang-format -i FILE`). The check
# first proves it can fail: a copy of a tree file with its indentation broken
# must be flagged. Skipped, saying why, only when clang-format is missing
# (tools/setup/setup.sh installs Debian's clang-format).
set -euo pipefail
: "${GF_SRC:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init format_check
cf=${CLANG_FORMAT:-clang-format}
if ! command -v "$cf" >/dev/null; then
    echo "skip: $cf not found (tools/setup/setup.sh installs clang-format)"
    exit 0
fi
echo "using $("$cf" --version)"
cd "$GF_SRC"
mapfile -t files < <(git ls-files -- 'harness/*.[ch]' 'engine/*.[ch]' 'backends/*.[ch]' 'include/*.h' \
    'examples/*.[ch]' 'tests/*.[ch]' 2>/dev/null || find harness engine backends include examples tests -name '*.[ch]')
[ ${#files[@]} -gt 100 ] || fail "found only ${#files[@]} C files under $GF_SRC"

# 1. the check can fail: a known file, its indentation broken, is flagged
probe="$tmp/probe.c"
sed 's/^    //' engine/status.c >"$probe"
cp .clang-format "$tmp/"
if "$cf" --dry-run --Werror "$probe" >/dev/null 2>&1; then
    fail "a misformatted copy of engine/status.c passed the format check"
fi
echo "ok   a misformatted file is flagged"

# 2. every tree file is in the house format
bad=()
for f in "${files[@]}"; do
    [ -f "$f" ] || continue
    "$cf" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
    printf 'not in the house format (clang-format -i FILE): %s\n' "${bad[@]}"
    fail "${#bad[@]} of ${#files[@]} files are not in the house format"
fi
echo "ok   ${#files[@]} files in the house format"
