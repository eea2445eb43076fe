#!/usr/bin/env bash
# Installs what poolfs needs on a Debian machine, only what is missing:
#   run:   fuse3 (for `poolfs mount`)
#   test:  + PostgreSQL server (the metadata engine suite), fio (benchmarks),
#          iproute2 and util-linux (ip, nsenter: the multi-host tests over network namespaces),
#          nftables (nft: packet loss and one-way partitions in those tests),
#          prometheus (its server and promtool scrape a cluster and check the alerting rules),
#          chromium (the dashboard tests drive it headless)
# Go itself must be on the machine, at least the version go.mod names.
set -euo pipefail
want=(fuse3)
if [ "${1:-}" = "test" ] || [ "${1:-}" = "bench" ]; then
  want+=(postgresql fio prometheus iproute2 util-linux nftables)
  [ "${1:-}" = "test" ] && want+=(chromium)
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
command -v go >/dev/null || { echo "poolfs needs Go (https://go.dev/dl)" >&2; exit 1; }
want_go=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$(dirname "$0")/../go.mod")
have_go=$(go env GOVERSION | sed 's/^go//')
if [ "$(printf '%s\n%s\n' "$want_go" "$have_go" | sort -V | head -n1)" != "$want_go" ]; then
  echo "poolfs needs Go $want_go or newer (go.mod); this machine has $have_go" >&2
  exit 1
fi
