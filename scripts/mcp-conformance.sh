#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance,
# pinned in scripts/mcp-node/package-lock.json) against package mcp: the
# server scenarios that apply to a tool server, over streamable HTTP, and
# the client scenarios for the importer. Both sides are the program in
# mcp/internal/conformance. Exits non-zero when any scenario fails.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
node_dir=$(bash "$repo/scripts/mcp-node.sh")
export PATH="$node_dir/node_modules/.bin:$PATH"   # node here is Node 22
work=$(mktemp -d)
server_pid=
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
(cd "$repo" && go build -o "$work/conformance" ./mcp/internal/conformance)

passed=0 failed=0
check() { # name, then the command
  local name=$1; shift
  if "$@" >"$work/out" 2>&1 && grep -Eq "Passed: [1-9][0-9]*/[0-9]+, 0 failed" "$work/out" && ! grep -q FAILURE "$work/out"; then
    passed=$((passed + 1)); echo "PASS $name"
  else
    failed=$((failed + 1)); echo "FAIL $name"; sed 's/\x1b\[[0-9;]*m//g' "$work/out" | tail -30
  fi
}

"$work/conformance" server >"$work/url" 2>"$work/server.log" &
server_pid=$!
for _ in $(seq 100); do [ -s "$work/url" ] && break; sleep 0.1; done
url=$(cat "$work/url")
[ -n "$url" ] || { echo "conformance server did not start:"; cat "$work/server.log"; exit 1; }
for s in server-initialize ping tools-list tools-call-simple-text tools-call-error dns-rebinding-protection; do
  check "server $s" conformance server --url "$url" --scenario "$s"
done
for s in initialize tools_call sse-retry; do
  check "client $s" conformance client --command "$work/conformance client" --scenario "$s" --timeout 60000
done
echo "conformance: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
