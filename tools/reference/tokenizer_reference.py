#!/usr/bin/env python3
"""Reference token ids from Hugging Face `tokenizers`, to compare genfence's
tokenizer against (tests/cli/tokenizer_vs_hf.sh).

TOKENIZER is a tokenizer.json, a directory holding one, or a directory holding
vocab.json + merges.txt. The latter is built as
    Tokenizer(models.BPE.from_file(vocab, merges))
    + pre_tokenizers.ByteLevel(add_prefix_space=False) + decoders.ByteLevel()
(plain GPT-2 BPE, no special-token matching), the former with Tokenizer.from_file.

For every input text (--text, --file and --jsonl, in that order) prints one
line: the JSON array of ids (encode(text, add_special_tokens=False)). With
--decode IDS prints {"text": ...} for the comma-separated ids instead.

Usage: .venv/bin/python tools/reference/tokenizer_reference.py TOKENIZER [--text T]...
           [--file F]... [--jsonl F] [--decode 1,2,3]
"""
import argparse
import json
import os
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers


def load(path):
    if os.path.isdir(path):
        tj = os.path.join(path, "tokenizer.json")
        if os.path.isfile(tj):
            return Tokenizer.from_file(tj)
        vocab, merges = os.path.join(path, "vocab.json"), os.path.join(path, "merges.txt")
        tok = Tokenizer(models.BPE.from_file(vocab, merges))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        return tok
    return Tokenizer.from_file(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tokenizer")
    ap.add_argument("--text", action="append", default=[], help="a text to encode (repeatable)")
    ap.add_argument("--file", action="append", default=[], help="a UTF-8 file to encode whole (repeatable)")
    ap.add_argument("--jsonl", help="a file with one JSON string (a text) per line")
    ap.add_argument("--decode", help="comma-separated ids to decode instead")
    args = ap.parse_args()
    tok = load(args.tokenizer)

    if args.decode is not None:
        ids = [int(x) for x in args.decode.split(",") if x.strip()]
        print(json.dumps({"text": tok.decode(ids, skip_special_tokens=False)}, ensure_ascii=False))
        return 0

    texts = list(args.text)
    for f in args.file:
        with open(f, "rb") as fh:
            texts.append(fh.read().decode("utf-8"))
    if args.jsonl:
        with open(args.jsonl, encoding="utf-8") as fh:
            texts.extend(json.loads(line) for line in fh if line.strip())
    out = sys.stdout
    for t in texts:
        out.write(json.dumps(tok.encode(t, add_special_tokens=False).ids) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
