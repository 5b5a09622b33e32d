#!/bin/bash
# bench/list.sh - leaserun --list on Redis with 10,000 leases held,
# against "redis-cli --scan" of the same keys, measured in one run on one
# machine; prints the times and the ratio.
#
#   bench/list.sh [BUILDDIR]      (default: the current directory)
#
# Fills a fresh redis-server (loopback, free port, no persistence) with
# LEASES (default 10000) plain leases as leaserun writes them (the lease
# key with a TTL and its fence counter), then times, best of RUNS (5):
#   leaserun --list > /dev/null
#   redis-cli --scan --pattern 'leaserun:fence:*' > /dev/null
# (the second only names the keys; --list also reads every holder, TTL and
# waiters' queue).  Issue 27's target: under a second for 10,000.
# Starts its own server in a temporary directory, stops it by PID.
set -eu
B=$(cd "${1:-.}" && pwd)
LEASES=${LEASES:-10000} RUNS=${RUNS:-5}
export LEASERUN_MODULE_DIR=$B/.libs
T=$(mktemp -d)
P=$("$B/tests/freeport")
redis-server --port "$P" --bind 127.0.0.1 --save '' --appendonly no \
	--dir "$T" --pidfile "$T/pid" --daemonize yes >/dev/null
trap 'kill "$(cat "$T/pid")"; rm -rf "$T"' EXIT
until redis-cli -p "$P" ping >/dev/null 2>&1; do sleep 0.05; done
now=$(($(date +%s%N) / 1000000))
for i in $(seq "$LEASES"); do
	echo "SET leaserun:{job-$i} \"tok-$i $i $i $now host$((i % 50))\" PX 600000"
	echo "SET leaserun:fence:{job-$i} $i"
done | redis-cli -p "$P" --pipe >/dev/null

# best SECONDS of RUNS runs of CMD... (stdout to /dev/null)
best() {
	local b= t0 t
	for _ in $(seq "$RUNS"); do
		t0=$(date +%s%N)
		"$@" >/dev/null
		t=$(($(date +%s%N) - t0))
		if [ -z "$b" ] || [ "$t" -lt "$b" ]; then b=$t; fi
	done
	echo "$b"
}

n=$("$B/leaserun" -U "redis://127.0.0.1:$P" --list | tail -n +2 | wc -l)
[ "$n" = "$LEASES" ] || { echo "listed $n leases, not $LEASES" >&2; exit 1; }
l=$(best "$B/leaserun" -U "redis://127.0.0.1:$P" --list)
j=$(best "$B/leaserun" -U "redis://127.0.0.1:$P" --list --json)
s=$(best redis-cli -p "$P" --scan --pattern 'leaserun:fence:*')
awk -v n="$LEASES" -v l="$l" -v j="$j" -v s="$s" 'BEGIN {
	printf "leaserun --list, %d leases:        %.0f ms\n", n, l / 1e6
	printf "leaserun --list --json, %d leases: %.0f ms\n", n, j / 1e6
	printf "redis-cli --scan of their keys:     %.0f ms\n", s / 1e6
	printf "ratio --list / redis-cli --scan:    %.2fx\n", l / s
}'
