#!/usr/bin/env python3
"""The statistical tier's measured error rates (docs/calibration.md): not in CI.

For each calibrated case and type: RESEEDS held-out reseeds (seeds 1000 and
up; calibrate.py calibrated on 0..R-1) of the case on the type's honest
backends, judged with the calibration table: the false-fail rate of the
KL-mean test, of the top-1 test and of the case as a whole (tail bounds
included), to set against alpha. Then ref-noise-env (tests/backends/
faulty_noise.c: ref plus uniform logit noise, declaring the type) with its
amplitude set on calibration seeds 0..9 so that its KL mean is exactly
mu0 + theta_kld, and again so that its top-1 disagreement rate is exactly
p0 + theta_top1: the share of the held-out reseeds each test catches, to
set against 1 - beta.

  .venv/bin/python tools/calibrate/error_rates.py [--reseeds 100]
      [--cases statistical.holmes-gpt,statistical.holmes-llama] [--types f32/f32,q8_0/f16,...]
      [--first-seed 1000] [--file cases/statistical.yaml]
"""
import argparse
import json
import math
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import calibrate as cal  # noqa: E402

NOISE = "@noise_env"
cal.TEST_BACKENDS[NOISE] = "libgenfence_test_faulty_ref_noise_env.so"
TUNE_SEEDS = range(10)  # calibration seeds: the amplitude is set on them, never judged


def judged(genfence, build, variants, backends, tmp, tag, table, env=None):
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        recs, _ = cal.run_cases(genfence, build, cal.case_yaml(variants, extra={}), backends,
                                os.path.join(tmp, "root"), os.path.join(tmp, tag), table=table)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return list(recs.values())


def check_failed(x, name):
    return any(c["name"] == name and not c["passed"] for c in x.get("checks", []))


def noise_env(w, kv, amp, every=None):
    e = {"GENFENCE_TEST_NOISE_AMP": "%.9g" % amp}
    if every:
        e["GENFENCE_TEST_NOISE_EVERY"] = str(every)
    if w != "f32":
        e["GENFENCE_TEST_NOISE_WEIGHTS"] = w
    if kv != "f32":
        e["GENFENCE_TEST_NOISE_KV"] = kv
    return e


def past_share(x, name):
    """The share of positions past the level in a tail check's line (its detail)."""
    for c in x.get("checks", []):
        if c["name"] == name:
            m = re.search(r"(\d+) of (\d+) positions past the level", c["detail"])
            if m:
                return int(m.group(1)) / int(m.group(2))
    return float("nan")


def tails_power(genfence, build, held, tmp, table, w, kv, h, tag):
    """The tails' exceedance tests at exactly their theta: ref-noise-env with noise on every N-th
    forward call only (N = floor(1 / (p0 + theta)): a share of at least p0 + theta of the
    positions), its amplitude such that a noised position's KL is ~10x the null's largest
    (KL ~ amp^2 / 6 for uniform noise on every logit), so each noised position is past the level."""
    out = {}
    for name in ("kld_p99", "kld_max", "dp_max"):
        t = h[name]
        every = max(1, int(math.floor(1 / (t["null_share"] + t["theta"]))))
        lvl = h["kld_max"]["level"]
        amp = math.sqrt(6 * 10 * lvl)
        recs = judged(genfence, build, held, [NOISE], tmp, "%s-%s" % (tag, name), table,
                      noise_env(w, kv, amp, every))
        share = [past_share(x, name) for x in recs]
        out[name] = (sum(check_failed(x, name) for x in recs), len(recs), every, sum(share) / max(1, len(share)))
    return out


def measure(genfence, build, variants, tmp, table, w, kv, amp, tag):
    recs = judged(genfence, build, variants, [NOISE], tmp, tag, table, noise_env(w, kv, amp))
    s = [x["metrics"]["statistical"] for x in recs if "statistical" in x.get("metrics", {})]
    n = sum(v["positions"] for v in s)
    return (sum(v["kld_mean"] * v["positions"] for v in s) / n, sum(v["top1_disagreements"] for v in s) / n, recs)


def tune(f, target, lo, hi, iters=12):
    """The amplitude in [lo, hi] (geometric bisection) where f(amp) = target (f increasing)."""
    for _ in range(iters):
        mid = math.sqrt(lo * hi)
        if f(mid) < target:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reseeds", type=int, default=100)
    ap.add_argument("--first-seed", type=int, default=1000,
                    help="the first held-out reseed (default 1000; another range, e.g. 2000, gives fresh seeds)")
    ap.add_argument("--cases", default="statistical.holmes-gpt,statistical.holmes-llama")
    ap.add_argument("--file", default="cases/statistical.yaml", help="the case file of --cases (as calibrate.py's)")
    ap.add_argument("--types", default="f32/f32,f32/q8_0,f16/f16,q8_0/f16")
    ap.add_argument("--build", default=os.path.join(cal.ROOT, "build"))
    ap.add_argument("--table", default=cal.TABLE)
    ap.add_argument("--honest-only", action="store_true",
                    help="the false-fail rates only (no faulty backend tuned to theta: minutes less per type)")
    args = ap.parse_args()
    genfence = os.path.join(args.build, "genfence")
    text = cal.corpus()
    known = cal.cases_json(genfence, os.path.join(cal.ROOT, args.file))
    cache = {}
    rows = []
    with tempfile.TemporaryDirectory(prefix="gf-error-rates-") as tmp:
        for cid in args.cases.split(","):
            base = known[cid]["case"]
            # judged as the case declares it: its own thetas (a case too short for the default
            # power declares larger ones), which calibrate.py's reseeds drop
            keep = {k: base[k] for k in ("hypothesis",) if k in base}
            held = [dict(cal.reseed(base, r, text, genfence, cache), calibration_case=cid, **keep)
                    for r in range(args.first_seed, args.first_seed + args.reseeds)]
            tune_v = [dict(cal.reseed(base, r, text, genfence, cache), calibration_case=cid, **keep)
                      for r in TUNE_SEEDS]
            for (w, kv) in cal.parse_types(args.types):
                t = "%s/%s" % (w, kv)
                honest = judged(genfence, args.build, held, cal.HONEST[(w, kv)], tmp, "h-%s-%s-%s" % (cid, w, kv),
                                args.table)
                hyp = [x for x in honest if "kld_mean" in x.get("metrics", {}).get("hypothesis", {})]
                if not hyp:
                    print("error_rates: %s %s: no calibrated record (%s)" % (cid, t, [
                        (x["backend"], x["verdict"], x.get("reason", "")[:200]) for x in honest[:2]]))
                    continue
                h = hyp[0]["metrics"]["hypothesis"]
                mu0, theta = h["kld_mean"]["null_mean"], h["kld_mean"]["theta"]
                p0, theta1 = h["top1"]["null_disagree"], h["top1"]["theta"]
                ff_kl = sum(check_failed(x, "kld_mean") for x in hyp)
                ff_t1 = sum(check_failed(x, "top1_min") for x in hyp)
                ff_case = sum(x["verdict"] != "pass" for x in hyp)
                ff_tail = {n: sum(check_failed(x, n) for x in hyp) for n in ("kld_p99", "kld_max", "dp_max")}
                # which honest runs failed, and where each backend's KL means sit against the null:
                # the rates alone cannot say whether one backend carries them
                for x in hyp:
                    bad = [c for c in x.get("checks", []) if not c["passed"]]
                    if bad:
                        print("error_rates: %s %s: honest %s on %s failed %s (KL mean %.4g)" % (
                            cid, t, x["id"], x["backend"], "; ".join("%s: %s" % (c["name"], c["detail"][:160])
                                                                     for c in bad),
                            x["metrics"]["statistical"]["kld_mean"]), flush=True)
                for b in sorted({x["backend"] for x in hyp}):
                    v = sorted(x["metrics"]["statistical"]["kld_mean"] for x in hyp if x["backend"] == b)
                    print("error_rates: %s %s: %s: %d runs, KL mean over runs %.4g, median %.4g, largest %.4g "
                          "(mu0 %.4g, threshold %.4g)" % (cid, t, b, len(v), sum(v) / len(v), v[len(v) // 2], v[-1],
                                                          mu0, h["kld_mean"].get("threshold", float("nan"))),
                          flush=True)
                tag = "%s-%s-%s" % (cid, w, kv.replace(",", "_"))
                if args.honest_only:
                    print("error_rates: %s %s: %d honest runs: false-fail KL %d, top-1 %d, case %d, tails %s" % (
                        cid, t, len(hyp), ff_kl, ff_t1, ff_case, ff_tail), flush=True)
                    rows.append(dict(case=cid, type=t, honest=len(hyp), ff_kl=ff_kl, ff_t1=ff_t1, ff_case=ff_case,
                                     ff_tail=ff_tail, honest_only=True))
                    continue
                pw_tail = tails_power(genfence, args.build, held, tmp, args.table, w, kv, h, "f-tail-" + tag)
                # the faulty backend at exactly theta, its amplitude set on the tuning seeds
                a_kl = tune(lambda a: measure(genfence, args.build, tune_v, tmp, args.table, w, kv, a, "t")[0],
                            mu0 + theta, math.sqrt(6 * (mu0 + theta)) / 4, math.sqrt(6 * (mu0 + theta)) * 4, 8)
                kl_at, _, _ = measure(genfence, args.build, tune_v, tmp, args.table, w, kv, a_kl, "t")
                _, _, recs = measure(genfence, args.build, held, tmp, args.table, w, kv, a_kl, "f-kl")
                pw_kl = sum(check_failed(x, "kld_mean") for x in recs), len(recs)
                a_t1 = tune(lambda a: measure(genfence, args.build, tune_v, tmp, args.table, w, kv, a, "t")[1],
                            p0 + theta1, 1e-3, 10.0, 10)
                _, d_at, _ = measure(genfence, args.build, tune_v, tmp, args.table, w, kv, a_t1, "t")
                _, _, recs = measure(genfence, args.build, held, tmp, args.table, w, kv, a_t1, "f-t1")
                pw_t1 = sum(check_failed(x, "top1_min") for x in recs), len(recs)
                row = dict(case=cid, type=t, n=h["kld_mean"]["positions"], alpha=h["kld_mean"]["alpha"],
                           beta=h["kld_mean"]["beta"], honest=len(hyp), ff_kl=ff_kl, ff_t1=ff_t1, ff_case=ff_case,
                           theta=theta, mu0=mu0, a_kl=a_kl, kl_at=kl_at, pw_kl=pw_kl, theta1=theta1, p0=p0,
                           a_t1=a_t1, d_at=d_at, pw_t1=pw_t1, backends=" ".join(cal.HONEST[(w, kv)]).replace("@", ""),
                           ff_tail=ff_tail, pw_tail=pw_tail, th_p99=h["kld_p99"]["theta"], th_max=h["kld_max"]["theta"])
                rows.append(row)
                print("error_rates: %(case)s %(type)s: false-fail KL %(ff_kl)d/%(honest)d, top-1 %(ff_t1)d/%(honest)d, "
                      "case %(ff_case)d/%(honest)d; power KL %(pw_kl)s at amp %(a_kl).3g (KL %(kl_at).3g = mu0 "
                      "%(mu0).3g + theta %(theta).3g), top-1 %(pw_t1)s at amp %(a_t1).3g (disagree %(d_at).4f = p0 "
                      "%(p0).4f + %(theta1)g); tails false-fail %(ff_tail)s, power %(pw_tail)s" % row, flush=True)
    print()
    print("| case | weights/kv | honest backends | n | alpha | false-fail KL mean | false-fail top-1 | false-fail case "
          "| beta | theta_kld | faulty KL mean (tuned) | caught by KL test | theta_top1 | faulty disagree (tuned) "
          "| caught by top-1 test |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in [r for r in rows if r.get("honest_only")]:
        f = r["ff_tail"]
        print("| %s | %s | %d honest runs | false-fail KL mean %d, top-1 %d, kld_p99 %d, kld_max %d, dp_max %d, "
              "case %d |" % (r["case"], r["type"], r["honest"], r["ff_kl"], r["ff_t1"], f["kld_p99"], f["kld_max"],
                             f["dp_max"], r["ff_case"]))
    rows = [r for r in rows if not r.get("honest_only")]
    for r in rows:
        print("| %s | %s | %s | %d | %g | %d/%d = %.3f | %d/%d = %.3f | %d/%d = %.3f | %g | %.3g | %.3g (mu0 %.3g) | "
              "%d/%d = %.2f | %g | %.4f (p0 %.4f) | %d/%d = %.2f |" % (
                  r["case"], r["type"], r["backends"], r["n"], r["alpha"], r["ff_kl"], r["honest"],
                  r["ff_kl"] / r["honest"], r["ff_t1"], r["honest"], r["ff_t1"] / r["honest"], r["ff_case"],
                  r["honest"], r["ff_case"] / r["honest"], r["beta"], r["theta"], r["kl_at"], r["mu0"],
                  r["pw_kl"][0], r["pw_kl"][1], r["pw_kl"][0] / max(1, r["pw_kl"][1]), r["theta1"], r["d_at"],
                  r["p0"], r["pw_t1"][0], r["pw_t1"][1], r["pw_t1"][0] / max(1, r["pw_t1"][1])))
    tails_table(rows)


def tails_table(rows):
    print()
    print("| case | weights/kv | honest runs | false-fail kld_p99 | false-fail kld_max | false-fail dp_max | theta_p99 "
          "| faulty: noise every N-th call (share past the p99 level) | caught by kld_p99 | theta_max "
          "| faulty: every N-th (share past the max level) | caught by kld_max | caught by dp_max |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        f, p = r["ff_tail"], r["pw_tail"]
        print("| %s | %s | %d | %d/%d | %d/%d | %d/%d | %g | %d (%.3f) | %d/%d = %.2f | %g | %d (%.3f) | %d/%d = %.2f "
              "| %d/%d = %.2f |" % (
                  r["case"], r["type"], r["honest"], f["kld_p99"], r["honest"], f["kld_max"], r["honest"],
                  f["dp_max"], r["honest"], r["th_p99"], p["kld_p99"][2], p["kld_p99"][3], p["kld_p99"][0],
                  p["kld_p99"][1], p["kld_p99"][0] / max(1, p["kld_p99"][1]), r["th_max"], p["kld_max"][2],
                  p["kld_max"][3], p["kld_max"][0], p["kld_max"][1], p["kld_max"][0] / max(1, p["kld_max"][1]),
                  p["dp_max"][0], p["dp_max"][1], p["dp_max"][0] / max(1, p["dp_max"][1])))


if __name__ == "__main__":
    main()
