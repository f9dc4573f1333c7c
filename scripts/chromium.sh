#!/usr/bin/env bash
# Installs Debian's chromium for the inspector's browser test
# (cmd/demo TestUI_Browser) when it is missing: that test loads the live
# view of a running demo in headless Chromium, clicks, reads the DOM and
# takes a screenshot. Needs root and apt-get; does nothing when chromium
# is already there.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "chromium is missing, and installing it needs root and apt-get (Debian's chromium package)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# fonts-dejavu-core: text in screenshots.
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
command -v chromium >/dev/null
