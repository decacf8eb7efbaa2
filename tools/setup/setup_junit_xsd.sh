#!/usr/bin/env bash
# The public JUnit schema the JUnit test validates junit.xml against: the
# Jenkins / Ant junit-10.xsd, unmodified, as pytest ships it in its sdist
# (testing/example_scripts/junit-10.xsd: the schema pytest validates its own
# --junitxml output against). Nothing third-party is committed: the pinned
# sdist is downloaded once into
#   ${GENFENCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/genfence}/dist/
# its sha256 checked, and the schema extracted beside it. Idempotent.
# Usage: tools/setup/setup_junit_xsd.sh [--print-path]
set -euo pipefail
cd "$(dirname "$0")/../.."

ver=8.3.4
sdist_sha256=965370d062bce11e73868e0335abac31b4d3de0e82f4007408d242b4f8610761
xsd_sha256=a1a816f58d1bf95ebabf371994df0b9246dee66ea9572fbec4f9296f1b2c0ff6
home=${HOME:-$(cd ~ 2>/dev/null && pwd || echo /tmp)}
root=${GENFENCE_CACHE:-${XDG_CACHE_HOME:-$home/.cache}/genfence}
dest="$root/junit-10.xsd-pytest-$ver/junit-10.xsd"
if [ "${1:-}" = --print-path ]; then echo "$dest"; exit 0; fi
if [ -f "$dest" ] && echo "$xsd_sha256  $dest" | sha256sum -c --status; then
    exit 0
fi
mkdir -p "$root/dist" "$(dirname "$dest")"
sdist="$root/dist/pytest-$ver.tar.gz"
if [ ! -f "$sdist" ] || ! echo "$sdist_sha256  $sdist" | sha256sum -c --status; then
    PIP=.venv/bin/pip
    [ -x "$PIP" ] || PIP="/usr/bin/python3 -m pip"
    echo "setup: downloading the pytest $ver sdist (its junit-10.xsd, for the JUnit schema test)"
    rm -f "$sdist"
    $PIP download -q --disable-pip-version-check --no-deps --no-binary :all: "pytest==$ver" -d "$root/dist"
fi
echo "$sdist_sha256  $sdist" | sha256sum -c --status || { echo "setup: $sdist: sha256 is not $sdist_sha256" >&2; exit 2; }
tmp=$(mktemp -d "$root/xsd.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tar xzf "$sdist" -C "$tmp" "pytest-$ver/testing/example_scripts/junit-10.xsd"
echo "$xsd_sha256  $tmp/pytest-$ver/testing/example_scripts/junit-10.xsd" | sha256sum -c --status ||
    { echo "setup: junit-10.xsd in $sdist: unexpected sha256" >&2; exit 2; }
mv "$tmp/pytest-$ver/testing/example_scripts/junit-10.xsd" "$dest"
echo "setup: $dest (pytest $ver's junit-10.xsd)"
