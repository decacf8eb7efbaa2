#!/usr/bin/env bash
# The protocol's per-call overhead, measured side by side in one run
# (docs/protocol.md, "Overhead"): greedy cached decode of N tokens after a
# 16-token prompt on models/holmes-gpt, best of R runs per backend, the runs
# interleaved so machine load hits every backend alike:
#   ref                in-process oracle (double accumulation)
#   exec:echo_ref      the same arithmetic in a child, over the protocol
#   exec:transformers  transformers over the protocol
#   exec:null_client   correct replies with zero logits, no arithmetic: the
#                      protocol's floor per forward (plus genfence's loop)
# On an idle machine echo_ref - ref per forward is the protocol's cost per
# call too; on a loaded one the null client's time is the steadier figure.
#
#   tools/backends/overhead.sh [BUILD_DIR] [N] [R]
set -euo pipefail
BUILD=${1:-build}
N=${2:-100}
R=${3:-7}
G=$BUILD/harness/genfence
[[ -x $G ]] || G=$BUILD/genfence
PY=${GF_PYTHON:-.venv/bin/python}
TOK=$(seq -s, 10 25)   # 16 prompt tokens
specs=("ref" "exec:$BUILD/tools/echo_ref" "exec:$PY tools/backends/transformers_backend.py" "exec:$BUILD/tools/null_client")
names=("ref" "echo_ref" "transformers" "null_client")
declare -a best
for ((r = 0; r < R; r++)); do
  n=${#specs[@]}
  for ((j = 0; j < n; j++)); do
    i=$(( (j + r) % n ))   # rotate the order each round
    s=$("$G" generate --model models/holmes-gpt --tokens "$TOK" --max-new-tokens "$N" --temperature 0 --no-eos \
          --backend "${specs[$i]}" --json 2>/dev/null | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["seconds"])')
    if [[ -z "${best[$i]:-}" ]] || "$PY" -c "import sys; sys.exit(0 if $s < ${best[$i]} else 1)"; then best[$i]=$s; fi
  done
done
"$PY" - "$N" "${best[@]}" "${names[@]}" <<'PY'
import sys
n = int(sys.argv[1]); k = (len(sys.argv) - 2) // 2
secs = [float(x) for x in sys.argv[2:2 + k]]; names = sys.argv[2 + k:]
ref = secs[0]
for name, s in zip(names, secs):
    print(f"{name:13s} {s * 1e3:8.1f} ms  {n / s:7.0f} tokens/s  x{ref / s:5.2f} of ref")
calls = n  # one prefill + n - 1 decode forwards (+ cache create/free)
print(f"protocol floor per forward (null_client / {calls}): {secs[3] / calls * 1e6:.0f} us")
print(f"echo_ref - ref per forward: {(secs[1] - ref) / calls * 1e6:.0f} us")
PY
