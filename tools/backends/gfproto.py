"""The genfence backend protocol (docs/protocol.md), client side, for Python engines.

An engine subclasses Backend, overrides what it implements and calls serve():

    import numpy as np, gfproto

    class Mine(gfproto.Backend):
        name = "mine"
        def model_load(self, path, threads, config): ...load path...
        def cache_create(self, batch, max_len): return handle   # any object
        def forward(self, cache, tokens, positions, key_mask, last_only):
            return logits                                        # (B, T or 1, V) float32

    gfproto.serve(Mine())

serve() reads requests from stdin and answers on stdout until stdin ends. It
does the framing, the byte layouts, the cache ids, the checks that need no
model (shapes, lengths), the contract's cache bookkeeping (batch size,
max_len, length advancing by T once per forward, reset), and turns exceptions
into error replies: a gfproto.Error keeps its status, anything else is
GF_E_BACKEND with "TypeName: message" (and the traceback on stderr). Stray
prints are safe: fd 1 is moved to a private descriptor and stdout goes to
stderr.

Needs only numpy.
"""
import os
import struct
import sys
import traceback

import numpy as np

PROTOCOL_VERSION = 1
MAGIC = 0x50434647  # b"GFCP"
ABI_VERSION = 2
FEATURE_SAMPLE = 1
FEATURE_TRACE = 2  # forward_trace (12): the trace slot
FEATURE_INVARIANCE = 4  # info's reply ends with str invariance (docs/backends.md)
FEATURE_PROBES = 8  # then the mechanism probes it runs (Backend.probes)
FEATURE_SPECULATE = 16  # speculate (13): the speculate slot (docs/speculative.md)
FEATURE_LOGPROBS = 64  # logprobs (14): the logprobs slot, plain sampler params (docs/sampler.md, "Logprobs")

# ops
HELLO, PROBE, INFO, MODEL_LOAD = 1, 2, 3, 4
CACHE_CREATE, CACHE_RESET, CACHE_FREE, CACHE_LENGTH, CACHE_BYTES = 5, 6, 7, 8, 9
FORWARD, SAMPLE, FORWARD_TRACE, SPECULATE, LOGPROBS = 10, 11, 12, 13, 14
# the logprobs modes (gf_logprob_mode, include/genfence/sampler.h)
LP_RAW, LP_RAW_LOGITS, LP_SCALED, LP_PROCESSED, LP_PROCESSED_LOGITS = 0, 1, 2, 3, 4

# the speculate rules (gf_sampler_profile, include/genfence/sampler.h)
RULE_SEED, RULE_HF, RULE_LLAMACPP, RULE_VLLM = 0, 1, 2, 3

# gf_status codes (include/genfence/status.h)
OK, E_INVALID_ARG, E_NOMEM, E_IO, E_FORMAT, E_UNSUPPORTED = 0, 1, 2, 3, 4, 5
E_UNAVAILABLE, E_CONTEXT_LIMIT, E_ABI, E_BACKEND, E_NOT_FOUND, E_INTERNAL = 6, 7, 8, 9, 10, 11

# gf_compute_dtype
DTYPES = {"f32": 1, "f16": 2, "bf16": 3, "f64": 4}

CONFIG_FIELDS = ("arch", "activation", "norm", "pos", "vocab_size", "n_positions", "n_embd",
                 "n_layer", "n_head", "n_kv_head", "d_head", "d_ff", "norm_eps", "rope_theta",
                 "bos_id", "eos_id", "tied_head", "qkv_bias", "rope_scaling", "rope_factor")
CONFIG_STRUCT = struct.Struct("<4I8i2f4iIf")  # 80 bytes
ARCH_GPT2, ARCH_LLAMA = 1, 2


class Error(Exception):
    """An error reply with a gf_status code and the engine's message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def invalid_arg(msg): return Error(E_INVALID_ARG, msg)
def context_limit(msg): return Error(E_CONTEXT_LIMIT, msg)
def unsupported(msg): return Error(E_UNSUPPORTED, msg)
def unavailable(msg): return Error(E_UNAVAILABLE, msg)


class Backend:
    """Override what the engine implements; the defaults refuse politely."""
    name = "python"
    description = ""
    has_sample = False
    has_trace = False  # True: forward_trace below is implemented (hello feature bit 1)
    has_speculate = False  # True: speculate below is implemented (hello feature bit 4)
    has_logprobs = False  # True: logprobs below is implemented (hello feature bit 6)
    # the invariance it declares, e.g. "all=bitwise,batch=gated" (hello feature bit 2; None: not said)
    invariance = None
    probes = None  # the mechanism probes run on its own kernels ("all", "all,-llama"; docs/cases.md): feature bit 3

    def probe(self):
        """Raise unavailable(reason) if the engine cannot run here."""

    def info(self, threads):
        """(dtype name, threads used, library, detail)."""
        return ("f32", 1, "", "")

    def model_load(self, path, threads, config):
        """Load the model directory `path`; config is genfence's view of it
        (a dict of CONFIG_FIELDS). Return (vocab_size, n_positions) loaded."""
        raise unsupported("model_load is not implemented")

    def cache_create(self, batch, max_len):
        """A new, empty KV cache for batch rows of up to max_len positions: any object."""
        raise unsupported("caches are not implemented")

    def cache_reset(self, cache):
        """Drop every position of cache (serve() then counts its length as 0)."""

    def cache_free(self, cache):
        pass

    def cache_bytes(self, cache):
        return 0

    def forward(self, cache, tokens, positions, key_mask, last_only):
        """tokens, positions: int32 (B, T); key_mask: bool (B, Tk) or None
        (Tk = cache length + T, or T uncached); cache: your object or None.
        Return float32 logits (B, T, V), or (B, 1, V) when last_only.
        Append the T new keys/values to cache: serve() advances its length."""
        raise unsupported("forward is not implemented")

    def forward_trace(self, cache, tokens, positions, key_mask, last_only):
        """forward, and the hidden states at the trace points (docs/backends.md,
        "The trace slot"): return (logits, trace, given) with trace float32
        (4 L + 2, B, T, D) and given a sequence of 4 L + 2 bools (False: the
        point cannot be given; its rows are ignored)."""
        raise unsupported("forward_trace is not implemented")

    def sample(self, logits, params, u):
        """logits float32 (B, V), u float64 (B, V), params a dict
        (temperature, use_top_k, top_k, use_top_p, top_p, seed): int ids (B)."""
        raise unsupported("sample is not implemented")

    def speculate(self, K, V, rule, params, target_logits, draft, draft_probs, u_accept, u_draw):
        """One round of the rejection sampler (docs/speculative.md): rule a
        RULE_* (0 seed, 1 hf, 2 llamacpp, 3 vllm), params as for sample,
        target_logits float32 (K + 1, V), draft int32 (K), draft_probs float64
        (K, V) or None (a deterministic draft: one-hot), u_accept float64 (K),
        u_draw float64 (K + 1). Return (accepted, next): the draft tokens
        accepted (0 .. K) and the token after them."""
        raise unsupported("speculate is not implemented")

    def logprobs(self, logits, params, mode):
        """What the client reports as log-probabilities (docs/sampler.md,
        "Logprobs"): logits float32 (B, V), params as for sample (plain:
        temperature, top_k, top_p; never greedy for modes 2-4), mode an LP_*.
        Return float64 (B, V): raw the log-softmax of the logits, raw_logits
        them, scaled the log-softmax of logits / T, processed the log-softmax
        of the filtered z (-inf where dropped), processed_logits that z."""
        raise unsupported("logprobs is not implemented")


class _Cache:
    __slots__ = ("obj", "batch", "max_len", "length")

    def __init__(self, obj, batch, max_len):
        self.obj, self.batch, self.max_len, self.length = obj, batch, max_len, 0


def _str(b):
    return struct.pack("<I", len(b)) + b


class _Server:
    def __init__(self, backend, rfd, wfd):
        self.b, self.rfd, self.wfd = backend, rfd, wfd
        self.caches, self.next_id = {}, 1
        self.model = None  # (vocab_size, n_positions) once loaded

    def read_exact(self, n):
        parts, left = [], n
        while left:
            chunk = os.read(self.rfd, min(left, 1 << 20))
            if not chunk:
                return None
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)

    def write(self, status, body):
        data = struct.pack("<II", status, len(body)) + body
        view = memoryview(data)
        while view:
            view = view[os.write(self.wfd, view):]

    def cache(self, body):
        (cid,) = struct.unpack_from("<I", body)
        c = self.caches.get(cid)
        if c is None:
            raise invalid_arg(f"no cache with id {cid}")
        return c

    def need_model(self):
        if self.model is None:
            raise invalid_arg("no model loaded")

    def handle(self, op, body):
        b = self.b
        if op == HELLO:
            magic, version, abi = struct.unpack_from("<3I", body)
            if magic != MAGIC:
                raise Error(E_ABI, f"hello magic 0x{magic:08x} is not genfence's")
            feats = (FEATURE_SAMPLE if b.has_sample else 0) | (FEATURE_TRACE if b.has_trace else 0)
            feats |= FEATURE_INVARIANCE if b.invariance is not None else 0
            feats |= FEATURE_PROBES if b.probes is not None else 0
            feats |= FEATURE_SPECULATE if b.has_speculate else 0
            feats |= FEATURE_LOGPROBS if b.has_logprobs else 0
            return (struct.pack("<3I", MAGIC, PROTOCOL_VERSION, feats) +
                    _str(b.name.encode()) + _str(b.description.encode()))
        if op == PROBE:
            b.probe()
            return b""
        if op == INFO:
            (threads,) = struct.unpack_from("<i", body)
            dtype, used, lib, detail = b.info(threads)
            reply = struct.pack("<Ii", DTYPES[dtype], used) + _str(lib.encode()) + _str(detail.encode())
            reply += _str(b.invariance.encode()) if b.invariance is not None else b""
            return reply + (_str(b.probes.encode()) if b.probes is not None else b"")
        if op == MODEL_LOAD:
            if self.model is not None:
                raise invalid_arg("a model is already loaded (one model per process)")
            threads, n = struct.unpack_from("<iI", body)
            path = body[8:8 + n].decode()
            cfg = dict(zip(CONFIG_FIELDS, CONFIG_STRUCT.unpack_from(body, 8 + n)))
            self.model = tuple(b.model_load(path, threads, cfg))
            return struct.pack("<ii", *self.model)
        if op == CACHE_CREATE:
            self.need_model()
            batch, max_len = struct.unpack_from("<ii", body)
            if batch < 1 or max_len < 1 or max_len > self.model[1]:
                raise invalid_arg(f"cache batch {batch}, max_len {max_len} (must be 1..{self.model[1]})")
            cid, self.next_id = self.next_id, self.next_id + 1
            self.caches[cid] = _Cache(b.cache_create(batch, max_len), batch, max_len)
            return struct.pack("<I", cid)
        if op == CACHE_RESET:
            c = self.cache(body)
            b.cache_reset(c.obj)
            c.length = 0
            return b""
        if op == CACHE_FREE:
            c = self.cache(body)
            b.cache_free(c.obj)
            del self.caches[struct.unpack_from("<I", body)[0]]
            return b""
        if op == CACHE_LENGTH:
            return struct.pack("<i", self.cache(body).length)
        if op == CACHE_BYTES:
            return struct.pack("<Q", int(b.cache_bytes(self.cache(body).obj)))
        if op == FORWARD:
            return self.forward(body)
        if op == FORWARD_TRACE:
            if not b.has_trace:
                raise unsupported("this client has no trace")
            return self.forward(body, trace=True)
        if op == SAMPLE:
            if not b.has_sample:
                raise unsupported("this client has no sampler")
            B, V, temp, use_k, k, use_p, _pad, top_p, seed = struct.unpack_from("<iidiiiidQ", body)
            n = B * V
            logits = np.frombuffer(body, "<f4", n, 48).reshape(B, V)
            u = np.frombuffer(body, "<f8", n, 48 + 4 * n).reshape(B, V)
            params = dict(temperature=temp, use_top_k=use_k, top_k=k, use_top_p=use_p, top_p=top_p, seed=seed)
            ids = np.asarray(b.sample(logits, params, u), dtype="<i4").reshape(B)
            return ids.tobytes()
        if op == SPECULATE:
            if not b.has_speculate:
                raise unsupported("this client has no speculate")
            return self.speculate(body)
        if op == LOGPROBS:
            if not b.has_logprobs:
                raise unsupported("this client has no logprobs")
            B, V, mode, _p0, temp, use_k, k, use_p, _p1, top_p = struct.unpack_from("<iiiidiiiid", body)
            if B < 1 or V < 1 or len(body) != 48 + 4 * B * V:
                raise invalid_arg(f"logprobs: B {B}, V {V} in a {len(body)}-byte request")
            logits = np.frombuffer(body, "<f4", B * V, 48).reshape(B, V)
            params = dict(temperature=temp, use_top_k=use_k, top_k=k, use_top_p=use_p, top_p=top_p, seed=0)
            out = np.asarray(b.logprobs(logits, params, mode), dtype="<f8").reshape(B, V)
            return out.tobytes()
        raise unsupported(f"unknown op {op}")

    def speculate(self, body):
        K, V, rule, has_q, temp, use_k, k, use_p, _pad, top_p, seed = struct.unpack_from("<iiiidiiiidQ", body)
        if K < 1 or V < 1:
            raise invalid_arg(f"speculate: K {K} and V {V} must be >= 1")
        off = 56
        need = off + 4 * (K + 1) * V + 4 * K + (8 * K * V if has_q else 0) + 8 * K + 8 * (K + 1)
        if len(body) != need:
            raise invalid_arg(f"speculate: a {len(body)}-byte request, K {K} and V {V} need {need}")
        target = np.frombuffer(body, "<f4", (K + 1) * V, off).reshape(K + 1, V)
        off += 4 * (K + 1) * V
        draft = np.frombuffer(body, "<i4", K, off)
        off += 4 * K
        q = None
        if has_q:
            q = np.frombuffer(body, "<f8", K * V, off).reshape(K, V)
            off += 8 * K * V
        u_accept = np.frombuffer(body, "<f8", K, off)
        u_draw = np.frombuffer(body, "<f8", K + 1, off + 8 * K)
        params = dict(temperature=temp, use_top_k=use_k, top_k=k, use_top_p=use_p, top_p=top_p, seed=seed)
        acc, nxt = self.b.speculate(K, V, rule, params, target, draft, q, u_accept, u_draw)
        return struct.pack("<ii", int(acc), int(nxt))

    def forward(self, body, trace=False):
        self.need_model()
        cid, B, T, Tk, mode, has_mask = struct.unpack_from("<I5i", body)
        c = None
        if cid:
            c = self.cache(body)
            if B != c.batch:
                raise invalid_arg(f"batch has {B} rows, cache has {c.batch}")
            if c.length + T > c.max_len:
                raise context_limit(f"cache holds {c.length} of {c.max_len} positions; {T} more do not fit")
            if Tk != c.length + T:
                raise invalid_arg(f"key mask of {Tk} keys, the cache holds {c.length} + {T}")
        elif T > self.model[1]:
            raise context_limit(f"{T} positions exceed n_positions {self.model[1]}")
        n = B * T
        tokens = np.frombuffer(body, "<i4", n, 24).reshape(B, T)
        positions = np.frombuffer(body, "<i4", n, 24 + 4 * n).reshape(B, T)
        mask = np.frombuffer(body, np.uint8, B * Tk, 24 + 8 * n).reshape(B, Tk) != 0 if has_mask else None
        V, npos = self.model
        if tokens.min() < 0 or tokens.max() >= V:
            raise invalid_arg(f"token outside [0, {V})")
        if positions.min() < 0 or positions.max() >= npos:
            raise invalid_arg(f"position outside [0, {npos})")
        if trace:
            logits, tr, given = self.b.forward_trace(c.obj if c else None, tokens, positions, mask, mode == 1)
            tr = np.ascontiguousarray(tr, dtype="<f4")
            if tr.ndim != 4 or tr.shape[1:3] != (B, T) or len(given) != tr.shape[0]:
                raise Error(E_INTERNAL, f"engine returned a {tr.shape} trace with {len(given)} given flags, "
                                        f"expected (4 L + 2, {B}, {T}, D)")
            tail = (struct.pack("<2i", tr.shape[0], tr.shape[3]) + bytes(1 if g else 0 for g in given) +
                    tr.tobytes())
        else:
            logits = self.b.forward(c.obj if c else None, tokens, positions, mask, mode == 1)
            tail = b""
        logits = np.ascontiguousarray(logits, dtype="<f4")
        rows = B if mode == 1 else n
        if logits.size != rows * V:
            raise Error(E_INTERNAL, f"engine returned {logits.shape} logits, expected ({rows} rows, {V})")
        if c:
            c.length += T
        return struct.pack("<3i", rows, V, c.length if c else -1) + logits.tobytes() + tail

    def run(self):
        while True:
            hdr = self.read_exact(8)
            if hdr is None:
                return 0
            op, n = struct.unpack("<II", hdr)
            body = self.read_exact(n) if n else b""
            if body is None:
                return 0
            try:
                out = self.handle(op, body)
                self.write(OK, out)
            except Error as e:
                self.write(e.status, str(e).encode()[:60000])
            except Exception as e:  # the engine's own failure: its message, traceback on stderr
                traceback.print_exc(file=sys.stderr)
                sys.stderr.flush()
                self.write(E_BACKEND, f"{type(e).__name__}: {e}".encode()[:60000])


def serve(backend):
    """Answer genfence's requests on stdin/stdout until stdin ends; returns 0."""
    rfd = os.dup(0)
    wfd = os.dup(1)
    os.dup2(2, 1)  # stray prints (the engine's, a library's) go to stderr, not into the protocol
    sys.stdout = sys.stderr
    return _Server(backend, rfd, wfd).run()
