#!/usr/bin/env bash
# genfence bench: the structure and fields of its output, never its timings.
# Exit status 0 when every backend ran, 1 when one failed (an unknown backend
# here: the must-fail half), 2 on bad usage; the cache bytes it reports are
# the backend's own, checked against (L, 1, H, 16 + new tokens, d_head) k and v
# (the cache is what the generation can feed, not the model's whole context).
set -euo pipefail
: "${GENFENCE:?set GENFENCE to the genfence binary}" "${GF_SRC:?}" "${GF_PYTHON:?set GF_PYTHON}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init bench_cli
# shellcheck source=../support/test_lib.sh
model=$(gf_test_model)
fail=0
check() { # check NAME COMMAND...: the command must succeed
    local name=$1; shift
    if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fail=1; fi
}
expect_rc() { # expect_rc WANT NAME COMMAND...
    local want=$1 name=$2 rc=0; shift 2
    "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    if [ "$rc" -eq "$want" ]; then echo "ok   $name (exit $rc)"; else
        echo "FAIL $name: exit $rc, want $want"; cat "$tmp/err"; fail=1; fi
}

expect_rc 0 "--help" "$GENFENCE" bench --help
for opt in --model --shape gpt2-small llama-small --backend --threads --json --no-uncached "median of"; do
    check "--help mentions $opt" grep -q -- "$opt" "$tmp/out"
done
check "genfence --help lists bench" bash -c '"$0" --help | gf_grepq -q "^  bench "' "$GENFENCE"
expect_rc 2 "no model" "$GENFENCE" bench
expect_rc 2 "both --model and --shape" "$GENFENCE" bench --model "$model" --shape gpt2-small
expect_rc 2 "unknown shape" "$GENFENCE" bench --shape gpt9
check "unknown shape names the known ones" grep -q "gpt2-small, llama-small" "$tmp/err"
expect_rc 2 "bad --repeats" "$GENFENCE" bench --model "$model" --repeats 0
expect_rc 2 "bad --threads" "$GENFENCE" bench --model "$model" --threads x

# JSON, one good backend and one that does not exist: exit 1, both rows there
expect_rc 1 "an unknown backend fails the run" "$GENFENCE" bench --model "$model" --backend ref \
    --backend no-such-backend --new-tokens 3 --repeats 1 --no-probe --json
"$GF_PYTHON" - "$tmp/out" "$model/config.json" <<'PY' || fail=1
import json, sys
out = json.load(open(sys.argv[1])); cfg = json.load(open(sys.argv[2]))
bad = []
def need(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond: bad.append(what)
pos = lambda x: isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0
w = out["workload"]
need(w["prompt_tokens"] == 16 and w["new_tokens"] == 3 and w["repeats"] == 1 and w["warmup"] == 1, "workload")
need(out["machine"]["read_gbps"] is None and out["machine"]["read_gbps_reason"] == "--no-probe",
     "--no-probe: no bandwidth, and why")
need(out["machine"]["read_working_set_gbps"] is None and out["machine"]["read_working_set_gbps_reason"] == "--no-probe",
     "--no-probe: no working-set bandwidth, and why")
need(pos(out["model"]["params"]) and pos(out["model"]["weight_bytes_f32"]), "model counts")
good, missing = out["backends"]
need(good["backend"] == "ref" and good["ok"] is True and good["error"] is None, "ref ran")
for mode in ("cached", "uncached"):
    m = good[mode]
    for k in ("seconds", "tokens_per_s", "prefill_ms", "prefill_ms_per_token", "decode_ms_per_token",
              "decode_tokens_per_s", "decode_weight_gbps", "decode_cpu_ms_per_token"):
        need(pos(m[k]), f"{mode}.{k} > 0")
    need(m["new_tokens"] == 3, f"{mode}.new_tokens")
    need(m["decode_of_bandwidth"] is None, f"{mode}: no bandwidth ratio without a probe")
    need(m["decode_of_working_set_bandwidth"] is None, f"{mode}: no working-set ratio without a probe")
need(pos(good["cached_over_uncached"]), "cached_over_uncached")
need(good["prefill"]["tokens"] == min(128, cfg["n_positions"]) and pos(good["prefill"]["gflops"]), "prefill row")
need(good["batched_decode"]["rows"] == 8 and pos(good["batched_decode"]["tokens_per_s"]), "batched decode row")
need(good["peak_rss_bytes"] > out["model"]["weight_bytes_f32"], "peak RSS holds at least the weights")
L, D = cfg["n_layer"], cfg["n_embd"]
P = min(cfg["n_positions"], 16 + 3)  # the 16-token prompt and 3 new tokens, not the whole context
need(good["cache_bytes"] == 2 * L * P * D * 4, "cache bytes = (L, 1, H, prompt + new tokens, d_head) k and v in f32")
need(good["dtype"] == "f32" and good["threads"] >= 1, "dtype and threads")
need(missing["ok"] is False and "no-such-backend" in missing["error"], "the unknown backend's row says why")
# every figure kept: each repeat's samples, the machine's state, the CPU path
for mode in ("cached", "uncached"):
    smp = good[mode]["samples"]
    need(sorted(smp) == sorted(["prefill_ms", "decode_ms_per_token", "seconds", "prefill_cpu_ms",
                                "decode_cpu_ms_per_token"]) and all(len(v) == 1 and pos(v[0]) for v in smp.values()),
         f"{mode}.samples: one positive figure per repeat")
    need(abs(smp["seconds"][0] - good[mode]["seconds"]) < 1e-9, f"{mode}: the median of one sample is that sample")
for row in ("prefill", "batched_decode"):
    smp = good[row]["samples"]
    need(len(smp["ms"]) == 1 and pos(smp["ms"][0]) and len(smp["cpu_ms"]) == 1 and pos(good[row]["cpu_ms"]),
         f"{row}: its samples and CPU time")
mach = out["machine"]
for st in ("state_start", "state_end"):
    la = mach[st]["loadavg"]
    need(len(la) == 3 and all(isinstance(x, (int, float)) and x >= 0 for x in la), f"{st}: three load averages")
    need(isinstance(mach[st]["governor"], str) or mach[st].get("governor_reason"), f"{st}: a governor, or why not")
need(mach["probes"] == [], "--no-probe: no probe figures")
need(pos(mach["wall_s"]), "the run's wall time")
need("cpu_path" in good and "weights" in good and "kv_cache" in good, "the backend's cpu_path, weights, kv_cache")
sys.exit(1 if bad else 0)
PY

# the table, with the probe (its numbers positive, never compared)
expect_rc 0 "table" "$GENFENCE" bench --model "$model" --new-tokens 2 --repeats 1 --no-uncached
check "table: model line" grep -q "^model    .*parameters" "$tmp/out"
check "table: machine line with a bandwidth" grep -Eq "^machine  .* read [0-9.]+ GB/s( \([^)]*\))?, fp32 FMA peak [0-9.]+ GFLOP/s" "$tmp/out"
# the test model's weights fit in the caches: a second read rate, at a token's working set
check "table: the read rate at a token's working set" grep -Eq "^machine  .* read [0-9.]+ GB/s \([0-9.]+ GB/s at a token's [0-9.]+ MB\), " "$tmp/out"
check "table: of BW and of WS columns" grep -Eq "^backend +mode .* of BW +of WS " "$tmp/out"
check "table: cached row, both ratios" grep -Eq "^ref +cached( +[0-9.]+){5} +[0-9.]+ +[0-9.]+ +[0-9.]+$" "$tmp/out"
check "table: no uncached row with --no-uncached" bash -c '! grep -Eq "^ref +uncached" "$0"' "$tmp/out"
check "table: memory columns" grep -q "RSS MiB" "$tmp/out"
check "no terminal escapes when stderr is not a terminal" bash -c '! grep -q $'"'"'\r'"'"' "$0"' "$tmp/err"
# progress whatever stderr is (issue 25: gpt2-small printed nothing for 480 s):
# each backend announced, then its row as it finishes
check "progress: the backend announced" grep -q "^bench: ref (1/1): 2 greedy tokens" "$tmp/err"
check "progress: its row as it finished" bash -c 'grep -A1 "^bench: ref done (1/1):" "$0" | gf_grepq -Eq "^ref +cached +[0-9.]+ "' "$tmp/err"

# --no-probe: 'not measured' and '-', never nan or an empty '()'
expect_rc 0 "table --no-probe" "$GENFENCE" bench --model "$model" --new-tokens 2 --repeats 1 --no-uncached --no-probe
check "--no-probe: no nan" bash -c '! grep -qi "nan" "$0"' "$tmp/out"
check "--no-probe: no empty ()" bash -c '! grep -qF "()" "$0"' "$tmp/out"
check "--no-probe: machine line says not measured" grep -Eq "^machine  .* read not measured, read at a token's [0-9.]+ MB not measured, fp32 FMA peak not measured, sgemm not measured \(--no-probe\)" "$tmp/out"
check "--no-probe: the ratios are -" grep -Eq "^ref +cached( +[0-9.]+){5} +- +- " "$tmp/out"
exit $fail
