#!/usr/bin/env bash
# Runs the e2e suite against the Kind cluster made by up.sh, with the real Metacontroller.
# Usage: e2e/kind/test.sh [go test flags, e.g. -run 'TestE2E/scale']
set -euo pipefail
cd "$(dirname "$0")/../.."
CLUSTER=${CLUSTER:-etcdhook-e2e}
kubeconfig=$(mktemp)
trap 'rm -f "$kubeconfig"' EXIT
kind get kubeconfig --name "$CLUSTER" > "$kubeconfig"
# Pod and Service addresses are not reachable from the host with Kind: the suite's clients go through
# port-forwards it opens itself (-e2e.port-forward).
go test -tags e2e -count=1 -timeout 80m ./e2e/ -args \
  -e2e.kubeconfig="$kubeconfig" -e2e.port-forward -e2e.results=e2e/RESULTS-kind.md "$@"
