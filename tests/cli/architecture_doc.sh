#!/usr/bin/env bash
# docs/architecture.md stays true to the tree: every file or folder it names in
# backticks (a path with a '/', or a name ending in .c .h .md .sh .txt .py
# .yaml) exists, resolved against the checkout, then against harness/ (the doc
# names harness layers by their folder: `kit/keys.c`), then as the tail of
# any path in the tree (`private/`, `html.c`); `<name>` and `*` are patterns that must match at
# least one file. The check first proves it can fail on a name that is not
# there.
set -euo pipefail
: "${GF_SRC:?}" "${GF_PYTHON:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init architecture_doc
check() {
    "$GF_PYTHON" - "$GF_SRC" "$1" <<'PY'
import glob, os, re, sys
root, doc = sys.argv[1], sys.argv[2]
text = open(doc, encoding="utf-8").read()
names = sorted(set(re.findall(r"`([^`\s]+)`", text)))
ext = re.compile(r"\.(c|h|md|sh|txt|py|yaml|cu)$")
skip_words = {"/"}
tree = []
for d, dirs, files in os.walk(root):
    dirs[:] = [x for x in dirs if not x.startswith(".") and not x.startswith("build")]
    tree.extend(os.path.relpath(os.path.join(d, f), root) for f in files)
missing, checked = [], 0
for n in names:
    if n in skip_words or "(" in n or "=" in n or n.startswith("-") or "://" in n:
        continue
    if "/" not in n and not ext.search(n):
        continue
    checked += 1
    pat = re.sub(r"<[^>]+>", "*", n).rstrip("/")
    found = False
    for base in (root, os.path.join(root, "harness")):
        if glob.glob(os.path.join(base, pat)):
            found = True
            break
    if not found:  # a name relative to some folder: `private/`, `html.c`
        found = any(glob.fnmatch.fnmatch(t, "*" + pat) or glob.fnmatch.fnmatch(t, "*" + pat + "/*")
                    for t in tree)
    if not found:
        missing.append(n)
print(f"{checked} names checked in {os.path.relpath(doc, root)}")
if missing:
    print("named but not in the tree: " + ", ".join(missing))
    sys.exit(1)
PY
}
# 1. the check can fail
cp "$GF_SRC/docs/architecture.md" "$tmp/arch.md"
echo 'A file that went away: `harness/krun/no_such_file.c`.' >>"$tmp/arch.md"
if check "$tmp/arch.md" >"$tmp/probe.out" 2>&1; then
    fail "a name that is not in the tree passed: $(cat "$tmp/probe.out")"
fi
grep -q 'no_such_file.c' "$tmp/probe.out" || fail "the missing name is not named: $(cat "$tmp/probe.out")"
echo "ok   a missing name is caught"
# 2. the doc as committed
check "$GF_SRC/docs/architecture.md" || fail "docs/architecture.md names files that are not in the tree"
echo "ok   every file docs/architecture.md names exists"
