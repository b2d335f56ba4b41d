#!/usr/bin/env bash
# Replays every fixture in hooks/testdata against a real `etcdhook serve` with curl and compares each
# answer with the expected file (both sides through `jq -S`), or the status code with the .code file.
# The server runs with the fixtures' frozen clock and image. Usage: e2e/fixtures.sh [path/to/etcdhook]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-bin/etcdhook}
# The fixture clock and image (internal/fixture): shell cannot import them.
NOW=2026-01-01T12:00:00Z
IMAGE=ghcr.io/etcdhook/etcdhook:v0.1.0

need() { command -v "$1" >/dev/null 2>&1; }
if ! need jq || ! need curl; then
  echo "installing jq and curl" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null && apt-get install -y -qq jq curl >/dev/null
fi
[ -x "$BIN" ] || { echo "no $BIN: run make build" >&2; exit 1; }

# A free loopback port, chosen by the kernel.
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
LOG=$(mktemp)
"$BIN" serve --addr "127.0.0.1:$PORT" --frozen-clock "$NOW" --image "$IMAGE" --drain-delay 0s 2>"$LOG" &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -f "$LOG"' EXIT
for _ in $(seq 1 100); do
  curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
  sleep 0.1
done
curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null || { cat "$LOG" >&2; exit 1; }

pass=0; fail=0
tmp=$(mktemp -d)
for req in hooks/testdata/*/*.request.json; do
  base=${req%.request.json}
  hook=$(basename "$(dirname "$req")")
  [ "$hook" = bench ] && hook=sync
  name=$(basename "$(dirname "$req")")/$(basename "$base")
  code=$(curl -sS -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary @"$req" "http://127.0.0.1:$PORT/$hook")
  if [ -f "$base.code" ]; then
    want=$(tr -d '[:space:]' < "$base.code")
    if [ "$code" = "$want" ] && jq -e '.error | length > 0' "$tmp/body" >/dev/null; then
      pass=$((pass+1))
    else
      echo "FAIL $name: HTTP $code, want $want: $(head -c 300 "$tmp/body")"; fail=$((fail+1))
    fi
    continue
  fi
  if [ "$code" != 200 ]; then
    echo "FAIL $name: HTTP $code: $(head -c 300 "$tmp/body")"; fail=$((fail+1)); continue
  fi
  if diff -u <(jq -S . "$base.response.json") <(jq -S . "$tmp/body") > "$tmp/diff"; then
    pass=$((pass+1))
  else
    echo "FAIL $name: answer differs"; head -40 "$tmp/diff"; fail=$((fail+1))
  fi
done
rm -rf "$tmp"
echo "fixtures: $pass passed, $fail failed"
[ "$fail" = 0 ]
