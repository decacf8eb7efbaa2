#!/usr/bin/env bash
# The planted-bug catalogue (tests/mutants/, run by `make mutants`, not in
# CI: a rebuild and a suite per mutant) still fits the tree: every
# tests/mutants/<area>/<name>.patch applies with `patch --fuzz=0`, and its
# first line says what it is (`# mutant: ...` or `# harmless: ...`). A patch
# that no longer applies is a planted bug that silently left the catalogue
# (run.sh counts it as an error only when someone runs it): two top-k mutants
# did so for three stops after the sampler's top-k changed. The check first
# proves it can fail: a copy of a mutant whose context no longer matches the
# tree must be refused.
set -euo pipefail
: "${GF_SRC:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init mutants_apply
command -v patch >/dev/null || fail "patch not found (build-essential)"
cd "$GF_SRC"
applies() { patch --dry-run --batch --silent --fuzz=0 -p1 <"$1" >/dev/null 2>&1; }

mapfile -t patches < <(find tests/mutants -mindepth 2 -name '*.patch' | sort)
[ ${#patches[@]} -ge 50 ] || fail "found only ${#patches[@]} mutants under tests/mutants"

# 1. the check can fail: the first mutant with one context line changed
probe="$tmp/probe.patch"
awk 'BEGIN{done=0} /^ / && !done {print " /* not in the tree */" substr($0, 2); done=1; next} {print}' \
    "${patches[0]}" >"$probe"
! applies "$probe" || fail "a mutant with a changed context line still applies: the check cannot fail"
echo "ok   the check refuses a mutant whose context is not in the tree (${patches[0]}, one line changed)"

# 2. every mutant applies and says what it is
bad=0
for p in "${patches[@]}"; do
    head -n 1 "$p" | gf_grepq -Eq '^# (mutant|harmless): .+' || { echo "FAIL $p: its first line is not '# mutant: WHAT' or '# harmless: WHAT'"; bad=1; }
    applies "$p" || { echo "FAIL $p: does not apply to the tree with patch --fuzz=0 -p1 (remake it: docs in tests/mutants/run.sh)"; bad=1; }
done
[ $bad = 0 ] || fail "some mutants do not fit the tree (above)"
echo "ok   all ${#patches[@]} mutants apply with --fuzz=0 and say what they are"
