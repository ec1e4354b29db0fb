#!/bin/bash
# Builds a self-contained se-shipper bundle for `install.sh --bundle`: the npm package (dist,
# schema, package.json) plus its production node_modules, as scheduled-events-shipper-<v>-bundle.tgz
# with everything under package/. Pure JavaScript, so one bundle serves x64 and arm64 VMs.
# Upload it where the VMs can read it (e.g. a blob container; pass a SAS URL as shipperBundleUrl).
#
#   deploy/make-bundle.sh [--out DIR]
#
# Run from a built checkout (npm ci && npm run build). Needs no network: the production
# dependencies are copied from this checkout's node_modules.
set -euo pipefail

OUT="$PWD"
while [ $# -gt 0 ]; do
  case "$1" in
  --out) OUT="${2:?}"; shift 2 ;;
  *) echo "make-bundle: unknown argument $1" >&2; exit 1 ;;
  esac
done

repo="$(cd "$(dirname "$0")/.." && pwd)"
[ -f "$repo/dist/cli/main.js" ] || { echo "make-bundle: run npm run build first" >&2; exit 1; }
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

tgz="$(cd "$repo" && npm pack --ignore-scripts --silent --pack-destination "$work" | tail -n 1)"
tar -xzf "$work/$tgz" -C "$work"
# Production dependencies exactly as installed (and tested) in this checkout: npm ls lists every
# package of the production tree; copy each one at the same relative path. No registry access.
deps="$(cd "$repo" && npm ls --omit=dev --all --parseable 2>/dev/null || true)"
[ -n "$deps" ] || { echo "make-bundle: npm ls found no dependency tree; run npm ci first" >&2; exit 1; }
count=0
while IFS= read -r dir; do
  [ "$dir" = "$repo" ] && continue
  rel="${dir#"$repo"/}"
  case "$rel" in node_modules/*) ;; *) continue ;; esac
  mkdir -p "$work/package/$rel"
  cp -a "$dir/." "$work/package/$rel/"
  count=$((count + 1))
done <<<"$deps"
echo "make-bundle: bundled $count production packages" >&2
version="$(node -p "require('$work/package/package.json').version")"
bundle="$OUT/scheduled-events-shipper-${version}-bundle.tgz"
tar -czf "$bundle" -C "$work" --owner=0 --group=0 package
echo "$bundle"
