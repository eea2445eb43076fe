#!/usr/bin/env bash
# Small requests through the poolfs FUSE mount: one process writing a file
# with 4 KiB, 32 KiB and 128 KiB write(2)s (the buffer sizes of Go's bufio,
# Java's and Rust's buffered streams, tar and dd), then reading it back with
# the same sizes through the page cache and with O_DIRECT. Every request of
# a descriptor opened for writing, and of an O_DIRECT one, is a FUSE
# round trip (the mount opens them FOPEN_DIRECT_IO), so this measures what
# one round trip costs; the same runs on a FUSE file system that discards
# writes (the FUSE ceiling, same flags) and on the local file system.
#
#   bench/smallio.sh [SIZE_MIB=256] [WORKDIR=./bench/out/smallio]
#
# POOLFS_MOUNT_FLAGS adds `poolfs up` flags (e.g. --uring=false to serve
# /dev/fuse instead of the per-CPU io_uring queues). Needs root, fio and
# /dev/fuse. Prints a Markdown table; each figure is the median of
# POOLFS_BENCH_REPS (default 3) runs, caches dropped before every read.
set -euo pipefail
size_mib=${1:-256}
work=${2:-./bench/out/smallio}
source "$(dirname "$0")/lib.sh"
bench_build
rm -rf "$work"; mkdir -p "$work"/{local,nulld,mnt}; work=$(cd "$work" && pwd)
haltpoll_apply
cleanup() {
  haltpoll_restore
  stop_all "$work/nulld" "$work/mnt"
  rm -rf "$work/cluster" "$work/local"
}
trap cleanup EXIT

"$bin" mount-null --direct-io --parallel "$work/nulld" >/dev/null 2>&1 & pids+=($!)
"$bin" up -c "$work/cluster" --listen 127.0.0.1:0 --drives 12 --drive-size 2G ${POOLFS_MOUNT_FLAGS:-} --mount "$work/mnt" >"$work/up.log" 2>&1 & pids+=($!)
waitmount "$work/mnt" "$work/nulld"

# fio_bw DIR rw bs direct -> MB/s of one process, SIZE_MIB of one file.
fio_bw() {
  local extra=()
  [ "$2" = write ] && extra+=(--end_fsync=1)
  fio --name=small --directory="$1" --rw="$2" --bs="$3" --size="${size_mib}M" --direct="$4" \
      --ioengine=psync "${extra[@]}" --output-format=json 2>/dev/null |
    python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]; print(round(j['$2']['bw_bytes']/1e6))"
}
reps=${POOLFS_BENCH_REPS:-3}
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2))}'; }

haltpoll_line
echo "mount: poolfs up --mount ${POOLFS_MOUNT_FLAGS:-} ($(grep -o 'FUSE requests come over[^"]*' "$work/up.log" | head -1 || true))"
echo
echo "| request | local write / read / O_DIRECT read | FUSE null (direct): write / O_DIRECT read | poolfs: write / read / O_DIRECT read | poolfs / FUSE null: write / O_DIRECT read |"
echo "|---|---|---|---|---|"
for bs in 4k 32k 128k; do
  lw=() lr=() ld=() nw=() nd=() pw=() pr=() pd=()
  for _ in $(seq "$reps"); do
    rm -f "$work"/local/* "$work"/nulld/* "$work"/mnt/*
    lw+=("$(fio_bw "$work/local" write $bs 0)")
    nw+=("$(fio_bw "$work/nulld" write $bs 0)")
    pw+=("$(fio_bw "$work/mnt" write $bs 0)")
    drop; lr+=("$(fio_bw "$work/local" read $bs 0)")
    drop; ld+=("$(fio_bw "$work/local" read $bs 1)")
    nd+=("$(fio_bw "$work/nulld" read $bs 1)")
    drop; pr+=("$(fio_bw "$work/mnt" read $bs 0)")
    drop; pd+=("$(fio_bw "$work/mnt" read $bs 1)")
  done
  python3 - "$bs" "$(median "${lw[@]}")" "$(median "${lr[@]}")" "$(median "${ld[@]}")" "$(median "${nw[@]}")" "$(median "${nd[@]}")" \
    "$(median "${pw[@]}")" "$(median "${pr[@]}")" "$(median "${pd[@]}")" <<'PY'
import sys
bs, lw, lr, ld, nw, nd, pw, pr, pd = sys.argv[1], *map(int, sys.argv[2:])
pct = lambda a, b: "%d%%" % (100 * a / b) if b else "-"
print(f"| {bs} | {lw} / {lr} / {ld} MB/s | {nw} / {nd} MB/s | {pw} / {pr} / {pd} MB/s | {pct(pw, nw)} / {pct(pd, nd)} |")
PY
done
