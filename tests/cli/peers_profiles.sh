#!/usr/bin/env bash
# The peers' vectors (cases/peers/*.yaml) under every sampler profile: each
# case, its `profile:` replaced by each profile in turn (one case per file,
# so a load refusal counts for that case only), must get the outcome declared
# beside it. A case block may carry one comment line
#     # xprofile: seed=fail llamacpp=refused vllm=fail
# naming its outcome under the profiles where it does not pass: fail (exit 1),
# refused (exit 2, an error in the case files: the profile refuses a
# parameter at load time). Every profile not named there, and the case's own
# profile always, must pass. A mismatch names the case, the profile, the
# outcome and the first lines genfence printed. Then the per-file tallies
# under seed are compared with docs/cases.md's table, and the cases that tell
# each profile apart must be non-passing under every other profile.
set -euo pipefail
: "${GENFENCE:?set GENFENCE to the genfence binary}" "${GF_SRC:?set GF_SRC}"
PY=${GF_PYTHON:-python3}
[[ -x "$PY" ]] || PY=python3
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init peers_profiles
PROFILES=(seed hf llamacpp vllm)

# docs/cases.md, "The peers' own vectors": FILE cases pass-under-seed
# refused-under-seed fail-under-seed
SEED_TABLE="hf.yaml 40 23 16 1
llamacpp.yaml 13 5 8 0
vllm.yaml 40 32 6 2"
# one case per profile that every other profile fails or refuses
DISCRIMINATING="peers.hf.arguments peers.llamacpp.sampler_queue peers.vllm.all_neginf peers.vllm.v1.min_tokens_penalty"

# Split the peer files: $tmp/<file>/<n>.<profile>.yaml per case and profile,
# and a manifest line per case: file id own-profile n expected-outcomes.
"$PY" - "$GF_SRC/cases/peers" "$tmp" <<'PYEOF' >"$tmp/manifest"
import os, re, sys
src, out = sys.argv[1], sys.argv[2]
PROFILES = ["seed", "hf", "llamacpp", "vllm"]
OUTCOMES = {"pass", "fail", "refused"}
def swap(line, p):
    if line.lstrip().startswith("#"):
        return line
    # every `profile: NAME` of the line (flow mappings hold several keys)
    return re.sub(r"(?<![\w-])profile:(\s*)(seed|hf|llamacpp|vllm)\b", lambda m: "profile:" + m.group(1) + p, line)
bad = 0
for fn in sorted(os.listdir(src)):
    if not fn.endswith(".yaml"):
        continue
    lines = open(os.path.join(src, fn)).read().split("\n")
    starts = [i for i, l in enumerate(lines) if re.match(r"^  - id: ", l)]
    os.makedirs(os.path.join(out, fn), exist_ok=True)
    for n, s in enumerate(starts):
        e = starts[n + 1] if n + 1 < len(starts) else len(lines)
        block = lines[s:e]
        cid = block[0].split("id:", 1)[1].strip()
        own = set()
        for l in block:
            if not l.lstrip().startswith("#"):
                own.update(m.group(1) for m in re.finditer(r"(?<![\w-])profile:\s*(seed|hf|llamacpp|vllm)\b", l))
        if len(own) != 1:
            print(f"BAD {fn} {cid}: names {len(own)} profiles ({', '.join(sorted(own)) or 'none'}); "
                  "a peer case runs under one", file=sys.stderr)
            bad = 1
            continue
        own = own.pop()
        want = {p: "pass" for p in PROFILES}
        notes = [l for l in block if re.match(r"^\s*# xprofile:", l)]
        if len(notes) > 1:
            print(f"BAD {fn} {cid}: {len(notes)} '# xprofile:' lines", file=sys.stderr)
            bad = 1
        for note in notes[:1]:
            for item in note.split("xprofile:", 1)[1].split():
                p, _, o = item.partition("=")
                if p not in PROFILES or o not in OUTCOMES or p == own:
                    print(f"BAD {fn} {cid}: '# xprofile:' item '{item}' (PROFILE=pass|fail|refused, "
                          f"not the case's own profile {own})", file=sys.stderr)
                    bad = 1
                    continue
                want[p] = o
        for p in PROFILES:
            with open(os.path.join(out, fn, f"{n}.{p}.yaml"), "w") as f:
                f.write("cases:\n" + "\n".join(swap(l, p) for l in block) + "\n")
        print(fn, cid, own, n, " ".join(f"{p}={want[p]}" for p in PROFILES))
sys.exit(2 if bad else 0)
PYEOF

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
declare -A TALLY # file.profile.outcome -> count
declare -A GOT   # id.profile -> outcome
n_cases=0
while read -r fn cid own n wants; do
    n_cases=$((n_cases + 1))
    for w in $wants; do
        p=${w%%=*} want=${w#*=}
        f="$tmp/$fn/$n.$p.yaml"
        rc=0
        (cd "$tmp" && GENFENCE_ROOT="$GF_SRC" "$GENFENCE" run "$f" --backend ref --no-report) >"$tmp/out" 2>&1 || rc=$?
        case $rc in
            0) got=pass ;;
            1) got=fail ;;
            2) if grep -Eq 'errors? in the case files' "$tmp/out"; then got=refused; else got="exit 2"; fi ;;
            *) got="exit $rc" ;;
        esac
        GOT[$cid.$p]=$got
        TALLY[$fn.$p.$got]=$((${TALLY[$fn.$p.$got]:-0} + 1))
        if [ "$p" = seed ]; then TALLY[$fn.cases]=$((${TALLY[$fn.cases]:-0} + 1)); fi
        if [ "$got" != "$want" ]; then
            if [ "$p" = "$own" ]; then
                fail "$cid ($fn) under its own profile $own: $got, expected pass"
            else
                fail "$cid ($fn) under $p (own $own): $got, expected $want (declare it with '# xprofile: $p=$got' if the difference is documented)"
            fi
            grep -Ev '^(genfence |  backend |tested:|verdicts:)' "$tmp/out" | head -n 4 | sed 's/^/    /'
        fi
    done
done <"$tmp/manifest"
[ "$n_cases" -gt 0 ] || fail "no peer case found under $GF_SRC/cases/peers"

echo "per file and profile: pass / fail / refused"
for fn in $(cut -d' ' -f1 "$tmp/manifest" | sort -u); do
    line="  $fn (${TALLY[$fn.cases]:-0} cases):"
    for p in "${PROFILES[@]}"; do
        line+=" $p ${TALLY[$fn.$p.pass]:-0}/${TALLY[$fn.$p.fail]:-0}/${TALLY[$fn.$p.refused]:-0}"
    done
    echo "$line"
done

while read -r fn total pass refused failed; do
    got="${TALLY[$fn.cases]:-0} ${TALLY[$fn.seed.pass]:-0} ${TALLY[$fn.seed.refused]:-0} ${TALLY[$fn.seed.fail]:-0}"
    [ "$got" = "$total $pass $refused $failed" ] ||
        fail "$fn under seed: cases/pass/refused/fail $got, docs/cases.md says $total $pass $refused $failed"
done <<<"$SEED_TABLE"

for cid in $DISCRIMINATING; do
    own=$(awk -v id="$cid" '$2 == id {print $3}' "$tmp/manifest")
    [ -n "$own" ] || { fail "discriminating case $cid is not in cases/peers"; continue; }
    for p in "${PROFILES[@]}"; do
        [ "$p" = "$own" ] && continue
        case ${GOT[$cid.$p]:-none} in
            fail | refused) ;;
            *) fail "$cid (profile $own) is not told apart from $p: ${GOT[$cid.$p]:-not run}" ;;
        esac
    done
done

# The records stay small: every kept set lists at most 32 ids (the most
# probable), says so (kept_ids_shown / kept_ids_total) and hashes the full set.
# llama.cpp's sampler_queue keeps 1..9999 of log_ramp 10000 under top-k 10000:
# its hash must be that of "1,2,...,9999", its shown ids 9968..9999; a set of
# at most 32 is listed whole, its hash that of the list.
if ! "$GENFENCE" run -q --report-dir "$tmp/caps" "$GF_SRC/cases/peers" >"$tmp/caps.out" 2>&1; then
    fail "cases/peers under their own profiles: $(tail -3 "$tmp/caps.out")"
elif ! caps=$("$PY" - "$tmp/caps/run.json" <<'PYEOF' 2>&1
import hashlib, json, os, sys
path = sys.argv[1]
h = lambda ids: hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()
bad, n, cut = [], 0, 0
for r in json.load(open(path))["results"]:
    for e in r.get("metrics", {}).get("expectations", []):
        if "kept" not in e:
            continue
        n += 1
        shown, total, kept = e.get("kept_ids_shown"), e.get("kept_ids_total"), e["kept"]
        if shown is None or total is None or "kept_ids_sha256" not in e:
            bad.append(f"{r['id']} {e['param']}: no kept_ids_shown / kept_ids_total / kept_ids_sha256")
            continue
        if shown != len(kept) or shown != min(32, total) or len(e.get("probs", kept)) != shown:
            bad.append(f"{r['id']} {e['param']}: {len(kept)} ids listed, shown {shown} of {total}")
        if total <= 32 and e["kept_ids_sha256"] != h(kept):
            bad.append(f"{r['id']} {e['param']}: the hash is not that of the whole listed set")
        cut += total > 32
        if r["id"] == "peers.llamacpp.sampler_queue" and "k=10000" in e["param"]:
            if e["kept_ids_sha256"] != h(range(1, 10000)) or kept != list(range(9968, 10000)) or total != 9999:
                bad.append(f"{r['id']} {e['param']}: not 9968..9999 of 1..9999 with that set's hash")
size = os.path.getsize(path)
if size > 2_000_000:
    bad.append(f"run.json of cases/peers is {size} bytes (more than 2 MB)")
print("\n".join(bad) if bad else f"{n} kept sets, {cut} cut to 32; run.json {size} bytes")
sys.exit(1 if bad else 0)
PYEOF
); then
    fail "record caps: $caps"
else
    echo "ok   record caps: $caps"
fi

if [ "$failures" -ne 0 ]; then
    echo "peers_profiles: $failures failure(s)"
    exit 1
fi
echo "ok   $n_cases peer cases x ${#PROFILES[@]} profiles as declared; seed tallies as docs/cases.md; $(wc -w <<<"$DISCRIMINATING") discriminating cases fail or are refused under every other profile"
