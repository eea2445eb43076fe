#!/usr/bin/env bash
# Small random writes into one large file: fio O_DIRECT, libaio, iodepth 16,
# 64 KiB and then 4 KiB random writes into a SIZE file laid out first by a
# sequential 1 MiB write, on the local file system and through the poolfs
# FUSE mount (`poolfs up --mount`, 12 drives, 8+2, 1 MiB unit) in the same
# run, the phases of the two sides interleaved, and the same jobs on
# `poolfs mount-null --direct-io --parallel` (a FUSE file system that
# discards writes: the FUSE ceiling). It reports, per phase:
#
#   - MB/s of each side and poolfs / fio: user bytes over the wall time of
#     the fio command, end_fsync included (all writes durable);
#   - the physical limits beside them: the FUSE ceiling, and the drive
#     bound, the local file system's sequential O_DIRECT write rate (what
#     the one disk under all 12 drives takes: the lower of the layout
#     phase's and of a write as long as a random phase, since a short one
#     may end in the host's cache) over the drive bytes per user byte
#     allowed (1.3 sequential, 3.5 for 64 KiB; for 4 KiB, which has no
#     target, the amplification measured); and poolfs over the lower of
#     the two;
#   - what the disk read and wrote, and how busy it was, while fio ran
#     through the mount (/proc/diskstats): the folds read what they fold;
#   - drive bytes written per user byte: the growth of the pool's
#     `written` counter (`poolfs status --json`: bytes the drives wrote to
#     store fragments, record headers included, whatever wrote them:
#     client, fold, rebuild, collection moves) from
#     before the phase until it stops growing after it, over fio's bytes;
#     beside it the `poolfs up` process's write_bytes (/proc/PID/io), which
#     also counts the metadata store and segment indexes. Delta extents
#     still in the log when a phase settles are folded later, at the cost
#     of at most one rewrite of every stripe (the committed raw bytes after
#     the layout): that bound is shown beside the counted figure;
#   - the on-disk size of the cluster directory (du, blocks), sampled every
#     second through the run, after each phase settled and after
#     `poolfs gc`, against the raw bytes of the live data, (K+M)/K x SIZE.
#
# The random phases are bounded by RUNTIME seconds each (size-based with a
# run-time cap, not time-based, so that fio's offsets and data are one
# reproducible stream). At the end the file read back through the mount must
# equal, byte for byte, a reference copy written on the local file system by
# the same fio jobs (same seeds) replayed for exactly the number of I/Os
# each poolfs phase made.
#
#   bench/randwrite.sh [SIZE_MIB=4096] [RUNTIME_SEC=60] [WORKDIR=./bench/out/randwrite]
#
# Needs root (drop caches), fio with libaio and /dev/fuse; takes about
# 3 x 2 x RUNTIME (local, null mount, poolfs) plus the layouts, the settling (POOLFS_SETTLE_SEC, default
# 120, at most per phase) and the reference. POOLFS_MOUNT_FLAGS adds
# `poolfs up` flags. POOLFS_GARBAGE_BUDGET_MIB, if set, is the garbage budget
# the on-disk target allows beyond 1.5x the raw live bytes. Prints Markdown.
set -euo pipefail
size_mib=${1:-4096}
runtime=${2:-60}
work=${3:-./bench/out/randwrite}
settle_max=${POOLFS_SETTLE_SEC:-120}
k=8 m=2
source "$(dirname "$0")/lib.sh"
command -v fio >/dev/null || { echo "randwrite.sh: needs fio" >&2; exit 1; }
bench_build
rm -rf "$work"; mkdir -p "$work"/{local,mnt,null}; work=$(cd "$work" && pwd)
cluster=$work/cluster
haltpoll_apply
cleanup() {
  haltpoll_restore
  [ -n "${du_pid:-}" ] && kill "$du_pid" 2>/dev/null
  stop_all "$work/mnt" "$work/null"
  rm -rf "$cluster" "$work/local"
}
trap cleanup EXIT

"$bin" up -c "$cluster" --listen 127.0.0.1:0 --drives 12 --scheme $k+$m --unit 1M \
  ${POOLFS_MOUNT_FLAGS:-} --mount "$work/mnt" >"$work/up.log" 2>&1 & pids+=($!)
up_pid=$!
"$bin" mount-null --direct-io --parallel "$work/null" >"$work/null.log" 2>&1 & pids+=($!)
waitmount "$work/mnt" "$work/null"

# The largest on-disk size of the cluster directory seen, sampled every
# second in the background into $work/du.max.
echo 0 >"$work/du.max"
# du_now -> that size now (files removed while du walks are skipped).
du_now() { { du -sB1 "$cluster" 2>/dev/null || true; } | cut -f1; }
echo 0 >"$work/du.max"
( while sleep 1; do
    n=$(du_now)
    if [ "${n:-0}" -gt "$(cat "$work/du.max")" ]; then echo "$n" >"$work/du.max"; fi
  done ) & du_pid=$!

# pool_field F -> field F of `poolfs status --json`, summed over the pools:
# written (bytes the drives wrote to store fragments since `poolfs up`
# began), used_raw (raw bytes of the committed stripes, the delta log's
# included).
pool_field() {
  "$bin" status -c "$cluster" --json | python3 -c "import json,sys; print(sum(p[sys.argv[1]] for p in json.load(sys.stdin)['pools']))" "$1"
}
written() { pool_field written; }
# proc_written -> bytes the `poolfs up` process caused to be written.
proc_written() { awk '/^write_bytes/ {print $2}' "/proc/$up_pid/io"; }
# settle waits until the drives have stopped writing (background flushes,
# folds, collection) for 3 s, at most settle_max s, and prints the counter.
settle() {
  local last now same=0
  last=$(written)
  for _ in $(seq "$settle_max"); do
    sleep 1
    now=$(written)
    if [ "$now" = "$last" ]; then
      same=$((same + 1)); [ $same -ge 3 ] && break
    else
      same=0 last=$now
    fi
  done
  echo "$last"
}

# The jobs: one file, O_DIRECT, libaio, iodepth 16; every buffer refilled
# from the seeded generator, so that the data, like the offsets, is one
# stream that a replay reproduces.
fio_common=(--ioengine=libaio --iodepth=16 --direct=1 --size="${size_mib}M" --randseed=20261125
  --refill_buffers=1 --scramble_buffers=0 --fallocate=none --end_fsync=1 --output-format=json)
# fio_job FILE rw bs extra... -> "user_bytes ios seconds" (wall time, fsync included)
fio_job() {
  local file=$1 rw=$2 bs=$3 t0 t1 out
  shift 3
  t0=$(date +%s.%N)
  out=$(fio --name=rw --filename="$file" --rw="$rw" --bs="$bs" "${fio_common[@]}" "$@")
  t1=$(date +%s.%N)
  python3 -c "import json,sys; w=json.loads(sys.argv[1])['jobs'][0]['write']; print(w['io_bytes'], w['total_ios'], float(sys.argv[3])-float(sys.argv[2]))" "$out" "$t0" "$t1"
}
# The disk under the work directory, and diskstat -> its bytes read, bytes
# written and milliseconds busy so far (/proc/diskstats).
disk_dev=$(basename "$(findmnt -no SOURCE -T "$work")")
diskstat() { awk -v d="$disk_dev" '$3 == d {printf "%.0f %.0f %d\n", $6 * 512, $10 * 512, $13}' /proc/diskstats; }
# cpustat -> the CPU time the host took from this VM (steal) and all CPU
# time so far, in ticks (/proc/stat): a phase the host slowed shows.
cpustat() { awk '/^cpu / {print $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9}' /proc/stat; }
# phase NAME rw bs extra...: the local file, the null mount, then the
# mount with the drive counters and the disk's read around it; results go
# to $work/NAME.
phase() {
  local name=$1 st0 ct0 st1 ct1
  shift
  read -r st0 ct0 < <(cpustat)
  read -r lb _ ls < <(fio_job "$work/local/rw.dat" "$@")
  read -r nb _ ns < <(fio_job "$work/null/rw.dat" "$@")
  local w0 p0 w1 p1 dr0 dw0 dt0 dr1 dw1 dt1
  w0=$(written); p0=$(proc_written)
  read -r dr0 dw0 dt0 < <(diskstat)
  read -r pb pn ps < <(fio_job "$work/mnt/rw.dat" "$@")
  read -r dr1 dw1 dt1 < <(diskstat)
  read -r st1 ct1 < <(cpustat)
  w1=$(settle); p1=$(proc_written)
  echo "$lb $ls $nb $ns $pb $pn $ps $((w1 - w0)) $((p1 - p0)) $(du_now) $(cat "$work/du.max") $(pool_field used_raw) $((dr1 - dr0)) $((dw1 - dw0)) $((dt1 - dt0)) $((st1 - st0)) $((ct1 - ct0))" >"$work/$name"
  echo "$name done: $(cat "$work/$name")" >&2
}

big=$((1 << 50)) # io_size: the run-time cap ends the random phases
haltpoll_line
echo "bench/randwrite.sh $size_mib $runtime: poolfs up --mount, 12 drives, $k+$m, unit 1 MiB${POOLFS_MOUNT_FLAGS:+ $POOLFS_MOUNT_FLAGS}; fio libaio iodepth 16 O_DIRECT on a ${size_mib} MiB file; random phases ${runtime} s each; $(nproc) cores, local file system $(findmnt -no FSTYPE -T "$work")"
echo
# The disk's sustained sequential write rate: 1 MiB O_DIRECT writes on the
# local file system for as long as a random phase, over a file twice the
# size (a short write may end in the host's cache under a virtual disk).
read -r sb _ ss < <(fio_job "$work/local/sustained.dat" write 1M --size=$((2 * size_mib))M --time_based --runtime="$runtime")
rm -f "$work/local/sustained.dat"
echo "$sb $ss" >"$work/sustained"
phase seq write 1M
phase rand64k randwrite 64k --io_size=$big --runtime="$runtime"
phase rand4k randwrite 4k --io_size=$big --runtime="$runtime"
"$bin" gc -c "$cluster" >"$work/gc.log" 2>&1 || echo "poolfs gc failed: $(cat "$work/gc.log")" >&2
settle >/dev/null
du_gc=$(du_now)

# The reference: the same jobs on the local file system, replayed for
# exactly the I/Os poolfs made, then compared with the mount's file.
rm -f "$work/local/rw.dat"
read -r _ _ _ _ _ n64 _ <"$work/rand64k"
read -r _ _ _ _ _ n4 _ <"$work/rand4k"
fio_job "$work/local/ref.dat" write 1M >/dev/null
fio_job "$work/local/ref.dat" randwrite 64k --io_size=$((n64 * 65536)) >/dev/null
fio_job "$work/local/ref.dat" randwrite 4k --io_size=$((n4 * 4096)) >/dev/null
drop
if cmp "$work/local/ref.dat" "$work/mnt/rw.dat" >"$work/cmp.log" 2>&1; then
  verdict="byte-identical to the reference copy ($n64 random 64 KiB and $n4 random 4 KiB writes replayed on the local file system)"
else
  verdict="**DIFFERS** from the reference copy: $(head -c 300 "$work/cmp.log")"
fi

python3 - "$work" "$size_mib" "$k" "$m" "$du_gc" "${POOLFS_GARBAGE_BUDGET_MIB:-}" "$verdict" <<'PY'
import sys
work, size_mib, k, m, du_gc, budget, verdict = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], sys.argv[7]
MiB = 1 << 20
rows = {}
for name in ("seq", "rand64k", "rand4k"):
    lb, ls, nb, ns, pb, pn, ps, dw, pw, du, dumax, used, kr, kw, kt, st, ct = open(f"{work}/{name}").read().split()
    rows[name] = dict(lb=int(lb), ls=float(ls), nb=int(nb), ns=float(ns), pb=int(pb), ps=float(ps), dw=int(dw), pw=int(pw), du=int(du), dumax=int(dumax), used=int(used),
                      kr=int(kr), kw=int(kw), kt=int(kt), steal=int(st) / max(1, int(ct)))
sb, ss = open(f"{work}/sustained").read().split()
sustained = int(sb) / float(ss) / 1e6
# The committed raw bytes after the layout are the file's stripes; what a
# random phase leaves beyond them is the delta log, whose extents are
# folded later: at most one rewrite of every stripe, uncounted above.
base = rows["seq"]["used"]
for r in rows.values():
    r["log"] = max(0, r["used"] - base)
    r["owed"] = base if r["log"] > 0 else 0
mbs = lambda b, s: b / s / 1e6
label = {"seq": "sequential layout, 1 MiB", "rand64k": "random 64 KiB", "rand4k": "random 4 KiB"}
ratio_target = {"seq": None, "rand64k": 0.40, "rand4k": 0.40}
amp_target = {"seq": 1.3, "rand64k": 3.5, "rand4k": None}
verdicts = []
def mark(ok):
    verdicts.append(ok)
    return "ok" if ok else "**missed**"
print("| phase | fio, local FS | poolfs | poolfs / fio (target) | drive bytes / user byte (target) | `poolfs up` write_bytes / user byte | user bytes written by poolfs |")
print("|---|---|---|---|---|---|---|")
# The disk's rate: the lower of the layout phase's and the sustained one.
seq_local = min(mbs(rows["seq"]["lb"], rows["seq"]["ls"]), sustained)
limits = {}
for name, r in rows.items():
    lr, pr = mbs(r["lb"], r["ls"]), mbs(r["pb"], r["ps"])
    ratio = pr / lr if lr else 0
    t = ratio_target[name]
    rt = f"{100*ratio:.0f}% (≥ {100*t:.0f}%: {mark(ratio >= t)})" if t else f"{100*ratio:.0f}%"
    amp = r["dw"] / r["pb"] if r["pb"] else 0
    a = amp_target[name]
    at = f"{amp:.2f} (≤ {a}: {mark(amp <= a)})" if a else f"{amp:.2f}"
    if r["owed"]:
        at += f"; ≤ {(r['dw'] + r['owed']) / r['pb']:.2f} with the {r['log']/MiB:.0f} MiB delta log left folded"
    print(f"| {label[name]} | {lr:.0f} MB/s | {pr:.1f} MB/s | {rt} | {at} | {r['pw']/r['pb']:.2f} | {r['pb']/MiB:.0f} MiB in {r['ps']:.1f} s |")
    # The physical limits of the phase: the FUSE ceiling and the drives.
    allowed = a if a else max(amp, 1)
    limits[name] = (mbs(r["nb"], r["ns"]), seq_local / allowed, allowed, pr, lr)
print()
least = (k + m) / k
print(f"Physical limits in the same run: the FUSE ceiling is the same fio job on `poolfs mount-null` (discards writes); the drive bound is the local file system's sequential O_DIRECT write rate ({seq_local:.0f} MB/s: the lower of the layout phase's, {mbs(rows['seq']['lb'], rows['seq']['ls']):.0f} MB/s, and a write as long as a random phase, {sustained:.0f} MB/s; the disk under all 12 drives) over the drive bytes per user byte allowed (for 4 KiB, which has no target, the amplification measured); the bound at the least amplification is that rate over the least any {k}+{m} write can store, {least:.2f} bytes per byte, or the FUSE ceiling if lower (the host's and the page cache can take more than the sequential rate for a short phase: the layout phase may pass it).")
print()
print(f"| phase | FUSE ceiling | drive bound (÷ amplification) | limit (the lower) | poolfs / limit | bound at the least amplification (÷ {least:.2f} or FUSE) | poolfs / that bound | 40% of fio, local FS |")
print("|---|---|---|---|---|---|---|---|")
for name, (null, drive, allowed, pr, lr) in limits.items():
    lim = min(null, drive)
    absolute = min(null, seq_local / least)
    goal = f"{0.4*lr:.0f} MB/s" + (" (above that bound)" if 0.4 * lr > absolute else " (within that bound)") if ratio_target[name] else "-"
    print(f"| {label[name]} | {null:.0f} MB/s | {drive:.0f} MB/s (÷ {allowed:.2f}) | {lim:.0f} MB/s | {100*pr/lim:.0f}% | {absolute:.0f} MB/s | {100*pr/absolute:.0f}% | {goal} |")
for name in ("rand64k", "rand4k"):
    lr = limits[name][4]
    if lr > seq_local:
        print()
        print(f"fio on the local file system writes {label[name]} at {lr:.0f} MB/s, above the disk's sequential O_DIRECT rate ({seq_local:.0f} MB/s): "
              "that figure is the host's cache under the virtual disk, not what the disk stores; the limit above is.")
print()
print("What the disk under all 12 drives did while fio ran through the mount (/proc/diskstats of the disk; the settling after the phase not included), and the CPU time the host took from this VM during the whole phase, its three fio runs (steal in /proc/stat: above a few percent, the phase's figures are the host's, not poolfs's):")
print()
print("| phase | disk read | disk written | disk busy | disk bytes (read + written) / user byte | CPU stolen by the host |")
print("|---|---|---|---|---|---|")
for name, r in rows.items():
    print(f"| {label[name]} | {mbs(r['kr'], r['ps']):.0f} MB/s | {mbs(r['kw'], r['ps']):.0f} MB/s | {min(100, r['kt'] / 10 / r['ps']):.0f}% | {(r['kr'] + r['kw']) / r['pb']:.2f} | {100 * r['steal']:.1f}% |")
live = (k + m) / k * size_mib * MiB
dumax = max(r["dumax"] for r in rows.values())
print()
print(f"On-disk size of the cluster directory (du) against the raw bytes of the live data, ({k}+{m})/{k} x {size_mib} MiB = {live/MiB:.0f} MiB:")
print()
print("| when | du | / raw live | beyond 1.5x raw live | committed delta log (raw) |")
print("|---|---|---|---|---|")
line = lambda what, b, log="-": print(f"| {what} | {b/MiB:.0f} MiB | {b/live:.2f}x | {max(0, b-1.5*live)/MiB:.0f} MiB | {log} |")
for name, r in rows.items():
    line(f"after {label[name]}, settled", r["du"], f"{r['log']/MiB:.0f} MiB")
line("after `poolfs gc`", du_gc)
line("largest seen during the run (sampled each second)", dumax)
over = max(0, dumax - 1.5 * live) / MiB
print()
if budget:
    print(f"On-disk target: at most 1.5x raw live + a garbage budget of {budget} MiB: {mark(over <= float(budget))} ({over:.0f} MiB beyond 1.5x).")
else:
    print(f"On-disk target: at most 1.5x raw live + the stated garbage budget: {over:.0f} MiB beyond 1.5x (set POOLFS_GARBAGE_BUDGET_MIB to check it).")
print()
print(f"Read back through the mount after the run: {verdict}.")
print()
print("Targets (issue 16 item 2): random 4 KiB and 64 KiB writes ≥ 40% of fio on the local file system; drive bytes per user byte ≤ 3.5 "
      "for random 64 KiB and ≤ 1.3 for the sequential write; on-disk size ≤ 1.5x the raw live bytes + a stated garbage budget. "
      f"Met here: {sum(verdicts)} of {len(verdicts)} checked.")
PY
