#!/bin/bash
# Removes se-shipper installed by deploy/install.sh: stops and disables the service, removes the
# unit, the settings and /opt/se-shipper. The state directory (spool of records not yet delivered)
# and the system user are kept unless --purge is given.
#
#   uninstall.sh [--purge] [--state-dir DIR] [--root DIR]
set -euo pipefail

PURGE=0
STATE_DIR="/var/lib/se-shipper"
ROOT="/"
SVC_USER="se-shipper"
UNIT_NAME="se-shipper.service"

log() { printf 'se-shipper uninstall: %s\n' "$*" >&2; }

while [ $# -gt 0 ]; do
  case "$1" in
  --purge) PURGE=1; shift ;;
  --state-dir) STATE_DIR="${2:?}"; shift 2 ;;
  --root) ROOT="${2:?}"; shift 2 ;;
  -h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
  *) log "unknown argument: $1"; exit 1 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { log "must run as root"; exit 1; }
case "$ROOT" in /*) ;; *) log "--root must be absolute"; exit 1 ;; esac
ROOT="${ROOT%/}"
R() { printf '%s%s' "$ROOT" "$1"; }

if [ -z "$ROOT" ] && command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  systemctl disable --now "$UNIT_NAME" >/dev/null 2>&1 || true
fi
rm -f "$(R /etc/systemd/system)/$UNIT_NAME"
if [ -z "$ROOT" ] && command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  systemctl daemon-reload || true
fi
rm -rf "$(R /etc/se-shipper)" "$(R /opt/se-shipper)"

if [ "$PURGE" -eq 1 ]; then
  rm -rf "$(R "$STATE_DIR")"
  if grep -q "^${SVC_USER}:" "$(R /etc/passwd)" 2>/dev/null; then
    if [ -n "$ROOT" ]; then userdel --prefix "$ROOT" "$SVC_USER"; else userdel "$SVC_USER"; fi
  fi
  log "removed se-shipper, its state and its user"
else
  log "removed se-shipper; kept $STATE_DIR and user $SVC_USER (use --purge to remove them)"
fi
