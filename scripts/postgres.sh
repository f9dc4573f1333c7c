#!/usr/bin/env bash
# Makes PostgreSQL's server binaries (initdb, postgres, pg_ctl) available for
# the tests of durability/pgstore and the cluster packages, which start a
# throwaway server of their own (see durability/pgstore/pgtest).
#
#   scripts/postgres.sh bindir   prints the directory holding the binaries,
#                                installing Debian's postgresql when missing
#                                (needs root and apt-get)
set -euo pipefail

find_bindir() {
  if [ -n "${POLYWEAVE_PG_BIN:-}" ] && [ -x "$POLYWEAVE_PG_BIN/initdb" ]; then
    echo "$POLYWEAVE_PG_BIN"; return 0
  fi
  # Debian keeps the server binaries out of PATH, one folder per major version.
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -n -r); do
    if [ -x "$d/initdb" ] && [ -x "$d/postgres" ]; then echo "$d"; return 0; fi
  done
  if command -v initdb >/dev/null 2>&1 && command -v postgres >/dev/null 2>&1; then
    dirname "$(command -v initdb)"; return 0
  fi
  return 1
}

case "${1:-bindir}" in
bindir)
  if find_bindir; then exit 0; fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "postgres.sh: installing Debian's postgresql" >&2
    apt-get update -qq >/dev/null
    # The package's own cluster is not used; do not let it start one.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
    find_bindir && exit 0
  fi
  echo "postgres.sh: PostgreSQL server binaries not found; install Debian's postgresql (apt-get install postgresql) or set POLYWEAVE_PG_BIN" >&2
  exit 1
  ;;
*)
  echo "usage: $0 bindir" >&2; exit 2 ;;
esac
