#!/usr/bin/env bash
# The backend sampler slot (docs/backends.md): examples/plugin built out of
# tree exactly as plugin_build.sh does (against a `cmake --install` of this
# build, headers through pkg-config) has its own sampler in `sample`; the
# sampler cases (cases/sampler.yaml) run every sampling call through it as
# well as the engine's sampler and must pass with the slot check recorded.
# The same source built with -DGF_PLUGIN_BAD_SAMPLE (tests/backends: the
# race's runner-up instead of its winner) must fail exactly that check; ref
# (no slot) keeps the engine-only record.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init plugin_sample_slot

bad="$GF_BUILD/tests/backends/libgenfence_test_example_bad_sample.so"
[ -f "$bad" ] || fail "test backend $bad not built"

cmake --install "$GF_BUILD" --prefix "$tmp/prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "install"; }
pcdir=$(dirname "$(find "$tmp/prefix" -name genfence.pc | head -1)")
cp -r "$GF_SRC/examples/plugin" "$tmp/src"
rm -rf "$tmp/src/build"*
env -u CPATH -u C_INCLUDE_PATH PKG_CONFIG_PATH="$pcdir" \
    cmake -S "$tmp/src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release >"$tmp/cfg.log" 2>&1 \
    || { cat "$tmp/cfg.log"; fail "configure"; }
cmake --build "$tmp/build" -j2 >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "build"; }
so="$tmp/build/libgenfence_example.so"
[ -f "$so" ] || fail "no $so"
echo "ok   built $so out of tree"

set +e
"$GENFENCE" run "$GF_SRC/cases/sampler.yaml" --backend "$so" --backend "$bad" --backend ref -j 2 --oversubscribe \
    --report-dir "$tmp/rep" >"$tmp/out" 2>&1
rc=$?
set -e
cat "$tmp/out"
[ $rc -eq 1 ] || fail "exit status $rc, expected 1 (the bad slot fails)"

"$PY" - "$tmp/rep/run.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
SLOT = "backend sample slot equals engine sampler"
bad = []
def check(ok, what):
    if not ok:
        bad.append(what)
by = {}
for r in doc["results"]:
    by.setdefault(r["backend"], {})[r["id"]] = r
# ref has no sample slot: the sampler kinds (and left_padding_positions,
# which reaches no slot) run once on the engine, not as passes of ref
check(set(by) == {"example", "example-bad-sample", "engine"}, f"backends {sorted(by)}")
check(all(r["id"] != "left_padding.positions" for b in ("example", "example-bad-sample") for r in by[b].values()),
      "left_padding.positions (no slot) reported per backend")
slot_cases = 0
for cid, r in by["example"].items():
    m, checks = r["metrics"], {c["name"]: c for c in r["checks"]}
    check(r["verdict"] == "pass", f"{cid} [example]: {r['verdict']} {r['reason']}")
    if "sampler" not in m:          # left_padding.positions: no sampler at all
        check(SLOT not in checks, f"{cid} [example]: slot check without a sampler")
        continue
    slot_cases += 1
    s = m["backend_sample_slot"]
    check(m["sampler"] == r["sampler"] == "engine + backend slot", f"{cid} [example]: sampler {m['sampler']!r}/{r['sampler']!r}")
    check(isinstance(s, dict) and s["ran"] is True and s["model"] is None and s["rows"] > 0
          and s["mismatches"] == 0 and s["errors"] == 0, f"{cid} [example]: slot record {s}")
    check(SLOT in checks and checks[SLOT]["passed"], f"{cid} [example]: slot check {checks.get(SLOT)}")
    print(f"ok   {cid} [example]: slot ran {s['calls']} calls / {s['rows']} rows, all equal to the engine")
check(slot_cases == 11, f"{slot_cases} sampler cases ran the slot, expected 11")
for cid, r in by["example-bad-sample"].items():
    failed = [c["name"] for c in r["checks"] if not c["passed"]]
    if "sampler" not in r["metrics"]:
        check(r["verdict"] == "pass", f"{cid} [bad]: {r['verdict']}")
        continue
    s = r["metrics"]["backend_sample_slot"]
    check(r["verdict"] == "fail" and failed == [SLOT] and s["mismatches"] > 0 and r["reason"].startswith(SLOT),
          f"{cid} [bad]: verdict {r['verdict']}, failed {failed}, reason {r['reason']!r}")
    print(f"ok   {cid} [example-bad-sample]: fails the slot check ({s['mismatches']} of {s['rows']} rows differ)")
for cid, r in by["engine"].items():
    m = r["metrics"]
    check(r["verdict"] == "pass", f"{cid} [engine]: {r['verdict']}")
    check(all(c["name"] != SLOT for c in r["checks"]), f"{cid} [engine]: slot check without a slot")
    if "sampler" in m:
        check(m["sampler"] == r["sampler"] == "engine" and m["backend_sample_slot"] == "none",
              f"{cid} [engine]: {m['sampler']!r} {m['backend_sample_slot']!r}")
if bad:
    print("\n".join("FAIL: " + b for b in bad))
    sys.exit(1)
print("ok   ref (no slot): the engine alone, reported as [engine]")
PY
