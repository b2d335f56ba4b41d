#!/usr/bin/env bash
# Runs promtool, built once from source and pinned by scripts/gotool.sh, so that `make test` needs nothing
# installed by hand. Usage: scripts/promtool.sh <promtool arguments>, e.g.
#   scripts/promtool.sh test rules manifests/monitoring/tests/*.yaml
set -euo pipefail
bin=$("$(dirname "${BASH_SOURCE[0]}")/gotool.sh" promtool)
exec "$bin" "$@"
