#!/usr/bin/env bash
# Installs what `make bench-peers` needs and is missing: Debian's redis-server (the Redis AOF
# peer) and libsqlite3-dev (GRDB links the system SQLite on Linux). Idempotent; needs root (or
# sudo) only when something is missing.
set -euo pipefail

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need+=(redis-tools)
dpkg -s libsqlite3-dev >/dev/null 2>&1 || need+=(libsqlite3-dev)

if [ ${#need[@]} -eq 0 ]; then
    echo "install-peers: redis-server, redis-cli and libsqlite3-dev are present"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-peers: installing ${need[*]}"
$SUDO apt-get update -qq
# No service start from the package's maintainer scripts: the benchmark runs its own
# redis-server on a free port of 127.0.0.1 and stops it afterwards.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod +x "$policy"
    created_policy=1
fi
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
if [ "$created_policy" -eq 1 ]; then $SUDO rm -f "$policy"; fi
redis-server --version
