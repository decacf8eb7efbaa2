#!/usr/bin/env bash
# The statistical tier's hypothesis tests (distribution_match, docs/calibration.md;
# issue 31 items 1-2), on a calibration table of known figures written here:
#   1. a calibrated case derives the KL-mean z-test (positions needed, threshold
#      mu0 + z_{1-alpha} sigma / sqrt(n), power) and the top-1 exact binomial test
#      (disagreements allowed, positions needed) from alpha, beta, theta and the
#      null, exactly as computed here in Python; both check lines print alpha,
#      beta, theta, the positions used and needed and the threshold; ref passes,
#      ref-noise (2e-3) fails the KL-mean test; the tails (kld_p99, kld_max,
#      dp_max) are exact binomial tests of the share of positions past the
#      null's levels (p0 0.01 past its p99, 1 / (N + 1) past its maximum, N its distinct positions; dp's
#      level sqrt(kld_max / 2) where the table has none), as computed here;
#   2. a case whose positions cannot reach the declared power is refused: an
#      error (exit 2) naming FILE:LINE of its hypothesis declaration;
#   3. a case the table does not calibrate keeps the fixed bounds, saying why;
#   4. a bad table is exit 2 at the table's FILE:LINE:COL (a value out of range,
#      an unknown key), as is a `calibration` naming no file;
#   5. the repository's table: ref (the oracle: double accumulation, the same
#      figures on any x86 CPU) passes cases/statistical.yaml's calibrated
#      cases by the tests, the record names the table's null (the other
#      backends' figures are their CPU's: docs/calibration.md, not asserted).
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init statistical_hypothesis
cd "$GF_SRC"
N="$GF_BUILD/tests/backends/libgenfence_test_faulty_ref_noise.so"
[[ -f $N ]] || fail "test backend $N not built"

mkdir -p "$tmp/root/cases" "$tmp/root/calibration"
ln -s "$GF_SRC/models" "$tmp/root/models"
ln -s "$GF_SRC/golden" "$tmp/root/golden"
hash=$("$GENFENCE" list --json cases/statistical.yaml | "$PY" -c '
import json, sys
print([c["model_hash"] for c in json.load(sys.stdin) if c["model"] == "models/holmes-gpt"][0])')
table() { # table FILE POLICY-LINE NULL-EXTRA
  cat >"$1" <<Y
provenance: {date: "test", machine: "test", versions: "test", command: "tests/cli/statistical_hypothesis.sh"}
policy:
  $2
nulls:
  - {case: t.hyp, model: models/holmes-gpt, model_hash: "$hash", weights: f32, kv: f32, backends: "test",
     windows: 10, positions: 1000, kld_mean: 1.0e-12, kld_sigma: 4.0e-12, top1_disagree: 0.01,
     kld_p99: 1.0e-10, kld_max: 1.0e-9$3}
Y
}
table "$tmp/root/calibration/distribution_match.yaml" \
  "f32: {alpha: 0.05, beta: 0.2, theta_kld: 2.0e-12, theta_top1: 0.2, theta_p99: 0.3, theta_max: 0.2}" ""
cat >"$tmp/root/cases/t.yaml" <<'Y'
cases:
  - id: t.hyp
    kind: distribution_match
    model: models/holmes-gpt
    prompts: ["Sherlock Holmes"]
    steps: 32
  - id: t.plain
    kind: distribution_match
    model: models/holmes-gpt
    prompts: ["Sherlock Holmes"]
    steps: 32
Y
cat >"$tmp/root/cases/under.yaml" <<'Y'
cases:
  - id: t.under
    kind: distribution_match
    model: models/holmes-gpt
    prompts: ["Sherlock Holmes"]
    steps: 32
    calibration_case: t.hyp
    hypothesis:
      f32: {theta_kld: 1.0e-13}
Y
check() { # check RUN.json PYTHON-ASSERTIONS (r: {(id, backend): result})
  "$PY" - "$1" "$2" <<'PY'
import json, math, sys
from statistics import NormalDist
doc = json.load(open(sys.argv[1]))
r = {(x["id"], x["backend"]): x for x in doc["results"]}
exec(sys.argv[2])
PY
}

# 1, 3
set +e
GENFENCE_ROOT="$tmp/root" "$GENFENCE" run -q "$tmp/root/cases/t.yaml" --backend ref --backend "$N" \
  --no-triangulate --report-dir "$tmp/a" >"$tmp/a.out" 2>&1
rc=$?
set -e
[[ $rc == 1 ]] || { cat "$tmp/a.out"; fail "run exited $rc, expected 1"; }
check "$tmp/a/run.json" '
z = NormalDist().inv_cdf
za, zb = z(0.95), z(0.8)
n = 32
need_kl = math.ceil(((za + zb) * 4e-12 / 2e-12) ** 2)
thr = 1e-12 + za * 4e-12 / math.sqrt(n)
def sf(k, n, p):  # P(X > k)
    return 1 - sum(math.comb(n, j) * p ** j * (1 - p) ** (n - j) for j in range(k + 1))
def kmax(n, p0):
    return next(k for k in range(n + 1) if sf(k, n, p0) <= 0.05)
def power(n):
    return sf(kmax(n, 0.01), n, 0.21)
need_t1 = next(m for m in range(1, 10000) if power(m) >= 0.8)  # bisection finds the same where power rises
for b in ("ref", "ref-noise"):
    x = r[("t.hyp", b)]
    h = x["metrics"]["hypothesis"]
    k, t = h["kld_mean"], h["top1"]
    assert (k["alpha"], k["beta"], k["theta"], k["positions"]) == (0.05, 0.2, 2e-12, n), k
    assert k["positions_needed"] == need_kl and abs(k["threshold"] - thr) < 1e-9 * thr, (k, need_kl, thr)
    assert abs(k["power"] - NormalDist().cdf(2e-12 * math.sqrt(n) / 4e-12 - za)) < 1e-9, k
    assert t["disagreements_allowed"] == kmax(n, 0.01) and t["positions_needed"] == need_t1, (t, kmax(n, 0.01), need_t1)
    assert abs(t["threshold"] - (1 - kmax(n, 0.01) / n)) < 1e-12 and abs(t["power"] - power(n)) < 1e-9, t
    assert h["calibration"]["case"] == "t.hyp" and h["calibration"]["line"] == 5 and h["policy_from"] == "table", h
    d = {c["name"]: c["detail"] for c in x["checks"]}
    for name, want in (("kld_mean", "alpha 0.05, beta 0.2, theta 2e-12"), ("top1_min", "alpha 0.05, beta 0.2, theta 0.2")):
        assert want in d[name] and "%d positions used, %d needed" % (n, need_kl if name == "kld_mean" else need_t1) in d[name] \
            and ("threshold %.3g" % thr if name == "kld_mean" else "threshold %.4g" % (1 - kmax(n, 0.01) / n)) in d[name], (name, d[name])
    # the tails: k_max at the null share, the power at p0 + theta, the level
    # the max tests count the null's distinct positions: no goldens here, so the 10 reseeds x the case's 32
    # (one backend named), not the 1000 pooled in the table
    for name, p0, theta, lvl in (("kld_p99", 0.01, 0.3, 1e-10), ("kld_max", 1 / 321, 0.2, 1e-9),
                                 ("dp_max", 1 / 321, 0.2, math.sqrt(1e-9 / 2))):
        tt = h[name]
        km = kmax(n, p0)
        assert (tt["alpha"], tt["beta"], tt["theta"], tt["positions"]) == (0.05, 0.2, theta, n), tt
        assert tt["past_allowed"] == km and abs(tt["level"] - lvl) < 1e-9 * lvl and abs(tt["null_share"] - p0) < 1e-9, (tt, km, lvl)
        assert abs(tt["power"] - sf(km, n, p0 + theta)) < 1e-9, (tt, sf(km, n, p0 + theta))
        assert "alpha 0.05, beta 0.2, theta %g" % theta in d[name] and "at most %d allowed" % km in d[name] \
            and "past the level %.3g" % lvl in d[name] and "%d positions used" % n in d[name], (name, d[name])
    assert "thresholds" not in x["metrics"], x["metrics"]["thresholds"]  # no fixed bound judges a calibrated case
assert r[("t.hyp", "ref")]["verdict"] == "pass", r[("t.hyp", "ref")]["reason"]
x = r[("t.hyp", "ref-noise")]
assert x["verdict"] == "fail" and x["reason"].startswith("kld_mean: measured ") and "> threshold " in x["reason"], x["reason"]
x = r[("t.plain", "ref")]  # not in the table: the fixed bounds, and why
assert x["verdict"] == "pass" and x["metrics"]["hypothesis"]["calibrated"] is False, x["metrics"].get("hypothesis")
assert "no null for case t.plain" in x["metrics"]["hypothesis"]["why"] and x["metrics"]["thresholds"]["kld_mean"] == 5e-11
assert r[("t.plain", "ref-noise")]["reason"].startswith("kld_mean: measured ") and "(safety " in r[("t.plain", "ref-noise")]["reason"]
'
echo "ok   1, 3: the tests derived as computed here, printed in the check lines; uncalibrated cases keep fixed bounds"

# 2. underpowered: refused with FILE:LINE
set +e
GENFENCE_ROOT="$tmp/root" "$GENFENCE" run -q "$tmp/root/cases/under.yaml" --backend ref --no-triangulate \
  --report-dir "$tmp/u" >"$tmp/u.out" 2>&1
rc=$?
set -e
[[ $rc == 2 ]] || { cat "$tmp/u.out"; fail "underpowered run exited $rc, expected 2"; }
check "$tmp/u/run.json" '
import re
x = r[("t.under", "ref")]
assert x["verdict"] == "error", x["verdict"]
assert re.match(r".*/under\.yaml:9: case t\.under: its 32 positions cannot reach the declared power for f32: the KL mean test "
                r"\(alpha 0\.05, beta 0\.2, theta 1e-13\) needs \d+ positions", x["reason"]), x["reason"]
assert x["metrics"]["hypothesis"]["policy_from"]["line"] == 9
'
echo "ok   2: an underpowered case is an error (exit 2) at its FILE:LINE"

# 4. bad tables
bad_table() { # bad_table POLICY-LINE NULL-EXTRA EXPECTED
  table "$tmp/root/calibration/bad.yaml" "$1" "$2"
  printf 'cases:\n  - id: t.b\n    kind: distribution_match\n    model: models/holmes-gpt\n    prompts: ["x"]\n    calibration: calibration/bad.yaml\n' \
    >"$tmp/root/cases/b.yaml"
  set +e
  GENFENCE_ROOT="$tmp/root" "$GENFENCE" list "$tmp/root/cases/b.yaml" >"$tmp/b.out" 2>&1
  local rc=$?
  set -e
  [[ $rc == 2 ]] || fail "bad table ($3): exit $rc"
  grep -q "bad.yaml:[0-9]*:[0-9]*: .*$3" "$tmp/b.out" || fail "bad table: expected '$3' in: $(cat "$tmp/b.out")"
}
bad_table "f32: {alpha: 1.5, beta: 0.2, theta_kld: 1.0e-12, theta_top1: 0.1}" "" "'alpha' must be a number in (0, 1)"
bad_table "f32: {alpha: 0.05, beta: 0.2, theta_kld: 1.0e-12}" "" "the policy of f32 needs 'theta_top1'"
bad_table "f32: {alpha: 0.05, beta: 0.2, theta_kld: 1.0e-12, theta_top1: 0.1}" ", kld_avg: 1" "unknown key 'kld_avg'"
bad_table "f32: {alpha: 0.05, beta: 0.2, theta_kld: 0, theta_top1: 0.1}" "" "'theta_kld' must be a finite number > 0"
bad_table "f32: {alpha: 0.05, beta: 0.2, theta_kld: 1.0e-12, theta_top1: 0.1, theta_p99: 1.5, theta_max: 0.1}" "" \
  "'theta_p99' must be a number in (0, 1)"
bad_table "f32: {alpha: 0.05, beta: 0.2, theta_kld: 1.0e-12, theta_top1: 0.1, theta_p99: 0.1}" "" "the policy of f32 needs 'theta_max'"
bad_table "f32: {alpha: 0.05, beta: 0.2, theta_kld: 1.0e-12, theta_top1: 0.1, theta_p99: 0.1, theta_max: 0.1}" ", dp_max: -1" \
  "'dp_max' must be a finite number >= 0"
printf 'cases:\n  - id: t.m\n    kind: distribution_match\n    model: models/holmes-gpt\n    prompts: ["x"]\n    calibration: calibration/none.yaml\n' \
  >"$tmp/root/cases/m.yaml"
set +e
GENFENCE_ROOT="$tmp/root" "$GENFENCE" list "$tmp/root/cases/m.yaml" >"$tmp/m.out" 2>&1
rc=$?
set -e
[[ $rc == 2 ]] && grep -q "none.yaml" "$tmp/m.out" || fail "a missing calibration table: exit $rc: $(cat "$tmp/m.out")"
printf 'cases:\n  - id: t.h\n    kind: distribution_match\n    model: models/holmes-gpt\n    prompts: ["x"]\n    hypothesis: {f32: {beta: 0}}\n' \
  >"$tmp/root/cases/h.yaml"
set +e
GENFENCE_ROOT="$tmp/root" "$GENFENCE" list "$tmp/root/cases/h.yaml" >"$tmp/h.out" 2>&1
rc=$?
set -e
[[ $rc == 2 ]] && grep -q "h.yaml:6:[0-9]*: 'beta' must be a number in (0, 1)" "$tmp/h.out" || fail "a bad hypothesis: exit $rc: $(cat "$tmp/h.out")"
echo "ok   4: a bad table or hypothesis is exit 2 at FILE:LINE:COL"

# 5. the repository's table on ref
set +e
"$GENFENCE" run -q cases/statistical.yaml --filter '^statistical\.holmes-(gpt|llama)$' --backend ref \
  --no-triangulate --report-dir "$tmp/r" >"$tmp/r.out" 2>&1
rc=$?
set -e
[[ $rc == 0 ]] || { cat "$tmp/r.out"; fail "the repository's calibrated cases exited $rc on ref"; }
check "$tmp/r/run.json" '
for (c, b), x in r.items():
    h = x["metrics"]["hypothesis"]
    assert h["calibration"]["case"] == c and h["calibration"]["table"].endswith("calibration/distribution_match.yaml"), h
    assert h["kld_mean"]["positions"] == 576 and h["kld_mean"]["positions_needed"] <= 576, h["kld_mean"]
    assert {"date", "machine", "versions", "command"} <= set(h["calibration"]["provenance"]), h["calibration"]
'
echo "ok   5: the repository's calibrated cases pass ref by the tests"
echo "statistical_hypothesis: ok"
