#!/usr/bin/env bash
# A primary and a read replica of package-service over a three-server NATS JetStream cluster on
# loopback: starts the servers (cluster/nats-{1,2,3}.conf, each with a JetStream store in a
# temporary directory), a primary (--replicate, loading the fixture into a fresh store, which
# ships) and a replica (--follow, on a store of its own), sends a sync to the primary, waits
# until the replica applied it, reads the change from the replica, then stops everything it
# started, also when a step fails or on Ctrl-C.
#
#   make example-cluster        (builds the service in debug first)
#   bash Tools/PackageService/example-cluster.sh
set -euo pipefail

cd "$(dirname "$0")"
BIN=$PWD/.build/debug/package-service
[ -x "$BIN" ] || swift build --product package-service
NATS_SERVER=$(command -v nats-server || echo /usr/sbin/nats-server)
[ -x "$NATS_SERVER" ] || { echo "nats-server is not installed (Tools/install-deps.sh installs Debian's)" >&2; exit 1; }

# The ports of the committed configurations: clients, routes, monitoring.
CLIENT_PORTS=(14222 14223 14224)
ROUTE_PORTS=(16222 16223 16224)
MONITOR_PORTS=(18222 18223 18224)
NATS_URLS=nats://127.0.0.1:14222,nats://127.0.0.1:14223,nats://127.0.0.1:14224
STREAM=PKGD
for port in "${CLIENT_PORTS[@]}" "${ROUTE_PORTS[@]}" "${MONITOR_PORTS[@]}"; do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "port $port is in use: the cluster's configurations (cluster/nats-*.conf) need it" >&2
        exit 1
    fi
done

TMP=$(mktemp -d)
NATS_PIDS=()
SERVICE_PIDS=()
FAILED=1
# stop PID…: SIGTERM, then waits for each (they stop gracefully: the services close their stores).
stop() {
    local pid
    for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "$@"; do wait "$pid" 2>/dev/null || true; done
}
cleanup() {
    trap - EXIT INT TERM
    stop "${SERVICE_PIDS[@]}"
    stop "${NATS_PIDS[@]}"
    if [ "$FAILED" = 1 ]; then
        for log in "$TMP"/*.log; do
            [ -f "$log" ] || continue
            echo "--- the last lines of $(basename "$log"):" >&2
            tail -n 20 "$log" | sed "s#$TMP#\$TMP#g" >&2
        done
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

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

# field KEY: the value of KEY in the JSON object on stdin, empty when null or missing (python3).
field() { python3 -c 'import json, sys; v = json.load(sys.stdin).get(sys.argv[1]); print("" if v is None else v)' "$1"; }

# wait_for WHAT SECONDS COMMAND…: runs COMMAND every 0.2 s until it succeeds; fails after SECONDS.
# The bounds are generous (a loaded machine, a debug build): each wait ends at the event.
wait_for() {
    local what=$1 seconds=$2 start=$SECONDS
    shift 2
    until "$@"; do
        if ((SECONDS - start > seconds)); then
            echo "gave up waiting for $what after $seconds s" >&2
            return 1
        fi
        sleep 0.2
    done
}

echo "== three nats-servers with JetStream (cluster/nats-{1,2,3}.conf), stores under \$TMP"
for i in 1 2 3; do
    mkdir -p "$TMP/nats-$i"
    NATS_STORE_DIR=$TMP/nats-$i "$NATS_SERVER" -c "cluster/nats-$i.conf" >"$TMP/nats-$i.log" 2>&1 &
    NATS_PIDS+=($!)
done
cluster_ready() {
    local port
    for port in "${MONITOR_PORTS[@]}"; do
        curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 || return 1
    done
    # A JetStream metadata leader: streams can be created.
    curl -sf "http://127.0.0.1:${MONITOR_PORTS[0]}/jsz" | python3 -c \
        'import json, sys; sys.exit(0 if (json.load(sys.stdin).get("meta_cluster") or {}).get("leader") else 1)'
}
wait_for "the NATS cluster" 120 cluster_ready
for i in 0 1 2; do
    echo "nats-server $((i + 1)): pid ${NATS_PIDS[$i]}, nats://127.0.0.1:${CLIENT_PORTS[$i]}"
done
echo

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PRIMARY=http://127.0.0.1:$(free_port)
REPLICA=http://127.0.0.1:$(free_port)
# start_service NAME URL ARGUMENTS…: starts the service in the background, logging to $TMP/NAME.log.
start_service() {
    local name=$1 url=$2
    shift 2
    echo "\$ package-service --store \$TMP/$name --port ${url##*:} $*"
    "$BIN" --store "$TMP/$name" --port "${url##*:}" "$@" >"$TMP/$name.log" 2>&1 &
    SERVICE_PIDS+=($!)
    local pid=$!
    healthy() {
        kill -0 "$pid" 2>/dev/null || { echo "$name exited" >&2; exit 1; }
        curl -sf "$url/health" >/dev/null 2>&1
    }
    wait_for "$name to answer GET /health" 300 healthy
}

echo "== the primary: loads the fixture into a fresh store; the saves ship to stream $STREAM"
start_service primary "$PRIMARY" --replicate "$NATS_URLS" --stream "$STREAM"
show curl -s "$PRIMARY/health"

echo "== the replica: follows stream $STREAM into a store of its own"
start_service replica "$REPLICA" --follow "$NATS_URLS" --stream "$STREAM"
LOADED=$(curl -s "$PRIMARY/health" | field lastSequence)
applied() { [ "$(curl -s "$REPLICA/health" | field lastSequence)" -ge "$1" ] 2>/dev/null; }
wait_for "the replica to apply the fixture's load (record $LOADED)" 300 applied "$LOADED"
show curl -s "$REPLICA/health"

echo "== a sync on the primary (the fixture without its obsolete packages, one team's at a new version)"
"$BIN" bench-data --out "$TMP/data" >/dev/null
# The first package whose version the sync changes, and the first it deletes.
read -r CHANGED DELETED < <(python3 - "$TMP/data" <<'EOF'
import json, sys
newer = json.load(open(sys.argv[1] + "/newer.json"))
older = json.load(open(sys.argv[1] + "/older.json"))
listed = {r["name"] for r in newer}
before = {r["name"]: r["version"] for r in older}
changed = next(r["name"] for r in newer if r["name"] in before and r["version"] != before[r["name"]])
deleted = next(r["name"] for r in older if r["name"] not in listed)
print(changed, deleted)
EOF
)
show curl -s "$REPLICA/packages/$CHANGED"
BEFORE=$(curl -s "$REPLICA/packages/$CHANGED" | field version)
# `Expect:`: curl would otherwise ask for "100 Continue" before a body this large, which
# Hummingbird does not send, and wait a second for it.
show curl -s -X POST -H 'Expect:' --data-binary "@$TMP/data/newer.json" "$PRIMARY/sync"
SYNCED=$(curl -s "$PRIMARY/health" | field lastSequence)
START_NS=$(date +%s%N)
wait_for "the replica to apply record $SYNCED" 300 applied "$SYNCED"
echo "The replica applied record $SYNCED $(((($(date +%s%N) - START_NS) / 1000000))) ms after the primary's answer (polled every 0.2 s)."
echo

echo "== the change, read from the replica"
show curl -s "$REPLICA/health"
show curl -s "$REPLICA/packages/$CHANGED"
echo "$CHANGED on the replica: $BEFORE before the sync, $(curl -s "$REPLICA/packages/$CHANGED" | field version) after it."
echo
show curl -s -i "$REPLICA/packages/$DELETED"
show curl -s -i -X POST -H 'Expect:' --data-binary "@$TMP/data/older.json" "$REPLICA/sync"
echo "\$ curl -s $REPLICA/metrics | grep -E '^(package_service|objectgraph_follower|hb_requests)'"
curl -s "$REPLICA/metrics" | grep -E '^(package_service|objectgraph_follower|hb_requests)'
echo
echo "\$ curl -s $PRIMARY/metrics | grep -E '^(package_service|objectgraph_(shipp|saves_total))'"
curl -s "$PRIMARY/metrics" | grep -E '^(package_service|objectgraph_(shipp|saves_total))'
echo

echo "== stopping the services (SIGTERM), then the nats-servers"
stop "${SERVICE_PIDS[@]}"
SERVICE_PIDS=()
for name in primary replica; do
    echo "--- the $name's log (stderr):"
    sed "s#$TMP#\$TMP#g" "$TMP/$name.log"
done
stop "${NATS_PIDS[@]}"
NATS_PIDS=()
FAILED=0
echo "stopped: 2 services, 3 nats-servers; removed \$TMP"
