#!/usr/bin/env bash
# genfence setup: Debian packages + the Python tooling venv. Idempotent; fast when done.
# Usage: tools/setup/setup.sh            (needs root for apt, or the packages already present)
set -euo pipefail
cd "$(dirname "$0")/../.."

APT_PKGS=(build-essential cmake pkg-config git
          libjansson-dev libpcre2-dev libutf8proc-dev libyaml-dev libcriterion-dev
          libopenblas-dev libdnnl-dev libcurl4-openssl-dev
          python3 python3-venv python3-torch python3-numpy
          chromium libxml2-utils clang-format)  # libcurl4-openssl-dev: the http backend (backends/http); chromium: the HTML report test renders index.html headless; xmllint: the JUnit schema test; clang-format: tests/cli/format_check.sh
# extra packages a target asks for (make fuzz: clang and its runtime; make test-valgrind: valgrind)
# shellcheck disable=SC2206
APT_PKGS+=(${GENFENCE_EXTRA_PKGS:-})

missing=()
for p in "${APT_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing Debian packages: ${missing[*]}"
    if [ "$(id -u)" != 0 ]; then
        echo "setup: need root to install ${missing[*]} (or install them yourself)" >&2
        exit 2
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Python tooling: Debian's own python3 (the only one that sees python3-torch).
PY=/usr/bin/python3
VENV=.venv
stamp="$VENV/.genfence-req-$(sha256sum tools/setup/requirements.txt | cut -c1-16)"
if [ ! -f "$stamp" ]; then
    echo "setup: creating $VENV (--system-site-packages over Debian's torch)"
    rm -rf "$VENV"
    "$PY" -m venv --system-site-packages "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check -r tools/setup/requirements.txt
    "$VENV/bin/python" - <<'PY'
import torch, transformers, tokenizers, safetensors
print(f"setup: torch {torch.__version__}, transformers {transformers.__version__}, "
      f"tokenizers {tokenizers.__version__}, safetensors {safetensors.__version__}")
PY
    touch "$stamp"
fi

# The public junit-10.xsd (from the pinned pytest sdist) that tests/cli/honest_junit.sh
# validates junit.xml against: tools/setup/setup_junit_xsd.sh
bash tools/setup/setup_junit_xsd.sh

# llama.cpp for the llamacpp backend module (docs/llamacpp.md): the llama.cpp
# bundled in the pinned llama-cpp-python sdist, library targets only, built once
# per machine into a cache keyed by version. GENFENCE_LLAMACPP=0 skips it.
if [ "${GENFENCE_LLAMACPP:-1}" != 0 ]; then
    bash tools/setup/setup_llamacpp.sh
fi
