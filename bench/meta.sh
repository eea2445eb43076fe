#!/usr/bin/env bash
# Metadata rates through the mount, against the FUSE ceiling and the local
# file system, all in one run (issue 3's metadata benchmark):
#
#   bench/meta.sh [ITEMS=10000] [WORKDIR=./bench/out/meta]
#
# `poolfs bench mdtest -F -n ITEMS` (empty files: create, stat, read, remove)
# with 1 and 2 processes, in one shared directory and in a directory per
# process (-u), on:
#   - poolfs: `poolfs up --mount` (SQLite, metadata in process), which
#     serves FUSE over io_uring where the kernel has it (run as root), and
#     the same with --uring=false (requests over /dev/fuse);
#   - the FUSE ceiling over /dev/fuse: `poolfs mount-null --loopback` over
#     a tmpfs directory (go-fuse's loopback with the poolfs mount's
#     options: default_permissions, 1 s entry and attribute timeouts);
#   - the local file system of WORKDIR.
# With POOLFS_PG=postgres://... one more row runs poolfs on PostgreSQL.
# POOLFS_HALTPOLL_NS=200000 runs with guest halt polling (bench/lib.sh).
# Needs /dev/fuse (root for the direct mount). Prints a Markdown table of
# create / stat / remove per second and poolfs's share of the ceiling.
set -euo pipefail
items=${1:-10000}
work=${2:-./bench/out/meta}
source "$(dirname "$0")/lib.sh"
bench_build
rm -rf "$work"; mkdir -p "$work"/{local,mnt,mntd,lbm,pgm}; work=$(cd "$work" && pwd)
lb=$(mktemp -d /dev/shm/poolfs-lb.XXXXXX)
haltpoll_apply
cleanup() {
  haltpoll_restore
  stop_all "$work/mnt" "$work/mntd" "$work/lbm" "$work/pgm"
  rm -rf "$lb" "$work/cluster" "$work/dcluster" "$work/pgcluster" "$work/local"
}
trap cleanup EXIT

"$bin" up -c "$work/cluster" --listen 127.0.0.1:0 --drives 12 --drive-size 2G --mount "$work/mnt" >"$work/up.log" 2>&1 & pids+=($!)
"$bin" up -c "$work/dcluster" --listen 127.0.0.1:0 --drives 12 --drive-size 2G --mount "$work/mntd" --uring=false >"$work/dup.log" 2>&1 & pids+=($!)
"$bin" mount-null --loopback "$lb" "$work/lbm" >"$work/lb.log" 2>&1 & pids+=($!)
waitmount "$work/mnt" "$work/mntd" "$work/lbm"
# The mount is visible a moment before it says how requests reach it.
for _ in $(seq 50); do grep -q "mounted on" "$work/up.log" && break; sleep 0.1; done
grep -q "io_uring queues" "$work/up.log" && ur="io_uring" || ur="/dev/fuse (no io_uring here)"
targets=("poolfs up --mount, SQLite, $ur|$work/mnt" "poolfs up --mount --uring=false, SQLite, /dev/fuse|$work/mntd"
  "FUSE loopback over tmpfs, /dev/fuse (ceiling)|$work/lbm" "local file system|$work/local")
if [ -n "${POOLFS_PG:-}" ]; then
  "$bin" up -c "$work/pgcluster" --listen 127.0.0.1:0 --drives 12 --drive-size 2G --meta "$POOLFS_PG" \
    --mount "$work/pgm" >"$work/pgup.log" 2>&1 & pids+=($!)
  waitmount "$work/pgm"
  targets+=("poolfs up --mount, PostgreSQL, /dev/fuse (its default)|$work/pgm")
fi

# rates DIR TASKS UNIQUE -> "create stat remove" (ops/s, rounded)
rates() {
  local u=() out="$work/r.json" d="$1/t$RANDOM$RANDOM"
  [ "$3" = 1 ] && u=(-u)
  mkdir "$d"
  "$bin" bench mdtest --dir "$d" -F -n "$items" -N "$2" "${u[@]}" --json "$out" >/dev/null
  python3 - "$out" <<'PY'
import json, sys
ph = {p["phase"]: p["ops_per_s"]["mean"] for p in json.load(open(sys.argv[1]))["mdtest"]["runs"][0]["phases"]}
print(" ".join(str(round(ph[k])) for k in ("file-create", "file-stat", "file-remove")))
PY
}

declare -A res
cases=("1 0" "1 1" "2 0" "2 1")
for t in "${targets[@]}"; do
  name=${t%%|*}; dir=${t#*|}
  for c in "${cases[@]}"; do res["$name|$c"]=$(rates "$dir" $c); done
done

haltpoll_line
echo "| ops/s: create / stat / remove | 1 process, shared dir | 1 process, unique dir | 2 processes, shared | 2 processes, unique |"
echo "|---|---|---|---|---|"
for t in "${targets[@]}"; do
  name=${t%%|*}; row="| $name |"
  for c in "${cases[@]}"; do read -r a b d <<<"${res["$name|$c"]}"; row+=" $a / $b / $d |"; done
  echo "$row"
done
ceil="FUSE loopback over tmpfs, /dev/fuse (ceiling)"
for t in "${targets[@]:0:2}"; do
  name=${t%%|*}; row="| $name: share of the ceiling |"
  for c in "${cases[@]}"; do
    read -r a b d <<<"${res["$name|$c"]}"; read -r x y z <<<"${res["$ceil|$c"]}"
    row+=" $((100 * a / x))% / $((100 * b / y))% / $((100 * d / z))% |"
  done
  echo "$row"
done
