#!/usr/bin/env bash
# Prepares the figure 7 benchmark peers so that they can run.
#
# Usage: bench/peers/setup.sh [ai-sdk] [eino]     (no argument: every peer)
#
# Idempotent: a peer that is already prepared is only checked. For each peer
# it prints "peer <name>: ready" on stdout, or "peer <name>: could not be
# prepared: <reason>" on stderr. Exits 0 when every requested peer is ready,
# 1 when at least one is not, 2 on a bad argument.
#
#   ai-sdk  needs node >= 18 and npm; runs `npm ci` from the committed
#           package-lock.json when node_modules is missing or was installed
#           from another lock file, then plays the conversation once.
#   eino    needs go; runs `go mod download` and builds the peer.
set -u

MIN_NODE_MAJOR=18
PEERS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# The eino peer is a module of its own; a go.work higher up must not claim it.
export GOWORK=off

ready() { echo "peer $1: ready ($2)"; }
unready() { echo "peer $1: could not be prepared: $2" >&2; }

setup_ai_sdk() {
	local dir="$PEERS_DIR/ai-sdk" stamp="$PEERS_DIR/ai-sdk/node_modules/.polyweave-lock.sha256"
	if ! command -v node >/dev/null 2>&1; then
		unready ai-sdk "node not found on PATH (need Node.js >= $MIN_NODE_MAJOR)"
		return 1
	fi
	local version major
	version=$(node --version 2>/dev/null) || version=""
	major=${version#v}
	major=${major%%.*}
	if ! [[ "$major" =~ ^[0-9]+$ ]] || ((major < MIN_NODE_MAJOR)); then
		unready ai-sdk "Node.js ${version:-of unknown version} is too old (need >= $MIN_NODE_MAJOR)"
		return 1
	fi
	if ! command -v npm >/dev/null 2>&1; then
		unready ai-sdk "npm not found on PATH"
		return 1
	fi

	local want have=""
	want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1) || {
		unready ai-sdk "cannot read $dir/package-lock.json"
		return 1
	}
	[[ -f "$stamp" ]] && have=$(<"$stamp")
	if [[ "$have" != "$want" ]]; then
		echo "peer ai-sdk: npm ci (node_modules missing or from another lock file)"
		if ! (cd "$dir" && npm ci --no-audit --no-fund --prefer-offline >&2); then
			unready ai-sdk "npm ci failed in $dir"
			return 1
		fi
		echo "$want" >"$stamp"
	fi

	# One played conversation, and one streamed, prove the install works.
	local out
	if ! out=$(cd "$dir" && node run.mjs --runs 1 --warmup 0) || ! (cd "$dir" && node run.mjs --stream --runs 1 --warmup 0 >/dev/null); then
		unready ai-sdk "smoke run of run.mjs failed"
		return 1
	fi
	ready ai-sdk "node $version, $(sed -n 's/.*"version":"\([^"]*\)".*/ai \1/p' <<<"$out")"
}

setup_eino() {
	local dir="$PEERS_DIR/eino"
	if ! command -v go >/dev/null 2>&1; then
		unready eino "go not found on PATH"
		return 1
	fi
	if ! (cd "$dir" && go mod download >&2); then
		unready eino "go mod download failed in $dir"
		return 1
	fi
	if ! (cd "$dir" && go build -o /dev/null . >&2); then
		unready eino "go build failed in $dir"
		return 1
	fi
	ready eino "$(go env GOVERSION), $(cd "$dir" && go list -m -f '{{.Path}} {{.Version}}' github.com/cloudwego/eino)"
}

peers=("$@")
((${#peers[@]} == 0)) && peers=(ai-sdk eino)

status=0
for peer in "${peers[@]}"; do
	case "$peer" in
	ai-sdk) setup_ai_sdk || status=1 ;;
	eino) setup_eino || status=1 ;;
	*)
		echo "setup.sh: unknown peer \"$peer\" (known: ai-sdk eino)" >&2
		exit 2
		;;
	esac
done
exit "$status"
