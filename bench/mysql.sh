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
# and stops it by PID at the end.  RUNS=N changes the number of hyperfine
# runs (default 200).
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

echo "== one short run (hyperfine, $runs runs, no shell)"
"$LEASERUN" -n -U "$url" bench true
hyperfine -N --style basic --warmup 20 --runs "$runs" \
	--export-csv "$tmp/short.csv" \
	-n "leaserun -n (mysql)" "$LEASERUN -n -U $url bench true" \
	-n "flock -n" "flock -n $tmp/flock.lock true" \
	-n "mariadb GET_LOCK" \
	"mariadb --no-defaults -h 127.0.0.1 -P $MY_PORT -u lr lr -N -e \"SELECT GET_LOCK('leaserun:bench', 0), RELEASE_LOCK('leaserun:bench')\""

# CSV: command,mean,stddev,median,user,system,min,max (seconds).
awk -F, 'NR > 1 { med[NR - 1] = $4; mean[NR - 1] = $2 }
	END {
		printf "\nmedian: leaserun %.2f ms, flock %.2f ms, mariadb %.2f ms\n",
			med[1] * 1000, med[2] * 1000, med[3] * 1000
		printf "leaserun / flock   = %.2fx (median; mean %.2fx)\n",
			med[1] / med[2], mean[1] / mean[2]
		printf "mariadb / leaserun = %.2fx (median; mean %.2fx; target >= 2x)\n",
			med[3] / med[1], mean[3] / mean[1]
	}' "$tmp/short.csv"
