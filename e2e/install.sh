#!/usr/bin/env bash
# Installs, upgrades or downgrades etcdhook under a running Metacontroller with the commands README
# (Install) and docs/operations.md §10 and §11 give: the kustomization KUSTOMIZATION (manifests/, or an
# overlay of it that names another image: e2e/overlay.sh), then, once the CRD is Established, the
# CompositeController registration METACONTROLLER_DIR (metacontroller/); it returns when the hook
# Deployment runs the new pods. e2e/local.sh installs HEAD with it, and TestUpgradeEtcdhook
# (e2e/upgrade_test.go) installs HEAD over the previous release, the previous release over HEAD, and
# HEAD again with it.
# Usage: e2e/install.sh KUSTOMIZATION METACONTROLLER_DIR   (env KUBECTL: the kubectl command, default kubectl)
set -euo pipefail
kustomization=$1 registration=$2
read -r -a kubectl_cmd <<< "${KUBECTL:-kubectl}"
# The commands as the docs write them (docs/commands_test.go reads them here).
kubectl() { command "${kubectl_cmd[@]}" "$@"; }
kubectl apply -k "$kustomization"
kubectl wait --for=condition=Established crd/etcdclusters.etcd.io --timeout=60s
kubectl apply -k "$registration"
kubectl -n etcdhook-system rollout status deployment/etcdhook --timeout=180s
