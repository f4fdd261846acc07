#!/usr/bin/env bash
# `make console-demo`: the web console on the sample corpus, in one command (docs/console.md).
# Starts `citewise serve` on its own home (.citewise-console), uploads the samples through the API as the
# demo tenant's admin (so every citation opens at its passage: the originals are in the server's store),
# prints a one-time sign-in link, and serves until Ctrl-C.
set -euo pipefail
BIN=${BIN:-.venv/bin}
PORT=${CONSOLE_PORT:-8080}
export CITEWISE_HOME=${CITEWISE_HOME:-.citewise-console}
export CITEWISE_SERVER="http://127.0.0.1:$PORT"
mkdir -p "$CITEWISE_HOME"

"$BIN/citewise" serve --port "$PORT" &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true' EXIT INT TERM
until "$BIN/python" -c "import urllib.request; urllib.request.urlopen('$CITEWISE_SERVER/v1/health', timeout=1)" 2>/dev/null; do
  kill -0 "$server" 2>/dev/null || { echo "citewise serve did not start (is port $PORT free? CONSOLE_PORT=... picks another)" >&2; exit 1; }
  sleep 0.5
done
# The token goes through the environment, never the command line (which the process list shows).
CITEWISE_TOKEN=$("$BIN/citewise" token --tenant demo --user demo --group admin) \
  "$BIN/citewise" upload samples/corpus/architecture.md.metadata.json samples/corpus/api.html samples/corpus/architecture.md samples/corpus/deployment.md \
  samples/corpus/operations-runbook.pdf --prefix samples/
echo
echo "Open the web console (the link works once, for five minutes):"
"$BIN/citewise" console --tenant demo --user demo --group admin --server "$CITEWISE_SERVER"
echo "Ctrl-C stops the server."
wait "$server"
