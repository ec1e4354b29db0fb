#!/bin/bash
# Installs se-shipper (scheduled-events-shipper) as a hardened systemd service on a Linux VM.
# Run as root: by the Azure Custom Script extension (infra/bicep/modules/shipper-vm*.bicep prepend
# `set -- <arguments>`), by cloud-init, or by hand. Idempotent: rerunning upgrades in place.
#
#   install.sh --eventhubs-namespace NS.servicebus.windows.net --eventhub NAME --client-id GUID
#              [--package NPM_SPEC | --bundle PATH_OR_URL] [--node auto|nodejs.org|distro]
#              [--node-version X.Y.Z] [--node-dist-url URL] [--state-dir DIR] [--scope self|all]
#              [--heartbeat-interval SECONDS] [--log-level LEVEL] [--health-port PORT]
#              [--root DIR] [--no-start]
#
# Node.js: --node auto (default) uses an installed `node` >= 20.19 as is, and otherwise does what
# --node nodejs.org does: download the pinned official binary tarball (--node-version) from
# nodejs.org (or a mirror: --node-dist-url, same layout), verify it against the release's
# SHASUMS256.txt and unpack it privately into /opt/se-shipper/node (nothing system-wide changes;
# the service keeps its runtime when the system's node changes). --node distro installs the
# distribution's nodejs package and fails if it is older than 20.19 (true of Ubuntu 22.04/24.04
# and Debian 12 at the time of writing, hence not the default).
#
# The shipper: --package (default scheduled-events-shipper@<version>) is anything `npm install`
# accepts: a registry spec, an https URL or a local path of an `npm pack` tarball; it needs the npm
# registry for dependencies. --bundle takes a self-contained tarball made by deploy/make-bundle.sh
# (local path or https URL, e.g. a blob with a SAS): no npm and no registry needed on the VM.
#
# Layout: /opt/se-shipper/lib/node_modules/scheduled-events-shipper (code), /opt/se-shipper/node
# (private Node.js, when downloaded), /etc/se-shipper/se-shipper.env (settings, SE_SHIPPER_*),
# /etc/systemd/system/se-shipper.service, state in /var/lib/se-shipper (OS disk, survives reboots
# and redeploys; never the ephemeral resource disk), system user se-shipper.
#
# --root DIR (or env SE_INSTALL_ROOT) lays everything out under DIR instead of / (image building,
# tests): the user is created with `useradd --prefix DIR` (DIR/etc/passwd must exist) and systemd
# is not touched. --no-start (or env SE_INSTALL_NO_START=1) writes everything but starts nothing.
set -euo pipefail

SHIPPER_VERSION_DEFAULT="0.1.0"
NODE_VERSION_DEFAULT="22.12.0"
NODE_MIN_MAJOR=20
NODE_MIN_MINOR=19

NAMESPACE=""
EVENTHUB=""
CLIENT_ID=""
PACKAGE="scheduled-events-shipper@${SHIPPER_VERSION_DEFAULT}"
BUNDLE=""
NODE_SOURCE="auto"
NODE_VERSION="$NODE_VERSION_DEFAULT"
NODE_DIST_URL="${SE_INSTALL_NODE_DIST_URL:-https://nodejs.org/dist}"
STATE_DIR="/var/lib/se-shipper"
SCOPE="self"
HEARTBEAT=""
LOG_LEVEL="info"
HEALTH_PORT=""
ROOT="${SE_INSTALL_ROOT:-/}"
START=1
[ -z "${SE_INSTALL_NO_START:-}" ] || START=0

SVC_USER="se-shipper"
PREFIX_DIR="/opt/se-shipper"
CONF_DIR="/etc/se-shipper"
UNIT_NAME="se-shipper.service"
PKG_NAME="scheduled-events-shipper"

log() { printf 'se-shipper install: %s\n' "$*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

while [ $# -gt 0 ]; do
  case "$1" in
  --eventhubs-namespace) NAMESPACE="${2:?}"; shift 2 ;;
  --eventhub) EVENTHUB="${2:?}"; shift 2 ;;
  --client-id) CLIENT_ID="${2:?}"; shift 2 ;;
  --package) PACKAGE="${2:?}"; shift 2 ;;
  --bundle) BUNDLE="${2:?}"; shift 2 ;;
  --node) NODE_SOURCE="${2:?}"; shift 2 ;;
  --node-version) NODE_VERSION="${2:?}"; shift 2 ;;
  --node-dist-url) NODE_DIST_URL="${2:?}"; shift 2 ;;
  --state-dir) STATE_DIR="${2:?}"; shift 2 ;;
  --scope) SCOPE="${2:?}"; shift 2 ;;
  --heartbeat-interval) HEARTBEAT="${2:?}"; shift 2 ;;
  --log-level) LOG_LEVEL="${2:?}"; shift 2 ;;
  --health-port) HEALTH_PORT="${2:?}"; shift 2 ;;
  --root) ROOT="${2:?}"; shift 2 ;;
  --no-start) START=0; shift ;;
  -h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
  *) die "unknown argument: $1 (see --help)" ;;
  esac
done

[ "$(id -u)" -eq 0 ] || die "must run as root"
[ -n "$NAMESPACE" ] || die "--eventhubs-namespace is required"
[ -n "$EVENTHUB" ] || die "--eventhub is required"
[ -n "$CLIENT_ID" ] || die "--client-id is required (client id of the user-assigned identity)"
case "$NAMESPACE" in *[!A-Za-z0-9.-]*) die "--eventhubs-namespace must be a host name: $NAMESPACE" ;; esac
case "$EVENTHUB" in *[!A-Za-z0-9._-]*) die "--eventhub has invalid characters: $EVENTHUB" ;; esac
case "$CLIENT_ID" in *[!A-Fa-f0-9-]*) die "--client-id must be a GUID: $CLIENT_ID" ;; esac
case "$SCOPE" in self | all) ;; *) die "--scope must be self or all" ;; esac
case "$NODE_SOURCE" in auto | nodejs.org | distro) ;; *) die "--node must be auto, nodejs.org or distro" ;; esac
case "$NODE_VERSION" in *[!0-9.]* | "") die "--node-version must be X.Y.Z" ;; esac
case "$STATE_DIR" in /*) ;; *) die "--state-dir must be absolute" ;; esac
case "$ROOT" in /*) ;; *) die "--root must be absolute" ;; esac
ROOT="${ROOT%/}"

R() { printf '%s%s' "$ROOT" "$1"; } # path under the target root
# The Custom Script extension runs with a minimal environment.
export HOME="${HOME:-/root}"
export PATH="${PATH:-/usr/sbin:/usr/bin:/sbin:/bin}:/usr/local/bin"

# ---------------------------------------------------------------- Node.js
node_ok() { # $1 = node binary; true when it runs and is >= 20.19
  local v
  v="$("$1" -p 'process.versions.node' 2>/dev/null)" || return 1
  local major="${v%%.*}" rest="${v#*.}"
  local minor="${rest%%.*}"
  [ "$major" -gt "$NODE_MIN_MAJOR" ] || { [ "$major" -eq "$NODE_MIN_MAJOR" ] && [ "$minor" -ge "$NODE_MIN_MINOR" ]; }
}

fetch() { # $1 = URL, $2 = output file; https (or file:// for local mirrors) only
  case "$1" in https://* | file:///*) ;; *) die "refusing to download over anything but https: $1" ;; esac
  if command -v curl >/dev/null 2>&1; then
    curl --fail --silent --show-error --location --retry 5 --retry-delay 3 --proto '=https,file' --proto-redir '=https' -o "$2" "$1"
  elif command -v wget >/dev/null 2>&1; then
    wget -q --tries=5 -O "$2" "$1"
  else
    die "neither curl nor wget is available to download $1"
  fi
}

install_node_distro() {
  log "installing Node.js from the distribution packages"
  . /etc/os-release 2>/dev/null || true
  case "${ID:-}:${ID_LIKE:-}" in
  *debian* | *ubuntu*) DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null ;;
  *azurelinux* | *mariner*) tdnf install -y nodejs >/dev/null ;;
  *rhel* | *fedora* | *centos*) dnf install -y nodejs npm >/dev/null ;;
  *suse*) zypper --non-interactive install nodejs20 npm20 >/dev/null ;;
  *) die "unknown distribution '${ID:-?}'; use --node nodejs.org" ;;
  esac
  local bin
  bin="$(command -v node || true)"
  [ -n "$bin" ] && node_ok "$bin" || die "the distribution's Node.js is older than ${NODE_MIN_MAJOR}.${NODE_MIN_MINOR}; use --node nodejs.org"
  NODE_BIN="$bin"
}

install_node_tarball() {
  local arch
  case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) die "unsupported CPU $(uname -m)" ;;
  esac
  local name="node-v${NODE_VERSION}-linux-${arch}"
  local dest
  dest="$(R "$PREFIX_DIR")/node"
  if [ -x "$dest/bin/node" ] && [ "$("$dest/bin/node" -p process.versions.node 2>/dev/null)" = "$NODE_VERSION" ]; then
    NODE_BIN="$PREFIX_DIR/node/bin/node"
    return
  fi
  log "downloading Node.js v${NODE_VERSION} (${arch}) from ${NODE_DIST_URL}"
  local tmp
  tmp="$(mktemp -d)"
  fetch "${NODE_DIST_URL}/v${NODE_VERSION}/${name}.tar.xz" "$tmp/${name}.tar.xz"
  fetch "${NODE_DIST_URL}/v${NODE_VERSION}/SHASUMS256.txt" "$tmp/SHASUMS256.txt"
  (cd "$tmp" && grep " ${name}.tar.xz\$" SHASUMS256.txt | sha256sum -c --quiet -) || die "checksum mismatch for ${name}.tar.xz"
  rm -rf "$dest.new"
  mkdir -p "$dest.new"
  tar -xJf "$tmp/${name}.tar.xz" -C "$dest.new" --strip-components=1 --no-same-owner
  rm -rf "$dest" "$tmp"
  mv "$dest.new" "$dest"
  NODE_BIN="$PREFIX_DIR/node/bin/node"
}

NODE_BIN=""
existing="$(command -v node || true)"
[ -z "$existing" ] || existing="$(readlink -f "$existing")"
# A node under /home or /root (nvm, ...) would be hidden from the service by ProtectHome=yes.
case "$existing" in /home/* | /root/*) existing="" ;; esac
if [ "$NODE_SOURCE" = auto ] && [ -n "$existing" ] && node_ok "$existing"; then
  NODE_BIN="$existing"
  log "using installed Node.js $("$NODE_BIN" -v) at $NODE_BIN"
elif [ "$NODE_SOURCE" = distro ]; then
  install_node_distro
else
  install_node_tarball
fi
# NODE_BIN is the path as seen from the target root; run it through $ROOT when it lives there.
node_run() { if [ -x "$(R "$NODE_BIN")" ]; then "$(R "$NODE_BIN")" "$@"; else "$NODE_BIN" "$@"; fi; }

# ---------------------------------------------------------------- system user
passwd_file="$(R /etc/passwd)"
if ! grep -q "^${SVC_USER}:" "$passwd_file" 2>/dev/null; then
  log "creating system user ${SVC_USER}"
  nologin="/usr/sbin/nologin"
  [ -x "$(R "$nologin")" ] || nologin="/sbin/nologin"
  if [ -n "$ROOT" ]; then
    useradd --prefix "$ROOT" --system --user-group --no-create-home --home-dir "$STATE_DIR" --shell "$nologin" \
      --comment "se-shipper (Azure Scheduled Events shipper)" "$SVC_USER"
  else
    useradd --system --user-group --no-create-home --home-dir "$STATE_DIR" --shell "$nologin" \
      --comment "se-shipper (Azure Scheduled Events shipper)" "$SVC_USER"
  fi
fi
SVC_UID="$(awk -F: -v u="$SVC_USER" '$1 == u { print $3 }' "$passwd_file")"
SVC_GID="$(awk -F: -v u="$SVC_USER" '$1 == u { print $4 }' "$passwd_file")"
[ -n "$SVC_UID" ] && [ -n "$SVC_GID" ] || die "could not resolve uid/gid of ${SVC_USER}"

# ---------------------------------------------------------------- the shipper
app_parent="$(R "$PREFIX_DIR")/lib/node_modules"
app_dir="$app_parent/$PKG_NAME"
mkdir -p "$app_parent" "$(R "$PREFIX_DIR")/bin"
if [ -n "$BUNDLE" ]; then
  tmp="$(mktemp -d)"
  case "$BUNDLE" in
  https://*) fetch "$BUNDLE" "$tmp/bundle.tgz" ;;
  http://*) die "--bundle must be https or a local path" ;;
  *) cp "$BUNDLE" "$tmp/bundle.tgz" ;;
  esac
  mkdir -p "$tmp/x"
  tar -xzf "$tmp/bundle.tgz" -C "$tmp/x" --no-same-owner
  [ -f "$tmp/x/package/package.json" ] && [ -d "$tmp/x/package/node_modules" ] ||
    die "--bundle is not a se-shipper bundle (package/package.json and package/node_modules expected)"
  rm -rf "$app_dir.new"
  mv "$tmp/x/package" "$app_dir.new"
  rm -rf "$app_dir" "$tmp"
  mv "$app_dir.new" "$app_dir"
else
  npm_bin="$(dirname "$(node_run -p process.execPath)")/npm"
  [ -x "$npm_bin" ] || npm_bin="$(command -v npm || true)"
  [ -n "$npm_bin" ] || die "npm not found next to node; use --bundle or install npm"
  log "installing ${PACKAGE} with npm"
  npm_cache="$(mktemp -d)"
  PATH="$(dirname "$npm_bin"):$PATH" "$npm_bin" install --global --prefix "$(R "$PREFIX_DIR")" --omit=dev \
    --no-audit --no-fund --no-update-notifier --cache "$npm_cache" "$PACKAGE" >&2
  rm -rf "$npm_cache"
fi
main_js="$app_dir/dist/cli/main.js"
[ -f "$main_js" ] || die "installed package has no dist/cli/main.js"
installed_version="$(node_run -p "require('$app_dir/package.json').version")"
ln -sfn "../lib/node_modules/$PKG_NAME/dist/cli/main.js" "$(R "$PREFIX_DIR")/bin/se-shipper"
chown -R 0:0 "$(R "$PREFIX_DIR")"
chmod -R u=rwX,go=rX "$(R "$PREFIX_DIR")"

# ---------------------------------------------------------------- state dir
mkdir -p "$(R "$STATE_DIR")"
chown "$SVC_UID:$SVC_GID" "$(R "$STATE_DIR")"
chmod 0750 "$(R "$STATE_DIR")"

# ---------------------------------------------------------------- settings
mkdir -p "$(R "$CONF_DIR")"
env_file="$(R "$CONF_DIR")/se-shipper.env"
{
  echo "# Written by se-shipper install.sh; rerun it (or edit, then: systemctl restart se-shipper)."
  echo "SE_SHIPPER_SINK=eventhubs"
  echo "SE_SHIPPER_EVENTHUBS_NAMESPACE=${NAMESPACE}"
  echo "SE_SHIPPER_EVENTHUB=${EVENTHUB}"
  echo "SE_SHIPPER_CREDENTIAL=managed-identity"
  echo "SE_SHIPPER_MANAGED_IDENTITY_CLIENT_ID=${CLIENT_ID}"
  echo "SE_SHIPPER_STATE_DIR=${STATE_DIR}"
  echo "SE_SHIPPER_SCOPE=${SCOPE}"
  echo "SE_SHIPPER_LOG_LEVEL=${LOG_LEVEL}"
  [ -z "$HEARTBEAT" ] || echo "SE_SHIPPER_HEARTBEAT_INTERVAL=${HEARTBEAT}"
  [ -z "$HEALTH_PORT" ] || echo "SE_SHIPPER_HEALTH_PORT=${HEALTH_PORT}"
} >"$env_file.new"
chown "0:$SVC_GID" "$env_file.new"
chmod 0640 "$env_file.new"
mv "$env_file.new" "$env_file"

# ---------------------------------------------------------------- systemd unit
unit_dir="$(R /etc/systemd/system)"
mkdir -p "$unit_dir"
cat >"$unit_dir/$UNIT_NAME.new" <<EOF
# Written by se-shipper install.sh (${PKG_NAME} ${installed_version}).
[Unit]
Description=se-shipper: Azure Scheduled Events to Event Hubs
Documentation=https://github.com/scheduled-events-shipper/scheduled-events-shipper
Wants=network-online.target
After=network-online.target
# Never give up restarting: a shipper that stopped is a lost maintenance notice.
StartLimitIntervalSec=0

[Service]
Type=simple
User=${SVC_USER}
Group=${SVC_USER}
EnvironmentFile=${CONF_DIR}/se-shipper.env
ExecStart=${NODE_BIN} ${PREFIX_DIR}/lib/node_modules/${PKG_NAME}/dist/cli/main.js run
Restart=always
RestartSec=5s
TimeoutStopSec=30s
WorkingDirectory=${STATE_DIR}
UMask=0027

# Hardening: the shipper needs outbound TCP (IMDS, Entra ID, Event Hubs) and its state dir, nothing else.
NoNewPrivileges=yes
ProtectSystem=strict
ReadWritePaths=${STATE_DIR}
ProtectHome=yes
PrivateTmp=yes
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
ProtectProc=invisible
RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
RemoveIPC=yes
SystemCallArchitectures=native
SystemCallFilter=@system-service
SystemCallErrorNumber=EPERM
CapabilityBoundingSet=
AmbientCapabilities=
# Stay cheap on the VM: bounded memory, lower CPU priority than the workload.
MemoryMax=256M
Nice=5

[Install]
WantedBy=multi-user.target
EOF
mv "$unit_dir/$UNIT_NAME.new" "$unit_dir/$UNIT_NAME"
chmod 0644 "$unit_dir/$UNIT_NAME"

if [ -z "$ROOT" ] && [ "$START" -eq 1 ]; then
  if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    systemctl daemon-reload
    systemctl enable "$UNIT_NAME" >/dev/null
    systemctl restart "$UNIT_NAME"
    log "started $UNIT_NAME"
  else
    log "systemd is not running; enable and start $UNIT_NAME yourself"
  fi
fi
log "installed ${PKG_NAME} ${installed_version} (node ${NODE_BIN})"
