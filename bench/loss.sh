#!/bin/bash
# bench/loss.sh - how soon a holder sees its lease end in the store, on
# the file store and PostgreSQL, quiet and under load.
#
#   bench/loss.sh [BUILDDIR]      (default: the current directory)
#
# A holder runs "sleep 60" under a TTL of 30 s (its first renewal is 10 s
# away, so only the store's loss signal can tell it); then the lease is
# ended in the store: the lock file removed (file), the holder's session
# ended with pg_terminate_backend() (PostgreSQL).  Two figures a trial,
# from the moment the store had done it (rm, or psql, returned): until
# leaserun logged the loss (its JSON log's time, to the millisecond; the
# command is SIGKILLed right before), and until leaserun had exited
# (the group gone, the exit reaped by the shell).  One that came before
# the store's own answer came back counts 0.  TRIALS=N trials (default
# 20) a store, quiet, then LOAD=N more leaserun runs (default 8) looping
# on another name of the same store meanwhile, each holding for 10 ms:
# on a 2-core machine, the 8 runs at once of the issue that asked for it.
# Prints the median, 90th percentile and maximum in ms.  Latencies, not
# ratios: there is no reference to hold them against but the renewal
# interval (here 10 s) that would find the loss otherwise.
#
# Starts its own PostgreSQL (tests/pg-server.bash) and stops it by PID.
set -eu
# shellcheck disable=SC2046 # names: nothing to split or glob
unset $(compgen -v LEASERUN_) NOTIFY_SOCKET

builddir=$(cd "${1:-.}" && pwd)
srcdir=$(cd "$(dirname "$0")/.." && pwd)
LEASERUN=$builddir/leaserun
export LEASERUN_MODULE_DIR=$builddir/.libs
export LR_BUILDDIR=$builddir
trials=${TRIALS:-20}
load=${LOAD:-8}

# shellcheck source=tests/pg-server.bash
. "$srcdir/tests/pg-server.bash"
tmp=$(mktemp -d /tmp/leaserun-bench.XXXXXX)
loaders=
cleanup() {
	for p in $loaders; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	pg_server_stop || true
	rm -rf "$tmp"
}
trap cleanup EXIT
pg_server_start || { echo "bench: PostgreSQL did not start" >&2; exit 2; }
export PGPASSWORD=$PG_PASSWORD
mkdir "$tmp/locks"

now_ns() { date +%s%N; }

# end_lease STORE: ends the holder's lease in the store.
end_lease() {
	case $1 in
	file) rm -f "$tmp/locks/probe.lock" ;;
	pg) pg_sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name LIKE 'leaserun:probe@%'" >/dev/null ;;
	esac
}

url_of() {
	case $1 in
	file) echo "file://$tmp/locks" ;;
	pg) echo "$PG_URL_NOPW" ;;
	esac
}

# trial STORE: one holder, its lease ended; prints the latency in ms.
trial() {
	local store=$1 pid t0 t1 rc=0
	rm -f "$tmp/started"
	LEASERUN_URL=$(url_of "$store") "$LEASERUN" --log-format json \
		-t 30s probe sh -c ': >"$0/started"; exec sleep 60' "$tmp" \
		2>"$tmp/log" &
	pid=$!
	while [ ! -e "$tmp/started" ]; do sleep 0.01; done
	end_lease "$store"
	t0=$(now_ns)
	wait "$pid" || rc=$?
	t1=$(now_ns)
	[ "$rc" = 124 ] || { echo "bench: the holder exited $rc" >&2; exit 1; }
	lost=$(jq -r 'select(.event == "lost") | .time' "$tmp/log" | head -n 1)
	lost=$(date -d "$lost" +%s%3N)
	lost=$((lost - t0 / 1000000))
	echo "$((lost > 0 ? lost : 0)) $(((t1 - t0) / 1000000))"
}

# stats: median, p90 and max of the column $1 of stdin.
stats() {
	awk -v c="$1" '{ print $c }' | sort -n | awk '{ v[NR] = $1 } END {
		printf "median %d ms, p90 %d ms, max %d ms (%d trials)",
			v[int((NR + 1) / 2)], v[int(NR * 0.9 + 0.5)], v[NR], NR }'
}

# report WHAT: the two figures of the trials on stdin.
report() {
	local f
	f=$(cat)
	echo "$1: loss logged: $(stats 1 <<<"$f")"
	echo "$1: exited:      $(stats 2 <<<"$f")"
}

start_load() {
	local store=$1 i
	for ((i = 0; i < load; i++)); do
		(
			export LEASERUN_URL
			LEASERUN_URL=$(url_of "$store")
			while :; do
				"$LEASERUN" -q -w 60s loadname sleep 0.01 || true
			done
		) &
		loaders="$loaders $!"
	done
}

stop_load() {
	for p in $loaders; do kill "$p" 2>/dev/null || true; done
	wait $loaders 2>/dev/null || true
	loaders=
}

for store in file pg; do
	for ((i = 0; i < trials; i++)); do trial "$store"; done |
		report "$store, quiet"
	start_load "$store"
	sleep 1
	for ((i = 0; i < trials; i++)); do trial "$store"; done |
		report "$store, $load runs looping beside it"
	stop_load
done
