#!/bin/bash
# bench/mysql.sh - leaserun on MariaDB against flock(1) and the mariadb
# client, measured in one run on one machine; prints the ratios.
#
#   bench/mysql.sh [BUILDDIR]      (default: the current directory)
#
# One short run: "leaserun -n NAME true" on MariaDB, "flock -n FILE true",
# and one mariadb client call "SELECT GET_LOCK(L, 0), RELEASE_LOCK(L)"
# (which takes and drops the same lock without running anything, and
# writes no fence: the floor for a client that connects).  hyperfine
# without a shell.  Target (issue 26): leaserun at least 2x faster than
# the client.
#
# Starts its own MariaDB (tests/mysql-server.bash: mariadb-install-db +
# mariadbd in a temporary directory, loopback, free port, password auth)
# and stops it by PID at the end.  RUNS=N changes the number of runs of
# each command (default 200), in ROUNDS rounds (default 10): each ratio is
# taken within a round, and the median of the rounds' ratios reported.
set -eu
# Nothing from the caller's environment may change what leaserun does.
# shellcheck disable=SC2046 # names: nothing to split or glob
unset $(compgen -v LEASERUN_) NOTIFY_SOCKET

builddir=$(cd "${1:-.}" && pwd)
srcdir=$(cd "$(dirname "$0")/.." && pwd)
LEASERUN=$builddir/leaserun
export LEASERUN_MODULE_DIR=$builddir/.libs
export LR_BUILDDIR=$builddir
runs=${RUNS:-200}
rounds=${ROUNDS:-10}

for tool in mariadb mariadbd hyperfine flock; do
	command -v "$tool" >/dev/null || { echo "bench: needs $tool" >&2; exit 2; }
done
if [ ! -x "$LEASERUN" ] || [ ! -e "$LEASERUN_MODULE_DIR/mysql.so" ]; then
	echo "bench: no leaserun or mysql.so in $builddir" >&2
	exit 2
fi

# shellcheck source=tests/mysql-server.bash
. "$srcdir/tests/mysql-server.bash"
tmp=$(mktemp -d /tmp/leaserun-bench.XXXXXX)
cleanup() {
	mysql_server_stop || true
	rm -rf "$tmp"
}
trap cleanup EXIT
mysql_server_start || { echo "bench: MariaDB did not start" >&2; exit 2; }
# The password travels in the environment, as users should do it.
export MYSQL_PWD=$MY_PASSWORD
url=$MY_URL_NOPW

per=$((runs / rounds))
echo "== one short run (hyperfine, $rounds rounds of $per runs each, no shell)"
"$LEASERUN" -n -U "$url" bench true
for r in $(seq "$rounds"); do
	hyperfine -N --style none --warmup 10 --runs "$per" \
		--export-csv "$tmp/short.$r.csv" \
		-n "leaserun -n (mysql)" "$LEASERUN -n -U $url bench true" \
		-n "flock -n" "flock -n $tmp/flock.lock true" \
		-n "mariadb GET_LOCK" \
		"mariadb --no-defaults -h 127.0.0.1 -P $MY_PORT -u lr lr -N -e \"SELECT GET_LOCK('leaserun:bench', 0), RELEASE_LOCK('leaserun:bench')\"" \
		>/dev/null
done

# CSV: command,mean,stddev,median,user,system,min,max (seconds).  A ratio
# is taken within a round, between blocks a few seconds apart at most,
# and the median of the rounds' ratios is reported: one hyperfine of 200
# runs a command compared blocks measured a minute apart, and the
# machine's drift between them moved the ratio by 0.3x either way from
# one run of the script to the next.
awk -F, '
	FNR == 1 { r++; next }
	{ med[r, FNR - 1] = $4 }
	function sort(a, n,   i, j, t) {
		for (i = 2; i <= n; i++)
			for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
				t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
			}
	}
	# median over the rounds of med[.,x] / med[.,y]
	function ratio(x, y,   i, a) {
		for (i = 1; i <= r; i++)
			a[i] = med[i, x] / med[i, y]
		sort(a, r)
		lo = a[1]; hi = a[r]
		return r % 2 ? a[(r + 1) / 2] : (a[r / 2] + a[r / 2 + 1]) / 2
	}
	function ms(x,   i, a) {
		for (i = 1; i <= r; i++)
			a[i] = med[i, x]
		sort(a, r)
		return 1000 * (r % 2 ? a[(r + 1) / 2] : (a[r / 2] + a[r / 2 + 1]) / 2)
	}
	END {
		printf "\nmedian: leaserun %.2f ms, flock %.2f ms, mariadb %.2f ms\n",
			ms(1), ms(2), ms(3)
		v = ratio(1, 2)
		printf "leaserun / flock   = %.2fx (median of %d rounds, %.2f-%.2f)\n",
			v, r, lo, hi
		v = ratio(3, 1)
		printf "mariadb / leaserun = %.2fx (median of %d rounds, %.2f-%.2f; target >= 2x)\n",
			v, r, lo, hi
	}' "$tmp"/short.*.csv
