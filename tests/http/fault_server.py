#!/usr/bin/env python3
"""An OpenAI-compatible completions server for tests, with faults on request.

    fault_server.py --model DIR --port-file FILE [--lifetime S]

Serves models/holmes-gpt (GPT-2) through tools/backends/numpy_gpt2.py's
forward (numpy, an opinion independent of ref) on 127.0.0.1, a free port
(written to FILE), in llama.cpp's llama-server layout: POST /v1/completions
takes the prompt as token ids and answers choices[0].logprobs.content with
ids; GET /v1/models; POST /detokenize ({"tokens"} -> {"content"}); POST
/v1/chat/completions (messages, logprobs: true, top_logprobs: k) with a
template that passes the messages' text through. This server has no BPE
encoder: a message's text is turned back into the ids it was detokenized
from (a text it never detokenized is refused, HTTP 400). Python's standard
library and numpy only.

Every path may start with /fault/NAME (the http backend's URL is then
http://127.0.0.1:PORT/fault/NAME): that prefix's replies carry the fault,
every other prefix (or none) is served correctly, so one server serves a
correct backend and every faulty one side by side. FAULTS below lists them.

Nothing is left listening: the server exits on SIGTERM / SIGINT, when its
parent process is gone, and after --lifetime seconds (default 900).
"""
import argparse
import json
import math
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "backends"))
import numpy_gpt2  # noqa: E402

FAULTS = {
    "slow": "every completion 30 s late (GF_TIME_SCALE scales it)",
    "hang": "reads the request and never answers (the connection stays open)",
    "truncated": "the JSON reply cut in half (Content-Length says the cut length)",
    "http500": "HTTP 500 to every completion",
    "http429": "HTTP 429 with Retry-After: 1 to every completion",
    "http429once": "HTTP 429 with Retry-After: 1 to every other completion (a retry gets through)",
    "wronglogprobs": "the top-k log-probabilities rotated against their ids",
    "late": "the right tokens, the logprobs of one position earlier",
    "streamcut": "a streamed reply cut inside its last event",
    "afterdone": "a streamed reply with an event after data: [DONE]",
    "droplastbyte": "a streamed reply without the last byte of its text",
    "ignoreseed": "sampling ignores seed",
    "badfinish": "finish_reason 'stop' for a token that is not EOS",
    "tempered": "every log-probability that of logits / 1.5 (consistent, the same argmax: a flatter distribution)",
    "processed": "log-probabilities after the request's temperature (vLLM's processed_logprobs; raw at temperature 0)",
    "chattemplate": "chat: a template that puts the EOS token before the message (usage.prompt_tokens says n + 1)",
}


def byte_decoder():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


class Engine:
    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            hf = json.load(f)
        D, H = hf["n_embd"], hf["n_head"]
        self.cfg = dict(arch=1, n_head=H, d_head=D // H, n_embd=D, n_layer=hf["n_layer"],
                        norm_eps=hf.get("layer_norm_epsilon", 1e-5), activation=1)
        self.n_ctx = hf["n_positions"]
        self.eos = hf.get("eos_token_id", -1)
        self.model = numpy_gpt2.Model(model_dir, self.cfg)
        with open(os.path.join(model_dir, "tokenizer.json")) as f:
            vocab = json.load(f)["model"]["vocab"]
        dec = byte_decoder()
        self.text = {}
        for tok, i in vocab.items():
            self.text[i] = bytes(dec.get(ch, 63) for ch in tok)
        self.name = os.path.basename(os.path.normpath(model_dir))
        self.lock = threading.Lock()
        self.memo = {}
        self.detok = {}  # text -> the ids /detokenize made it from (the chat route's "tokenizer")

    def piece(self, i):
        """a token's bytes; b"" for a special token outside the BPE vocabulary (EOS)"""
        return self.text.get(i, b"")

    def logprobs(self, ids):
        """log-softmax of the next-token logits after ids, float64 (V); remembered
        (every backend of a test asks the same prompts: one forward each)."""
        key = tuple(ids)
        with self.lock:
            hit = self.memo.get(key)
            if hit is None:
                t = np.array([ids], dtype=np.int64)
                pos = np.arange(len(ids))[None, :]
                x = self.model.forward(None, t, pos, None, True)[0, -1].astype(np.float64)
                m = x.max()
                hit = x - (m + math.log(np.exp(x - m).sum()))
                if len(self.memo) > 20000:
                    self.memo.clear()
                self.memo[key] = hit
        return hit.copy()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    counter = {}
    counter_lock = threading.Lock()

    def log_message(self, fmt, *args):
        pass

    def split(self):
        p = self.path
        if p.startswith("/fault/"):
            rest = p[len("/fault/"):]
            name, _, tail = rest.partition("/")
            return name, "/" + tail
        return "", p

    def send(self, code, obj=None, raw=None, headers=(), length=None, ctype="application/json"):
        body = raw if raw is not None else json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def error(self, code, msg, typ="invalid_request_error", headers=()):
        self.send(code, {"error": {"code": code, "message": msg, "type": typ}}, headers=headers)

    def do_GET(self):
        fault, path = self.split()
        if path == "/v1/models":
            self.send(200, {"object": "list", "data": [{"id": ENGINE.name, "object": "model",
                                                         "owned_by": "genfence fault_server" + (f" [{fault}]" if fault else "")}]})
        else:
            self.error(404, f"no route {path}")

    def do_POST(self):
        fault, path = self.split()
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n)
        if fault and fault not in FAULTS:
            return self.error(404, f"unknown fault '{fault}' (faults: {', '.join(FAULTS)})")
        if path == "/detokenize":
            return self.detokenize(raw)
        chat = path == "/v1/chat/completions"
        if path != "/v1/completions" and not chat:
            return self.error(404, f"no route {path}")
        if fault == "hang":
            STOP.wait(3600)
            return
        if fault == "slow":
            time.sleep(30.0 * float(os.environ.get("GF_TIME_SCALE", "1")))
        if fault in ("http500",):
            return self.error(500, "internal server error (fault http500)", "server_error")
        if fault in ("http429", "http429once"):
            with Handler.counter_lock:
                c = Handler.counter[fault] = Handler.counter.get(fault, 0) + 1
            if fault == "http429" or c % 2 == 1:
                return self.error(429, "rate limited (fault %s)" % fault, "rate_limit_error", headers=[("Retry-After", "1")])
        try:
            req = json.loads(raw)
        except ValueError as e:
            return self.error(400, f"the request is not JSON: {e}")
        if chat:
            msgs = req.get("messages")
            if not isinstance(msgs, list) or not msgs or not all(isinstance(m, dict) for m in msgs):
                return self.error(400, "'messages' must be a non-empty list of messages")
            text = "".join(str(m.get("content", "")) for m in msgs)  # the pass-through template
            with ENGINE.lock:
                ids = ENGINE.detok.get(text)
            if ids is None:
                return self.error(400, "this test server tokenizes only texts it detokenized (POST /detokenize first)")
            req["prompt"] = ([ENGINE.eos] if fault == "chattemplate" else []) + list(ids)
            req["logprobs"] = int(req.get("top_logprobs") or 0) if req.get("logprobs") else 0
            if req.get("echo"):
                return self.error(400, "chat completions have no echo")
        prompt = req.get("prompt")
        if not isinstance(prompt, list) or not prompt or not all(isinstance(t, int) for t in prompt):
            return self.error(400, "this server takes the prompt as a non-empty list of token ids")
        V = len(ENGINE.text)
        if any(t < 0 or t >= ENGINE.model.head.shape[0] for t in prompt):
            return self.error(400, "a prompt token is outside the vocabulary")
        if req.get("echo"):
            return self.error(400, "Only no echo is supported")
        max_tokens = int(req.get("max_tokens", 16))
        k = int(req.get("logprobs") or 0)
        temp = float(req.get("temperature", 1.0))
        seed = req.get("seed")
        if len(prompt) + max(max_tokens, 1) > ENGINE.n_ctx:
            return self.error(400, f"the request exceeds the available context size ({len(prompt)} prompt tokens, "
                                   f"n_ctx {ENGINE.n_ctx})", "exceed_context_size_error")
        rng = np.random.default_rng(None if (fault == "ignoreseed" or seed is None) else int(seed))
        ids = list(prompt)
        steps, text, finish = [], b"", "length"
        for _ in range(max_tokens):
            lp = ENGINE.logprobs(ids)
            if temp <= 0:
                tok = int(np.argmax(lp))
            else:
                p = np.exp(lp / temp - (lp / temp).max())
                tok = int(rng.choice(len(p), p=p / p.sum()))
            if fault == "late" and len(ids) > 1:
                lp = ENGINE.logprobs(ids[:-1])  # the right token, the logprobs of one position earlier
            if fault == "processed" and temp > 0:
                x = lp / temp
                lp = x - (x.max() + math.log(np.exp(x - x.max()).sum()))
            if fault == "tempered":
                x = lp / 1.5
                lp = x - (x.max() + math.log(np.exp(x - x.max()).sum()))
            order = np.argsort(-lp, kind="stable")[:k]
            top = [(int(i), float(lp[i])) for i in order]
            if fault == "wronglogprobs" and len(top) > 1:
                vals = [v for _, v in top]
                top = [(i, v) for (i, _), v in zip(top, vals[1:] + vals[:1])]
            steps.append({"id": tok, "token": ENGINE.piece(tok).decode("utf-8", "replace"),
                          "bytes": list(ENGINE.piece(tok)), "logprob": float(lp[tok]),
                          "top_logprobs": [{"id": i, "token": ENGINE.piece(i).decode("utf-8", "replace"),
                                            "bytes": list(ENGINE.piece(i)), "logprob": v} for i, v in top]})
            ids.append(tok)
            text += ENGINE.piece(tok)
            if tok == ENGINE.eos:
                finish = "stop"
                break
        if fault == "badfinish":
            finish = "stop"
        s = text.decode("utf-8", "replace")
        if req.get("stream"):
            return self.stream(fault, s, finish, len(prompt), len(steps), chat)
        choice = {"index": 0, "logprobs": {"content": steps} if k else None, "finish_reason": finish}
        if chat:
            choice["message"] = {"role": "assistant", "content": s}
        else:
            choice["text"] = s
        body = {"id": "cmpl-fault", "object": "chat.completion" if chat else "text_completion",
                "created": int(time.time()), "model": ENGINE.name, "choices": [choice],
                "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(steps),
                          "total_tokens": len(prompt) + len(steps)}}
        data = json.dumps(body).encode()
        if fault == "truncated":
            return self.send(200, raw=data[: len(data) // 2])
        self.send(200, raw=data)

    def detokenize(self, raw):
        try:
            ids = json.loads(raw).get("tokens")
        except (ValueError, AttributeError) as e:
            return self.error(400, f"the request is not a JSON object: {e}")
        if not isinstance(ids, list) or not all(isinstance(t, int) and 0 <= t < ENGINE.model.head.shape[0] for t in ids):
            return self.error(400, "'tokens' must be a list of token ids inside the vocabulary")
        data = b"".join(ENGINE.piece(t) for t in ids)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            text = data.decode("utf-8", "replace")
        with ENGINE.lock:
            ENGINE.detok.setdefault(text, list(ids))
        self.send(200, {"content": text})

    def stream(self, fault, text, finish, n_prompt, n_gen, chat=False):
        if fault == "droplastbyte":
            text = text.encode()[:-1].decode("utf-8", "ignore")

        def piece(ch):
            return {"delta": {"content": ch}} if chat else {"text": ch}

        # the text in chunks of 1 character (UTF-8 bytes of one character stay together, as JSON strings must)
        events = [{"choices": [dict(piece(ch), index=0, finish_reason=None)]} for ch in text]
        events.append({"choices": [dict(piece(""), index=0, finish_reason=finish)],
                       "usage": {"prompt_tokens": n_prompt, "completion_tokens": n_gen}})
        out = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
        if fault == "afterdone":
            out += b"data: " + json.dumps(events[0]).encode() + b"\n\n"
        if fault == "streamcut":
            out = out[: len(out) - len(b"data: [DONE]\n\n") - 5]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(out)
        self.wfile.flush()
        self.close_connection = True


STOP = threading.Event()
ENGINE = None


def main():
    global ENGINE
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--lifetime", type=float, default=900)
    a = ap.parse_args()
    ENGINE = Engine(a.model)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    parent = os.getppid()

    def stop(*_):
        STOP.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(f"{srv.server_address[1]}\n")
    os.replace(tmp, a.port_file)
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    t.start()
    t0 = time.monotonic()
    while not STOP.wait(0.5):
        if os.getppid() != parent or time.monotonic() - t0 > a.lifetime:
            break
    STOP.set()
    srv.shutdown()
    srv.server_close()


if __name__ == "__main__":
    main()
