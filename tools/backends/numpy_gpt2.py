#!/usr/bin/env python3
"""A GPT-2 protocol client in numpy, written from docs/protocol.md alone.

    genfence run --backend "exec:.venv/bin/python tools/backends/numpy_gpt2.py"

It uses neither genfence's helper (gfproto.py) nor torch: only struct, json
and numpy, to check that the document is enough to write a client from
scratch. float32 throughout (numpy's BLAS matmuls), so it is also a third
numerical opinion beside ref and transformers. GPT-2 only, no sampler.
"""
import json
import math
import os
import struct
import sys

import numpy as np

MAGIC, VERSION = 0x50434647, 1
E_INVALID_ARG, E_UNSUPPORTED, E_CONTEXT_LIMIT, E_BACKEND = 1, 5, 7, 9


class Fail(Exception):
    def __init__(self, status, msg):
        super().__init__(msg)
        self.status = status


def load(path):
    """model.safetensors -> {name: float32 array} (names without 'transformer.')."""
    with open(os.path.join(path, "model.safetensors"), "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data)
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            raise Fail(E_UNSUPPORTED, f"{name}: dtype {t['dtype']}, this client reads F32 only")
        a, b = t["data_offsets"]
        out[name.removeprefix("transformer.")] = np.frombuffer(data, "<f4", (b - a) // 4, 8 + n + a).reshape(t["shape"])
    return out


def layernorm(x, w, b, eps):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w + b


def gelu(x, act):
    if act == 2:
        erf = np.vectorize(math.erf, otypes=[np.float32])
        return (0.5 * x * (1 + erf(x / math.sqrt(2)))).astype(np.float32)
    if act == 3:
        return np.maximum(x, 0)
    return (0.5 * x * (1 + np.tanh(np.float32(math.sqrt(2 / math.pi)) * (x + np.float32(0.044715) * x ** 3)))).astype(np.float32)


class Model:
    def __init__(self, path, cfg):
        if cfg["arch"] != 1:
            raise Fail(E_UNSUPPORTED, f"numpy_gpt2 runs GPT-2 only (arch {cfg['arch']})")
        self.c, self.w = cfg, load(path)
        self.head = self.w.get("lm_head.weight", self.w["wte.weight"])  # (V, D)

    def forward(self, cache, tokens, positions, mask, last):
        c, w = self.c, self.w
        B, T = tokens.shape
        H, dh, D = c["n_head"], c["d_head"], c["n_embd"]
        L0 = cache["length"] if cache else 0
        Tk = L0 + T
        x = w["wte.weight"][tokens] + w["wpe.weight"][positions]               # (B, T, D)
        # visible[b, t, j]: causal offset by L0, AND the key mask, always the own key
        j = np.arange(Tk)[None, None, :]
        q = (L0 + np.arange(T))[None, :, None]
        vis = (j <= q) & ((mask[:, None, :] if mask is not None else True) | (j == q))
        for layer in range(c["n_layer"]):
            p = f"h.{layer}."
            h = layernorm(x, w[p + "ln_1.weight"], w[p + "ln_1.bias"], c["norm_eps"])
            qkv = h @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]   # (B, T, 3D)
            qh, kh, vh = (qkv[..., i * D:(i + 1) * D].reshape(B, T, H, dh).transpose(0, 2, 1, 3) for i in range(3))
            if cache:
                cache["k"][layer][:, :, L0:Tk] = kh
                cache["v"][layer][:, :, L0:Tk] = vh
                K, V = cache["k"][layer][:, :, :Tk], cache["v"][layer][:, :, :Tk]
            else:
                K, V = kh, vh
            s = qh @ K.transpose(0, 1, 3, 2) / np.float32(math.sqrt(dh))     # (B, H, T, Tk)
            s = np.where(vis[:, None], s, -np.inf)
            s = np.exp(s - s.max(-1, keepdims=True))
            a = (s / s.sum(-1, keepdims=True)) @ V                             # (B, H, T, dh)
            x = x + a.transpose(0, 2, 1, 3).reshape(B, T, D) @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
            h = layernorm(x, w[p + "ln_2.weight"], w[p + "ln_2.bias"], c["norm_eps"])
            f = gelu(h @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"], c["activation"])
            x = x + f @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
        if cache:
            cache["length"] = Tk
        if last:
            x = x[:, -1:]
        return layernorm(x, w["ln_f.weight"], w["ln_f.bias"], c["norm_eps"]) @ self.head.T


def string(s):
    b = s.encode()
    return struct.pack("<I", len(b)) + b


def handle(state, op, body):
    if op == 1:   # hello
        return struct.pack("<3I", MAGIC, VERSION, 0) + string("numpy_gpt2") + string("GPT-2 in numpy float32")
    if op == 2:   # probe
        return b""
    if op == 3:   # info
        return struct.pack("<Ii", 1, 1) + string(f"numpy {np.__version__}") + string("float32 BLAS matmuls")
    if op == 4:   # model_load
        threads, n = struct.unpack_from("<iI", body)
        f = struct.unpack_from("<4I8i2f4iIf", body, 8 + n)
        keys = ("arch activation norm pos vocab_size n_positions n_embd n_layer n_head n_kv_head d_head d_ff "
                "norm_eps rope_theta bos_id eos_id tied_head qkv_bias rope_scaling rope_factor").split()
        cfg = dict(zip(keys, f))
        state["model"] = Model(body[8:8 + n].decode(), cfg)
        return struct.pack("<ii", cfg["vocab_size"], cfg["n_positions"])
    m = state["model"]
    if op == 5:   # cache_create
        B, S = struct.unpack_from("<ii", body)
        c = m.c
        shape = (B, c["n_head"], S, c["d_head"])
        state["next"] += 1
        state["caches"][state["next"]] = dict(B=B, S=S, length=0, k=[np.zeros(shape, np.float32) for _ in range(c["n_layer"])],
                                              v=[np.zeros(shape, np.float32) for _ in range(c["n_layer"])])
        return struct.pack("<I", state["next"])
    if op in (6, 7, 8, 9):
        (cid,) = struct.unpack_from("<I", body)
        if cid not in state["caches"]:
            raise Fail(E_INVALID_ARG, f"no cache {cid}")
        cache = state["caches"][cid]
        if op == 6:
            cache["length"] = 0
            return b""
        if op == 7:
            del state["caches"][cid]
            return b""
        if op == 8:
            return struct.pack("<i", cache["length"])
        return struct.pack("<Q", sum(a.nbytes for a in cache["k"] + cache["v"]))
    if op == 10:  # forward
        cid, B, T, Tk, last, has_mask = struct.unpack_from("<I5i", body)
        cache = state["caches"].get(cid) if cid else None
        if cid and cache is None:
            raise Fail(E_INVALID_ARG, f"no cache {cid}")
        if cache and cache["B"] != B:
            raise Fail(E_INVALID_ARG, f"batch of {B} rows, the cache has {cache['B']}")
        if cache and cache["length"] + T > cache["S"]:
            raise Fail(E_CONTEXT_LIMIT, f"cache holds {cache['length']} of {cache['S']}; {T} more do not fit")
        if not cache and T > m.c["n_positions"]:
            raise Fail(E_CONTEXT_LIMIT, f"{T} positions exceed n_positions")
        tokens = np.frombuffer(body, "<i4", B * T, 24).reshape(B, T)
        positions = np.frombuffer(body, "<i4", B * T, 24 + 4 * B * T).reshape(B, T)
        mask = np.frombuffer(body, np.uint8, B * Tk, 24 + 8 * B * T).reshape(B, Tk).astype(bool) if has_mask else None
        if tokens.min() < 0 or tokens.max() >= m.c["vocab_size"] or positions.min() < 0 or positions.max() >= m.c["n_positions"]:
            raise Fail(E_INVALID_ARG, "token or position out of range")
        logits = np.ascontiguousarray(m.forward(cache, tokens, positions, mask, last), "<f4")
        rows = B if last else B * T
        return struct.pack("<3i", rows, m.c["vocab_size"], cache["length"] if cache else -1) + logits.tobytes()
    raise Fail(E_UNSUPPORTED, f"op {op} not implemented")


def main():
    rd, wr = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr          # nothing but replies on the real stdout
    state = {"model": None, "caches": {}, "next": 0}
    while True:
        hdr = rd.read(8)
        if len(hdr) < 8:
            return 0
        op, n = struct.unpack("<II", hdr)
        body = rd.read(n) if n else b""
        try:
            status, out = 0, handle(state, op, body)
        except Fail as e:
            status, out = e.status, str(e).encode()
        except Exception as e:
            status, out = E_BACKEND, f"{type(e).__name__}: {e}".encode()
        wr.write(struct.pack("<II", status, len(out)) + out)
        wr.flush()


if __name__ == "__main__":
    sys.exit(main())
