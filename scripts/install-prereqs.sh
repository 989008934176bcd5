#!/usr/bin/env bash
# What a fresh Debian/Ubuntu machine needs besides Python 3.11 and a running Docker engine:
#   uv          (PyPI)   installs the locked Python dependencies
#   debootstrap (apt)    makes the runtime image's base with no container registry
#   chromium    (apt)    renders the HTML report in the screenshot test
# Each is installed only when missing.
set -euo pipefail
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

command -v uv >/dev/null || python3 -m pip install -q uv || python3 -m pip install -q --user uv

missing=()
command -v debootstrap >/dev/null || [ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]} (apt)"
  as_root apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 \
    || { as_root apt-get update -q >/dev/null && as_root apt-get install -y -q "${missing[@]}" >/dev/null; }
fi
