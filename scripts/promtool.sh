#!/usr/bin/env bash
# Runs promtool, built from source with `go install` into the project's bin/tools/ the first time (and
# again when the pinned version changes), so `make test` needs nothing installed by hand: only Go and
# the Go module proxy. Usage: scripts/promtool.sh <promtool arguments>, e.g.
#   scripts/promtool.sh test rules manifests/monitoring/tests/*.yaml
set -euo pipefail

# github.com/prometheus/prometheus tags its Go module v0.<major><minor>.<patch>: v0.316.0 is Prometheus 3.16.0.
PROMETHEUS_VERSION=v0.316.0

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$root/bin/tools"
bin="$tools/promtool-$PROMETHEUS_VERSION"

if [ ! -x "$bin" ]; then
	mkdir -p "$tools"
	# A lock: .ci/run builds the tools in the background while make test may already ask for one.
	exec 9>"$tools/.promtool.lock"
	flock 9
	if [ ! -x "$bin" ]; then
		echo "promtool.sh: building promtool $PROMETHEUS_VERSION into $tools (once)" >&2
		# Built outside the project's module (go install pkg@version ignores go.mod), into a temporary GOBIN
		# so that a half-written binary is never taken for a finished one.
		tmp=$(mktemp -d "$tools/.build.XXXXXX")
		trap 'rm -rf "$tmp"' EXIT
		(cd "$tmp" && GOBIN="$tmp" GOFLAGS=-buildvcs=false CGO_ENABLED=0 \
			go install "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION")
		mv "$tmp/promtool" "$bin"
	fi
	exec 9>&-
fi
exec "$bin" "$@"
