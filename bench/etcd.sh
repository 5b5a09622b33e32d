#!/bin/bash
# bench/etcd.sh - leaserun on etcd against "etcdctl lock", measured in one
# run on one machine against the same etcd; prints the ratios.
#
#   bench/etcd.sh [BUILDDIR]      (default: the current directory)
#
# 1. Time: hyperfine (no shell) runs "leaserun -n NAME true" on etcd and
#    "etcdctl lock NAME true" alternately; prints both medians and means
#    and the ratios.  Target: leaserun at least 4x faster (median).
#    Both take the same kind of lock (a lease, a key under NAME/ bound to
#    it, the lowest create revision holds), run true, and give it back.
#    "flock -n FILE true" runs in the same batch: the floor of any wrapper
#    that runs a command.
# 2. Memory: peak RSS (GNU time's %M) of each, median of 21 runs, and the
#    ratio.  Target: leaserun at least 4x smaller.
# 3. Hand-over (bench/handover.bash): 20 waiters queue on one name, each
#    holds the lease for 50 ms; one command's end -> the next one's
#    start, and leaserun's own part of it from its logs ("exited" of one
#    holder -> "acquired" of the next: release, wake-up, acquire).
#    Target: leaserun's part under 5 ms median.
#
# Starts its own etcd (tests/etcd-server.bash: one member on free loopback
# ports in a temporary directory) and stops it by PID at the end.  Needs
# etcd, etcdctl, hyperfine, flock and /usr/bin/time.  RUNS=N sets
# hyperfine's runs (default 200); SKIP_SHORT=1 measures only the
# hand-over.  Build without sanitizers for figures worth quoting.
set -eu
# Nothing from the caller's environment may change what leaserun does
# (a LEASERUN_LIMIT or LEASERUN_SPLAY would skew the figures).
# shellcheck disable=SC2046 # names: nothing to split or glob
unset $(compgen -v LEASERUN_) NOTIFY_SOCKET

builddir=$(cd "${1:-.}" && pwd)
srcdir=$(cd "$(dirname "$0")/.." && pwd)
LEASERUN=$builddir/leaserun
export LEASERUN_MODULE_DIR=$builddir/.libs
export LR_BUILDDIR=$builddir
runs=${RUNS:-200}
# shellcheck source=handover.bash
. "$srcdir/bench/handover.bash"
for tool in etcd etcdctl hyperfine flock /usr/bin/time; do
	command -v "$tool" >/dev/null || { echo "bench: needs $tool" >&2; exit 2; }
done
[ -x "$LEASERUN" ] || { echo "bench: no leaserun in $builddir" >&2; exit 2; }
[ -e "$LEASERUN_MODULE_DIR/etcd.so" ] ||
	{ echo "bench: no etcd.so in $LEASERUN_MODULE_DIR" >&2; exit 2; }
[ -x "$builddir/tests/freeport" ] ||
	{ echo "bench: run 'make tests/freeport' in $builddir first" >&2; exit 2; }
if nm -D "$LEASERUN" 2>/dev/null | grep -q __asan_init; then
	echo "bench: warning: $LEASERUN is built with ASan; figures are not representative" >&2
fi

# shellcheck source=../tests/etcd-server.bash
. "$srcdir/tests/etcd-server.bash"
tmp=$(mktemp -d /tmp/leaserun-bench.XXXXXX)
trap 'etcd_stop_all "$tmp"; rm -rf "$tmp"' EXIT
# The data directory on tmpfs by default (BENCH_DISK=1: on disk).  Both
# tools make the same four writes per run, so the disk's fsync time is the
# same for both and only hides the difference between the clients.
if [ -z "${BENCH_DISK:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
	data=$(mktemp -d /dev/shm/leaserun-bench.XXXXXX)
	where="tmpfs"
else
	data=$(mktemp -d "$tmp/data.XXXXXX")
	where="disk"
fi
trap 'etcd_stop_all "$data"; rm -rf "$data" "$tmp"' EXIT
etcd_single "$data" >/dev/null
ep=$LRE_EP
echo "etcd $(etcd --version | awk 'NR == 1 { print $3 }') on $ep, data on $where; load average $(cut -d' ' -f1-3 /proc/loadavg)"

short_run() {
	hyperfine -N --warmup 20 --runs "$runs" --export-csv "$tmp/t.csv" \
		-n leaserun "$LEASERUN -U etcd://$ep -n bench true" \
		-n etcdctl "etcdctl --endpoints $ep lock bench true" \
		-n flock "flock -n $tmp/flock.lock true" \
		>"$tmp/hyperfine.out" 2>&1 ||
		{ cat "$tmp/hyperfine.out" >&2; exit 1; }

	# CSV: command,mean,stddev,median,user,system,min,max (seconds)
	awk -F, 'NR > 1 { mean[$1] = $2; med[$1] = $4 }
		END {
			printf "time   leaserun %.2f ms median (mean %.2f)  etcdctl lock %.2f ms median (mean %.2f)\n",
				med["leaserun"] * 1000, mean["leaserun"] * 1000,
				med["etcdctl"] * 1000, mean["etcdctl"] * 1000
			printf "       etcdctl/leaserun %.2fx median (mean %.2fx); target >= 4x\n",
				med["etcdctl"] / med["leaserun"], mean["etcdctl"] / mean["leaserun"]
			printf "floor  flock -n FILE true %.2f ms median: any wrapper that runs a command pays it\n",
				med["flock"] * 1000
		}' "$tmp/t.csv"

	rss() {
		for _ in $(seq 21); do
			/usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -n 1
		done | sort -n | sed -n 11p
	}
	lr_kb=$(rss "$LEASERUN" -U "etcd://$ep" -n bench true)
	ec_kb=$(rss etcdctl --endpoints "$ep" lock bench true)
	awk -v a="$lr_kb" -v b="$ec_kb" 'BEGIN {
		printf "memory leaserun %d KB  etcdctl lock %d KB  etcdctl/leaserun %.2fx (peak RSS, median of 21); target >= 4x\n", a, b, b / a }'
}

if [ "${SKIP_SHORT:-}" != 1 ]; then
	echo "== one short run ($runs runs each)"
	short_run
fi
echo "== hand-over with 20 waiters (target: leaserun's part under 5 ms median)"
handover "etcd://$ep" etcd
