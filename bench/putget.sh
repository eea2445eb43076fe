#!/usr/bin/env bash
# put/get of a large file on a 12-drive pool against the device's limit,
# measured in the same run with fio (4 MiB blocks, O_DIRECT, same file system),
# page cache dropped before every read (poolfs and fio alike). Beside put, the
# same file is written through a `poolfs mount` in its own process (dd, 4 MiB
# blocks, fsync at the end, as put syncs before it returns): the same RPC
# transport to the same servers, so the two data paths compare fairly. After
# an untimed write (the first writer creates the drives' segment files), put
# and the mount take turns twice; each figure is the mean of its two runs.
#
#   bench/putget.sh [SIZE_GIB=4] [WORKDIR=./bench/out/putget]
#
# DRIVE_FORMAT=files|segments picks the drives' on-disk format (default:
# poolfs up's default); DRIVE_SIZE the size each of the 12 drives advertises
# (default: room for SIZE_GIB, bench/lib.sh drive_size; poolfs up refuses drives larger than the free space of the
# file system under WORKDIR).
# Needs root (to drop caches) and fio. Prints a Markdown table and writes
# WORKDIR/result.json.
set -euo pipefail
size_gib=${1:-4}
work=${2:-./bench/out/putget}
source "$(dirname "$0")/lib.sh"
bench_build
command -v fio >/dev/null || { echo "needs fio (scripts/deps.sh bench)"; exit 1; }
rm -rf "$work"; mkdir -p "$work"; work=$(cd "$work" && pwd)
size=$((size_gib << 30))

fio_bw() { # rw engine depth -> bytes/s
  fio --name=lim --rw="$1" --bs=4M --size="${size_gib}G" --direct=1 --ioengine="$2" --iodepth="$3" \
      --filename="$work/fio.dat" --output-format=json 2>/dev/null |
    python3 -c "import json,sys; j=json.load(sys.stdin)['jobs'][0]; print(int(j['$1'.replace('rand','')]['bw_bytes']))"
}
now() { date +%s.%N; }

echo "fio limits (4 MiB, O_DIRECT, ${size_gib} GiB) ..." >&2
fio_w1=$(fio_bw write psync 1);   drop; fio_r1=$(fio_bw read psync 1)
fio_w16=$(fio_bw write libaio 16); drop; fio_r16=$(fio_bw read libaio 16)

echo "poolfs up (12 drives, 8+2, 1 MiB unit, drive format ${DRIVE_FORMAT:-default}) ..." >&2
"$bin" up -c "$work/cluster" --listen 127.0.0.1:0 --drives 12 --drive-size "${DRIVE_SIZE:-$(drive_size $((size_gib * 2)))}" \
  ${DRIVE_FORMAT:+--drive-format "$DRIVE_FORMAT"} >"$work/up.log" 2>&1 &
up=$!
mkdir -p "$work/mnt"
trap 'fusermount3 -u -z "$work/mnt" 2>/dev/null || true; kill $up ${mnt:-} 2>/dev/null || true; wait $up 2>/dev/null || true; rm -rf "$work/cluster" "$work/fio.dat"' EXIT
for _ in $(seq 100); do grep -q '"pid"' "$work/cluster/cluster.json" 2>/dev/null && break; sleep 0.1; done
cat "$work/fio.dat" >/dev/null   # the source comes from the page cache
"$bin" mount -c "$work/cluster" "$work/mnt" >"$work/mount.log" 2>&1 &
mnt=$!
waitmount "$work/mnt"
# The first writer after the start creates the drives' segment files; a
# write of the same file that is not timed does it for both paths. Then
# put and the mount take turns, twice; each figure is the mean of its two.
"$bin" put -q -c "$work/cluster" "$work/fio.dat" /warm
rm -f "$work/mnt/warm"
tp=0 tm=0
for i in 1 2; do
  t0=$(now); "$bin" put -q -c "$work/cluster" "$work/fio.dat" /big$i; t1=$(now)
  tp=$(python3 -c "print($tp + $t1 - $t0)")
  [ $i = 2 ] || rm -f "$work/mnt/big$i"
  t0=$(now); dd if="$work/fio.dat" of="$work/mnt/copy" bs=4M conv=fsync status=none; t1=$(now)
  tm=$(python3 -c "print($tm + $t1 - $t0)")
  rm -f "$work/mnt/copy"
done
t0=0 t1=$(python3 -c "print($tp / 2)") t4=0 t5=$(python3 -c "print($tm / 2)")
fusermount3 -u "$work/mnt"; wait $mnt 2>/dev/null || true; mnt=
drop
t2=$(now); "$bin" get -q -c "$work/cluster" /big2 - >/dev/null; t3=$(now)

DRIVE_FORMAT=${DRIVE_FORMAT:-default} \
python3 - "$size" "$fio_w1" "$fio_r1" "$fio_w16" "$fio_r16" "$t0" "$t1" "$t2" "$t3" "$t4" "$t5" "$work/result.json" <<'PY'
import json, os, sys
size, w1, r1, w16, r16 = (int(x) for x in sys.argv[1:6])
t0, t1, t2, t3, t4, t5 = (float(x) for x in sys.argv[6:12])
put, get, mnt = size / (t1 - t0), size / (t3 - t2), size / (t5 - t4)
wl, rl = max(w1, w16), max(r1, r16)
res = dict(drive_format=os.environ["DRIVE_FORMAT"], size=size, fio_write_qd1=w1, fio_read_qd1=r1, fio_write_qd16=w16, fio_read_qd16=r16,
           put=put, get=get, mount_write=mnt, put_ratio=put / wl, get_ratio=get / rl, mount_write_ratio=mnt / wl)
json.dump(res, open(sys.argv[12], "w"), indent=2)
mb = lambda b: "%.0f MB/s" % (b / 1e6)
print("| measure | throughput | ratio to the device limit |")
print("|---|---|---|")
print("| fio write 4 MiB O_DIRECT, QD1 / QD16 | %s / %s | limit = %s |" % (mb(w1), mb(w16), mb(wl)))
print("| fio read 4 MiB O_DIRECT, QD1 / QD16 | %s / %s | limit = %s |" % (mb(r1), mb(r16), mb(rl)))
print("| poolfs put (user bytes; 8+2 writes 1.25x; drives: %s) | %s | %.0f%% (target 55%%, ceiling 80%%) |"
      % (os.environ["DRIVE_FORMAT"], mb(put), 100 * put / wl))
print("| poolfs mount, own process: dd bs=4M conv=fsync (same RPC transport as put) | %s | %.0f%% (put's target: at least this) |"
      % (mb(mnt), 100 * mnt / wl))
print("| poolfs get (caches dropped) | %s | %.0f%% (target 80%%) |" % (mb(get), 100 * get / rl))
PY
