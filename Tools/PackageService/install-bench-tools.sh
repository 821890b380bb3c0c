#!/usr/bin/env bash
# Installs what bench.sh and `make example` need and is missing: Debian's wrk (the HTTP load
# generator), curl (the sync loop and the smoke requests) and libsqlite3-dev (GRDB links the
# system SQLite on Linux). Idempotent; uses sudo when not root, and says what to do when
# neither works.
set -euo pipefail

need=()
command -v wrk >/dev/null 2>&1 || need+=(wrk)
command -v curl >/dev/null 2>&1 || need+=(curl)
dpkg -s libsqlite3-dev >/dev/null 2>&1 || need+=(libsqlite3-dev)
[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
else
    echo "install-bench-tools: ${need[*]} missing and this user can neither run apt-get nor sudo." >&2
    echo "install-bench-tools: run as root: apt-get install -y ${need[*]}" >&2
    exit 1
fi
echo "install-bench-tools: installing ${need[*]} with apt-get" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 || {
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
}
command -v wrk >/dev/null 2>&1 || { echo "install-bench-tools: wrk still missing" >&2; exit 1; }
