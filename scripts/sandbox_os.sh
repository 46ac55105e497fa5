#!/bin/sh
# What the DeepCoder-MT code sandbox needs from the operating system (docs/security.md): bubblewrap, plus root
# (or unprivileged user namespaces and a delegated cgroup). Called by `make install` with the venv's python.
# Installs bubblewrap with apt-get when it is missing and this runs as root; otherwise says how to get it. It never
# fails the install: without the boundary the sandbox refuses to run generated code and its error says why.
set -u
PY="${1:-}"
if command -v bwrap >/dev/null 2>&1; then
    :
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "install: bubblewrap (the code sandbox's boundary) is missing: apt-get install -y bubblewrap"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q bubblewrap >/dev/null 2>&1; then
        apt-get update -q >/dev/null 2>&1 && apt-get install -y -q bubblewrap >/dev/null 2>&1 \
            || echo "install: WARNING: apt-get could not install bubblewrap (offline?); install it by hand."
    fi
else
    echo "install: WARNING: bubblewrap is not installed, and this is not root with apt-get to install it."
    echo "install:   Install it (Debian/Ubuntu: sudo apt-get install bubblewrap; Fedora: sudo dnf install bubblewrap)."
    echo "install:   Until then the DeepCoder-MT sandbox refuses to run generated code (docs/security.md)."
fi
if [ -n "$PY" ] && [ -x "$PY" ]; then
    "$PY" -m helpers.sandbox --brief || true
fi
