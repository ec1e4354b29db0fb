#!/usr/bin/env bash
# Debian packages some tests use as independent witnesses:
#  - python3-azure: Microsoft's Python azure.eventhub client, a second AMQP client for the
#    Event Hubs emulator conformance test;
#  - systemd: systemd-analyze verify for the unit file the VM install script writes.
# Idempotent; does nothing where everything is present already or apt-get is missing.
set -euo pipefail
need=()
/usr/bin/python3 -c 'import azure.eventhub' >/dev/null 2>&1 || need+=(python3-azure)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
[ ${#need[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-system-deps: apt-get not found; missing: ${need[*]}" >&2
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
