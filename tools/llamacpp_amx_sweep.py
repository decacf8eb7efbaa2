#!/usr/bin/env python3
"""Reduce llama.cpp's AMX crash to its smallest trigger (issue 24, item 4;
docs/llamacpp.md, "The AMX crash").

    tools/llamacpp_amx_sweep.py [--genfence PATH] [--backend SPEC] [--types q8_0,q4_0,f16]
        [--n-embd 32,48,...] [--n-head 1,2,4] [--vocab 64,512] [--T 1,2,5,16,33]
        [--layers 1] [--seed 1] [--threads 1] [--out DIR] [--quick]

For every shape (n_embd, n_head, vocab) a random GPT-2 with seeded weights is
written (tests/support/make_test_model.py), and for every batch length T one
uncached `genfence forward` of T token ids runs on ref and on SPEC with each
weight type ("{type}" in SPEC is replaced by it; default "llamacpp:{type}").
Each run is classified:

    crash   the engine was killed by a signal (the AMX kernel's SIGSEGV)
    wrong   it ran, but max |delta logit| vs ref exceeds the type's bound,
            BOUND[type] x the ref logits' range (stated in the table)
    refused genfence refused the spec (exit 2: a type the backend does not
            offer, e.g. q4_0 before llamacpp has it), with its message
    error   any other exit status, with its message
    fine    within the bound

It prints the table (one row per run), the CPU's AMX flags and the engine's
system_info, and the smallest trigger (the crash, else wrong, row with the
fewest n_embd x vocab x T) with the two commands that reproduce it. Exit 0
when every run is fine or refused, 1 when any crashed, went wrong or erred,
2 for bad usage. On a CPU without AMX the AMX kernels never run: the sweep
then measures the plain path only, and says so.
"""
import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile

import numpy as np
from safetensors.numpy import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MAKE_MODEL = os.path.join(ROOT, "tests", "support", "make_test_model.py")
# max |delta logit| / (max - min of ref's logits): a kernel that computes
# garbage lands at O(1); an honest path of the type well below
BOUND = {"f32": 1e-3, "f16": 2e-2, "q8_0": 5e-2, "q4_0": 0.25}


def ints(s):
    try:
        v = [int(x) for x in s.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {s!r}")
    if not v or min(v) < 1:
        raise argparse.ArgumentTypeError(f"want positive integers: {s!r}")
    return v


def cpu_amx():
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
    except OSError:
        flags = []
    return sorted(x for x in flags if x.startswith("amx"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--genfence", default=os.path.join(ROOT, "build", "genfence"))
    ap.add_argument("--backend", default="llamacpp:{type}", help="spec; {type} is replaced by each type")
    ap.add_argument("--types", default="q8_0,q4_0,f16")
    ap.add_argument("--n-embd", type=ints, default=[32, 48, 64, 96, 128, 256])
    ap.add_argument("--n-head", type=ints, default=[1, 2, 4])
    ap.add_argument("--vocab", type=ints, default=[64, 512])
    ap.add_argument("--T", type=ints, default=[1, 2, 5, 16, 33])
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", help="keep the models here (default: a temporary directory)")
    ap.add_argument("--quick", action="store_true", help="n_embd 32,48,128; n_head 2; vocab 64; T 1,5")
    a = ap.parse_args()
    if a.quick:
        a.n_embd, a.n_head, a.vocab, a.T = [32, 48, 128], [2], [64], [1, 5]
    types = [t for t in a.types.split(",") if t]
    bad = [t for t in types if t not in BOUND]
    if bad:
        ap.error(f"unknown type(s) {', '.join(bad)} (known: {', '.join(BOUND)})")
    if not os.access(a.genfence, os.X_OK):
        ap.error(f"{a.genfence}: not an executable (build genfence, or pass --genfence)")
    env = dict(os.environ)
    env.setdefault("GENFENCE_MODULE_DIR", os.path.join(os.path.dirname(os.path.abspath(a.genfence)), "backends"))
    env.setdefault("OMP_WAIT_POLICY", "passive")
    work = a.out or tempfile.mkdtemp(prefix="amx-sweep-")
    os.makedirs(work, exist_ok=True)

    def gf(*args):
        return subprocess.run([a.genfence, *args], capture_output=True, text=True, env=env)

    amx = cpu_amx()
    info = gf("backends", "--backend", a.backend.replace("{type}", types[0]))
    sysinfo = next((l for l in info.stdout.splitlines() if "CPU :" in l), "")
    m = re.search(r"CPU :[^;]*", sysinfo)
    print(f"cpu amx flags: {' '.join(amx) if amx else 'none (no AMX on this CPU: the AMX kernels are not run here)'}")
    print(f"llama.cpp system_info: {m.group(0).strip() if m else '(none: the llamacpp module is not loaded)'}")
    print(f"backend spec: {a.backend}; types {', '.join(types)}; seed {a.seed}; {a.layers} layer(s); "
          f"threads {a.threads}; models in {work}")
    print(f"bounds (max |delta| / ref logits' range): " + ", ".join(f"{t} {BOUND[t]:g}" for t in types))
    hdr = f"{'n_embd':>6} {'n_head':>6} {'vocab':>5} {'T':>3} {'type':<5} {'verdict':<8} {'max|d|':>9} {'bound':>9}  detail"
    print(hdr)
    rows = []
    for D in a.n_embd:
        for H in a.n_head:
            if D % H:
                continue
            for V in a.vocab:
                mdir = os.path.join(work, f"gpt2-d{D}-h{H}-v{V}-l{a.layers}-s{a.seed}")
                make = [sys.executable, MAKE_MODEL, mdir, "--seed", str(a.seed), "--n-embd", str(D), "--n-head", str(H),
                        "--vocab", str(V), "--n-layer", str(a.layers), "--n-positions", str(max(64, max(a.T)))]
                if not os.path.exists(os.path.join(mdir, "model.safetensors")):
                    subprocess.run(make, check=True, capture_output=True)
                for T in a.T:
                    ids = ",".join(str((i * 37 + 11) % V) for i in range(T))
                    sel = ["--model", mdir, "--tokens", ids, "--threads", str(a.threads)]
                    p = gf("forward", *sel, "--out", os.path.join(work, "ref.st"), "--backend", "ref")
                    if p.returncode != 0:
                        print(f"ref failed on {mdir} T {T}: {p.stderr.strip()}", file=sys.stderr)
                        return 2
                    ref = load_file(os.path.join(work, "ref.st"))["logits"].astype(np.float64)
                    span = float(ref.max() - ref.min()) or 1.0
                    for t in types:
                        spec = a.backend.replace("{type}", t)
                        p = gf("forward", *sel, "--out", os.path.join(work, "got.st"), "--backend", spec)
                        rc, d, detail = p.returncode, None, ""
                        if rc < 0 or rc >= 128:
                            sig = -rc if rc < 0 else rc - 128
                            verdict, detail = "crash", f"killed by signal {sig}"
                        elif rc == 2:
                            verdict, detail = "refused", (p.stderr.strip().splitlines() or [""])[-1][:120]
                        elif rc != 0:
                            verdict, detail = "error", f"exit {rc}: " + (p.stderr.strip().splitlines() or [""])[-1][:110]
                        else:
                            got = load_file(os.path.join(work, "got.st"))["logits"].astype(np.float64)
                            d = float(np.abs(got - ref).max()) if got.shape == ref.shape else float("inf")
                            verdict = "fine" if d <= BOUND[t] * span else "wrong"
                            if got.shape != ref.shape:
                                detail = f"logits {got.shape}, ref {ref.shape}"
                        row = dict(D=D, H=H, V=V, T=T, type=t, verdict=verdict, d=d, bound=BOUND[t] * span,
                                   detail=detail, make=make, cmd=[a.genfence, "forward", *sel, "--out", "x.st",
                                                                  "--backend", spec])
                        rows.append(row)
                        ds = f"{d:9.3e}" if d is not None else f"{'-':>9}"
                        print(f"{D:>6} {H:>6} {V:>5} {T:>3} {t:<5} {verdict:<8} {ds} {row['bound']:9.3e}  {detail}",
                              flush=True)
    count = {}
    for r in rows:
        count[r["verdict"]] = count.get(r["verdict"], 0) + 1
    print("summary: " + ", ".join(f"{n} {v}" for v, n in sorted(count.items())) + f" of {len(rows)} runs")
    if not amx:
        print("note: no AMX on this CPU: the AMX column was not run; run this sweep on an AMX machine "
              "(docs/llamacpp.md, \"The AMX crash\")")
    for kind in ("crash", "wrong", "error"):
        hit = [r for r in rows if r["verdict"] == kind]
        if not hit:
            continue
        s = min(hit, key=lambda r: (r["D"] * r["V"] * r["T"], r["D"], r["T"], r["V"], r["H"]))
        print(f"smallest {kind}: n_embd {s['D']}, n_head {s['H']}, vocab {s['V']}, T {s['T']}, {s['type']}"
              f"{': ' + s['detail'] if s['detail'] else ''}")
        print("  reproduce: " + " ".join(shlex.quote(x) for x in s["make"]))
        print("             " + " ".join(shlex.quote(x) for x in s["cmd"]))
        break
    else:
        print("smallest trigger: none (every run fine or refused)")
    return 1 if any(r["verdict"] in ("crash", "wrong", "error") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
