#!/usr/bin/env python3
"""A faulty genfence protocol client, for tests/cli/exec_faults.sh.

    faulty_client.py FAULT CLIENT [ARGS...]

Runs CLIENT (a working client, e.g. build/tools/echo_ref) and relays every
request and reply between it and genfence unchanged, except for one fault:

  crash    at the first cached forward: dies of SIGSEGV instead of replying
  hang     at the first cached forward: never replies
  garbage  at the first cached forward: writes 64 random bytes instead of the reply
  short    at the first cached forward: the logits reply one float short (wrong length)
  shape    at the first cached forward: the reply says one row fewer (wrong shape)
  length   every cached forward reports the cache one position longer than it is
  error    at the first cached forward: an error reply with an engine message
  version  hello: claims protocol version 99
  banner   prints a line on stdout before any reply (a chatty engine)
  nomask   drops the key mask from every forward request (the client never sees padding)
  kvzero   every forward_trace reply with keys and values (hello bit 5): block 0's key at cache
           position 0 of row 0 zeroed (the trace lies, the logits are right)
  kvshape  every forward_trace reply with keys and values: their L one more than the model's
  lpshort  every logprobs (14) reply one double short (wrong length)
  lpshift  every logprobs (14) reply's row 0, token 0 moved by 1e-3 (a value the slot check must catch)

Uncached forwards, cache calls and everything else pass through, so only
the cases that run a cached forward should fail (version and banner: every
case that loads a model; nomask: the cases with padding).
"""
import os
import random
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools", "backends"))
import gfproto  # noqa: E402


def read_exact(f, n):
    data = b""
    while len(data) < n:
        chunk = f.read(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def main():
    fault, cmd = sys.argv[1], sys.argv[2:]
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    inp = os.fdopen(os.dup(0), "rb", buffering=0)
    child = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    if fault == "banner":
        out.write(b"Loading model weights... done\n")
    fired = False
    while True:
        hdr = read_exact(inp, 8)
        if hdr is None:
            child.stdin.close()
            child.wait()
            return 0
        op, n = struct.unpack("<II", hdr)
        body = read_exact(inp, n) if n else b""
        if fault == "nomask" and op in (gfproto.FORWARD, gfproto.FORWARD_TRACE):
            cid, B, T, Tk, mode, has_mask = struct.unpack_from("<I5i", body)
            if has_mask:
                body = struct.pack("<I5i", cid, B, T, Tk, mode, 0) + body[24:len(body) - B * Tk]
                hdr = struct.pack("<II", op, len(body))
        child.stdin.write(hdr + body)
        rhdr = read_exact(child.stdout, 8)
        status, m = struct.unpack("<II", rhdr)
        rbody = read_exact(child.stdout, m) if m else b""
        cached_forward = op in (gfproto.FORWARD, gfproto.FORWARD_TRACE) and struct.unpack_from("<I", body)[0] != 0
        if fault == "version" and op == gfproto.HELLO and status == 0:
            rbody = rbody[:4] + struct.pack("<I", 99) + rbody[8:]
        elif fault in ("kvzero", "kvshape") and op == gfproto.FORWARD_TRACE and status == 0:
            rbody = bytearray(rbody)
            cid, B, T, Tk, mode, has_mask = struct.unpack_from("<I5i", body)
            rows, V, _ = struct.unpack_from("<3i", rbody)
            off = 12 + 4 * rows * V
            P, D = struct.unpack_from("<2i", rbody, off)
            off += 8 + P + 4 * P * B * T * D
            if off + 12 <= len(rbody):  # the keys and values follow (the client set hello bit 5)
                L, KVd, Tk2 = struct.unpack_from("<3i", rbody, off)
                if fault == "kvshape":
                    struct.pack_into("<i", rbody, off, L + 1)
                else:  # (L, 2, B, Tk, KVd): block 0, keys, row 0, position 0
                    at = off + 12 + L
                    rbody[at:at + 4 * KVd] = bytes(4 * KVd)
            rbody = bytes(rbody)
        elif fault == "lpshort" and op == gfproto.LOGPROBS and status == 0:
            rbody = rbody[:-8]
        elif fault == "lpshift" and op == gfproto.LOGPROBS and status == 0:
            v = struct.unpack_from("<d", rbody)[0]
            rbody = struct.pack("<d", v + 1e-3) + rbody[8:]
        elif fault == "length" and cached_forward and status == 0:
            rows, V, length = struct.unpack_from("<3i", rbody)
            rbody = struct.pack("<3i", rows, V, length + 1) + rbody[12:]
        elif cached_forward and not fired and status == 0 and fault not in ("version", "banner", "length", "nomask",
                                                                             "kvzero", "kvshape", "lpshort",
                                                                             "lpshift"):
            fired = True
            if fault == "crash":
                os.kill(os.getpid(), signal.SIGSEGV)
            if fault == "hang":
                while True:
                    time.sleep(3600)
            if fault == "garbage":
                out.write(random.Random(7).randbytes(64))
                continue
            if fault == "short":
                rbody = rbody[:-4]
            if fault == "shape":
                rows, V, length = struct.unpack_from("<3i", rbody)
                rbody = struct.pack("<3i", rows - 1, V, length) + rbody[12:]
            if fault == "error":
                status = gfproto.E_BACKEND
                rbody = b"CUDA error: out of memory (injected by faulty_client.py)"
        out.write(struct.pack("<II", status, len(rbody)) + rbody)


if __name__ == "__main__":
    sys.exit(main())
