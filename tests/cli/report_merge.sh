#!/usr/bin/env bash
# genfence merge: the reports of --shard 1/2 and 2/2 (given in either order)
# joined equal the unsharded run's report, timings and the report folders of
# failure artifacts aside; a missing, repeated or foreign shard is refused (2).
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
PY=${GF_PYTHON:-python3}
bad="$GF_BUILD/tests/backends/libgenfence_test_ref_bad_cache.so"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init report_merge
cd "$GF_SRC"
sel=(cases/sampler.yaml cases/generation.yaml --filter '^(cache\.sherlock|eos\.rows|stream\..*|top_.*|sampler\..*|temperature\..*)$'
     --backend ref --backend "$bad")
run() { # DIR [args]: exit 1 where the bad backend's failure is in the slice (which slice holds it
    # depends on how many cases the files hold), else 0
    local d=$1
    shift
    set +e
    "$GENFENCE" run "${sel[@]}" "$@" --report-dir "$tmp/$d" > "$tmp/$d.txt" 2>&1
    local rc=$?
    set -e
    local want
    want=$("$PY" -c 'import json, sys; print(int(any(r["verdict"] == "fail" for r in json.load(open(sys.argv[1]))["results"])))' "$tmp/$d/run.json")
    [ "$rc" = "$want" ] || { cat "$tmp/$d.txt"; fail "run $d: exit $rc, expected $want"; }
}
run all
[ "$(grep -c '^FAIL ' "$tmp/all.txt")" = 1 ] || { cat "$tmp/all.txt"; fail "the unsharded run: want the bad backend's one failure"; }
run s1 --shard 1/2
run s2 --shard 2/2
run s3 --shard 1/3
set +e
"$GENFENCE" merge "$tmp/s2/run.json" "$tmp/s1/run.json" -o "$tmp/merged.json" --html "$tmp/merged.html" > "$tmp/merge.txt" 2>&1
rc=$?
set -e
cat "$tmp/merge.txt"
[ "$rc" = 1 ] || fail "merge exit $rc, expected the merged run's status 1"
[ -s "$tmp/merged.html" ] || fail "no merged HTML report"
# merge ends with the unsharded run's last line: each backend's figures, the engine alone's apart
[[ "$(tail -n 1 "$tmp/merge.txt")" == "$(tail -n 1 "$tmp/all.txt")" ]] ||
    fail "merge's last line '$(tail -n 1 "$tmp/merge.txt")' is not the run's '$(tail -n 1 "$tmp/all.txt")'"
tail -n 1 "$tmp/merge.txt" | gf_grepq -Eq "^ref: [0-9]+ passed, 0 failed, 0 skipped; ref-bad-cache: [0-9]+ passed, [1-9][0-9]* failed, 0 skipped; engine alone: "  ||
    fail "merge's last line: $(tail -n 1 "$tmp/merge.txt")"
"$PY" - "$tmp/all/run.json" "$tmp/merged.json" "$tmp/s1/run.json" <<'PY'
import json, os, re, sys
a, b, s1 = (json.load(open(p)) for p in sys.argv[1:4])
TIMING = {"seconds", "child_seconds", "started"}
def strip(v, key=""):
    if isinstance(v, dict):
        return {k: strip(x, k) for k, x in v.items() if k not in TIMING}
    if isinstance(v, list):
        # failure artifacts live in each run's own report folder
        return [os.path.basename(x) if key == "artifacts" and isinstance(x, str) else strip(x) for x in v]
    if key in ("reproduce", "trace_command") and isinstance(v, str):  # so does a reproduce or trace line's own report folder
        return re.sub(r" --report-dir \S+", "", v)
    return v
assert len(s1["results"]) < len(a["results"]), "shard 1/2 ran everything: the test shards nothing"
for k in ("schema_version", "genfence", "case_files", "backends", "audit", "results", "summary", "triangulation"):
    x, y = strip(a.get(k)), strip(b.get(k))
    if x != y:
        print("merged differs from unsharded in", k)
        print(json.dumps(x)[:2000]); print(json.dumps(y)[:2000])
        sys.exit(1)
assert b["options"]["shard"] is None, b["options"]
assert [m["index"] for m in b["merged_from"]] == [2, 1], b["merged_from"]
print("merged == unsharded (modulo timings):", len(b["results"]), "results,", b["summary"])
PY
refuse() { # WHY ARGS...: merge must exit 2 with a message
    local why=$1
    shift
    set +e
    "$GENFENCE" merge "$@" -o "$tmp/x.json" > "$tmp/x.txt" 2>&1
    local rc=$?
    set -e
    [ "$rc" = 2 ] || { cat "$tmp/x.txt"; fail "merge of $why: exit $rc, expected 2"; }
    grep -q "merge: " "$tmp/x.txt" || fail "merge of $why: no message"
    cat "$tmp/x.txt"
}
refuse "a missing shard" "$tmp/s1/run.json"
refuse "a shard given twice" "$tmp/s1/run.json" "$tmp/s1/run.json"
refuse "shards of different counts" "$tmp/s1/run.json" "$tmp/s3/run.json"
refuse "a non-report" "$tmp/s1.txt"
"$PY" - "$tmp/s2/run.json" "$tmp/foreign.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["options"]["filter"] = "^other$"
json.dump(d, open(sys.argv[2], "w"))
PY
refuse "a shard of another run" "$tmp/s1/run.json" "$tmp/foreign.json"
echo "1 passed, 0 failed"
