#!/usr/bin/env bash
# Creates a Kind cluster with Metacontroller v4.17.2 and etcdhook (built from this checkout) installed.
# For users with Docker and Kind; CI on a machine without Docker runs the same suite on localkube
# (e2e/local.sh). Usage: e2e/kind/up.sh   (env: CLUSTER, KIND_IMAGE, METACONTROLLER_VERSION)
set -euo pipefail
cd "$(dirname "$0")/../.."
CLUSTER=${CLUSTER:-etcdhook-e2e}
METACONTROLLER_VERSION=${METACONTROLLER_VERSION:-v4.17.2}
IMAGE=localhost/etcdhook:e2e
ETCD_VERSIONS=${ETCD_VERSIONS:-"v3.5.35 v3.6.16 v3.7.3"}

for tool in docker kind kubectl; do
  command -v "$tool" >/dev/null || { echo "$tool is required" >&2; exit 1; }
done

if ! kind get clusters | grep -qx "$CLUSTER"; then
  kind create cluster --name "$CLUSTER" ${KIND_IMAGE:+--image "$KIND_IMAGE"} --wait 120s
fi
kubectl config use-context "kind-$CLUSTER"

echo "installing Metacontroller $METACONTROLLER_VERSION"
kubectl apply -k "https://github.com/metacontroller/metacontroller/manifests/production?ref=$METACONTROLLER_VERSION"
# The settings install/ gives Metacontroller (install/metacontroller/settings.yaml), as e2e/local.sh applies them.
kubectl -n metacontroller patch statefulset metacontroller --patch-file install/metacontroller/settings.yaml
kubectl -n metacontroller rollout status statefulset/metacontroller --timeout=180s

echo "building $IMAGE"
docker build -t "$IMAGE" .
kind load docker-image --name "$CLUSTER" "$IMAGE"
for v in $ETCD_VERSIONS; do
  docker pull "quay.io/coreos/etcd:$v"
  kind load docker-image --name "$CLUSTER" "quay.io/coreos/etcd:$v"
done

echo "installing etcdhook"
overlay=$(mktemp -d e2e/.overlay-XXXXXX)
trap 'rm -rf "$overlay"' EXIT
bash e2e/overlay.sh "$overlay" localhost/etcdhook:e2e
kubectl apply -k "$overlay"
kubectl -n etcdhook-system rollout status deployment/etcdhook --timeout=180s
kubectl wait --for=condition=Established crd/etcdclusters.etcd.io --timeout=60s
echo "ready: e2e/kind/test.sh runs the suite"
