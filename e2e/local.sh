#!/usr/bin/env bash
# The e2e suite on ../shared/localkube: a real single-node Kubernetes built from Go modules and Debian
# packages, with etcd images built from the Go modules, the etcdhook image from this checkout, and the
# real Metacontroller v4.17.2 installed from its release manifests (../shared/metacontroller). etcdhook
# is installed exactly as the README tells users to: manifests/, then the CompositeController once the
# CRD is Established.
# Usage: e2e/local.sh [go test -run pattern]   (env: LOCALKUBE, METACONTROLLER, KEEP_CLUSTER=1 to leave it up,
# E2E_SERIAL=1 to run every scenario alone: the ones marked beside() otherwise run two at a time,
# E2E_SKIP: a go test -skip pattern; CI's tier skips the fleet and the 5-member recovery (.ci/run), the full tier (make e2e) nothing)
set -euo pipefail
cd "$(dirname "$0")/.."
shared=$(cd .. && pwd)/shared
LK=${LOCALKUBE:-$shared/localkube/localkube}
MC=${METACONTROLLER:-$shared/metacontroller/metacontroller}
RUN=${1:-.}
SKIP=${E2E_SKIP:-}
ETCD_VERSIONS=${ETCD_VERSIONS:-v3.5.35 v3.6.16 v3.7.3}
t0=$(date +%s)
step() { echo "== [e2e $(( $(date +%s) - t0 ))s] $*"; }

diagnostics() {
  step "diagnostics"
  "$LK" kubectl get nodes,pods -A -o wide || true
  "$LK" kubectl -n etcdhook-system logs deploy/etcdhook --tail=200 || true
  "$LK" kubectl -n metacontroller logs metacontroller-0 --tail=200 || true
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
step "etcd images ($ETCD_VERSIONS)"
for v in $ETCD_VERSIONS; do "$LK" image etcd "$v"; done
step "Metacontroller v4.17.2 (built from its source release, installed from its release manifests)"
"$MC" install
# With the settings install/ gives Metacontroller (two replicas, leader election, 20 workers, client QPS
# 50): what the e2e figures are measured under (the fleet scenario also measures the release's defaults).
"$LK" kubectl -n metacontroller patch statefulset metacontroller --patch-file install/metacontroller/settings.yaml
"$LK" kubectl -n metacontroller rollout status statefulset metacontroller --timeout=180s
step "etcdhook binary, image and e2e test binary"
make build
"$LK" image build --tag localhost/etcdhook:e2e --file bin/etcdhook:/etcdhook:0755 --entrypoint /etcdhook --user 65532
CGO_ENABLED=0 go test -c -tags e2e -o bin/e2e.test ./e2e/   # as make test built its dependencies
# The backup scenario's S3 store (built once into bin/tools/, as the membership tests use it).
minio=$(scripts/gotool.sh minio)

step "install etcdhook (manifests/ with the local image, then the CompositeController)"
overlay=e2e/.overlay-local
rm -rf "$overlay" && mkdir -p "$overlay"
bash e2e/overlay.sh "$overlay" localhost/etcdhook:e2e
"$LK" kubectl apply -k "$overlay"
"$LK" kubectl wait --for=condition=Established crd/etcdclusters.etcd.io --timeout=60s
"$LK" kubectl apply -k metacontroller/
"$LK" kubectl -n etcdhook-system rollout restart deployment/etcdhook
"$LK" kubectl -n etcdhook-system rollout status deployment/etcdhook --timeout=180s
# Metacontroller reads the hook's CA (caBundle.secretRef) when it starts the controller; one it could not
# start before the hook pods made that Secret is retried with a growing backoff: a change of the object
# makes it try now.
"$LK" kubectl annotate compositecontroller etcdhook etcdhook.io/serving-cert-ready="$(date +%s)" --overwrite >/dev/null
# Metacontroller starts the CompositeController once its discovery (every 20 s) knows the new CRD. Proof
# that the whole path works (discovery, the hook Service, status written back): a throwaway paused
# EtcdCluster (the hook creates nothing for it) must get a status. (A version the hook refuses is
# refused by the CRD itself since issue 24.)
step "wait until Metacontroller syncs EtcdClusters"
"$LK" kubectl create namespace etcdhook-ready --dry-run=client -o yaml | "$LK" kubectl apply -f - >/dev/null
"$LK" kubectl apply -f - >/dev/null <<'YAML'
apiVersion: etcd.io/v1alpha1
kind: EtcdCluster
metadata: {name: probe, namespace: etcdhook-ready}
spec: {paused: true}
YAML
phase=""
for _ in $(seq 1 120); do
  phase=$("$LK" kubectl -n etcdhook-ready get etcdcluster probe -o jsonpath='{.status.phase}' 2>/dev/null || true)
  [ -n "$phase" ] && break
  sleep 1
done
[ -n "$phase" ] || { echo "Metacontroller did not sync the probe EtcdCluster within 120 s"; exit 1; }
"$LK" kubectl delete namespace etcdhook-ready --wait=false >/dev/null

step "e2e suite (real Metacontroller)"
kubeconfig=$("$LK" env | sed -n 's/^export KUBECONFIG=//p' | tr -d '"')
(cd e2e && "$LK" exec --cluster-dns -- ../bin/e2e.test -test.v -test.count=1 -test.parallel=2 -test.timeout=80m -test.run "$RUN" -test.skip "$SKIP" \
  -e2e.kubeconfig="$kubeconfig" -e2e.etcd-next=3.7.3 -e2e.minio="$minio" -e2e.results=RESULTS.md) 2>&1 | tee bin/e2e.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|e2e_test|_test.go' || true
grep -q '^PASS' bin/e2e.log || { tail -200 bin/e2e.log; exit 1; }
step "e2e passed"
