#!/usr/bin/env bash
# Runs actionlint, built once from source and pinned by scripts/gotool.sh: without file arguments it
# checks the .github/workflows it finds from the current directory up, as `make lint` does for the release
# workflow, with nothing installed by hand. Usage: scripts/actionlint.sh [actionlint arguments]
set -euo pipefail
bin=$("$(dirname "${BASH_SOURCE[0]}")/gotool.sh" actionlint)
exec "$bin" "$@"
