#!/usr/bin/env bash
# The HTML report (reports/index.html) in a real headless browser (Debian's
# chromium): it renders, logs no console message, has the verdict matrix, the
# per-step plots (two <svg> per model case with per-step data), the failure
# list with reproduce lines and the durations; a screenshot is kept under
# $GF_BUILD/test-artifacts/report_html/.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}"
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
    echo "skipped: chromium is not installed (apt-get install chromium)"
    exit 0
fi
art="$GF_BUILD/test-artifacts/report_html"
rm -rf "$art"
mkdir -p "$art"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "report_html: $*"; exit 1; }
bad="$GF_BUILD/tests/backends/libgenfence_test_ref_bad_cache.so"
cd "$GF_SRC"
set +e
"$GENFENCE" run cases/golden.yaml cases/generation.yaml --filter '^(golden\.greedy\.sherlock|cache\.sherlock|eos\.rows)$' \
    --backend ref --backend "$bad" --report-dir "$tmp/rep" > "$tmp/out.txt" 2>&1
rc=$?
set -e
[ "$rc" = 1 ] || { cat "$tmp/out.txt"; fail "exit status $rc, expected 1 (the bad backend fails cache.sherlock)"; }
html="$tmp/rep/index.html"
[ -s "$html" ] || fail "no index.html next to run.json"
cp "$html" "$art/index.html"
# no network: nothing in the page is fetched from anywhere
if grep -Eiq '(src|href)="(https?:)?//' "$html"; then fail "the page references the network"; fi
if grep -qi '<script' "$html"; then fail "the page has a script"; fi

chrome() { # URL DUMP LOG [extra flags]
    local url=$1 dump=$2 log=$3
    shift 3
    HOME="$tmp" timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run \
        --user-data-dir="$tmp/profile" --enable-logging=stderr --v=0 "$@" "$url" > "$dump" 2> "$log"
}
# the console check itself must catch a console message: a control page that logs one
printf '<!DOCTYPE html><html><body><script>console.error("gf-control-message")</script></body></html>\n' > "$tmp/control.html"
chrome "file://$tmp/control.html" "$tmp/control.dom" "$tmp/control.log" --dump-dom || fail "chromium failed on the control page"
grep -q 'CONSOLE.*gf-control-message' "$tmp/control.log" || { cat "$tmp/control.log"; fail "the console check does not see console messages"; }

chrome "file://$html" "$tmp/dom.html" "$art/chromium.log" --dump-dom || { cat "$art/chromium.log"; fail "chromium failed to render"; }
cp "$tmp/dom.html" "$art/dom.html"
if grep -q 'CONSOLE' "$art/chromium.log"; then grep 'CONSOLE' "$art/chromium.log"; fail "console messages while rendering"; fi
grep -q '<table class="matrix">' "$tmp/dom.html" || fail "no verdict matrix in the rendered page"
svgs=$(grep -o '<svg' "$tmp/dom.html" | wc -l)
# golden.greedy.sherlock and cache.sherlock on two backends: 4 results x 2 plots; eos has no per-step data
[ "$svgs" = 8 ] || fail "$svgs <svg> plots in the rendered page, expected 8"
grep -q 'class="gate"' "$tmp/dom.html" || fail "no gate line drawn"
grep -q 'class="first-divergence"\|class="failing-step"' "$tmp/dom.html" || fail "the failing step of the bad backend is not highlighted"
grep -q 'class="reproduce">[^<]*genfence run .*--backend' "$tmp/dom.html" || fail "no reproduce line in the failure list"
grep -q 'id="durations"' "$tmp/dom.html" || fail "no durations"
grep -q '<span class="v v-fail">fail</span>' "$tmp/dom.html" || fail "no failing verdict in the matrix"
# near ties and the first divergence are drawn where the record has them: the
# same report with one ref margin put below the near-tie threshold and a first
# divergence at step 7, rendered again (merge of one unsharded report --html)
"${GF_PYTHON:-python3}" - "$tmp/rep/run.json" "$tmp/marked.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
r = next(r for r in d["results"] if r["id"] == "cache.sherlock" and r["backend"] == "ref")
m = r["metrics"]
c = m["comparisons"]["cached_vs_uncached"]
m["step_margin"][5] = c["gate_threshold"] / 10
c["first_divergence"] = 7
json.dump(d, open(sys.argv[2], "w"))
PY
"$GENFENCE" merge "$tmp/marked.json" -o "$tmp/marked.out.json" --html "$tmp/marked.html" > /dev/null || true
[ -s "$tmp/marked.html" ] || fail "no HTML from merge --html"
chrome "file://$tmp/marked.html" "$tmp/marked.dom" "$tmp/marked.log" --dump-dom || fail "chromium failed on the marked page"
if grep -q 'CONSOLE' "$tmp/marked.log"; then fail "console messages on the marked page"; fi
[ "$(grep -o 'class="near-tie"' "$tmp/marked.dom" | wc -l)" = 1 ] || fail "the near tie is not marked once"
[ "$(grep -o 'class="first-divergence"' "$tmp/marked.dom" | wc -l)" = 2 ] || fail "the first divergence is not in both plots"
grep -q "first divergence (tokens differ): step 7" "$tmp/marked.dom" || fail "the first divergence step is not said"
grep -q "1 near tie(s) marked" "$tmp/marked.dom" || fail "the near-tie count is not said"
chrome "file://$html" /dev/null "$tmp/shot.log" --hide-scrollbars --window-size=1200,2600 \
    --screenshot="$art/screenshot.png" || { cat "$tmp/shot.log"; fail "no screenshot"; }
[ -s "$art/screenshot.png" ] || fail "empty screenshot"
echo "rendered: $svgs plots; screenshot: $art/screenshot.png"
echo "1 passed, 0 failed"
