#!/usr/bin/env bash
# Installs what poolfs needs on a Debian machine, only what is missing:
#   run:   fuse3 (for `poolfs mount`)
#   test:  + PostgreSQL server (the metadata engine suite), fio (benchmarks)
# Go itself must be on the machine (1.24 or newer).
set -euo pipefail
want=(fuse3)
if [ "${1:-}" = "test" ] || [ "${1:-}" = "bench" ]; then
  want+=(postgresql fio)
fi
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "installing: ${missing[*]}" >&2
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v go >/dev/null || { echo "poolfs needs Go (https://go.dev/dl)"; exit 1; }
