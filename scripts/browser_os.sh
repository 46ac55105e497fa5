#!/bin/sh
# What tests/test_browser.py needs from the operating system: a Chromium (or Chrome) to open JupyterLab in,
# headless. Called by `make install`. Installs Debian's `chromium` with apt-get when no browser is found and this
# runs as root (about 25 s and 300 MB on a clean Debian 12); otherwise says how to get one. It never fails the
# install: without a browser the test is skipped and says why. KIT_NO_BROWSER=1 skips the install;
# KIT_CHROMIUM=PATH names a browser the test should use (e.g. Chrome on macOS).
set -u
if [ -n "${KIT_CHROMIUM:-}" ] || command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
    || command -v google-chrome >/dev/null 2>&1 || command -v google-chrome-stable >/dev/null 2>&1; then
    exit 0
fi
if [ "${KIT_NO_BROWSER:-}" = 1 ]; then
    echo "install: no Chromium, and KIT_NO_BROWSER=1: tests/test_browser.py will be skipped."
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "install: Chromium (for tests/test_browser.py, JupyterLab in a headless browser) is missing: apt-get install -y chromium"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q --no-install-recommends chromium fonts-liberation >/dev/null 2>&1; then
        apt-get update -q >/dev/null 2>&1 && apt-get install -y -q --no-install-recommends chromium fonts-liberation >/dev/null 2>&1 \
            || echo "install: WARNING: apt-get could not install chromium (offline?); tests/test_browser.py will be skipped."
    fi
else
    echo "install: note: no Chromium or Chrome found, and this is not root with apt-get to install it;"
    echo "install:   tests/test_browser.py (JupyterLab in a headless browser) will be skipped. To run it, install one"
    echo "install:   (Debian/Ubuntu: sudo apt-get install chromium; macOS: Google Chrome, then"
    echo "install:   KIT_CHROMIUM=\"/Applications/Google Chrome.app/Contents/MacOS/Google Chrome\")."
fi
