#!/usr/bin/env bash
# Regenerates the protobuf Go code in messages/ with the pinned generator:
# protoc-gen-go at the google.golang.org/protobuf version in go.mod, and
# protoc at protoc_version below (the generated files name it in their
# header, and an older protoc compiles proto3 differently, or refuses
# `optional`), so the output only changes when one of those versions (or a
# .proto file) does. Another protoc is refused before anything is written.
# Installs Debian's protobuf-compiler at that version when protoc is
# missing and it runs as root with apt-get (Debian 12 has it); elsewhere,
# install protoc $protoc_version and put it first on PATH, or name it in
# PROTOC.
#
# Usage: scripts/genproto.sh [--tools | --out DIR]
#   --tools    only makes protoc and protoc-gen-go ready, generates nothing
#   --out DIR  writes the generated files to DIR instead of messages/
#              (CI compares them with the committed ones, leaving the
#              working tree alone while other jobs build it)
set -euo pipefail

# The protoc messages/*.pb.go are generated with. To move to another,
# change it here and commit the files regenerated with that protoc.
protoc_version=3.21.12

out=messages
case "${1:-}" in
  "") ;;
  --tools) ;;
  --out) [ -n "${2:-}" ] || { echo "genproto: --out needs a folder" >&2; exit 2; }
         out=$(cd "$2" && pwd) ;;
  *) echo "genproto: unknown argument $1 (usage: genproto.sh [--tools | --out DIR])" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."

protoc=${PROTOC:-protoc}
if [ -z "${PROTOC:-}" ] && ! command -v protoc >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "genproto: installing protoc $protoc_version (Debian's protobuf-compiler)" >&2
    apt-get update -qq >/dev/null
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "protobuf-compiler=$protoc_version-*" >/dev/null; then
      echo "genproto: Debian's protobuf-compiler $protoc_version could not be installed (apt-cache policy protobuf-compiler says which versions this system has): install protoc $protoc_version by hand and put it first on PATH, or name it in PROTOC" >&2
      exit 1
    fi
  else
    echo "genproto: protoc not found: install protoc $protoc_version (Debian 12's protobuf-compiler) and put it first on PATH, or name it in PROTOC" >&2
    exit 1
  fi
fi
# protoc --version prints "libprotoc 3.21.12".
found=$("$protoc" --version 2>&1) || { echo "genproto: $protoc --version failed: $found" >&2; exit 1; }
if [ "$found" != "libprotoc $protoc_version" ]; then
  echo "genproto: $(command -v "$protoc" || echo "$protoc") is ${found:-silent about its version}, but messages/*.pb.go are generated with protoc $protoc_version (pinned in scripts/genproto.sh), and another protoc generates other files: install protoc $protoc_version (Debian 12's protobuf-compiler) and put it first on PATH, or name it in PROTOC" >&2
  exit 1
fi

version=$(go list -m -f '{{.Version}}' google.golang.org/protobuf)
bin="$(pwd)/.cache/bin/protoc-gen-go-$version"
if [ ! -x "$bin" ]; then
  mkdir -p .cache/bin
  tmp=$(mktemp -d)
  GOBIN="$tmp" go install "google.golang.org/protobuf/cmd/protoc-gen-go@$version"
  mv "$tmp/protoc-gen-go" "$bin"
  rm -rf "$tmp"
fi
[ "${1:-}" != "--tools" ] || exit 0

# Generated into a folder of its own, then checked, then moved to $out: a
# refused run leaves $out as it was.
gen=$(mktemp -d)
trap 'rm -rf "$gen"' EXIT
"$protoc" --plugin=protoc-gen-go="$bin" \
  --proto_path=messages \
  --go_out="$gen" --go_opt=paths=source_relative \
  messages/*.proto
# The header names the version protoc told the plugin: a wrapper around
# the pinned protoc could still tell another one.
for f in "$gen"/*.pb.go; do
  named=$(sed -n 's|^// 	protoc  *v||p' "$f" | head -n 1)
  if [ "$named" != "$protoc_version" ]; then
    echo "genproto: ${f##*/} came out of protoc ${named:-(no version named)}, not $protoc_version (pinned in scripts/genproto.sh), though $protoc says it is $found: nothing written" >&2
    exit 1
  fi
done
mv "$gen"/*.pb.go "$out"/
