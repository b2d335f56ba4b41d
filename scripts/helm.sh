#!/usr/bin/env bash
# Runs helm, built from source with `go install` into the project's bin/tools/ the first time (and again
# when the pinned version changes), so `make chart` and `make test` need nothing installed by hand: only
# Go and the Go module proxy. helm stays out of the main go.mod (it pulls in most of Kubernetes).
# Usage: scripts/helm.sh <helm arguments>, e.g.
#   scripts/helm.sh lint charts/etcdhook
set -euo pipefail

HELM_VERSION=v3.22.0

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$root/bin/tools"
bin="$tools/helm-$HELM_VERSION"

if [ ! -x "$bin" ]; then
	mkdir -p "$tools"
	# A lock: .ci/run builds the tools in the background while make test may already ask for one.
	exec 9>"$tools/.helm.lock"
	flock 9
	if [ ! -x "$bin" ]; then
		echo "helm.sh: building helm $HELM_VERSION into $tools (once, a few minutes)" >&2
		# Built outside the project's module (go install pkg@version ignores go.mod), into a temporary GOBIN
		# so that a half-written binary is never taken for a finished one; nice, as the machine is shared.
		tmp=$(mktemp -d "$tools/.build.XXXXXX")
		trap 'rm -rf "$tmp"' EXIT
		(cd "$tmp" && GOBIN="$tmp" GOFLAGS=-buildvcs=false CGO_ENABLED=0 \
			nice -n 10 go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION")
		mv "$tmp/helm" "$bin"
	fi
	exec 9>&-
fi
exec "$bin" "$@"
