#!/usr/bin/env bash
# Installs the C and C++ libraries ObjectGraph builds against (Debian's liblz4-dev,
# libsimdjson-dev, libnats-dev, libsqlite3-dev for graph-journal's export, and pkg-config), the
# nats-server the replication tests start and the sqlite3 shell the export tests read databases
# with, when they are missing. Uses sudo when not root; says what to do when neither works.
set -euo pipefail

missing=()
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists liblz4; then
    missing+=(liblz4-dev)
fi
[ -f /usr/include/simdjson.h ] || missing+=(libsimdjson-dev)
if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists libnats; then
    missing+=(libnats-dev)
fi
if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists sqlite3; then
    missing+=(libsqlite3-dev)
fi
command -v sqlite3 >/dev/null 2>&1 || missing+=(sqlite3)
# Debian installs nats-server in /usr/sbin, which a user's PATH may lack.
nats_server_present() { PATH="$PATH:/usr/sbin:/usr/local/sbin" command -v nats-server >/dev/null 2>&1; }
nats_server_present || missing+=(nats-server)
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]} with apt-get" >&2
if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
else
    echo "install-deps: ${missing[*]} missing and this user can neither run apt-get nor sudo." >&2
    echo "install-deps: run as root: apt-get install -y ${missing[*]}" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-deps: no apt-get here; install ${missing[*]} (liblz4, libnats and libsqlite3 with their pkg-config files, simdjson's header and library, nats-server, the sqlite3 shell) by hand." >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1 || {
    $SUDO apt-get update >/dev/null
    $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
}
pkg-config --exists liblz4 || { echo "install-deps: liblz4 still not found by pkg-config" >&2; exit 1; }
[ -f /usr/include/simdjson.h ] || { echo "install-deps: /usr/include/simdjson.h still missing" >&2; exit 1; }
pkg-config --exists libnats || { echo "install-deps: libnats still not found by pkg-config" >&2; exit 1; }
pkg-config --exists sqlite3 || { echo "install-deps: libsqlite3 still not found by pkg-config" >&2; exit 1; }
command -v sqlite3 >/dev/null 2>&1 || { echo "install-deps: the sqlite3 shell still not found" >&2; exit 1; }
nats_server_present || { echo "install-deps: nats-server still not found" >&2; exit 1; }
