#!/usr/bin/env bash
# genfence scoreboard (issue 15, item 4): the conformance table of run
# reports. From one small run (the statistical tier and two goldens on ref, on
# ref-noise (fp32, noisy: fails) and on ref-noise-q8_0 (declares q8_0: golden
# cases skipped, the tier fails)), the page names the run (machine, versions,
# command), has one row per case and one column per backend with its weight
# type, a cell per result whose verdict is the report's, a finding with its
# reproduce line per failure, the skips' reasons, and the --include text after
# its marker. Bad input is exit 2. Structure only: no timings.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init scoreboard
cd "$GF_SRC"
B="$GF_BUILD/tests/backends"
for f in ref_noise ref_noise_q8_0; do
  [[ -f "$B/libgenfence_test_faulty_$f.so" ]] || fail "test backend $B/libgenfence_test_faulty_$f.so not built"
done

set +e
"$GENFENCE" run -q cases/statistical.yaml cases/golden.yaml --filter 'holmes-gpt|^golden\.greedy\.sherlock$' \
  --backend ref --backend "$B/libgenfence_test_faulty_ref_noise.so" --backend "$B/libgenfence_test_faulty_ref_noise_q8_0.so" \
  --report-dir "$tmp/rep" >"$tmp/run.out" 2>&1
rc=$?
set -e
[[ $rc == 1 ]] || { cat "$tmp/run.out"; fail "the run exited $rc, expected 1 (the noisy backends fail)"; }

# the weight / KV types a backend declares (gf_backend_info.weights, kv_cache):
# `genfence backends` shows them, run.json's backend entry carries them
"$GENFENCE" backends --backend "$B/libgenfence_test_faulty_ref_noise_q8_0.so" >"$tmp/backends.out" \
  || fail "genfence backends exited $?"
grep -F "libgenfence_test_faulty_ref_noise_q8_0.so available" "$tmp/backends.out" | gf_grepq -q '; weights q8_0$' \
  || { cat "$tmp/backends.out"; fail "genfence backends does not show 'weights q8_0' for ref-noise-q8_0"; }
grep -E '^ref +available' "$tmp/backends.out" | gf_grepq -q 'weights' \
  && fail "genfence backends shows a weight type for ref, which declares none"
"$GENFENCE" backends --json --backend "$B/libgenfence_test_faulty_ref_noise_q8_0.so" >"$tmp/backends.json"
"$PY" - "$tmp/backends.json" "$tmp/rep/run.json" <<'PY' || fail "weights / kv_cache in the backend entries"
import json, sys
errors = []
bs = {b["name"]: b for b in json.load(open(sys.argv[1]))}
q = next((b for n, b in bs.items() if n.endswith("ref_noise_q8_0.so")), None)
if not q or q.get("weights") != "q8_0" or "kv_cache" in q:
    errors.append(f"backends --json: {q}")
if "weights" in bs["ref"]:
    errors.append(f"backends --json: ref has weights {bs['ref']['weights']!r}")
run = {b["name"]: b for b in json.load(open(sys.argv[2]))["backends"]}
if run.get("ref-noise-q8_0", {}).get("weights") != "q8_0":
    errors.append(f"run.json backend entry ref-noise-q8_0: {run.get('ref-noise-q8_0')}")
for n in ("ref", "ref-noise"):
    if "weights" in run.get(n, {"weights": "?"}):
        errors.append(f"run.json backend entry {n}: {run.get(n)}")
if errors:
    print("\n".join(errors), file=sys.stderr)
    sys.exit(1)
PY
# the scoreboard's column type comes from either place: the backend entry alone
# (the tier's metrics stripped) or the tier's record alone (the entry's stripped)
"$PY" - "$tmp/rep/run.json" "$tmp/entry.json" "$tmp/tier.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
a = json.loads(json.dumps(doc))
for r in a["results"]:
    r.get("metrics", {}).pop("weights", None)
json.dump(a, open(sys.argv[2], "w"))
for b in doc["backends"]:
    b.pop("weights", None)
    b.pop("kv_cache", None)
json.dump(doc, open(sys.argv[3], "w"))
PY
for v in entry tier; do
  "$GENFENCE" scoreboard "$tmp/$v.json" | gf_grepq -q '| ref-noise-q8_0 (fp32; weights q8_0, kv f32) |' \
    || fail "scoreboard: the q8_0 column lost its weight type when only the $v names it"
done

printf '## Findings\n\nhand-written text\n' >"$tmp/findings.md"
"$GENFENCE" scoreboard "$tmp/rep/run.json" -o "$tmp/table.md" --include "$tmp/findings.md" \
  || fail "scoreboard exited $?"
"$GENFENCE" scoreboard "$tmp/rep/run.json" >"$tmp/stdout.md" || fail "scoreboard to stdout exited $?"
grep -q '^## Table' "$tmp/stdout.md" || fail "no table on standard output"

"$PY" - "$tmp/rep/run.json" "$tmp/table.md" <<'PY'
import json, re, sys
doc = json.load(open(sys.argv[1]))
md = open(sys.argv[2]).read()
errors = []
lines = md.splitlines()
# the run: machine, versions, command
for want in (doc["environment"]["cpu_model"], doc["genfence"]["version"], doc["genfence"]["commit"], doc["started"]):
    if want not in md:
        errors.append(f"header lacks {want!r}")
if not any(l.startswith("    ") and "genfence run -q cases/statistical.yaml" in l for l in lines):
    errors.append("no command line of the run")
self = [l for l in lines if l.startswith("    genfence scoreboard ")]
if len(self) != 1 or not all(w in self[0].split() for w in ("-o", "--include")) or "run.json" not in self[0]:
    errors.append("the page does not quote the scoreboard command that made it")
for b in doc["backends"]:
    if f"`{b['name']}`" not in md and f"`{b['requested']}`" not in md:
        errors.append(f"backend {b['name']} not named in the header")
# the table
i = lines.index("## Table")
head = lines[i + 2]
def split(l):  # cells: '|' separates, '\|' is a pipe inside a cell
    return [c.strip() for c in re.split(r"(?<!\\)\|", l.strip()[1:-1])]
cols = split(head)
if cols[:2] != ["case", "kind"]:
    errors.append(f"table header {head!r}")
colnames = cols[2:]
want_cols = {"ref": "fp32", "ref-noise": "fp32", "ref-noise-q8_0": "weights q8_0, kv f32"}
for name, typ in want_cols.items():
    if not any(c.startswith(name + " (") and typ in c for c in colnames):
        errors.append(f"no column {name} ({typ}) in {colnames}")
rows = {}
for l in lines[i + 4:]:
    if not l.startswith("|"):
        break
    cells = split(l)
    rows[cells[0]] = cells
ids = {r["id"] for r in doc["results"]}
if set(rows) != ids:
    errors.append(f"rows {sorted(rows)} != cases {sorted(ids)}")
n_find = n_skip = 0
for r in doc["results"]:
    cells = rows.get(r["id"])
    if not cells:
        continue
    col = next(k for k, c in enumerate(colnames) if c.split(" (")[0] == r["backend"])
    cell = cells[2 + col]
    v = r["verdict"]
    if not re.match(rf"^(\*\*)?{re.escape(v)}(\*\*)?( |$)", cell):
        errors.append(f"{r['id']} [{r['backend']}]: cell {cell!r}, verdict {v}")
    if "statistical" in r["metrics"] and v != "skip":
        if "KL " not in cell or "top-1 " not in cell or "sf " not in cell:
            errors.append(f"{r['id']} [{r['backend']}]: statistical cell without KL / top-1 / sf: {cell!r}")
    if v == "skip":
        n_skip += 1
        m = re.search(r"\(s(\d+)\)", cell)
        if not m or not re.search(rf"^- s{m.group(1)} {re.escape(r['id'])} \[.*\]: .*statistical tier", md, re.M) \
                and "statistical" not in r["reason"]:
            errors.append(f"{r['id']} [{r['backend']}]: skip without its reason")
    elif v not in ("pass", "pass-near-tie"):
        n_find += 1
        m = re.search(r"\(f(\d+)\)", cell)
        if not m:
            errors.append(f"{r['id']} [{r['backend']}]: finding without a note")
            continue
        k = lines.index(next(l for l in lines if l.startswith(f"- **f{m.group(1)}** {r['id']} [")))
        rep = lines[k + 2].strip()
        if " run " not in rep or "--filter" not in rep or r["backend_requested"].split("/")[-1] not in rep:
            errors.append(f"{r['id']} [{r['backend']}]: reproduce line {rep!r}")
if not n_find or not n_skip:
    errors.append(f"expected findings and skips, got {n_find} and {n_skip}")
if f"## Findings ({n_find})" not in md or f"## Skips ({n_skip})" not in md:
    errors.append("findings / skips counts")
# the ref-noise-q8_0 golden case is skipped for the tier
g = [r for r in doc["results"] if r["id"] == "golden.greedy.sherlock" and r["backend"] == "ref-noise-q8_0"]
if not g or g[0]["verdict"] != "skip" or "judged by the statistical tier (case statistical.holmes-gpt)" not in g[0]["reason"]:
    errors.append(f"golden on ref-noise-q8_0: {g and (g[0]['verdict'], g[0]['reason'])}")
# the included text, after its marker
k = md.find("<!-- not generated: included as written from")
if k < 0 or "hand-written text" not in md[k:]:
    errors.append("the --include text is missing or not after its marker")
if errors:
    print("\n".join(errors), file=sys.stderr)
    sys.exit(1)
PY

# bad input: exit 2
set +e
"$GENFENCE" scoreboard >/dev/null 2>&1; [[ $? == 2 ]] || fail "no report: expected exit 2"
echo '{"a": 1}' >"$tmp/bad.json"
"$GENFENCE" scoreboard "$tmp/bad.json" >/dev/null 2>"$tmp/err"; [[ $? == 2 ]] || fail "a non-report: expected exit 2"
grep -q 'not a genfence run report' "$tmp/err" || fail "a non-report: $(cat "$tmp/err")"
"$GENFENCE" scoreboard "$tmp/nope.json" >/dev/null 2>&1; [[ $? == 2 ]] || fail "a missing file: expected exit 2"
"$GENFENCE" scoreboard --bogus "$tmp/rep/run.json" >/dev/null 2>&1; [[ $? == 2 ]] || fail "an unknown option: expected exit 2"
set -e
echo "scoreboard: ok"
