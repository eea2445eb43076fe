#!/usr/bin/env bash
# Overwrites of a nearly full pool: `poolfs up --mount` on 12 small drives
# (160 MiB each, 8+2, 1 MiB units: about 1 GiB usable), one file of
# FILE_MIB (default 700, about 70% of the pool) laid out by fio (fallocate,
# then sequential 1 MiB writes, O_DIRECT, iodepth 16), then overwritten by
# random 64 KiB writes (IO_MIB in all, default 256; fsync every 256 writes)
# that fio verifies block by block (crc32c) once written. Every write
# replaces data of the same size, so none may fail with ENOSPC; the script
# exits non-zero if fio reports an error or a bad block.
#
#   bench/nearfull.sh [FILE_MIB] [IO_MIB] [WORKDIR]
#
# Needs root, fio with libaio and /dev/fuse; takes about a minute for the
# defaults. Prints
# Markdown.
set -euo pipefail
file_mib=${1:-700}
io_mib=${2:-256}
work=${3:-./bench/out/nearfull}
source "$(dirname "$0")/lib.sh"
command -v fio >/dev/null || { echo "nearfull.sh: needs fio" >&2; exit 1; }
bench_build
rm -rf "$work"; mkdir -p "$work"/mnt; work=$(cd "$work" && pwd)
cluster=$work/cluster
cleanup() {
  stop_all "$work/mnt"
  rm -rf "$cluster"
}
trap cleanup EXIT
"$bin" up -c "$cluster" --listen 127.0.0.1:0 --drives 12 --scheme 8+2 --unit 1M --drive-size 160M \
  --mount "$work/mnt" >"$work/up.log" 2>&1 & pids+=($!)
waitmount "$work/mnt"

f=$work/mnt/f
common=(--name=nearfull --filename="$f" --ioengine=libaio --iodepth=16 --direct=1 --size="${file_mib}M" --output-format=json)
# phase NAME fio-args... -> a table row from fio's JSON and messages;
# fails if fio failed, reported an error, or printed a message.
phase() {
  local name=$1; shift
  local out rc=0
  out=$(fio "${common[@]}" "$@" 2>"$work/$name.err") || rc=$?
  python3 -c '
import json, sys
name, rc, errf, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
start = out.find("{")
job = json.loads(out[start:])["jobs"][0] if start >= 0 else {}
w = job.get("write", {})
err = job.get("error", 0)
msg = open(errf).read().strip().replace("\n", " ")
mbs = w.get("bw_bytes", 0) / 1e6
mib = w.get("io_bytes", 0) >> 20
print(f"| {name} | {mib} | {mbs:.1f} | {err} | {msg or chr(45)} |")
sys.exit(1 if rc or err or msg else 0)
' "$name" "$rc" "$work/$name.err" "$out"
}
echo "bench/nearfull.sh $file_mib $io_mib: poolfs up --mount, 12 drives of 160 MiB, 8+2, unit 1 MiB; fio libaio iodepth 16 O_DIRECT; $(nproc) cores"
echo
echo "| phase | MiB written | MB/s | fio error | fio messages (bad blocks, ENOSPC) |"
echo "|---|---|---|---|---|"
ok=0
phase layout --rw=write --bs=1M --end_fsync=1 || ok=1
phase random --rw=randwrite --bs=64k --io_size="${io_mib}M" --fsync=256 --end_fsync=1 \
  --verify=crc32c --do_verify=1 --verify_fatal=1 --verify_state_save=0 || ok=1
echo
echo "Pool after the run: $("$bin" status -c "$cluster" | sed -n 's/^ *used: //p')"
exit $ok
