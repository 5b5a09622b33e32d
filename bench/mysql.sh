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

# Each ratio within a round, the median of the rounds (rounds.awk).
awk -F, -f "$srcdir/bench/rounds.awk" -f /dev/stdin "$tmp"/short.*.csv <<'EOF'
END {
	printf "\nmedian: leaserun %.2f ms, flock %.2f ms, mariadb %.2f ms\n",
		ms(1), ms(2), ms(3)
	v = ratio(1, 2)
	printf "leaserun / flock   = %.2fx (median of %d rounds, %.2f-%.2f)\n",
		v, r, lo, hi
	v = ratio(3, 1)
	printf "mariadb / leaserun = %.2fx (median of %d rounds, %.2f-%.2f; target >= 2x)\n",
		v, r, lo, hi
}
EOF
