#!/usr/bin/env bash
# GET /packages/{name} under load, ObjectGraph next to SQLite through GRDB, on loopback:
#
#   (a) wrk alone, (b) wrk while a loop POSTs /sync documents without pause,
#   for the ObjectGraph backend (AsyncStore, reads from snapshots) and the GRDB backend
#   (DatabasePool in WAL mode, reads on reader connections): the same executable, the same
#   routes and JSON encoding, the same data.
#
# wrk: 4 connections, 2 threads, BENCH_DURATION (10s) per run, random names from the fixture
# (bench/get-random.lua). BENCH_ROUNDS rounds (5) of the four configurations, in turn, each
# after a 3 s warm-up of its server; the report gives every round and the median.
# Writes Results/http.md. Release build; about 5 minutes after it.
#
#   bash Tools/PackageService/bench.sh        (or: make bench-http)
set -euo pipefail

cd "$(dirname "$0")"
HERE=$PWD
ROUNDS=${BENCH_ROUNDS:-5}
DURATION=${BENCH_DURATION:-10s}
CONNECTIONS=4
THREADS=2
WORK=$HERE/.build/bench
SWIFT=${SWIFT:-swift}

# `bench.sh --report`: writes Results/http.md again from the last run's files, without measuring.
REPORT_ONLY=0
[ "${1:-}" = "--report" ] && REPORT_ONLY=1

if [ "$REPORT_ONLY" -eq 0 ]; then
bash ./install-bench-tools.sh

# What is measured: the library's commit, and its uncommitted changes, as the build sees them.
LIBRARY=$(cd "$HERE/../.." && pwd)
COMMIT=$(git -C "$LIBRARY" rev-parse --short HEAD)
DIRTY=$(git -C "$LIBRARY" status --porcelain -- Sources Package.swift | wc -l)

# The release build loads the `@Entity` macro from this package's debug build instead of
# compiling swift-syntax in release (Package.swift, OBJECTGRAPH_MACRO_PLUGIN). An
# OBJECTGRAPH_MACRO_PLUGIN already set (e.g. the library's own debug build of the macro) is used
# as it is, without building the macro target here.
if [ -n "${OBJECTGRAPH_MACRO_PLUGIN:-}" ] && [ -x "$OBJECTGRAPH_MACRO_PLUGIN" ]; then
    PLUGIN=$OBJECTGRAPH_MACRO_PLUGIN
else
    $SWIFT build --product ObjectGraphMacros
    PLUGIN=$HERE/.build/debug/ObjectGraphMacros-tool
fi
OBJECTGRAPH_MACRO_PLUGIN=$PLUGIN $SWIFT build -c release --product package-service
BIN=$HERE/.build/release/package-service

rm -rf "$WORK"
mkdir -p "$WORK"
"$BIN" bench-data --out "$WORK/data"
{
    echo "COMMIT=$COMMIT"
    echo "DIRTY=$DIRTY"
    echo "STARTED='$(date -u '+%Y-%m-%d %H:%M')'"
} >"$WORK/meta.env"

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

SERVICE_PID=""
PORT=""
SYNC_PID=""

cleanup() {
    if [ -n "$SYNC_PID" ]; then kill "$SYNC_PID" 2>/dev/null || true; fi
    if [ -n "$SERVICE_PID" ]; then kill -TERM "$SERVICE_PID" 2>/dev/null || true; fi
}
trap cleanup EXIT

# start_service BACKEND: a fresh store loaded from the fixture, on a free port.
start_service() {
    local backend=$1
    PORT=$(free_port)
    rm -rf "$WORK/store-$backend"
    "$BIN" --store "$WORK/store-$backend" --backend "$backend" --port "$PORT" >"$WORK/service-$backend.log" 2>&1 &
    SERVICE_PID=$!
    for _ in $(seq 1 300); do
        if curl -sf "http://127.0.0.1:$PORT/stats" >/dev/null 2>&1; then return 0; fi
        if ! kill -0 "$SERVICE_PID" 2>/dev/null; then cat "$WORK/service-$backend.log" >&2; exit 1; fi
        sleep 0.1
    done
    echo "bench: the $backend service did not answer" >&2
    exit 1
}

# stop_service: SIGTERM, then wait for the graceful shutdown (the store is closed).
stop_service() {
    kill -TERM "$SERVICE_PID"
    wait "$SERVICE_PID" || { echo "bench: the service exited with $?" >&2; exit 1; }
    SERVICE_PID=""
}

# sync_loop FILE: POSTs older.json and newer.json in turn until killed; one line per sync:
# the answer's JSON, the status and curl's total time. `Expect:` stops curl from asking for a
# "100 Continue" before a large body, which Hummingbird does not send (curl would wait 1 s).
sync_loop() {
    local out=$1
    while :; do
        for doc in older newer; do
            curl -sS -X POST -H 'Content-Type: application/json' -H 'Expect:' --data-binary "@$WORK/data/$doc.json" \
                -w ' %{http_code} %{time_total}\n' "http://127.0.0.1:$PORT/sync" >>"$out" || true
        done
    done
}

# run_wrk LABEL: one wrk run against the current service, its summary line kept in LABEL.wrk.
run_wrk() {
    local label=$1
    cat /proc/loadavg >"$WORK/$label.loadavg-before"
    wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --latency -s "$HERE/bench/get-random.lua" \
        "http://127.0.0.1:$PORT" -- "$WORK/data/names.txt" >"$WORK/$label.out"
    cat /proc/loadavg >"$WORK/$label.loadavg-after"
    grep '^WRK ' "$WORK/$label.out" >"$WORK/$label.wrk"
}

measure() {
    local backend=$1 round=$2
    start_service "$backend"
    curl -s "http://127.0.0.1:$PORT/stats" >"$WORK/$backend.stats.json"
    # Warm-up: connections, caches, the allocator's pools.
    wrk -t"$THREADS" -c"$CONNECTIONS" -d3s -s "$HERE/bench/get-random.lua" "http://127.0.0.1:$PORT" -- "$WORK/data/names.txt" >/dev/null

    echo "bench: round $round, $backend, GET alone"
    run_wrk "$backend-alone-$round"

    echo "bench: round $round, $backend, GET while syncing"
    local syncs="$WORK/$backend-sync-$round.syncs"
    : >"$syncs"
    sync_loop "$syncs" &
    SYNC_PID=$!
    sleep 2  # the loop's first syncs, before the measured window
    wc -l <"$syncs" >"$syncs.start"
    run_wrk "$backend-sync-$round"
    wc -l <"$syncs" >"$syncs.end"
    kill "$SYNC_PID"
    wait "$SYNC_PID" 2>/dev/null || true
    SYNC_PID=""
    stop_service
}

for round in $(seq 1 "$ROUNDS"); do
    for backend in objectgraph grdb; do
        measure "$backend" "$round"
    done
done
{
    echo "ROUNDS=$ROUNDS"
    echo "LOADAVG='$(cat /proc/loadavg)'"
} >>"$WORK/meta.env"
fi

# shellcheck disable=SC1091
source "$WORK/meta.env"
SQLITE=$(grep -o 'sqlite=[^ ]*' "$WORK/service-grdb.log" | head -1 | cut -d= -f2)
JOURNAL_MODE=$(grep -o 'journal_mode=[^ ]*' "$WORK/service-grdb.log" | head -1 | cut -d= -f2)

python3 - "$WORK" "$ROUNDS" "$DURATION" "$CONNECTIONS" "$THREADS" "$COMMIT" "$DIRTY" "$SQLITE" "$JOURNAL_MODE" \
    "$LOADAVG" "$(nproc)" "$(wrk --version 2>&1 | head -1 | cut -d' ' -f1-2)" "$STARTED" >"$HERE/Results/http.md" <<'PY'
import json, statistics, sys, os
work, rounds, duration, connections, threads, commit, dirty, sqlite, journal_mode, loadavg, cores, wrkversion, started = sys.argv[1:]
rounds = int(rounds)

def wrk(label):
    line = open(os.path.join(work, label + ".wrk")).read().split()
    return {k: float(v) for k, v in (f.split("=") for f in line[1:])}

def syncs(label):
    path = os.path.join(work, label + ".syncs")
    start = int(open(path + ".start").read())
    end = int(open(path + ".end").read())
    lines = open(path).read().splitlines()[start:end]
    done, server_ms, total_s, failed = 0, [], [], 0
    for line in lines:
        try:
            body, status, seconds = line.rsplit(" ", 2)
            if status != "200":
                raise ValueError(status)
            ms = json.loads(body)["milliseconds"]
        except (ValueError, KeyError):
            failed += 1
            continue
        done += 1
        server_ms.append(ms)
        total_s.append(float(seconds))
    return done, server_ms, total_s, failed

def loadavg_of(label):
    return open(os.path.join(work, label + ".loadavg-before")).read().split()[0], open(os.path.join(work, label + ".loadavg-after")).read().split()[0]

configs = [("objectgraph", "alone", "ObjectGraph (AsyncStore snapshots)", "GET alone"),
           ("objectgraph", "sync", "ObjectGraph (AsyncStore snapshots)", "GET while syncing"),
           ("grdb", "alone", "SQLite via GRDB (DatabasePool, WAL)", "GET alone"),
           ("grdb", "sync", "SQLite via GRDB (DatabasePool, WAL)", "GET while syncing")]

out = []
w = out.append
w("# HTTP under load: `GET /packages/{name}`, ObjectGraph and SQLite (GRDB)")
w("")
w(f"Written by `make bench-http` (`Tools/PackageService/bench.sh`), run started {started} UTC, library commit `{commit}`"
  + (f" with {dirty} uncommitted or untracked paths under the library's `Sources/` and `Package.swift` (the working tree was built)."
     if int(dirty) else " (no uncommitted change under the library's `Sources/` and `Package.swift` when it was built)."))
w("")
w(f"Machine: {cores} cores; `cat /proc/loadavg` after the last run: `{loadavg}`. The server, wrk and the sync loop share "
  "these cores (the load average of about 4 is theirs: the server's threads, wrk's two, curl); each run's load average is "
  "in the table of rounds.")
w("")
w("## Median of the rounds")
w("")
w("| backend | load | requests/s | p50 | p99 | max | syncs done in the window | sync, server side (median) |")
w("|---|---|---:|---:|---:|---:|---:|---:|")
medians = {}
sync_medians = {}
for backend, mode, title, load in configs:
    runs = [wrk(f"{backend}-{mode}-{r}") for r in range(1, rounds + 1)]
    rps = statistics.median(r["rps"] for r in runs)
    p50 = statistics.median(r["p50_us"] for r in runs)
    p99 = statistics.median(r["p99_us"] for r in runs)
    mx = statistics.median(r["max_us"] for r in runs)
    medians[(backend, mode)] = (rps, p99)
    if mode == "sync":
        s = [syncs(f"{backend}-{mode}-{r}") for r in range(1, rounds + 1)]
        done = statistics.median(x[0] for x in s)
        sync_medians[backend] = done
        ms = [m for x in s for m in x[1]]
        sync_cells = f"{done:g} | {statistics.median(ms):.1f} ms" if ms else "0 | -"
    else:
        sync_cells = "- | -"
    w(f"| {title} | {load} | {rps:,.0f} | {p50 / 1000:.2f} ms | {p99 / 1000:.2f} ms | {mx / 1000:.1f} ms | {sync_cells} |")
w("")
og_a, og_s, sq_a, sq_s = (medians[("objectgraph", "alone")], medians[("objectgraph", "sync")],
                          medians[("grdb", "alone")], medians[("grdb", "sync")])
w(f"ObjectGraph ÷ SQLite, requests/s: {og_a[0] / sq_a[0]:.2f}× alone, {og_s[0] / sq_s[0]:.2f}× while syncing. "
  f"p99: {og_a[1] / 1000:.2f} ms against {sq_a[1] / 1000:.2f} ms alone, {og_s[1] / 1000:.2f} ms against {sq_s[1] / 1000:.2f} ms while syncing. "
  f"Requests/s while syncing, relative to alone: ObjectGraph {og_s[0] / og_a[0]:.2f}, SQLite {sq_s[0] / sq_a[0]:.2f}. "
  f"The sync loop runs back to back, so the write load is not the same on both sides: in the same {duration} the "
  f"ObjectGraph service completed {sync_medians['objectgraph']:g} syncs and the SQLite one {sync_medians['grdb']:g} "
  "(medians), each a whole document of about 4,000 records.")
w("")
w("## Every round")
w("")
w("| round | backend | load | requests/s | p50 | p99 | max | non-2xx | socket errors | syncs done (failed) | sync: server ms mean / curl s mean | loadavg (1 min) before → after |")
w("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
for r in range(1, rounds + 1):
    for backend, mode, title, load in configs:
        label = f"{backend}-{mode}-{r}"
        x = wrk(label)
        sock = int(x["errors_connect"] + x["errors_read"] + x["errors_write"] + x["errors_timeout"])
        if mode == "sync":
            done, ms, secs, failed = syncs(label)
            sync_cells = f"{done} ({failed}) | {statistics.mean(ms):.1f} / {statistics.mean(secs):.3f}" if ms else f"0 ({failed}) | -"
        else:
            sync_cells = "- | -"
        b, a = loadavg_of(label)
        w(f"| {r} | {backend} | {load} | {x['rps']:,.0f} | {x['p50_us'] / 1000:.2f} ms | {x['p99_us'] / 1000:.2f} ms | "
          f"{x['max_us'] / 1000:.1f} ms | {int(x['errors_status'])} | {sock} | {sync_cells} | {b} → {a} |")
w("")
stats = {b: json.load(open(os.path.join(work, f"{b}.stats.json"))) for b in ("objectgraph", "grdb")}
w("## Configurations")
w("")
w(f"- **Load**: `{wrkversion}`, `-t{threads} -c{connections} -d{duration} --latency`, `bench/get-random.lua`: "
  "`GET /packages/{name}` with names drawn at random (seeded per thread) from the "
  f"names present in both sync documents, so every request finds its package. Loopback (127.0.0.1). "
  "A 3 s warm-up run precedes the measured runs of each server.")
w("- **Concurrent syncs** (\"while syncing\"): a shell loop of `curl -X POST --data-binary @… /sync`, without pause, "
  "alternating `older.json` (the fixture without every 97th package) and `newer.json` (the fixture without the "
  "obsolete packages, the largest maintainer team's versions bumped), written by `package-service bench-data`; each "
  "sync inserts, updates and deletes packages and maintainers. The loop starts 2 s before wrk; the syncs counted are "
  "those that ended during wrk's window. \"Server side\" is the `milliseconds` of the answer (parse to durable save).")
w(f"- **Server**: the `package-service` release build, the same for both backends: Hummingbird 2 (HTTP/1.1, "
  "NIO's singleton event loop group, one thread per core), the same routes and JSON encoding (`JSONEncoder`, sorted "
  "keys), log level info (no per-request log). Each server starts on a fresh store loaded from the fixture "
  f"(4,000 packages, {stats['objectgraph']['maintainers']} maintainers).")
w("- **ObjectGraph**: `AsyncStore` with the default `StoreOptions` (durability `.always`: each save is fsynced). "
  "`GET /packages/{name}` reads `store.snapshot.object(DebianPackage.self, where: \\.name, equals:)` (the snapshot's "
  "unique index) and `decode(as: PackageBody.self)` on the request's task; `POST /sync` runs `context.sync` "
  "(two entity mappings of the document, the sweep) inside `store.perform`.")
w(f"- **SQLite {sqlite} via GRDB 7.10**: `DatabasePool` (journal_mode={journal_mode}; readers on their own connections, "
  "GRDB's default of at most 5), `synchronous=FULL` (each commit fsynced, as each ObjectGraph save is), "
  "`package(name TEXT NOT NULL, …)` with `CREATE UNIQUE INDEX package_name ON package(name)` and an index on "
  "`(section, name)`. `GET /packages/{name}` is `try await pool.read { PackageBody.fetchOne(db.cachedStatement(sql: "
  "\"SELECT … WHERE name = ?\"), arguments: [name]) }`, the row read by column position (`init(row:)`, the "
  "`depends` JSON text decoded by one shared `JSONDecoder`); `POST /sync` decodes the document with `JSONDecoder` "
  "into records, then one `pool.write` transaction: the stored names and versions and the maintainers' IDs read "
  "once into dictionaries (`Row` cursors), then prepared, cached statements with arguments: maintainers inserted "
  "when missing (`lastInsertedRowID`), each package inserted, updated when its version changed or left (one "
  "`JSONEncoder` for the `depends` column of the rows written), then a `DELETE` by name of each package the "
  "document no longer lists, and of the maintainers left without a package.")
w("")
print("\n".join(out))
PY

echo "bench: wrote $HERE/Results/http.md"
cat "$HERE/Results/http.md"
