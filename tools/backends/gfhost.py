#!/usr/bin/env python3
"""Talk to a genfence protocol client by hand, without genfence (docs/protocol.md).

    tools/backends/gfhost.py [--model DIR] [--hex] -- CLIENT [ARGS...]

Starts CLIENT and sends hello, probe, info, model_load (DIR, default
models/holmes-gpt, with the config read from its config.json), cache_create
(1 row, 16 positions), a cached forward of 3 tokens, one more of 1 token,
cache_length, cache_bytes, an uncached forward of the same 4 tokens, then
closes stdin. Prints each reply (and with --hex the bytes of every frame),
and the largest |delta| between the cached and the uncached logits of the
last position. For trying a new client before running genfence's cases.
"""
import argparse
import json
import os
import struct
import subprocess
import sys

import numpy as np

import gfproto as P

ACT = {"gelu_new": 1, "gelu_pytorch_tanh": 1, "gelu": 2, "relu": 3, "silu": 4}


def config_block(cfg):
    """genfence's view of a config.json as the 80-byte model_load block (the common fields)."""
    llama = cfg.get("model_type") != "gpt2"
    D = cfg.get("n_embd") or cfg["hidden_size"]
    H = cfg.get("n_head") or cfg["num_attention_heads"]
    vals = dict(arch=2 if llama else 1, activation=ACT.get(cfg.get("activation_function", cfg.get("hidden_act")), 1),
                norm=2 if llama else 1, pos=2 if llama else 1, vocab_size=cfg["vocab_size"],
                n_positions=cfg.get("n_positions") or cfg["max_position_embeddings"], n_embd=D,
                n_layer=cfg.get("n_layer") or cfg["num_hidden_layers"], n_head=H,
                n_kv_head=cfg.get("num_key_value_heads", H), d_head=cfg.get("head_dim", D // H),
                d_ff=cfg.get("n_inner") or cfg.get("intermediate_size") or 4 * D,
                norm_eps=cfg.get("layer_norm_epsilon", cfg.get("rms_norm_eps", 1e-5)),
                rope_theta=cfg.get("rope_theta", 0.0), bos_id=cfg.get("bos_token_id", -1) or -1,
                eos_id=cfg.get("eos_token_id", -1) or -1, tied_head=int(cfg.get("tie_word_embeddings", True)),
                qkv_bias=0, rope_scaling=0, rope_factor=0.0)
    return P.CONFIG_STRUCT.pack(*[vals[k] for k in P.CONFIG_FIELDS]), vals


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="models/holmes-gpt")
    ap.add_argument("--hex", action="store_true")
    ap.add_argument("client", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.client[1:] if a.client and a.client[0] == "--" else a.client
    if not cmd:
        ap.error("no client command")
    child = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)

    def show(tag, data):
        if a.hex:
            print(f"  {tag} {data[:48].hex(' ')}{' ...' if len(data) > 48 else ''} ({len(data)} bytes)")

    def call(op, body=b""):
        frame = struct.pack("<II", op, len(body)) + body
        show(">", frame)
        child.stdin.write(frame)
        hdr = child.stdout.read(8)
        status, n = struct.unpack("<II", hdr)
        data = child.stdout.read(n) if n else b""
        show("<", hdr + data)
        if status:
            raise SystemExit(f"op {op}: error status {status}: {data.decode(errors='replace')}")
        return data

    r = call(P.HELLO, struct.pack("<3I", P.MAGIC, P.PROTOCOL_VERSION, P.ABI_VERSION))
    magic, version, feats = struct.unpack_from("<3I", r)
    n = struct.unpack_from("<I", r, 12)[0]
    print(f"hello: version {version}, features {feats}, name {r[16:16 + n].decode()!r}")
    call(P.PROBE)
    print("probe: ok")
    r = call(P.INFO, struct.pack("<i", 1))
    dtype, threads, n = struct.unpack_from("<IiI", r)
    print(f"info: dtype {dtype}, threads {threads}, library {r[12:12 + n].decode()!r}")
    path = os.path.abspath(a.model).encode()
    block, vals = config_block(json.load(open(os.path.join(a.model, "config.json"))))
    V, npos = struct.unpack("<ii", call(P.MODEL_LOAD, struct.pack("<iI", 1, len(path)) + path + block))
    print(f"model_load: vocab {V}, {npos} positions")
    (cid,) = struct.unpack("<I", call(P.CACHE_CREATE, struct.pack("<ii", 1, 16)))
    print(f"cache_create: id {cid}")
    toks = [10, 20, 30, 40]

    def forward(cid, toks, start, Tk, last=1):
        body = struct.pack("<I5i", cid, 1, len(toks), Tk, last, 0)
        body += np.asarray(toks, "<i4").tobytes() + np.arange(start, start + len(toks), dtype="<i4").tobytes()
        r = call(P.FORWARD, body)
        rows, v, length = struct.unpack_from("<3i", r)
        return np.frombuffer(r, "<f4", rows * v, 12).reshape(rows, v), length

    _, length = forward(cid, toks[:3], 0, 3)
    print(f"forward (cached, 3 tokens): cache length {length}")
    cached, length = forward(cid, toks[3:], 3, 4)
    print(f"forward (cached, 1 token): cache length {length}")
    print(f"cache_length: {struct.unpack('<i', call(P.CACHE_LENGTH, struct.pack('<I', cid)))[0]}")
    print(f"cache_bytes: {struct.unpack('<Q', call(P.CACHE_BYTES, struct.pack('<I', cid)))[0]}")
    full, length = forward(0, toks, 0, 4)
    print(f"forward (uncached, 4 tokens): length field {length}; "
          f"max |cached - uncached| at the last position {np.abs(cached[-1] - full[-1]).max():.3g}")
    child.stdin.close()
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
