#!/usr/bin/env bash
# The mechanism probes (issue 28 items 3-4; cases/probes/, docs/cases.md
# "probe"): every probe passes on ref, openblas, onednn and the example
# plugin (each where it is built and available), with the probe table on the
# console (one line per probe x shape) and the grid on the HTML page; each
# probe fault of tests/backends fails exactly the probes of its mechanism,
# the line naming the probe and the shape, and passes the rest; a declared
# probe the backend refuses fails; a declared probe whose calls ran a kernel
# path the backend does not declare (the model_paths slot against
# info.cpu_path: a silent fallback) fails with ref's numbers, and the same
# paths declared pass; onednn's calls run the path it declares; a failing
# probe replays from its
# reproduce line (its seed is in the case) with the same NMSE; llamacpp runs
# them where it is built (its verdicts are not asserted: a third-party
# engine's numbers on this CPU).
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init probes
B="$GF_BUILD/tests/backends"
n_cases=$("$GENFENCE" list "$GF_SRC/cases/probes" | awk '$2 == "probe"' | wc -l)
(( n_cases >= 60 )) || fail "cases/probes lists $n_cases probe cases, expected 60 or more"

# 1. honest backends: every probe passes, one table line per probe
honest=(ref)
for be in openblas onednn; do
  case "$("$GENFENCE" backends | awk -v b="$be" '$1 == b')" in
    *" available "*) honest+=("$be") ;;
    *) echo "skip $be: not built or unavailable here" ;;
  esac
done
[[ -f "$B/libgenfence_test_example_plugin.so" ]] || fail "test backend example-plugin not built"
honest+=("$B/libgenfence_test_example_plugin.so")
for be in "${honest[@]}"; do
  name=$(basename "$be")
  rc=0
  "$GENFENCE" run "$GF_SRC/cases/probes" --backend "$be" --report-dir "$tmp/rep_$name" >"$tmp/$name.out" 2>&1 || rc=$?
  [[ $rc == 0 ]] || { cat "$tmp/$name.out"; fail "$be: exit $rc on cases/probes, expected 0"; }
  gf_grepq -q '^probes (NMSE = sum (x - ref)^2 / sum ref^2' <"$tmp/$name.out" || fail "$be: no probe table"
  # every line passes, or skips a model feature the backend says it lacks (yarn's attention factor)
  lines=$(grep -cE '^  (embedding|attention|rope|norm|mlp|head) +(llama|gpt2) .* (pass$|skip .*the micro-model needs model)' \
    "$tmp/$name.out" || true)
  [[ $lines == "$n_cases" ]] || { cat "$tmp/$name.out"; fail "$be: $lines passing table lines, expected $n_cases"; }
  gf_grepq -q 'id="probes"' <"$tmp/rep_$name/index.html" || fail "$be: no probe grid on the HTML page"
  echo "ok   $be: $n_cases probes pass, table and grid"
done

# 2. each fault fails exactly its probes (ids as an ERE), naming probe and shape
check_fault() { # STEM FAILING_ERE
  local stem=$1 want=$2 rc=0
  [[ -f "$B/libgenfence_test_$stem.so" ]] || fail "test backend $stem not built"
  "$GENFENCE" run "$GF_SRC/cases/probes" --backend "$B/libgenfence_test_$stem.so" --no-triangulate \
    --report-dir "$tmp/rep_$stem" >"$tmp/$stem.out" 2>&1 || rc=$?
  [[ $rc == 1 ]] || { cat "$tmp/$stem.out"; fail "$stem: exit $rc on cases/probes, expected 1"; }
  "$PY" - "$tmp/rep_$stem/run.json" "$want" "$stem" <<'PY' || fail "$stem: wrong probes failed"
import json, re, sys
doc = json.load(open(sys.argv[1]))
want = re.compile(sys.argv[2])
bad = []
n_fail = 0
for r in doc["results"]:
    should = bool(want.fullmatch(r["id"]))
    if should != (r["verdict"] == "fail") or r["verdict"] not in ("pass", "fail"):
        bad.append(f'{r["id"]}: {r["verdict"]} ({r["reason"][:160]})')
    if r["verdict"] == "fail":
        n_fail += 1
        m = r["metrics"]
        # the reason names the probe and the shape
        if f'probe {m["probe"]} [{m["shape"]}]' not in r["reason"]:
            bad.append(f'{r["id"]}: reason does not name probe and shape: {r["reason"][:200]}')
if bad or not n_fail:
    print("\n".join(bad) or "nothing failed")
    sys.exit(1)
print(f"ok   {sys.argv[3]}: {n_fail} probes fail ({sys.argv[2]}), the rest pass")
PY
}
check_fault ref_attn_no_max 'probe\.attention\.big_scores(\.gpt2|\.cached)?'
check_fault ref_rope_off_by_one 'probe\.(attention\.(causal|padded|cached\.(prefill|one_by_one|uneven)|big_scores(\.cached)?|d36)|rope\..*|gqa\..*|head_dim\..*)'
check_fault ref_rms_eps_outside 'probe\.norm\.rms\.tiny'
check_fault ref_head_dim_80 'probe\.head_dim\.80(\.cached)?'
check_fault faulty_ref_refuse_dh80 'probe\.head_dim\.80(\.cached)?'
gf_grepq -qE '^  attention +llama silu D64 H2/2 dh80 .* ref-head-dim-80 .* FAIL' <"$tmp/ref_head_dim_80.out" \
  || fail "ref-head-dim-80: the table line does not name the probe and shape"
gf_grepq -q "declared (info.probes: all) but the backend refused it at model_load" <"$tmp/faulty_ref_refuse_dh80.out" \
  || fail "ref-refuse-dh80: the refusal of a declared probe is not named"
check_fault faulty_ref_fallback_dh80 'probe\.head_dim\.80(\.cached)?'
gf_grepq -q "the calls ran path 'scalar', which the backend does not declare (cpu_path tiled): a silent fallback" \
  <"$tmp/faulty_ref_fallback_dh80.out" || fail "ref-fallback-dh80: the silent fallback is not named"
"$PY" - "$tmp/rep_faulty_ref_fallback_dh80/run.json" <<'PY' || fail "ref-fallback-dh80: the NMSE is not what failed"
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    if r["verdict"] == "fail":
        names = {c["name"]: c["passed"] for c in r["checks"]}
        assert names == {"declared path ran": False, "NMSE against ref": True}, (r["id"], names)
        assert r["metrics"]["kernel_paths"] == "scalar", r["metrics"]
PY
rc=0
"$GENFENCE" run "$GF_SRC/cases/probes" --backend "$B/libgenfence_test_faulty_ref_path_honest.so" --no-triangulate \
  --report-dir "$tmp/rep_honest_path" >"$tmp/honest_path.out" 2>&1 || rc=$?
[[ $rc == 0 ]] || { cat "$tmp/honest_path.out"; fail "ref-path-honest: exit $rc, expected 0 (its fallback path is declared)"; }
echo "ok   ref-path-honest: the same paths, declared: every probe passes"
# over the protocol: echo_ref declares its probes in the info reply (hello
# feature bit 3, docs/protocol.md): GPT-2's pass, the Llama micro-models skip
# naming its declaration
ECHO="$GF_BUILD/tools/echo_ref"
if [[ -x "$ECHO" ]]; then
  rc=0
  "$GENFENCE" run "$GF_SRC/cases/probes" --backend "exec:$ECHO" --no-triangulate --report-dir "$tmp/rep_echo" \
    >"$tmp/echo.out" 2>&1 || rc=$?
  [[ $rc == 0 ]] || { cat "$tmp/echo.out"; fail "exec:echo_ref: exit $rc on cases/probes, expected 0"; }
  "$PY" - "$tmp/rep_echo/run.json" <<'PY' || fail "exec:echo_ref: its declaration"
import json, sys
res = json.load(open(sys.argv[1]))["results"]
for r in res:
    if r["verdict"] == "skip":
        assert "for this case: it leaves out -llama (info.probes: all,-llama)" in r["reason"], r["reason"]
    else:
        assert r["verdict"] == "pass" and r["metrics"]["shape"].startswith("gpt2 "), (r["id"], r["verdict"])
n = sum(r["verdict"] == "pass" for r in res)
assert n >= 10, n
print(f"ok   exec:echo_ref: {n} GPT-2 probes pass over the protocol, {len(res) - n} Llama ones skip (info.probes: all,-llama)")
PY
else
  fail "$ECHO not built"
fi
for name in onednn; do
  [[ -f "$tmp/rep_$name/run.json" ]] || continue
  "$PY" - "$tmp/rep_$name/run.json" <<'PY' || fail "$name: model_paths"
import json, sys
doc = json.load(open(sys.argv[1]))
decl = [b for b in doc["backends"] if b.get("name") == "onednn"][0].get("cpu_path")
ran = set()
for r in doc["results"]:
    p = r["metrics"].get("kernel_paths")
    # the matmul for several rows, dnnl_sgemm for one: each probe ran some of them
    assert p and set(p.split(",")) <= set(decl.split(",")), (r["id"], p, decl)
    ran |= set(p.split(","))
assert ran == set(decl.split(",")), (sorted(ran), decl)
print(f"ok   onednn: every probe's calls ran declared paths, and the probes ran all of them ({decl})")
PY
done

# 3. a failing probe replays from its reproduce line with the same NMSE
rep=$("$PY" - "$tmp/rep_ref_head_dim_80/run.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    if r["id"] == "probe.head_dim.80":
        print(r["reproduce"])
        print(repr(r["metrics"]["nmse"]))
PY
)
line=$(sed -n 1p <<<"$rep")
nmse=$(sed -n 2p <<<"$rep")
line=${line/--report-dir */--report-dir $tmp/replay}
rc=0
eval "$line" >"$tmp/replay.out" 2>&1 || rc=$?
[[ $rc == 1 ]] || { cat "$tmp/replay.out"; fail "replay: exit $rc, expected 1"; }
again=$("$PY" -c 'import json,sys; print(repr([r for r in json.load(open(sys.argv[1]))["results"]][0]["metrics"]["nmse"]))' \
  "$tmp/replay/run.json")
[[ $again == "$nmse" ]] || fail "replay: NMSE $again, the run had $nmse"
echo "ok   replay of probe.head_dim.80: NMSE $again again"

# 4. llamacpp runs them (converting each micro-model to GGUF); verdicts not asserted
case "$("$GENFENCE" backends | awk '$1 == "llamacpp"')" in
  *" available "*)
    rc=0
    "$GENFENCE" run "$GF_SRC/cases/probes" --backend llamacpp --no-report >"$tmp/llamacpp.out" 2>&1 || rc=$?
    [[ $rc == 0 || $rc == 1 ]] || { cat "$tmp/llamacpp.out"; fail "llamacpp: exit $rc"; }
    n=$(grep -cE '^  (embedding|attention|rope|norm|mlp|head) +(llama|gpt2) .* llamacpp ' "$tmp/llamacpp.out" || true)
    (( n >= n_cases - 2 )) || { cat "$tmp/llamacpp.out"; fail "llamacpp: $n table lines"; }
    # what its gpt2 graph lacks it leaves out by tag (info.probes "all,-gelu_erf,-relu"): skipped, not refused
    for t in gelu_erf relu; do
      gf_grepq -qE "^  mlp +gpt2 $t .* skip .*it leaves out -$t" <"$tmp/llamacpp.out" \
        || { cat "$tmp/llamacpp.out"; fail "llamacpp: the $t MLP probe is not skipped as left out"; }
    done
    echo "ok   llamacpp: $n probes in the table, gelu_erf and relu left out by its declaration" ;;
  *) echo "skip llamacpp: not built or unavailable here" ;;
esac
echo "probes: ok"
