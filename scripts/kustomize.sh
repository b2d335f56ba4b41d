#!/usr/bin/env bash
# Runs kustomize, built from source with `go install` into the project's bin/tools/ the first time (and again
# when the pinned version changes), so `make chart` and `make test` need nothing installed by hand: only
# Go and the Go module proxy. kustomize stays out of the main go.mod; kubectl kustomize differs by kubectl version.
# Usage: scripts/kustomize.sh <kustomize arguments>, e.g.
#   scripts/kustomize.sh build install/
set -euo pipefail

KUSTOMIZE_VERSION=v5.8.2

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$root/bin/tools"
bin="$tools/kustomize-$KUSTOMIZE_VERSION"

if [ ! -x "$bin" ]; then
	mkdir -p "$tools"
	# A lock: .ci/run builds the tools in the background while make test may already ask for one.
	exec 9>"$tools/.kustomize.lock"
	flock 9
	if [ ! -x "$bin" ]; then
		echo "kustomize.sh: building kustomize $KUSTOMIZE_VERSION into $tools (once, a few minutes)" >&2
		# Built outside the project's module (go install pkg@version ignores go.mod), into a temporary GOBIN
		# so that a half-written binary is never taken for a finished one; nice, as the machine is shared.
		tmp=$(mktemp -d "$tools/.build.XXXXXX")
		trap 'rm -rf "$tmp"' EXIT
		(cd "$tmp" && GOBIN="$tmp" GOFLAGS=-buildvcs=false CGO_ENABLED=0 \
			nice -n 10 go install "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION")
		mv "$tmp/kustomize" "$bin"
	fi
	exec 9>&-
fi
exec "$bin" "$@"
