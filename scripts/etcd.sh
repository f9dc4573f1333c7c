#!/usr/bin/env bash
# Makes an etcd server binary available for the cluster membership tests
# (package cluster starts a throwaway etcd of its own, on loopback).
#
#   scripts/etcd.sh   prints the path of the etcd binary; when there is
#                     none, unpacks Debian's etcd-server (apt-get download,
#                     dpkg -x) into .cache/etcd of this repository
set -euo pipefail
cd "$(dirname "$0")/.."

find_etcd() {
  if [ -n "${POLYWEAVE_ETCD:-}" ] && [ -x "$POLYWEAVE_ETCD" ]; then echo "$POLYWEAVE_ETCD"; return 0; fi
  if command -v etcd >/dev/null 2>&1; then command -v etcd; return 0; fi
  if [ -x /usr/bin/etcd ]; then echo /usr/bin/etcd; return 0; fi
  if [ -x .cache/etcd/usr/bin/etcd ]; then echo "$(pwd)/.cache/etcd/usr/bin/etcd"; return 0; fi
  return 1
}

if find_etcd; then exit 0; fi
if command -v apt-get >/dev/null 2>&1; then
  # Unpacked, not installed: no service of the package's own is started,
  # and it works without root.
  echo "etcd.sh: unpacking Debian's etcd-server into .cache/etcd" >&2
  tmp=$(mktemp -d)
  chmod 777 "$tmp" # apt-get download drops privileges to _apt when it can
  if ! (cd "$tmp" && apt-get download etcd-server >/dev/null 2>&1); then
    if [ "$(id -u)" = 0 ]; then apt-get update -qq >/dev/null; fi
    (cd "$tmp" && apt-get download etcd-server >/dev/null 2>&1)
  fi
  mkdir -p .cache/etcd
  dpkg -x "$tmp"/etcd-server_*.deb .cache/etcd
  rm -rf "$tmp"
  find_etcd && exit 0
fi
echo "etcd.sh: etcd not found; install Debian's etcd-server (apt-get install etcd-server) or set POLYWEAVE_ETCD" >&2
exit 1
