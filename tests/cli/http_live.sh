#!/usr/bin/env bash
# The http backend against a real engine: llama.cpp's own llama-server
# (tools/setup/setup_llama_server.sh, the llama.cpp the llamacpp backend links)
# on 127.0.0.1 and a free port, serving holmes-gpt and holmes-llama as the F32
# GGUFs the llamacpp backend makes (build/tools/gguf_write). Per model:
#   1. the server starts and answers /health (bounded wait);
#   2. `genfence backends` shows it available, its tokens named by id;
#   3. `genfence run` of the model's golden cases through http:URL exits 0 or
#      1 (never 2: the mapping is sound), every result attributed to http with
#      a reason where it is not a pass;
#   4. the server is stopped and its port refuses connections.
# What llama.cpp computes on this CPU (its verdicts, its drift from the
# goldens) is printed ("finding ..."), never asserted: docs/llamacpp.md.
# Skipped (exit 0, with the reason) when llama-server or the modules are not
# built here.
set -euo pipefail
: "${GENFENCE:?}" "${GF_SRC:?}" "${GF_BUILD:?}" "${GF_PYTHON:?}"
. "$GF_SRC/tests/support/test_lib.sh"
gf_test_init http_live
export GENFENCE_MODULE_DIR="$GF_BUILD/backends"
scale=${GF_TIME_SCALE:-1}
dir=$(bash "$GF_SRC/tools/setup/setup_llama_server.sh" --print-dir)
server="$dir/bin/llama-server"
if [ ! -x "$server" ]; then
    echo "skip: no llama-server in $dir (tools/setup/setup_llama_server.sh builds it; docs/http.md)"
    exit 0
fi
for f in "$GF_BUILD/backends/libgenfence_backend_http.so" "$GF_BUILD/tools/gguf_write"; do
    [ -e "$f" ] || { echo "skip: $f is not built in this configuration"; exit 0; }
done

free_port() { "$GF_PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
closed() { ! "$GF_PYTHON" -c "import socket,sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 2)" "$1" 2>/dev/null; }

for pair in "holmes-gpt golden.yaml" "holmes-llama golden_llama.yaml"; do
    read -r name cases <<<"$pair"
    model="$GF_SRC/models/$name"
    [ -f "$model/model.safetensors" ] || { echo "skip $name: no weights"; continue; }
    "$GF_BUILD/tools/gguf_write" "$model" "$tmp/$name.gguf" || fail "$name: gguf_write failed"
    ctx=$("$GF_PYTHON" -c 'import json,sys; c=json.load(open(sys.argv[1])); print(c.get("n_positions") or c["max_position_embeddings"])' "$model/config.json")
    port=$(free_port)
    # f32 KV cache and no flash attention, as the llamacpp backend's f32 (llama-server's defaults: f16, auto)
    "$server" -m "$tmp/$name.gguf" --host 127.0.0.1 --port "$port" -c "$ctx" -np 1 -t 1 -ctk f32 -ctv f32 -fa off \
        > "$tmp/$name.server.log" 2>&1 &
    spid=$!
    gf_on_exit "kill $spid 2>/dev/null; wait $spid 2>/dev/null"
    up=0
    for _ in $(seq 1 $((240 * scale))); do
        if curl -sf --noproxy '*' "http://127.0.0.1:$port/health" > /dev/null 2>&1; then up=1; break; fi
        kill -0 "$spid" 2>/dev/null || break
        sleep 0.5
    done
    [ $up = 1 ] || { tail -20 "$tmp/$name.server.log"; fail "$name: llama-server did not come up on port $port"; }
    url="http://127.0.0.1:$port"
    "$GENFENCE" backends --backend "http:$url" > "$tmp/be.txt" 2>&1 || { cat "$tmp/be.txt"; fail "$name: backends exit $?"; }
    gf_grepq -qF "top-k logprobs by id: yes" < "$tmp/be.txt" || { cat "$tmp/be.txt"; fail "$name: no top-k logprobs by id"; }
    echo "ok   $name: llama-server on port $port: $(grep -o 'top-k logprobs by id[^;]*;[^;]*;[^;]*;[^;]*' "$tmp/be.txt" | head -1)"
    rc=0
    "$GENFENCE" run "$GF_SRC/cases/$cases" --backend "http:$url,timeout=$((120 * scale))" -j 1 \
        --timeout $((600 * scale)) --report-dir "$tmp/rep-$name" > "$tmp/run-$name.txt" 2>&1 || rc=$?
    [ $rc -le 1 ] || { cat "$tmp/run-$name.txt"; fail "$name: genfence run exits $rc (bad input?)"; }
    "$GF_PYTHON" - "$tmp/rep-$name/run.json" "$name" <<'PY' || fail "$name: the report is wrong"
import json, sys
doc = json.load(open(sys.argv[1]))
for r in doc["results"]:
    assert r["backend"] == "http", r["backend"]
    assert r["verdict"] == "pass" or r.get("reason"), r["id"]
    print(f"finding {sys.argv[2]} {r['id']} [http llama-server]: {r['verdict']}"
          + (f" ({r['reason'][:200]})" if r["verdict"] != "pass" else ""))
PY
    echo "ok   $name: genfence run exit $rc, every result attributed to http with its reason"
    kill "$spid"
    wait "$spid" 2>/dev/null || true
    closed "$port" || fail "$name: port $port still accepts connections"
    echo "ok   $name: llama-server stopped, nothing listening on $port"
done
