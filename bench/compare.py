#!/usr/bin/env python3
"""Merge the JSON rows bench/compare.sh collected (one file per round and
runner, r<ROUND>-<runner>.json) into one table: the median over rounds of
each figure, and each runner's ratio to PyTorch and to llama.cpp side by
side, each ratio taken round by round (the runners of one round ran
back to back) with its spread over the rounds: "1.58 (1.41-1.62)" is the
median, the lowest and the highest. Then the machine's state in each round
(load average at the start and end of each genfence bench run, governor)."""
import glob
import json
import os
import re
import statistics
import sys

FIGURES = [  # (label, path in a row, higher is better)
    ("e2e tok/s", ("cached", "tokens_per_s"), True),
    ("decode tok/s", ("cached", "decode_tokens_per_s"), True),
    ("prefill16 ms/tok", ("cached", "prefill_ms_per_token"), False),
    ("prefill128 tok/s", ("prefill", "tokens_per_s"), True),
    ("B=8 tok/s", ("batched_decode", "tokens_per_s"), True),
]


def get(row, path):
    for k in path:
        if not isinstance(row, dict) or row.get(k) is None:
            return None
        row = row[k]
    return row


def spread(vals, fmt="{:.2f}"):
    vals = [v for v in vals if v is not None and v == v]
    if not vals:
        return "-"
    m = statistics.median(vals)
    if len(vals) == 1:
        return fmt.format(m)
    return f"{fmt.format(m)} ({fmt.format(min(vals))}-{fmt.format(max(vals))})"


def main(folder):
    rows, machine, model, states = {}, None, None, []
    by_round = {}  # round -> runner -> row
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        with open(path) as f:
            doc = json.load(f)
        rnd = re.match(r"r(\d+)-", os.path.basename(path))
        rnd = int(rnd.group(1)) if rnd else 0
        entries = doc["backends"] if "backends" in doc else [doc]
        if doc.get("machine", {}).get("read_gbps") is not None:
            machine, model = doc["machine"], doc["model"]
        if "state_start" in doc.get("machine", {}):
            m = doc["machine"]
            states.append((rnd, os.path.basename(path)[:-5], m["state_start"], m["state_end"]))
        for e in entries:
            name = "llama.cpp" if e["backend"].startswith("llamacpp") else e["backend"]
            if not e.get("ok"):
                print(f"{name}: {e.get('error')}", file=sys.stderr)
                continue
            rows.setdefault(name, []).append(e)
            by_round.setdefault(rnd, {})[name] = e
    if model:
        print(f"model    {model['name']}: {model['params'] / 1e6:.1f}M parameters")
    if machine:
        print(f"machine  {machine['cpu']}, {machine['cpus']} CPUs; {machine['threads']} thread(s): "
              f"read {machine['read_gbps']:.1f} GB/s"
              + (f" ({machine['read_working_set_gbps']:.1f} GB/s at a token's"
                 f" {model['decode_bytes_per_token_f32'] / 1e6:.1f} MB)"
                 if machine.get("read_working_set_gbps") and model else "")
              + f", sgemm {machine.get('sgemm_peak_gflops') or float('nan'):.1f} GFLOP/s")
    rounds = max((len(v) for v in rows.values()), default=0)
    print(f"medians over {rounds} interleaved round(s), the lowest and highest round in brackets; x torch /"
          f" x l.cpp: that runner's figure over theirs in the same round (above 1 = faster)\n")
    order = [n for n in rows if n not in ("pytorch", "llama.cpp")] + [n for n in ("llama.cpp", "pytorch") if n in rows]
    for lab, path, higher in FIGURES:
        print(f"{lab}")
        print(f"  {'runner':<12}{'figure':>26}{'x torch':>24}{'x l.cpp':>24}")
        for n in order:
            line = f"  {n:<12}{spread([get(r, path) for r in rows[n]], '{:.4g}'):>26}"
            for other in ("pytorch", "llama.cpp"):
                ratios = []
                for rnd in sorted(by_round):
                    a, b = by_round[rnd].get(n), by_round[rnd].get(other)
                    va, vb = (get(a, path) if a else None), (get(b, path) if b else None)
                    if va and vb and va == va and vb == vb:
                        ratios.append(va / vb if higher else vb / va)
                line += f"{spread(ratios) if n != other else '-':>24}"
            print(line)
    # compare.sh's /proc/loadavg before and after each runner (PyTorch's too)
    loads = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.loadavg"))):
        with open(path) as f:
            loads[os.path.basename(path)[:-8]] = " -> ".join(l.split()[0] for l in f if l.strip())
    if states or loads:
        print("\nthe machine in each run (load average over 1 minute before -> after; the governor genfence read):")
        gov = {name: a.get("governor") or "not readable" for _, name, a, _ in states}
        for name in sorted(set(loads) | set(gov), key=lambda n: (int(re.match(r"r(\d+)", n).group(1)), n)):
            print(f"  {name}: load {loads.get(name, '-')}" + (f"; governor {gov[name]}" if name in gov else ""))


if __name__ == "__main__":
    main(sys.argv[1])
