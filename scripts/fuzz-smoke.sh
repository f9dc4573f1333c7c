#!/usr/bin/env bash
# Runs every fuzz target of the module for a few seconds, as a regression
# check (CI's "fuzz targets" step). Targets are found by name (func FuzzX
# in a _test.go file), so a new target is run without editing this file.
# Each target fuzzes for FUZZ_BUDGET seconds (default 30) split over the
# targets, at most 5 and at least 2 seconds. Each package is built for
# fuzzing once (go test -c -fuzz), and that binary fuzzes each of the
# package's targets in turn: building comes on top of the fuzzing, once
# per package rather than once per target.
#
# To fuzz one target longer:
#   go test -run '^$' -fuzz '^FuzzOpen_DamagedFile$' -fuzztime 10m ./durability/boltstore/
set -euo pipefail
cd "$(dirname "$0")/.."
budget="${FUZZ_BUDGET:-30}"
mapfile -t targets < <(git grep -E '^func Fuzz[A-Za-z0-9_]+\(' -- '*_test.go' |
  sed -E 's|^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]+)\(.*|./\1 \2|' | sort)
if [ "${#targets[@]}" -eq 0 ]; then
  echo "no fuzz targets"; exit 0
fi
each=$(( budget / ${#targets[@]} ))
[ "$each" -le 5 ] || each=5
[ "$each" -ge 2 ] || each=2
echo "${#targets[@]} fuzz targets, ${each}s each"
# go1.26's fuzz coordinator can report "context deadline exceeded" when
# -fuzztime ends while a worker is mid-input (golang/go#75804, fixed in
# go1.27), without any failing input. A real failure writes its input to
# testdata/fuzz/<target>/: only that, or any other error, fails the step.
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
out=$work/out
module=$(go list -m)
fuzzcache="$(go env GOCACHE)/fuzz"  # where go test -fuzz keeps what it found
count() { { find "$1" -type f 2>/dev/null || true; } | wc -l; }
for t in "${targets[@]}"; do
  pkg=${t% *}; name=${t#* }
  bin="$work/$(printf '%s' "$pkg" | tr -c 'A-Za-z0-9\n' _).test"
  if [ ! -x "$bin" ]; then
    echo "-- building $pkg for fuzzing"
    go test -c -fuzz=. -o "$bin" "$pkg"
  fi
  echo "-- $name ($pkg)"
  corpus="$pkg/testdata/fuzz/$name"
  before=$(count "$corpus")
  # From the package's folder, as go test runs it: a failing input is
  # written to testdata/fuzz/<target>/ there.
  if (cd "$pkg" && "$bin" -test.run='^$' -test.fuzz="^${name}\$" -test.fuzztime="${each}s" \
      -test.fuzzcachedir="$fuzzcache/$module/${pkg#./}") >"$out" 2>&1; then
    echo "ok: $(grep -E "^fuzz: elapsed" "$out" | tail -n 1)"; continue
  fi
  if [ "$(count "$corpus")" -eq "$before" ] && grep -q 'context deadline exceeded' "$out" && ! grep -q 'Failing input' "$out"; then
    echo "ok: stopped by the coordinator's deadline race (golang/go#75804), no failing input"
    continue
  fi
  cat "$out"; exit 1
done
