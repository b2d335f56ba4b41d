#!/usr/bin/env bash
# Checks that a release tag is one the repository is ready to publish: a vMAJOR.MINOR.PATCH (krew and the
# chart's appVersion want one), and the image the install paths name is ghcr.io/etcdhook/etcdhook:TAG,
# the image the release workflow pushes for it. Otherwise a release would push one tag while
# `kubectl apply -k manifests/` and `helm install` pull another. Bump them in the commit you tag.
# Usage: scripts/release-tag.sh vX.Y.Z
set -euo pipefail
tag=${1:?usage: $0 vX.Y.Z}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
image=ghcr.io/etcdhook/etcdhook
if ! [[ $tag =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  echo "$tag: not vMAJOR.MINOR.PATCH" >&2
  exit 1
fi
re=${tag//./\\.}
bad=0
expect() { # FILE REGEX: some line of FILE matches REGEX (extended)
  if ! grep -Eq "$2" "$1"; then
    echo "$1 does not name $image:$tag (no line matching '$2')" >&2
    bad=1
  fi
}
expect manifests/kustomization.yaml "^  newTag: $re\$"   # what kubectl apply -k installs
expect charts/etcdhook/Chart.yaml "^appVersion: $re\$"   # the chart's default image.tag
expect Makefile "^IMAGE +\?= $image:$re\$"               # make run, make image
# manifests/deployment.yaml names the image three times (the init container, the hook, ETCDHOOK_IMAGE);
# kustomize rewrites them, but a reader of the file should see the release's tag.
others=$(grep -o "$image:[^ ,}]*" manifests/deployment.yaml | grep -vx "$image:$tag" || true)
if [ -n "$others" ]; then
  echo "manifests/deployment.yaml names $(echo "$others" | sort -u | paste -sd' ')" >&2
  bad=1
fi
[ "$bad" = 0 ] && echo "$tag: the manifests, the chart and the Makefile name $image:$tag"
exit "$bad"
