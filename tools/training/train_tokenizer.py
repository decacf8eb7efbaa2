#!/usr/bin/env python3
"""Train the holmes-gpt byte-level BPE tokenizer (512 tokens).

Byte-level BPE exactly like GPT-2's scheme: ByteLevel pre-tokenizer
(add_prefix_space=False, GPT-2 regex), ByteLevel decoder, all 256 byte symbols
as the initial alphabet, exactly 255 learned merges (ids 0..510), then
<|endoftext|> added as a special token with id 511.

Trained on the TRAIN split only (the 122 non-empty training sections; see
holmes_common.train_val_sections), fed one section per iterator item.

Usage: .venv/bin/python tools/training/train_tokenizer.py [--data ../shared/data/sherlock-holmes-canon.txt]
                                                 [--out models/holmes-gpt/tokenizer.json]
"""
import argparse
import json
import os

import holmes_common as hc

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

N_MERGES = 255
VOCAB = 512


def build(train_sections):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    assert len(alphabet) == 256
    trainer = trainers.BpeTrainer(
        vocab_size=256 + N_MERGES,
        min_frequency=0,
        show_progress=False,
        special_tokens=[],
        initial_alphabet=alphabet,
    )
    tok.train_from_iterator(train_sections, trainer=trainer)
    tok.add_special_tokens([hc.EOT])
    return tok


def verify(tok, corpus):
    assert tok.get_vocab_size(with_added_tokens=True) == VOCAB, tok.get_vocab_size()
    assert tok.token_to_id(hc.EOT) == hc.EOT_ID, tok.token_to_id(hc.EOT)
    assert tok.id_to_token(hc.EOT_ID) == hc.EOT
    j = json.loads(tok.to_str())
    merges = j["model"]["merges"]
    assert len(merges) == N_MERGES, len(merges)
    assert len(j["model"]["vocab"]) == VOCAB - 1
    assert sorted(j["model"]["vocab"].values()) == list(range(VOCAB - 1))
    samples = [
        corpus,
        "Héllo wörld — naïve café, Ærøskøbing, Ŝ ŝ, ß, ½ £3 10°",
        "emoji: 😀🕵️‍♂️🇬🇧 👍🏽 and CJK 福尔摩斯 and Ελληνικά, עברית, \u200b zero-width",
        "  leading spaces\ttabs\r\nCRLF\n\n\nand trailing   ",
        "",
        "\x00\x01\x7f odd control bytes",
    ]
    for s in samples:
        ids = tok.encode(s).ids
        assert all(0 <= i < hc.EOT_ID for i in ids), "normal text must not produce the special id"
        back = tok.decode(ids, skip_special_tokens=False)
        assert back == s, f"round-trip failed for {s[:60]!r}"
    # the special token is recognised in text and decodes back to itself
    ids = tok.encode("end." + hc.EOT + "Start").ids
    assert hc.EOT_ID in ids and tok.decode(ids, skip_special_tokens=False) == "end." + hc.EOT + "Start"
    n = len(tok.encode(corpus).ids)
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.path.relpath(hc.DEFAULT_DATA))
    ap.add_argument("--out", default=os.path.join(os.path.relpath(hc.DEFAULT_MODEL_DIR), "tokenizer.json"))
    args = ap.parse_args()

    corpus = hc.read_corpus(args.data)
    train, val = hc.train_val_sections(corpus)
    tok = build(train)
    # determinism check: a second training run must give the identical JSON
    tok2 = build(train)
    assert tok.to_str() == tok2.to_str(), "tokenizer training is not deterministic"
    n = verify(tok, corpus)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tok.save(args.out, pretty=True)
    # reload from disk and re-verify
    verify(Tokenizer.from_file(args.out), corpus)
    print(f"wrote {args.out}: vocab {tok.get_vocab_size()} (255 merges + 256 bytes + {hc.EOT}=511); "
          f"corpus {len(corpus.encode('utf-8'))} bytes -> {n} tokens "
          f"({len(corpus.encode('utf-8')) / n:.3f} bytes/token); sha256 {hc.sha256_file(args.out)}")


if __name__ == "__main__":
    main()
