#!/usr/bin/env python3
"""The speculative_sampling kind's false-failure rate, measured (issue 30).

Every case of cases/speculative_sampling.yaml is copied under N seeds (the
case's seed + 1000 s for s in 1..N; ids get a .sS suffix) into one case
file, which `genfence run` runs on the given backends (ref: the engine's
reference, once per case; a plugin with the speculate slot: its rounds,
which must equal the engine's). A correct rejection sampler fails a case
with probability at most the case's alpha (1e-3, split among its tests), so
the rate printed is the false-failure rate of those checks.

  tools/spec_false_failures.py [--seeds N] [--alpha A] [--genfence build/genfence] [--backend X]...
"""
import argparse, json, os, re, subprocess, sys, tempfile

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--seeds", type=int, default=100)
ap.add_argument("--genfence", default="build/genfence")
ap.add_argument("--cases", default="cases/speculative_sampling.yaml")
ap.add_argument("--backend", action="append", default=[])
ap.add_argument("--alpha", type=float, default=None, help="each case's alpha (default: the case's own, else the kind's)")
a = ap.parse_args()

text = open(a.cases).read()
head, body = text.split("\ncases:\n", 1)
blocks = re.split(r"\n(?=  - id: )", "\n" + body)
blocks = [b.strip("\n") for b in blocks if b.lstrip().startswith("- id: ")]
out = ["cases:"]
for s in range(1, a.seeds + 1):
    for b in blocks:
        b2 = re.sub(r"^(  - id: \S+)", lambda m: m.group(1) + ".s%d" % s, b, count=1, flags=re.M)
        if re.search(r"^    seed: \d+", b2, flags=re.M):
            b2 = re.sub(r"^    seed: (\d+)", lambda m: "    seed: %d" % (int(m.group(1)) + 1000 * s), b2, flags=re.M)
        else:
            b2 += "\n    seed: %d" % (1000 * s)
        if a.alpha is not None:
            b2 = re.sub(r"^    alpha: .*\n?", "", b2, flags=re.M).rstrip("\n") + "\n    alpha: %g" % a.alpha
        out.append(b2)
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "spec_seeds.yaml")
    open(path, "w").write("\n".join(out) + "\n")
    cmd = [a.genfence, "run", path, "--report-dir", os.path.join(d, "rep"), "-j", "2"]
    for b in a.backend or ["ref"]:
        cmd += ["--backend", b]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if not os.path.exists(os.path.join(d, "rep", "run.json")):
        sys.exit("genfence run exited %d without a report:\n%s" % (p.returncode, p.stdout[-2000:]))
    r = json.load(open(os.path.join(d, "rep", "run.json")))
by = {}
for x in r["results"]:
    st = by.setdefault(x["backend"], {"runs": 0, "fail": 0, "first": []})
    st["runs"] += 1
    if x["verdict"] not in ("pass", "pass-near-tie"):
        st["fail"] += 1
        st["first"].append("%s: %s" % (x["id"], (x.get("reason") or "")[:160]))
print("%d cases x %d seeds" % (len(blocks), a.seeds))
for b, st in sorted(by.items()):
    print("%-28s %5d case runs, %d failed (rate %.2g)" % (b, st["runs"], st["fail"], st["fail"] / max(st["runs"], 1)))
    for f in st["first"][:5]:
        print("    " + f)
sys.exit(0)
