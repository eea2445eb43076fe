#!/usr/bin/env bash
# The long fault sequence over network namespaces (root; nftables and tc,
# see scripts/deps.sh test): one cluster of PostgreSQL, mgmt, meta, four
# storage servers and two mounts, taken through a server cut off while a
# file is rewritten, a one-way partition towards mgmt, 5% packet loss, a
# 20 Mbit/s link, a server killed during a 24 MiB write and a server cut
# off past the down grace, every file checked byte for byte through both
# mounts after each. `make test` runs the first and the last of these.
# Then a one-way partition between one client and one server only
# (TestSeveralHostsClientPartition).
#   bench/faults.sh [go test flags]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
POOLFS_FAULTS_LONG=1 exec go test -tags faults -count=1 -timeout 10m -run 'TestSeveralHostsFaults$|TestSeveralHostsClientPartition$' -v "$@" ./cmd/poolfs/
