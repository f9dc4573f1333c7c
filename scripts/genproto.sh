#!/usr/bin/env bash
# Regenerates the protobuf Go code in messages/ with the pinned generator.
# protoc-gen-go is pinned to the google.golang.org/protobuf version in go.mod,
# so the output only changes when that version (or a .proto file) does.
# Needs protoc (Debian: protobuf-compiler); installs it when missing and root.
#
# Usage: scripts/genproto.sh [--tools | --out DIR]
#   --tools    only makes protoc and protoc-gen-go ready, generates nothing
#   --out DIR  writes the generated files to DIR instead of messages/
#              (CI compares them with the committed ones, leaving the
#              working tree alone while other jobs build it)
set -euo pipefail
out=messages
case "${1:-}" in
  "") ;;
  --tools) ;;
  --out) [ -n "${2:-}" ] || { echo "genproto: --out needs a folder" >&2; exit 2; }
         out=$(cd "$2" && pwd) ;;
  *) echo "genproto: unknown argument $1 (usage: genproto.sh [--tools | --out DIR])" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."

if ! command -v protoc >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "genproto: installing protoc (protobuf-compiler)" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler >/dev/null
  else
    echo "genproto: protoc not found; install Debian's protobuf-compiler" >&2
    exit 1
  fi
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

protoc --plugin=protoc-gen-go="$bin" \
  --proto_path=messages \
  --go_out="$out" --go_opt=paths=source_relative \
  messages/*.proto
