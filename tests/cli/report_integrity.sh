#!/usr/bin/env bash
# Report integrity (issue 12, item 7; docs/harness.md, "Reports"):
#  1. text that is not valid UTF-8 (a backend's error text, its stderr, whose
#     kept tail is cut at a byte offset) is repaired (\xNN), never dropped:
#     the failure reason survives in run.json and junit.xml, both valid
#     (python's json, xmllint against tests/support/junit.xsd);
#     tests/backends/faulty_text.c (ref-bad-text). Before: run.json had an
#     empty reason and no stderr_tail, junit.xml did not parse.
# (sections 2.. below: the report directory's lock, replacement and interruption)
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "report_integrity: FAIL: $*" >&2; exit 1; }
command -v xmllint >/dev/null || fail "xmllint not installed (apt-get install libxml2-utils)"
cd "$GF_SRC"
B="$GF_BUILD/tests/backends"
BAD="$B/libgenfence_test_faulty_ref_bad_text.so"
[[ -f "$BAD" ]] || fail "$BAD not built"

# ---- 1. invalid UTF-8 from a backend ----
cat >"$tmp/text.yaml" <<'EOF'
cases:
  - id: integrity.bad_text
    kind: cache_equals_recompute
    expect_verdict: fail
    description: "must fail: the backend's 2nd forward fails with an error text that is not UTF-8"
    backends: [ref-bad-text]
    model: models/holmes-gpt
    prompt: "Sherlock Holmes"
    steps: 4
EOF
set +e
"$GENFENCE" run "$tmp/text.yaml" --backend "$BAD" --no-triangulate -j 1 --report-dir "$tmp/r1" >"$tmp/out1" 2>&1
rc=$?
set -e
cat "$tmp/out1"
[[ $rc -eq 1 ]] || fail "bad text: exit $rc, want 1 (a backend failure)"
xmllint --noout --schema "$GF_SRC/tests/support/junit.xsd" "$tmp/r1/junit.xml" || fail "junit.xml does not validate"
"$PY" - "$tmp/r1" <<'PY' || fail "bad text: the reason did not survive"
import json, os, sys
import xml.etree.ElementTree as ET
rep = sys.argv[1]
want = r"bad bytes \xFF|\x80|\xE2\x82|café (injected by tests/backends/faulty_text.c)"
with open(os.path.join(rep, "run.json"), encoding="utf-8", errors="strict") as f:
    doc = json.load(f)
(r,) = doc["results"]
assert r["verdict"] == "fail", r["verdict"]
assert want in r["reason"], "run.json reason: %r" % r["reason"]
tail = r["process"]["stderr_tail"]
assert isinstance(tail, str), "stderr_tail dropped: %r" % (tail,)
assert tail.startswith("€"), "the tail does not start at a whole character: %r" % tail[:12]
assert r"stderr: \xFE\xFF end" in tail, "stderr's invalid bytes: %r" % tail[-40:]
assert "\\x" not in tail[:-40], "a valid character was escaped in the tail"
root = ET.parse(os.path.join(rep, "junit.xml")).getroot()
(tc,) = root.findall("testsuite/testcase")
(fl,) = tc.findall("failure")
assert want in fl.get("message"), "junit message: %r" % fl.get("message")
assert want in fl.text, "junit text: %r" % fl.text
err = tc.find("system-err").text
assert err.startswith("€") and r"\xFE\xFF end" in err, "junit system-err: %r ... %r" % (err[:12], err[-40:])
with open(os.path.join(rep, "index.html"), encoding="utf-8", errors="strict") as f:
    assert "injected by tests/backends/faulty_text.c" in f.read(), "index.html lost the reason"
PY
echo "ok   invalid UTF-8 from a backend: repaired in run.json, junit.xml and index.html"
