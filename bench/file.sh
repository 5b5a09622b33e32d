#!/bin/bash
# bench/file.sh - leaserun on the file store against flock(1), measured in
# one run on one machine; prints the ratios.
#
#   bench/file.sh [BUILDDIR]      (default: the current directory)
#
# 1. Time: hyperfine (no shell) runs "leaserun -n NAME true" and
#    "flock -n FILE true" alternately; prints both means and the ratio.
# 2. Memory: peak RSS (GNU time's %M) of each, median of 21 runs, and the
#    ratio.  Target: under 2 MB for leaserun.
# Needs hyperfine, flock and /usr/bin/time.  RUNS=N sets hyperfine's runs
# (default 500).  The lock directory is made in TMPDIR, by default on the
# first tmpfs of /run/lock, /dev/shm and /tmp, as the file store's default
# directory is on a usual Linux system: each grant fsyncs its fence
# counter, which costs nothing on a tmpfs and one flush of the disk
# elsewhere (TMPDIR=/var/tmp measures that; flock(1) syncs nothing).
# Target: within 1.15x of flock.
set -eu
# Nothing from the caller's environment may change what leaserun does
# (a LEASERUN_LIMIT or LEASERUN_SPLAY would skew the figures).
# shellcheck disable=SC2046 # names: nothing to split or glob
unset $(compgen -v LEASERUN_) NOTIFY_SOCKET

builddir=$(cd "${1:-.}" && pwd)
LEASERUN=$builddir/leaserun
runs=${RUNS:-500}
for tool in hyperfine flock /usr/bin/time; do
	command -v "$tool" >/dev/null || { echo "bench: needs $tool" >&2; exit 2; }
done
[ -x "$LEASERUN" ] || { echo "bench: no leaserun in $builddir" >&2; exit 2; }

# The first writable tmpfs among the file store's usual homes: /run/lock
# is not a tmpfs everywhere (in some containers it is on the root disk).
if [ -z "${TMPDIR:-}" ]; then
	for d in /run/lock /dev/shm /tmp; do
		[ -w "$d" ] && [ "$(stat -f -c %T "$d")" = tmpfs ] &&
			{ TMPDIR=$d; break; }
	done
	TMPDIR=${TMPDIR:-/tmp}
fi
tmp=$(mktemp -d "$TMPDIR/leaserun-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "lock directory: $TMPDIR ($(stat -f -c %T "$TMPDIR"))"
hyperfine -N --warmup 50 --runs "$runs" --export-csv "$tmp/t.csv" \
	-n leaserun "$LEASERUN -U file://$tmp -n bench true" \
	-n flock "flock -n $tmp/flock.lock true" >"$tmp/hyperfine.out" 2>&1

# CSV: command,mean,stddev,median,user,system,min,max (seconds)
awk -F, 'NR > 1 { mean[$1] = $2; med[$1] = $4 }
	END {
		printf "time   leaserun %.3f ms (median %.3f)  flock %.3f ms (median %.3f)  ratio %.2fx (median %.2fx)\n",
			mean["leaserun"] * 1000, med["leaserun"] * 1000,
			mean["flock"] * 1000, med["flock"] * 1000,
			mean["leaserun"] / mean["flock"], med["leaserun"] / med["flock"]
	}' "$tmp/t.csv"

rss() {
	for _ in $(seq 21); do
		/usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -n 1
	done | sort -n | sed -n 11p
}
lr_kb=$(rss "$LEASERUN" -U "file://$tmp" -n bench true)
fl_kb=$(rss flock -n "$tmp/flock.lock" true)
awk -v a="$lr_kb" -v b="$fl_kb" 'BEGIN {
	printf "memory leaserun %d KB  flock %d KB  ratio %.2fx (peak RSS, median of 21)\n", a, b, a / b }'
