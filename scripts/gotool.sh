#!/usr/bin/env bash
# Prints the path of a test server built from source with `go install` into the project's bin/tools/
# the first time (and again when the pinned version changes), so that `make test` needs nothing
# installed by hand. The membership tests' object stores call it: real MinIO and a real GCS emulator.
# Usage: scripts/gotool.sh minio | fake-gcs-server
set -euo pipefail

case "${1:-}" in
minio)
	# MinIO publishes no semver module versions: the newest commit `go install …@latest` resolved to
	# when this was pinned (2026-02-12).
	pkg=github.com/minio/minio
	version=v0.0.0-20260212201848-7aac2a2c5b7c
	;;
fake-gcs-server)
	pkg=github.com/fsouza/fake-gcs-server
	version=v1.56.1
	;;
*)
	echo "usage: $0 minio|fake-gcs-server" >&2
	exit 2
	;;
esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$root/bin/tools"
bin="$tools/$1-$version"

if [ ! -x "$bin" ]; then
	mkdir -p "$tools"
	echo "gotool.sh: building $1 $version into $tools (once)" >&2
	start=$(date +%s)
	# Outside the project's module (go install pkg@version ignores go.mod), into a temporary GOBIN so
	# that a half-written binary is never taken for a finished one; a lock, because test packages run
	# in parallel and may both ask.
	exec 9>"$tools/.$1.lock"
	flock 9
	if [ ! -x "$bin" ]; then
		tmp=$(mktemp -d "$tools/.build.XXXXXX")
		trap 'rm -rf "$tmp"' EXIT
		(cd "$tmp" && GOBIN="$tmp" GOFLAGS=-buildvcs=false CGO_ENABLED=0 go install "$pkg@$version") >&2
		mv "$tmp/$(basename "$pkg")" "$bin"
		echo "gotool.sh: built $1 in $(( $(date +%s) - start ))s" >&2
	fi
fi
echo "$bin"
