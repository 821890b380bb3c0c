#!/usr/bin/env bash
# Starts package-service (this package's debug build) on a fresh store and a free loopback
# port, sends one request of each kind with curl, then stops it with SIGTERM and prints its log.
#
#   bash Tools/PackageService/example.sh        (make example runs it after the tests)
set -euo pipefail

cd "$(dirname "$0")"
BIN=$PWD/.build/debug/package-service
[ -x "$BIN" ] || swift build --product package-service
TMP=$(mktemp -d)
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
PID=""
trap '[ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null; rm -rf "$TMP"' EXIT

"$BIN" --store "$TMP/store" --port "$PORT" >"$TMP/service.log" 2>&1 &
PID=$!
for _ in $(seq 1 300); do
    curl -sf "$URL/stats" >/dev/null 2>&1 && break
    kill -0 "$PID" 2>/dev/null || { cat "$TMP/service.log" >&2; exit 1; }
    sleep 0.1
done

# show COMMAND…: prints the command as one would type it (arguments with shell characters in
# single quotes, the temporary directory as $TMP), runs it, then a blank line.
show() {
    local line="\$" arg
    for arg in "$@"; do
        arg=${arg//$TMP/\$TMP}
        if [[ $arg =~ ^[A-Za-z0-9_@%+=:,./\$-]+$ ]]; then line+=" $arg"; else line+=" '$arg'"; fi
    done
    echo "$line"
    "$@"
    echo
    echo
}

show curl -s "$URL/packages/adduser"
show curl -s -i "$URL/packages/no-such-package"
show curl -s "$URL/packages?section=admin&limit=2"
show curl -s -i "$URL/packages?section=admin&limit=5000"
"$BIN" bench-data --out "$TMP/data" >/dev/null
# `Expect:`: curl would otherwise ask for "100 Continue" before a body this large, which
# Hummingbird does not send, and wait a second for it.
show curl -s -X POST -H 'Expect:' --data-binary "@$TMP/data/newer.json" "$URL/sync"
show curl -s -i -X POST --data-binary '[{"name": "x" "version": "1"}]' "$URL/sync"
show curl -s "$URL/stats"

kill -TERM "$PID"
wait "$PID"
PID=""
echo "--- the service's log (stderr):"
sed "s#$TMP#\$TMP#g" "$TMP/service.log"
