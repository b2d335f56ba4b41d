#!/usr/bin/env bash
# Runs kustomize, built once from source and pinned by scripts/gotool.sh, so that `make test` needs nothing
# installed by hand. Usage: scripts/kustomize.sh <kustomize arguments>, e.g.
#   scripts/kustomize.sh build install/
set -euo pipefail
bin=$("$(dirname "${BASH_SOURCE[0]}")/gotool.sh" kustomize)
exec "$bin" "$@"
