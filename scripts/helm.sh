#!/usr/bin/env bash
# Runs helm, built once from source and pinned by scripts/gotool.sh, so that `make test` needs nothing
# installed by hand. Usage: scripts/helm.sh <helm arguments>, e.g.
#   scripts/helm.sh lint charts/etcdhook
set -euo pipefail
bin=$("$(dirname "${BASH_SOURCE[0]}")/gotool.sh" helm)
exec "$bin" "$@"
