#!/usr/bin/env bash
# The benchmark suite: prints the figures that BENCHMARKS.md records.
#   bench/run.sh            erasure codec benchmarks + put/get of 4 GiB vs fio
#   SIZE_GIB=1 bench/run.sh a quicker put/get
set -euo pipefail
cd "$(dirname "$0")/.."
echo "## Machine"; echo
echo "- $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "- $(free -g | awk '/Mem:/{print $2}') GiB memory; disk: $(df -h . | awk 'NR==2{print $1, $2}'), $(findmnt -no FSTYPE -T .)"
echo "- $(go version)"; echo
echo "## Erasure codec (go test -bench, user bytes/s)"; echo
echo '```'
go test -run '^$' -bench 'Encode|Reconstruct|Seal|Verify' -benchtime 2s ./internal/erasure/ | grep -E '^Benchmark'
echo '```'; echo
echo "## Metadata engine (SQLite, group commit)"; echo
echo '```'
go test -run '^$' -bench . -benchtime 2s ./internal/meta/sqlite/ | grep -E '^Benchmark'
echo '```'; echo
echo "## put / get against fio, same run"; echo
./bench/putget.sh "${SIZE_GIB:-4}"
