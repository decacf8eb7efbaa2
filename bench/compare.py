#!/usr/bin/env python3
"""Merge the JSON rows bench/compare.sh collected (one file per round and
runner) into one table: the median over rounds of each figure, and each
runner's ratio to PyTorch and to llama.cpp side by side."""
import glob
import json
import os
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


def main(folder):
    rows, machine, model = {}, None, None
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        with open(path) as f:
            doc = json.load(f)
        entries = doc["backends"] if "backends" in doc else [doc]
        if doc.get("machine", {}).get("read_gbps") is not None:
            machine, model = doc["machine"], doc["model"]
        for e in entries:
            name = "llama.cpp" if e["backend"].startswith("llamacpp") else e["backend"]
            if not e.get("ok"):
                print(f"{name}: {e.get('error')}", file=sys.stderr)
                continue
            rows.setdefault(name, []).append(e)
    if model:
        print(f"model    {model['name']}: {model['params'] / 1e6:.1f}M parameters")
    if machine:
        print(f"machine  {machine['cpu']}, {machine['cpus']} CPUs; {machine['threads']} thread(s): "
              f"read {machine['read_gbps']:.1f} GB/s, sgemm {machine.get('sgemm_peak_gflops') or float('nan'):.1f} GFLOP/s")
    rounds = max((len(v) for v in rows.values()), default=0)
    print(f"medians over {rounds} interleaved round(s); x torch / x llama.cpp: that runner's figure over "
          f"theirs (above 1 = faster)\n")
    med = {n: {lab: statistics.median([v for v in (get(r, p) for r in rs) if v is not None] or [float("nan")])
               for lab, p, _ in FIGURES} for n, rs in rows.items()}
    order = [n for n in rows if n not in ("pytorch", "llama.cpp")] + [n for n in ("llama.cpp", "pytorch") if n in rows]
    head = f"{'runner':<12}" + "".join(f"{lab:>18}{'x torch':>9}{'x l.cpp':>9}" for lab, _, _ in FIGURES)
    print(head)
    for n in order:
        line = f"{n:<12}"
        for lab, _, higher in FIGURES:
            v = med[n][lab]
            line += f"{v:>18.2f}"
            for other in ("pytorch", "llama.cpp"):
                o = med.get(other, {}).get(lab)
                if o is None or o != o or v != v:
                    line += f"{'-':>9}"
                else:
                    line += f"{(v / o if higher else o / v):>9.2f}"
        print(line)


if __name__ == "__main__":
    main(sys.argv[1])
