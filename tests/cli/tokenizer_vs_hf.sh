#!/usr/bin/env bash
# genfence's tokenizer against Hugging Face tokenizers, id for id.
#
# For GPT-2's vocab.json + merges.txt (shared/data/gpt2-tokenizer) and, when
# present, models/holmes-gpt/tokenizer.json: encode a varied set of texts with
# `genfence tokenize --json` and with tools/reference/tokenizer_reference.py, print one
# summary line per text and fail on any difference. Also decodes the ids back
# and compares with HF's decode.
#
# Environment (set by CTest): GENFENCE, GF_SRC, GF_SHARED, GF_PYTHON.
set -euo pipefail
: "${GENFENCE:?path to the genfence binary}" "${GF_SRC:?}" "${GF_SHARED:?}" "${GF_PYTHON:?}"

REF="$GF_SRC/tools/reference/tokenizer_reference.py"
CORPUS="$GF_SHARED/data/sherlock-holmes-canon.txt"
GPT2="$GF_SHARED/data/gpt2-tokenizer"
HOLMES="$GF_SRC/models/holmes-gpt/tokenizer.json"

. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init tokenizer_vs_hf
work=$tmp

names=()
texts=()
add() { names+=("$1"); texts+=("$2"); }

add "ascii sentence"        "Hello, world! This is a test."
add "contractions"          "I'm sure it's the dog's; we'll see, they'd've gone, you're right, I've won, don't"
add "contractions upper"    "IT'S HOLMES'S CASE, I'M SURE THEY'LL COME, WE'D, YOU'RE, I'VE, CAN'T, 'S"
add "leading apostrophes"   "'s 't 're 've 'm 'll 'd 'x 'sup 'tis ''s"
add "digits"                "1 12 123 1234 12345 3.14159 1,000,000 2024-01-01 0x1F 007"
add "long number"           "31415926535897932384626433832795028841971693993751058209749445923078164062862089986280"
add "unicode digits"        "٣٤٥ ½ ² ³ ⅓ Ⅻ ① १२३ ๑๒"
add "runs of spaces"        "a  b   c    d     e"
add "leading spaces"        "    four leading"
add "trailing spaces"       "trailing three   "
add "only spaces"           "      "
add "tabs"                  $'col1\tcol2\t\tcol3 \t x\t'
add "newlines"              $'line1\nline2\n\nline4\n\n\n\nend\n'
add "crlf"                  $'first\r\nsecond\r\n\r\nthird\r'
add "space before newline"  $'a \nb  \n  c\n \n'
add "whitespace mix"        $' \t\n \x0b\x0c\r x'
add "nbsp"                  $'non\u00a0breaking\u00a0 space \u00a0\u00a0x \u00a0'
add "unicode spaces"        $'ideo\u3000graphic\u3000\u3000x thin\u2009sp en\u2002em\u2003 line\u2028par\u2029 nel\u0085 ogham\u1680x'
add "not whitespace"        $'mongolian\u180evowel zero\u200bwidth joiner\u200dx word\u2060joiner'
add "accents"               "café naïve résumé Ærøskøbing façade coöperate Ŝ ŝ ß İstanbul"
add "combining marks"       $'e\u0301 n\u0303o a\u0308\u0304 \u0301alone'
add "cjk"                   "福尔摩斯探案集。我是一个侦探！日本語のテキスト、カタカナ。한국어 텍스트입니다"
add "emoji"                 "👍 👍🏽 😀😀😀 ❤️ ✨🎉"
add "emoji zwj"             "👨‍👩‍👧‍👦 🕵️‍♂️ 🧑🏽‍💻 🏳️‍🌈"
add "flags"                 "🇬🇧🇺🇸🇫🇷 🇯🇵"
add "symbols"               "£100 €5 ¥ © ® ™ § ¶ † ‡ • … ‰ ← → ∑ ∞ ≠ ≤ ± × ÷ °C"
add "quotes and dashes"     "“Quoted,” she said — ‘single’ – en–dash —em— dash"
add "mixed scripts"         "Ελληνικά русский язык עברית العربية हिन्दी ไทย ქართული Հայերեն"
add "punctuation runs"      "!!!??? ... --- *** ((())) {[<>]} @#\$%^&*_+=|\\/~\`"
add "control characters"    $'\x01\x02\x7f bell\x07 esc\x1b[0m del\x7f'
add "endoftext literal"     "text<|endoftext|>more <|endoftext|> <|endoftext"
add "empty"                 ""
add "single char"           "a"
add "single space"          " "
add "apostrophe forms"      "don’t it’s O'Neil rock'n'roll '90s"
add "urls and code"         "https://example.com/a?b=c&d=e#f; int main(void) { return 0; }"

files_names=("Holmes paragraph" "whole Holmes corpus (3.4 MB)")
sed -n '10770,10800p' "$CORPUS" >"$work/paragraph.txt"
files=("$work/paragraph.txt" "$CORPUS")

eot_names=("eot between words" "eot alone" "eot twice" "eot with spaces" "eot unfinished"
           "eot then newlines" "eot interleaved" "eot nested brackets" "eot with trailing bars")
eot_texts=("end.<|endoftext|>Start" "<|endoftext|>" "<|endoftext|><|endoftext|>" " <|endoftext|> "
           "<|endoftext" $'<|endoftext|>\n\nChapter I' "a<|endoftext|>b<|endoftext|>c"
           "<<|endoftext|>>" "<|endoftext|>|>")

# compare TOKENIZER LABEL NAMES... -- TEXTS...
compare() {
    local tok="$1" label="$2"
    shift 2
    local -a cnames=() ctexts=()
    while [[ "$1" != "--" ]]; do cnames+=("$1"); shift; done
    shift
    ctexts=("$@")
    local dir="$work/$label"
    mkdir -p "$dir"
    : >"$dir/names"
    : >"$dir/ours"
    : >"$dir/decoded"
    local -a refargs=()
    local i
    for i in "${!ctexts[@]}"; do
        printf '%s\n' "${cnames[$i]}" >>"$dir/names"
        refargs+=("--text=${ctexts[$i]}")
        if ! "$GENFENCE" tokenize --tokenizer "$tok" --text="${ctexts[$i]}" --json >>"$dir/ours" 2>"$dir/err"; then
            echo "\"ERROR: $(tr -d '\n"\\' <"$dir/err")\"" >>"$dir/ours"
        fi
    done
    for i in "${!files[@]}"; do
        printf '%s\n' "${files_names[$i]}" >>"$dir/names"
        refargs+=("--file=${files[$i]}")
        if ! "$GENFENCE" tokenize --tokenizer "$tok" --file "${files[$i]}" --json >>"$dir/ours" 2>"$dir/err"; then
            echo "\"ERROR: $(tr -d '\n"\\' <"$dir/err")\"" >>"$dir/ours"
        fi
    done
    "$GF_PYTHON" "$REF" "$tok" "${refargs[@]}" >"$dir/ref"
    # decode our ids back (all but the corpus) and compare with HF's decode too
    local n
    n=$(wc -l <"$dir/ours")
    for ((i = 1; i < n; i++)); do
        local ids
        ids=$(sed -n "${i}p" "$dir/ours" | tr -d '[] ')
        if [[ "$ids" == \"ERROR* ]]; then echo '{"text": null}' >>"$dir/decoded"; continue; fi
        "$GENFENCE" tokenize --tokenizer "$tok" --decode "$ids" --json >>"$dir/decoded" 2>/dev/null ||
            echo '{"text": null}' >>"$dir/decoded"
    done
    "$GF_PYTHON" - "$dir" "$tok" "$label" <<'EOF'
import json, sys
d, tok_path, label = sys.argv[1:4]
sys.path.insert(0, __import__("os").path.join(__import__("os").environ["GF_SRC"], "tools", "reference"))
import tokenizer_reference as tr
tok = tr.load(tok_path)
names = open(f"{d}/names", encoding="utf-8").read().split("\n")[:-1]
ours = [json.loads(l) for l in open(f"{d}/ours", encoding="utf-8")]
ref = [json.loads(l) for l in open(f"{d}/ref", encoding="utf-8")]
dec = [json.loads(l)["text"] for l in open(f"{d}/decoded", encoding="utf-8")]
assert len(names) == len(ours) == len(ref), (len(names), len(ours), len(ref))
bad = 0
for i, (name, o, r) in enumerate(zip(names, ours, ref)):
    if isinstance(o, str):
        print(f"  FAIL {label}: {name}: genfence failed: {o}")
        bad += 1
        continue
    if o != r:
        k = next((j for j in range(min(len(o), len(r))) if o[j] != r[j]), min(len(o), len(r)))
        print(f"  FAIL {label}: {name}: {len(o)} ids vs HF {len(r)}; first difference at {k}: "
              f"ours {o[k:k+6]} HF {r[k:k+6]}")
        bad += 1
        continue
    note = ""
    if i < len(dec):
        want = tok.decode(r, skip_special_tokens=False)
        if dec[i] != want:
            print(f"  FAIL {label}: {name}: ids equal but decode differs: {dec[i]!r:.80} vs HF {want!r:.80}")
            bad += 1
            continue
        note = ", decode equal"
    print(f"  ok   {label}: {name}: {len(o)} ids equal{note}")
print(f"{label}: {len(ours) - bad}/{len(ours)} texts equal")
sys.exit(1 if bad else 0)
EOF
}

status=0
echo "== GPT-2 vocab.json + merges.txt ($GPT2)"
compare "$GPT2" gpt2 "${names[@]}" -- "${texts[@]}" || status=1

if [[ -f "$HOLMES" ]]; then
    echo "== holmes-gpt tokenizer.json ($HOLMES)"
    compare "$HOLMES" holmes "${names[@]}" "${eot_names[@]}" -- "${texts[@]}" "${eot_texts[@]}" || status=1
else
    echo "== SKIP holmes-gpt: $HOLMES not found (models/holmes-gpt is trained by tools/training/train_tokenizer.py)"
fi

if ((status)); then
    echo "tokenizer_vs_hf: FAILED"
else
    echo "tokenizer_vs_hf: all equal"
fi
exit $status
