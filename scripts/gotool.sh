#!/usr/bin/env bash
# Prints the path of a tool built from source with `go install` into the project's bin/tools/ the first
# time (and again when the pinned version changes), so that `make test` needs nothing installed by hand:
# only Go and the Go module proxy. The membership tests' object stores (real MinIO, a real GCS
# emulator), the chart and rule checks (helm, kustomize, promtool, through scripts/<tool>.sh), `make lint`'s
# workflow check (actionlint) and the release's SBOM (cyclonedx-gomod) use it.
# None of them is in the main go.mod (helm alone pulls in most of Kubernetes).
# Usage: scripts/gotool.sh minio | fake-gcs-server | helm | kustomize | promtool | actionlint | cyclonedx-gomod
set -euo pipefail

name=${1:-}
tags=
case "$name" in
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
helm)
	pkg=helm.sh/helm/v3/cmd/helm
	version=v3.22.0
	;;
kustomize)
	# kubectl kustomize differs by kubectl version: this one is pinned.
	pkg=sigs.k8s.io/kustomize/kustomize/v5
	version=v5.8.2
	;;
promtool)
	# github.com/prometheus/prometheus tags its Go module v0.<major><minor>.<patch>: v0.316.0 is
	# Prometheus 3.16.0.
	pkg=github.com/prometheus/prometheus/cmd/promtool
	version=v0.316.0
	# Without the service discovery plugins (Prometheus' own build tag): rule tests use none, and the
	# cloud SDKs they pull in were most of an 11-minute cold build.
	tags=remove_all_sd
	;;
actionlint)
	pkg=github.com/rhysd/actionlint/cmd/actionlint
	version=v1.7.12
	;;
cyclonedx-gomod)
	pkg=github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod
	version=v1.10.0
	;;
*)
	echo "usage: $0 minio|fake-gcs-server|helm|kustomize|promtool|actionlint|cyclonedx-gomod" >&2
	exit 2
	;;
esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools="$root/bin/tools"
bin="$tools/$name-$version${tags:+-$tags}"

if [ ! -x "$bin" ]; then
	mkdir -p "$tools"
	echo "gotool.sh: building $name $version into $tools (once)" >&2
	start=$(date +%s)
	# Outside the project's module (go install pkg@version ignores go.mod), into a temporary GOBIN so
	# that a half-written binary is never taken for a finished one; a lock, because test packages run
	# in parallel and .ci/run builds tools in the background, and either may ask while a build runs.
	exec 9>"$tools/.$name.lock"
	flock 9
	if [ ! -x "$bin" ]; then
		tmp=$(mktemp -d "$tools/.build.XXXXXX")
		trap 'rm -rf "$tmp"' EXIT
		(cd "$tmp" && GOBIN="$tmp" GOFLAGS=-buildvcs=false CGO_ENABLED=0 go install ${tags:+-tags="$tags"} "$pkg@$version") >&2
		# The binary is named for the command's directory, the module's major version excepted
		# (sigs.k8s.io/kustomize/kustomize/v5 installs kustomize).
		mv "$tmp"/* "$bin"
		echo "gotool.sh: built $name in $(( $(date +%s) - start ))s" >&2
	fi
fi
echo "$bin"
