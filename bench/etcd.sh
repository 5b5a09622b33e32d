#!/bin/bash
# bench/etcd.sh - leaserun on etcd against "etcdctl lock", measured in one
# run on one machine against the same etcd; prints the ratios.
#
#   bench/etcd.sh [BUILDDIR]      (default: the current directory)
#
# 1. Time: hyperfine (no shell) runs "leaserun -n NAME true" on etcd and
#    "etcdctl lock NAME true" alternately; prints both means and the ratio.
#    Target: leaserun at least 2x faster.
# 2. Memory: peak RSS (GNU time's %M) of each, median of 21 runs, and the
#    ratio.  Target: leaserun at least 2x smaller.
# Both take the same kind of lock (a lease, a key under NAME/ bound to it,
# the lowest create revision holds), run true, and give it back.
# 3. The floor: bench/curl-floor.c, a program that only loads libcurl and
#    calls curl_global_init(), timed and measured in the same run.  No
#    libcurl client can take less; etcdctl/floor is the best ratio any of
#    them could reach on this machine.  Needs cc and pkg-config's libcurl.
#
# Starts its own etcd (tests/etcd-server.bash: one member on free loopback
# ports in a temporary directory) and stops it by PID at the end.  Needs
# etcd, etcdctl, hyperfine and /usr/bin/time.  RUNS=N sets hyperfine's runs
# (default 200).  Build without sanitizers for figures worth quoting.
set -eu

builddir=$(cd "${1:-.}" && pwd)
srcdir=$(cd "$(dirname "$0")/.." && pwd)
LEASERUN=$builddir/leaserun
export LEASERUN_MODULE_DIR=$builddir/.libs
export LR_BUILDDIR=$builddir
runs=${RUNS:-200}
for tool in etcd etcdctl hyperfine /usr/bin/time; do
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
echo "etcd $(etcd --version | awk 'NR == 1 { print $3 }') on $ep, data on $where; $runs runs each; load average $(cut -d' ' -f1-3 /proc/loadavg)"

floor=()
# shellcheck disable=SC2046 # pkg-config's words are meant to split
if command -v cc >/dev/null && pkg-config --exists libcurl 2>/dev/null &&
	cc -O2 -o "$tmp/curl-floor" $(pkg-config --cflags libcurl) \
		"$srcdir/bench/curl-floor.c" $(pkg-config --libs libcurl); then
	floor=(-n floor "$tmp/curl-floor")
else
	echo "bench: no cc or libcurl headers: the floor is not measured" >&2
fi

hyperfine -N --warmup 20 --runs "$runs" --export-csv "$tmp/t.csv" \
	-n leaserun "$LEASERUN -U etcd://$ep -n bench true" \
	-n etcdctl "etcdctl --endpoints $ep lock bench true" \
	"${floor[@]}" >"$tmp/hyperfine.out" 2>&1 ||
	{ cat "$tmp/hyperfine.out" >&2; exit 1; }

# CSV: command,mean,stddev,median,user,system,min,max (seconds)
awk -F, 'NR > 1 { mean[$1] = $2; med[$1] = $4 }
	END {
		printf "time   leaserun %.2f ms (median %.2f)  etcdctl lock %.2f ms (median %.2f)  etcdctl/leaserun %.2fx (median %.2fx)\n",
			mean["leaserun"] * 1000, med["leaserun"] * 1000,
			mean["etcdctl"] * 1000, med["etcdctl"] * 1000,
			mean["etcdctl"] / mean["leaserun"], med["etcdctl"] / med["leaserun"]
		if ("floor" in med)
			printf "floor  libcurl alone %.2f ms (median %.2f)  etcdctl/floor %.2fx (median %.2fx): the most any libcurl client could reach here\n",
				mean["floor"] * 1000, med["floor"] * 1000,
				mean["etcdctl"] / mean["floor"], med["etcdctl"] / med["floor"]
	}' "$tmp/t.csv"

rss() {
	for _ in $(seq 21); do
		/usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -n 1
	done | sort -n | sed -n 11p
}
lr_kb=$(rss "$LEASERUN" -U "etcd://$ep" -n bench true)
ec_kb=$(rss etcdctl --endpoints "$ep" lock bench true)
awk -v a="$lr_kb" -v b="$ec_kb" 'BEGIN {
	printf "memory leaserun %d KB  etcdctl lock %d KB  etcdctl/leaserun %.2fx (peak RSS, median of 21)\n", a, b, b / a }'
if [ ${#floor[@]} -gt 0 ]; then
	fl_kb=$(rss "$tmp/curl-floor")
	awk -v f="$fl_kb" -v b="$ec_kb" 'BEGIN {
		printf "floor  libcurl alone %d KB  etcdctl/floor %.2fx (peak RSS, median of 21)\n", f, b / f }'
fi
