#!/usr/bin/env bash
# Deletes the Kind cluster made by up.sh.
set -euo pipefail
CLUSTER=${CLUSTER:-etcdhook-e2e}
kind delete cluster --name "$CLUSTER"
