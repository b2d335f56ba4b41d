#!/usr/bin/env bash
# The e2e suite on ../shared/localkube: a real single-node Kubernetes built from Go modules and Debian
# packages, with etcd images built from the Go modules and the etcdhook image from this checkout. The
# hook runs in-cluster from manifests/, exactly as users deploy it; Metacontroller cannot be installed
# here, so the suite runs the project's contract driver (e2e/driver) in its place.
# Usage: e2e/local.sh [go test -run pattern]   (env: LOCALKUBE, KEEP_CLUSTER=1 to leave it up)
set -euo pipefail
cd "$(dirname "$0")/.."
LK=${LOCALKUBE:-$(cd .. && pwd)/shared/localkube/localkube}
RUN=${1:-.}
t0=$(date +%s)
step() { echo "== [e2e $(( $(date +%s) - t0 ))s] $*"; }

diagnostics() {
  step "diagnostics"
  "$LK" kubectl get nodes,pods -A -o wide || true
  "$LK" kubectl -n etcdhook-system logs deploy/etcdhook --tail=200 || true
  "$LK" kubectl get events -A --sort-by=.lastTimestamp | tail -60 || true
  "$LK" logs kubelet 2>/dev/null | grep -E "^E" | tail -30 || true
}
cleanup() {
  rc=$?
  [ "$rc" = 0 ] || diagnostics
  if [ -z "${KEEP_CLUSTER:-}" ]; then step "localkube down"; "$LK" down || true; fi
  exit "$rc"
}
trap cleanup EXIT

step "localkube up"
"$LK" up
step "etcd images"
"$LK" image etcd v3.5.35
"$LK" image etcd v3.6.16
step "etcdhook binary, image and e2e test binary"
make build
"$LK" image build --tag localhost/etcdhook:e2e --file bin/etcdhook:/etcdhook:0755 --entrypoint /etcdhook --user 65532
go test -c -tags e2e -o bin/e2e.test ./e2e/

step "install etcdhook (manifests/ with the local image; the driver stands in for Metacontroller)"
overlay=e2e/.overlay-local
rm -rf "$overlay" && mkdir -p "$overlay"
bash e2e/overlay.sh "$overlay" localhost/etcdhook:e2e
# The CompositeController kind does not exist without Metacontroller: the driver reads the file instead.
"$LK" kubectl kustomize "$overlay" | python3 -c '
import sys
docs = sys.stdin.read().split("\n---\n")
print("\n---\n".join(d for d in docs if "kind: CompositeController" not in d))
' > "$overlay/rendered.yaml"
"$LK" kubectl apply --server-side -f "$overlay/rendered.yaml"
"$LK" kubectl wait --for=condition=Established crd/etcdclusters.etcd.io --timeout=60s
"$LK" kubectl -n etcdhook-system rollout restart deployment/etcdhook
"$LK" kubectl -n etcdhook-system rollout status deployment/etcdhook --timeout=180s

step "e2e suite"
kubeconfig=$("$LK" env | sed -n 's/^export KUBECONFIG=//p' | tr -d '"')
(cd e2e && "$LK" exec --cluster-dns -- ../bin/e2e.test -test.v -test.count=1 -test.timeout=80m -test.run "$RUN" \
  -e2e.kubeconfig="$kubeconfig" -e2e.driver -e2e.results=RESULTS.md) 2>&1 | tee bin/e2e.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|e2e_test|_test.go' || true
grep -q '^PASS' bin/e2e.log || { tail -200 bin/e2e.log; exit 1; }
step "e2e passed"
