#!/bin/bash
# bench/pg.sh - leaserun on PostgreSQL against flock(1) and psql, measured
# in one run on one machine; prints the ratios.
#
#   bench/pg.sh [BUILDDIR]      (default: the current directory)
#
# 1. One short run: "leaserun -n NAME true" on PostgreSQL, "flock -n FILE
#    true", and one psql call "select pg_try_advisory_lock(KEY)" (which
#    takes and drops the same lock without running anything: the floor for
#    a client that connects).  hyperfine without a shell.  Target: leaserun
#    faster than one psql call.
# 2. Hand-over: 20 waiters queue on one name (each in pg_advisory_lock on
#    the server); each holds the lease for 50 ms.  A gap is "previous
#    holder's command ended -> next command started" (both taken with date
#    +%s%N inside the commands), which includes leaserun reaping, releasing
#    and spawning; and, from the -v JSON logs (1 ms resolution), the
#    store's own part "released -> next acquired".  Prints the median, min
#    and max over 20 gaps, for PostgreSQL and for the file store.  Target:
#    median under 5 ms on loopback.
#
# Starts its own PostgreSQL (tests/pg-server.bash: initdb + pg_ctl in a
# temporary directory, loopback, free port, scram password auth, fsync
# off) and stops it by PID at the end.  As root, the server runs as the
# "postgres" user.  Needs the PostgreSQL server binaries, psql, hyperfine
# and flock.  RUNS=N changes the number of hyperfine runs (default 200);
# PG_FSYNC=on starts the server with fsync, so that the WAL flush each
# grant waits for (its fence must survive a crash) reaches the disk.
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

for tool in psql hyperfine flock; do
	command -v "$tool" >/dev/null || { echo "bench: needs $tool" >&2; exit 2; }
done
if [ ! -x "$LEASERUN" ] || [ ! -e "$LEASERUN_MODULE_DIR/pg.so" ]; then
	echo "bench: no leaserun or pg.so in $builddir" >&2
	exit 2
fi

# shellcheck source=tests/pg-server.bash
. "$srcdir/tests/pg-server.bash"
tmp=$(mktemp -d /tmp/leaserun-bench.XXXXXX)
cleanup() {
	pg_server_stop || true
	rm -rf "$tmp"
}
trap cleanup EXIT
pg_server_start || { echo "bench: PostgreSQL did not start" >&2; exit 2; }
# The password travels in the environment, as users should do it.
export PGPASSWORD=$PG_PASSWORD
url=$PG_URL_NOPW
key=$(pg_sql "SELECT ('x' || substr(md5('leaserun:' || 'bench'), 1, 16))::bit(64)::bigint")

echo "== one short run (hyperfine, $runs runs, no shell)"
"$LEASERUN" -n -U "$url" bench true
hyperfine -N --style basic --warmup 20 --runs "$runs" \
	--export-csv "$tmp/short.csv" \
	-n "leaserun -n (pg)" "$LEASERUN -n -U $url bench true" \
	-n "flock -n" "flock -n $tmp/flock.lock true" \
	-n "psql try_advisory_lock" \
	"psql -X -q -t -c 'select pg_try_advisory_lock($key)' $url"

# CSV: command,mean,stddev,median,user,system,min,max (seconds).
awk -F, 'NR > 1 { med[NR - 1] = $4; mean[NR - 1] = $2; cpu[NR - 1] = $5 + $6 }
	END {
		printf "\nmedian: leaserun %.2f ms, flock %.2f ms, psql %.2f ms\n",
			med[1] * 1000, med[2] * 1000, med[3] * 1000
		printf "leaserun / flock = %.2fx (median; mean %.2fx)\n",
			med[1] / med[2], mean[1] / mean[2]
		printf "psql / leaserun  = %.2fx (median; mean %.2fx; target > 1x)\n",
			med[3] / med[1], mean[3] / mean[1]
		printf "CPU (user+sys, mean): leaserun %.2f ms, flock %.2f ms, psql %.2f ms; psql / leaserun = %.2fx\n",
			cpu[1] * 1000, cpu[2] * 1000, cpu[3] * 1000, cpu[3] / cpu[1]
	}' "$tmp/short.csv"

# ms since midnight of the "time" field of leaserun's JSON log lines
# with the given event, one a line, sorted.
event_ms() {
	grep -h "\"event\":\"$1\"" "$tmp"/log.* |
		sed 's/.*"time":"[^T]*T\([0-9:.]*\)Z".*/\1/' |
		awk -F: '{ printf "%.3f\n", ($1 * 3600 + $2 * 60 + $3) * 1000 }' |
		sort -n
}

# median_line LABEL: median, min and max of the numbers on stdin.
median_line() {
	sort -n | awk -v label="$1" '{ g[NR] = $1 }
		END {
			m = NR % 2 ? g[(NR + 1) / 2] : (g[NR / 2] + g[NR / 2 + 1]) / 2
			printf "%s median %.2f ms, min %.2f ms, max %.2f ms (%d gaps)\n",
				label, m, g[1], g[NR], NR
		}'
}

# handover URL LABEL: 20 waiters behind one holder on one name.
handover() {
	local u=$1 label=$2 name="ho-$RANDOM" i
	: >"$tmp/starts"
	: >"$tmp/ends"
	rm -f "$tmp"/log.*
	"$LEASERUN" -v --log-format json -U "$u" "$name" \
		sh -c "sleep 1; date +%s%N >> '$tmp/ends'" 2>"$tmp/log.0" &
	sleep 0.2
	for i in $(seq 20); do
		"$LEASERUN" -v --log-format json -w 60 -U "$u" "$name" sh -c \
			"date +%s%N >> '$tmp/starts'; sleep 0.05; date +%s%N >> '$tmp/ends'" \
			2>"$tmp/log.$i" &
	done
	wait
	sort -n "$tmp/starts" >"$tmp/s"
	sort -n "$tmp/ends" | head -n 20 >"$tmp/e"
	paste "$tmp/s" "$tmp/e" | awk '{ print ($1 - $2) / 1e6 }' |
		median_line "hand-over $(printf '%-5s' "$label") command ends -> next starts:"
	# The store's part: holder's "released" -> next holder's "acquired",
	# from the logs (1 ms resolution; below 0 when the next holder had
	# the lock before the previous one logged its release).
	event_ms released | head -n 20 >"$tmp/rel"
	event_ms acquired | tail -n +2 >"$tmp/acq"
	paste "$tmp/acq" "$tmp/rel" | awk '{ print $1 - $2 }' |
		median_line "hand-over $(printf '%-5s' "$label") released -> acquired (log): "
}

echo
echo "== hand-over with 20 waiters (holder's command ends -> next starts)"
handover "$url" pg
mkdir -p "$tmp/locks"
handover "file://$tmp/locks" file
echo "(target for pg: median under 5 ms on loopback)"
