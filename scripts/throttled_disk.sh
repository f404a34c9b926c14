#!/usr/bin/env bash
# Runs a command with the disk under a directory capped at a fixed read and
# write bandwidth, so that replays and benches on a shared virtual disk
# (whose speed drifts many times over within minutes) see a disk of one
# speed. The cap must sit below the slowest the disk gets, or it does not
# remove the drift: check with fio first (docs/replay.md, "A disk of one
# speed").
#
#   scripts/throttled_disk.sh --read 400MB --write 400MB --dir /tmp -- CMD ...
#
# Needs root and the cgroup v1 blkio controller (or cgroup v2 with io);
# O_DIRECT I/O (the SSD tier's) is what the cap governs. The cgroup is
# removed when the command ends, however it ends.
set -euo pipefail

read_bps="" write_bps="" dir="${TMPDIR:-/tmp}"
to_bytes() {
  local v="${1^^}"
  case "$v" in
    *GB) echo $(( ${v%GB} * 1000000000 )) ;;
    *MB) echo $(( ${v%MB} * 1000000 )) ;;
    *) echo "$v" ;;
  esac
}
while [ $# -gt 0 ]; do
  case "$1" in
    --read) read_bps="$(to_bytes "$2")"; shift 2 ;;
    --write) write_bps="$(to_bytes "$2")"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "throttled_disk: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ $# -eq 0 ] || { [ -z "$read_bps" ] && [ -z "$write_bps" ]; }; then
  echo "usage: $0 --read BPS [--write BPS] [--dir DIR] -- CMD ..." >&2
  exit 2
fi

# The whole disk under DIR (a partition's limits go on its parent disk).
devnum="$(stat -c '%Hd:%Ld' "$dir")"
sys="/sys/dev/block/$devnum"
if [ -f "$sys/partition" ]; then devnum="$(cat "$sys/../dev")"; fi

name="kvpool-throttle-$$"
if [ -d /sys/fs/cgroup/blkio ]; then
  cg="/sys/fs/cgroup/blkio/$name"
  mkdir "$cg"
  [ -n "$read_bps" ] && echo "$devnum $read_bps" > "$cg/blkio.throttle.read_bps_device"
  [ -n "$write_bps" ] && echo "$devnum $write_bps" > "$cg/blkio.throttle.write_bps_device"
elif grep -qw io /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  cg="/sys/fs/cgroup/$name"
  mkdir "$cg"
  echo "$devnum ${read_bps:+rbps=$read_bps} ${write_bps:+wbps=$write_bps}" > "$cg/io.max"
else
  echo "throttled_disk: no blkio (v1) or io (v2) cgroup controller here" >&2
  exit 1
fi
cleanup() {
  # Move anything left back to the root group so the directory can go.
  if [ -f "$cg/cgroup.procs" ]; then
    while read -r pid; do
      echo "$pid" > "$(dirname "$cg")/cgroup.procs" 2>/dev/null || true
    done < "$cg/cgroup.procs"
  fi
  rmdir "$cg" 2>/dev/null || true
}
trap cleanup EXIT
echo "throttled_disk: $devnum capped at read ${read_bps:-none} B/s, write ${write_bps:-none} B/s ($cg)" >&2
# The command runs in a child that joins the group first; this shell stays
# outside it to clean up.
bash -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cg" "$@"
