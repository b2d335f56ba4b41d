#!/usr/bin/env bash
# The e2e suite on ../shared/localkube: a real single-node Kubernetes built from Go modules and Debian
# packages, with etcd images built from the Go modules, the etcdhook image from this checkout, and the
# real Metacontroller v4.17.2 installed from its release manifests (../shared/metacontroller). etcdhook
# is installed exactly as the README tells users to: manifests/, then the CompositeController once the
# CRD is Established.
# Usage: e2e/local.sh [go test -run pattern]   (env: LOCALKUBE, METACONTROLLER, KEEP_CLUSTER=1 to leave it up,
# E2E_SERIAL=1 to run every scenario alone: the ones marked beside() otherwise run two at a time,
# E2E_SKIP: a go test -skip pattern; CI's tier skips the fleet and the 5-member recovery (.ci/run), the full tier (make e2e) nothing,
# E2E_UPGRADE_FROM: a commit, the previous release (make e2e sets it; CI's tier does not): before the suite,
# that release is built from git and installed, and TestUpgradeEtcdhook upgrades etcdhook from it to this
# checkout, downgrades it and upgrades it again, alone; docs/operations.md §11 names the same commit)
set -euo pipefail
cd "$(dirname "$0")/.."
here=$(pwd)
shared=$(cd .. && pwd)/shared
LK=${LOCALKUBE:-$shared/localkube/localkube}
MC=${METACONTROLLER:-$shared/metacontroller/metacontroller}
RUN=${1:-.}
# The upgrade test reinstalls etcdhook: it runs alone, in its own step (below), never in the suite.
SKIP=${E2E_SKIP:+$E2E_SKIP|}^TestUpgradeEtcdhook\$
UPGRADE_FROM=${E2E_UPGRADE_FROM:-}
# The test and the docs name one release: docs/operations.md §11 says which one users upgrade from.
if [ -n "$UPGRADE_FROM" ] && ! grep -q "The release before this one: \`$UPGRADE_FROM\`" docs/operations.md; then
  echo "E2E_UPGRADE_FROM=$UPGRADE_FROM is not the release docs/operations.md §11 names as the release before this one"; exit 1
fi
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
  [ -z "${prev:-}" ] || rm -rf "$prev"
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

# etcdhook installed as README (Install) says (e2e/install.sh: the kustomization, the CRD Established,
# the CompositeController), from KUSTOMIZATION (an overlay of manifests/ naming a local image) and the
# registration REGISTRATION. The pods are restarted: a local image's tag is used again for the next build.
install_etcdhook() {
  KUBECTL="$LK kubectl" bash e2e/install.sh "$1" "$2"
  "$LK" kubectl -n etcdhook-system rollout restart deployment/etcdhook
  "$LK" kubectl -n etcdhook-system rollout status deployment/etcdhook --timeout=180s
  # Metacontroller reads the hook's CA (caBundle.secretRef) when it starts the controller; one it could not
  # start before the hook pods made that Secret is retried with a growing backoff: a change of the object
  # makes it try now.
  "$LK" kubectl annotate compositecontroller etcdhook etcdhook.io/serving-cert-ready="$(date +%s)" --overwrite >/dev/null
}
# Metacontroller starts the CompositeController once its discovery (every 20 s) knows the new CRD. Proof
# that the whole path works (discovery, the hook Service, status written back): a throwaway paused
# EtcdCluster (the hook creates nothing for it) must get a status. (A version the hook refuses is
# refused by the CRD itself since issue 24.)
wait_synced() {
  "$LK" kubectl wait --for=delete namespace/etcdhook-ready --timeout=180s >/dev/null 2>&1 || true
  "$LK" kubectl create namespace etcdhook-ready --dry-run=client -o yaml | "$LK" kubectl apply -f - >/dev/null
  "$LK" kubectl apply -f - >/dev/null <<'YAML'
apiVersion: etcd.io/v1alpha1
kind: EtcdCluster
metadata: {name: probe, namespace: etcdhook-ready}
spec: {paused: true}
YAML
  local phase=""
  for _ in $(seq 1 120); do
    phase=$("$LK" kubectl -n etcdhook-ready get etcdcluster probe -o jsonpath='{.status.phase}' 2>/dev/null || true)
    [ -n "$phase" ] && break
    sleep 1
  done
  [ -n "$phase" ] || { echo "Metacontroller did not sync the probe EtcdCluster within 120 s"; exit 1; }
  "$LK" kubectl delete namespace etcdhook-ready --wait=false >/dev/null
}
kubeconfig=$("$LK" env | sed -n 's/^export KUBECONFIG=//p' | tr -d '"')
overlay=e2e/.overlay-local
rm -rf "$overlay" && mkdir -p "$overlay"
bash e2e/overlay.sh "$overlay" localhost/etcdhook:e2e

if [ -n "$UPGRADE_FROM" ]; then
  # The previous release, from git without touching this checkout: its tree extracted outside it, its
  # binary built as make build builds it, its image as this checkout's above.
  step "previous release $UPGRADE_FROM: binary and image, built from git"
  prev=$(mktemp -d "${TMPDIR:-/tmp}/etcdhook-upgrade-from.XXXXXX")   # removed on exit (cleanup)
  git archive "$UPGRADE_FROM" | tar -x -C "$prev"
  (cd "$prev" && CGO_ENABLED=0 go build -ldflags "-s -w -X main.version=$UPGRADE_FROM" -o bin/etcdhook ./cmd/etcdhook)
  "$LK" image build --tag localhost/etcdhook:previous --file "$prev/bin/etcdhook:/etcdhook:0755" --entrypoint /etcdhook --user 65532
  step "install the previous release $UPGRADE_FROM (its manifests/ with localhost/etcdhook:previous, then its metacontroller/)"
  bash "$prev/e2e/overlay.sh" "$prev/e2e/.overlay-previous" localhost/etcdhook:previous
  install_etcdhook "$prev/e2e/.overlay-previous" "$prev/metacontroller"
  step "wait until Metacontroller syncs EtcdClusters (the previous release)"
  wait_synced
  step "upgrade test: $UPGRADE_FROM -> this checkout -> $UPGRADE_FROM -> this checkout (TestUpgradeEtcdhook, alone)"
  upgrade_start=$(date +%s)
  (cd e2e && "$LK" exec --cluster-dns -- ../bin/e2e.test -test.v -test.count=1 -test.timeout=60m -test.run '^TestUpgradeEtcdhook$' \
    -e2e.kubeconfig="$kubeconfig" -e2e.minio="$minio" -e2e.upgrade-from="$UPGRADE_FROM" \
    -e2e.upgrade-from-manifests="$prev/e2e/.overlay-previous" -e2e.upgrade-from-registration="$prev/metacontroller" \
    -e2e.upgrade-from-image=localhost/etcdhook:previous \
    -e2e.upgrade-to-manifests="$here/$overlay" -e2e.upgrade-to-registration="$here/metacontroller" \
    -e2e.upgrade-to-image=localhost/etcdhook:e2e) 2>&1 | tee bin/e2e-upgrade.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|e2e_test|_test.go' || true
  grep -q '^PASS' bin/e2e-upgrade.log || { tail -200 bin/e2e-upgrade.log; exit 1; }
  step "upgrade test passed ($(( $(date +%s) - upgrade_start ))s)"
fi

step "install etcdhook (manifests/ with the local image, then the CompositeController)"
install_etcdhook "$overlay" metacontroller/
step "wait until Metacontroller syncs EtcdClusters"
wait_synced

step "e2e suite (real Metacontroller)"
(cd e2e && "$LK" exec --cluster-dns -- ../bin/e2e.test -test.v -test.count=1 -test.parallel=2 -test.timeout=80m -test.run "$RUN" -test.skip "$SKIP" \
  -e2e.kubeconfig="$kubeconfig" -e2e.etcd-next=3.7.3 -e2e.minio="$minio" -e2e.results=RESULTS.md) 2>&1 | tee bin/e2e.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|e2e_test|_test.go' || true
grep -q '^PASS' bin/e2e.log || { tail -200 bin/e2e.log; exit 1; }
step "e2e passed"
