#!/usr/bin/env bash
# Writes a kustomize overlay of manifests/ that runs etcdhook from IMAGE (NAME:TAG) into DIR (under e2e/).
# An overlay's image change does not reach ETCDHOOK_IMAGE (the base copies the image before): it is set too.
# Usage: e2e/overlay.sh DIR IMAGE
set -euo pipefail
dir=$1 image=$2
mkdir -p "$dir"
cat > "$dir/kustomization.yaml" <<YAML
resources:
- ../../manifests
images:
- name: ghcr.io/etcdhook/etcdhook
  newName: ${image%:*}
  newTag: ${image##*:}
patches:
- target: {kind: Deployment, name: etcdhook}
  patch: |-
    - op: replace
      path: /spec/template/spec/containers/0/env/0/value
      value: $image
YAML
