#!/usr/bin/env bash
# The poolfs acceptance suite in one command. Markdown goes to stdout,
# progress to stderr; result files (JSON) and charts (SVG) to --out.
#
#   bench/suite.sh                                   # local directory only
#   bench/suite.sh --mount ./mnt                     # + poolfs through its FUSE mount
#   bench/suite.sh --cluster ./poolfs-data           # + poolfs client API and drive survey
#   bench/suite.sh --dir /scratch --out results > report.md
#
# Limits measured in the same run: raw disk bandwidth of the local directory
# (fio, O_DIRECT, 1 MiB sequential; dd if fio is missing) and a memory-copy
# limit (dd from /dev/zero to /dev/null). Every bandwidth in the report is
# also shown as a percentage of both.
#
# Environment: POOLFS (binary; default: poolfs in PATH, else built from this
# checkout), SUITE_DISK_SIZE (fio file size, default 1g), SUITE_QUICK=1
# (smaller sweeps, for a smoke test). The default run takes about 5-10
# minutes on 2 cores.
set -euo pipefail

dir="" mount="" cluster="" out="./bench-results"
while [ $# -gt 0 ]; do
	case "$1" in
	--dir) dir=$2; shift 2 ;;
	--mount) mount=$2; shift 2 ;;
	--cluster|-c) cluster=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	-h|--help) sed -n '2,20p' "$0"; exit 0 ;;
	*) echo "suite.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done

say() { echo "suite: $*" >&2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
out=$(cd "$out" && pwd)
[ -n "$dir" ] || dir="$work/local"
mkdir -p "$dir"

poolfs=${POOLFS:-$(command -v poolfs || true)}
if [ -z "$poolfs" ]; then
	root=$(cd "$(dirname "$0")/.." && pwd)
	say "building poolfs from $root"
	(cd "$root" && go build -o "$work/poolfs" ./cmd/poolfs)
	poolfs="$work/poolfs"
fi

disk_size=${SUITE_DISK_SIZE:-1g}
transfers="4k,64k,1m,4m" tasks="1,2" block="64m" items=1000 mddirs="1,100" iters=2
if [ "${SUITE_QUICK:-0}" = 1 ]; then
	transfers="64k,1m" block="16m" items=200 mddirs="1,10" iters=1 disk_size=128m
fi

# Memory-copy limit: bytes moved by dd through a 1 MiB buffer.
say "memory-copy limit"
memcpy=$(dd if=/dev/zero of=/dev/null bs=1M count=8192 2>&1 |
	awk '/copied/ { for (i = 1; i <= NF; i++) if ($i ~ /^s,?$/) s = $(i-1); printf "%.0f", $1 / 1048576 / s }')

# Raw disk limit of the local directory, O_DIRECT.
say "raw disk bandwidth of $dir"
if command -v fio >/dev/null && command -v jq >/dev/null; then
	fio_bw() {
		fio --name=suite --directory="$dir" --rw="$1" --bs=1m --size="$disk_size" --direct=1 \
			--ioengine=psync --end_fsync=1 --output-format=json 2>/dev/null |
			jq -r ".jobs[0].$2.bw_bytes / 1048576 | floor"
	}
	disk_w=$(fio_bw write write)
	disk_r=$(fio_bw read read)
	disk_tool="fio, 1 MiB, O_DIRECT, $disk_size"
	rm -f "$dir"/suite.0.0
else
	dd_bw() { dd "$@" bs=1M 2>&1 | awk '/copied/ { for (i = 1; i <= NF; i++) if ($i ~ /^s,?$/) s = $(i-1); printf "%.0f", $1 / 1048576 / s }'; }
	n=1024
	disk_w=$(dd_bw if=/dev/zero of="$dir/suite.dd" count=$n oflag=direct conv=fsync)
	disk_r=$(dd_bw if="$dir/suite.dd" of=/dev/null iflag=direct)
	disk_tool="dd, 1 MiB, O_DIRECT, 1 GiB"
	rm -f "$dir/suite.dd"
fi

run() { say "$*"; "$poolfs" bench "$@" >/dev/null; }

fs=$(df -T "$dir" 2>/dev/null | awk 'NR == 2 { print $2 }')
local_label="local ${fs:-dir}"
run ior --dir "$dir/ior" -t "$transfers" -b "$block" -N "$tasks" -F -e -C -i "$iters" --label "$local_label" --json "$out/local-ior.json"
run ior --dir "$dir/ior" -t 64k,1m -b "$block" -N 2 -z -e -C --label "$local_label random" --json "$out/local-ior-random.json"
run mdtest --dir "$dir/md" -n "$items" -N "$tasks" --dirs "$mddirs" --label "$local_label" --json "$out/local-mdtest.json"
results=("$out/local-ior.json" "$out/local-ior-random.json" "$out/local-mdtest.json")

if [ -n "$mount" ]; then
	run ior --dir "$mount/suite-ior" -t "$transfers" -b "$block" -N "$tasks" -F -e -C -i "$iters" --label "poolfs mount" --json "$out/mount-ior.json"
	run mdtest --dir "$mount/suite-md" -n "$items" -N "$tasks" --dirs "$mddirs" --label "poolfs mount" --json "$out/mount-mdtest.json"
	results+=("$out/mount-ior.json" "$out/mount-mdtest.json")
fi
if [ -n "$cluster" ]; then
	run ior --api poolfs -c "$cluster" --dir /suite-ior -t "$transfers" -b "$block" -N "$tasks" -F -e -C -i "$iters" --label "poolfs api" --json "$out/api-ior.json"
	run ior --api poolfs -c "$cluster" --dir /suite-ior -t 1m -b "$block" -N "$tasks" -e -C --label "poolfs api shared file" --json "$out/api-ior-shared.json"
	run mdtest --api poolfs -c "$cluster" --dir /suite-md -n "$items" -N "$tasks" --dirs "$mddirs" --label "poolfs api" --json "$out/api-mdtest.json"
	run survey -c "$cluster" --size 64m --label "poolfs drives" --json "$out/survey.json"
	results+=("$out/api-ior.json" "$out/api-ior-shared.json" "$out/api-mdtest.json" "$out/survey.json")
fi

cat <<MD
# poolfs acceptance suite

$(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), $(nproc) CPUs, $(uname -sr); results and charts in \`$out\`.

## Limits measured in this run

| limit | MiB/s | how |
|---|---:|---|
| disk write | $disk_w | $disk_tool, sequential write of \`$dir\` |
| disk read | $disk_r | $disk_tool, sequential read |
| memcpy | $memcpy | dd /dev/zero to /dev/null, 1 MiB buffer |

MD
"$poolfs" bench report "${results[@]}" --charts "$out" --limit "disk-write=$disk_w" --limit "disk-read=$disk_r" --limit "memcpy=$memcpy"
