# Shared by the bench scripts (sourced, not run): the tree and the binary,
# cache dropping, mounts and the processes behind them, and guest halt
# polling.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin="$root/bin/poolfs"
pids=() # background processes stop_all kills

# bench_build builds bin/poolfs from the tree.
bench_build() { (cd "$root" && go build -o "$bin" ./cmd/poolfs); }

# drop writes back and drops the page cache (root).
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }

# drive_size GIB: the size each of 12 drives advertises for a run that
# stores GIB of user data: room for the data at up to 2.5x (8+2 parity,
# garbage not yet collected, the preservation capacity held back) and no
# more, since `poolfs up` refuses drives larger than the free space under
# the cluster directory.
drive_size() { echo "$(( ($1 * 5 + 23) / 24 + 1 ))G"; }

# waitmount DIR... waits up to 20 s for each DIR to be a mount point.
waitmount() {
  for d in "$@"; do
    for _ in $(seq 200); do mountpoint -q "$d" && continue 2; sleep 0.1; done
    echo "no mount on $d" >&2
    exit 1
  done
}

# stop_all MOUNTPOINT... detaches the mounts and stops every process in pids.
stop_all() {
  for m in "$@"; do fusermount3 -u -z "$m" 2>/dev/null || true; done
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}

# Guest halt polling. Every FUSE round trip wakes a sleeping thread on the
# other CPU. On a VM whose idle CPUs halt at once (cpuidle-haltpoll with
# guest_halt_poll_ns=0, as on our CI machines) each such wake-up is a VM
# exit and an inter-processor interrupt, and that, more than the file
# system, sets how many round trips a second FUSE can make (see
# BENCHMARKS.md). POOLFS_HALTPOLL_NS=200000 lets an idle CPU poll that long
# before it halts, for the run only (root; the old value comes back at
# exit), which is how such VMs are tuned for latency-bound I/O.
haltpoll_param=/sys/module/haltpoll/parameters/guest_halt_poll_ns
haltpoll_old=$(cat "$haltpoll_param" 2>/dev/null || echo none)

# haltpoll_apply sets POOLFS_HALTPOLL_NS, if given; haltpoll_restore undoes it.
haltpoll_apply() {
  [ -n "${POOLFS_HALTPOLL_NS:-}" ] || return 0
  [ -w "$haltpoll_param" ] || { echo "POOLFS_HALTPOLL_NS: $haltpoll_param is not writable here" >&2; exit 1; }
  echo "$POOLFS_HALTPOLL_NS" >"$haltpoll_param"
}
haltpoll_restore() {
  if [ -n "${POOLFS_HALTPOLL_NS:-}" ] && [ "$haltpoll_old" != none ]; then echo "$haltpoll_old" >"$haltpoll_param"; fi
}

# haltpoll_line prints the setting a run used, for the head of its table.
haltpoll_line() {
  echo "guest halt polling: $(cat "$haltpoll_param" 2>/dev/null || echo "none (no cpuidle-haltpoll)") ns, cpuidle driver $(cat /sys/devices/system/cpu/cpuidle/current_driver 2>/dev/null || echo none)"
  echo
}
