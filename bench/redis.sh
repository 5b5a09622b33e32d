#!/bin/bash
# bench/redis.sh - leaserun on Redis against flock(1) and a redis-cli
# script, measured in one run on one machine; prints the ratios.
#
#   bench/redis.sh [BUILDDIR]      (default: the current directory)
#
# 1. One short run: "leaserun -n NAME true" on Redis, "flock -n FILE true",
#    and a careful redis-cli script doing the same lease by hand (SET NX PX
#    with a random token, the command, a Lua compare-and-delete).  hyperfine
#    without a shell.  Targets: within 1.25x of flock (issue 16), 4x faster
#    than the redis-cli script.  "leaserun -n" on the file store (on a
#    tmpfs) is measured too, to tell the core's own cost from the Redis
#    store's, and so is bench/floor.c, the least a Redis lease costs
#    here: a C client linked with hiredis that connects, grants with one
#    EVAL, runs the command and releases with one EVAL (built with cc).
#    And "leaserun -n" on a Redis Cluster of three masters (no replicas,
#    no persistence, as the single server), seeded with the master of the
#    lease's slot (the usual case once a run has learned it) and with
#    another master (one MOVED).  Target: within 1.15x of the single
#    server (issue 25), in the same rounds.
# 2. Hand-over: 20 waiters queue on one name; each holds the lease for
#    50 ms.  A gap is "previous holder's command ended -> next command
#    started" (bash's $EPOCHREALTIME, the last and the first thing the
#    commands do); prints the median, min and max over 20 gaps, for Redis
#    and for the file store.  Also from leaserun's own -v JSON log (1 ms
#    resolution): "exited" of one holder -> "acquired" of the next, the
#    part that leaserun and the store control (release, wake-up, acquire),
#    without the commands' process start and exit.
#    Target: median under 5 ms on loopback.
#
# Starts its own redis-server (loopback, free port, no password, no
# persistence) in a temporary directory and stops it by PID at the end.
# Needs redis-server, redis-cli, hyperfine, flock, cc and hiredis's
# headers.  RUNS=N changes the number of runs of each command (default
# 600), ROUNDS=N the number of hyperfine runs they are split into
# (default 10; each ratio is taken within a round, see short_run);
# SKIP_SHORT=1 measures only the hand-over.
set -eu
# Nothing from the caller's environment may change what leaserun does
# (a LEASERUN_LIMIT or LEASERUN_SPLAY would skew the figures).
# shellcheck disable=SC2046 # names: nothing to split or glob
unset $(compgen -v LEASERUN_) NOTIFY_SOCKET

builddir=$(cd "${1:-.}" && pwd)
LEASERUN=$builddir/leaserun
export LEASERUN_MODULE_DIR=$builddir/.libs
runs=${RUNS:-600}
rounds=${ROUNDS:-10}
# shellcheck source=handover.bash
. "$(dirname "$0")/handover.bash"

for tool in redis-server redis-cli hyperfine flock cc; do
	command -v "$tool" >/dev/null || { echo "bench: needs $tool" >&2; exit 2; }
done
if [ ! -x "$LEASERUN" ] || [ ! -e "$LEASERUN_MODULE_DIR/redis.so" ]; then
	echo "bench: no leaserun or redis.so in $builddir" >&2
	exit 2
fi

tmp=$(mktemp -d /tmp/leaserun-bench.XXXXXX)
# The file store's runs on a tmpfs, as its default directory is on a
# usual system (on a disk, each grant also flushes its fence counter).
ftmp=$tmp
if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
	ftmp=$(mktemp -d /dev/shm/leaserun-bench.XXXXXX)
fi
port=$("$builddir/tests/freeport")
redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
	--dir "$tmp" --logfile "$tmp/redis.log" </dev/null >/dev/null 2>&1 &
rpid=$!
cpids=
cleanup() {
	# shellcheck disable=SC2086 # pids
	kill "$rpid" $cpids 2>/dev/null || true
	# shellcheck disable=SC2086
	wait "$rpid" $cpids 2>/dev/null || true
	rm -rf "$tmp" "$ftmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
for _ in $(seq 100); do
	[ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] && break
	sleep 0.05
done
[ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] ||
	{ echo "bench: redis-server did not start" >&2; exit 2; }
url=redis://127.0.0.1:$port

# The cluster: three masters, each with a bus port of its own.
read -r -a cports <<<"$("$builddir/tests/freeport" 6 | paste -sd' ')"
for i in 0 1 2; do
	p=${cports[$i]}
	mkdir "$tmp/c$p"
	redis-server --bind 127.0.0.1 --port "$p" --cluster-enabled yes \
		--cluster-port "${cports[$((i + 3))]}" \
		--cluster-config-file "$tmp/c$p/nodes.conf" --save '' \
		--appendonly no --dir "$tmp/c$p" --logfile "$tmp/c$p/redis.log" \
		</dev/null >/dev/null 2>&1 &
	cpids="$cpids $!"
done
for p in "${cports[@]:0:3}"; do
	for _ in $(seq 100); do
		[ "$(redis-cli -p "$p" ping 2>/dev/null)" = PONG ] && break
		sleep 0.05
	done
done
redis-cli --cluster create "127.0.0.1:${cports[0]}" "127.0.0.1:${cports[1]}" \
	"127.0.0.1:${cports[2]}" --cluster-yes >"$tmp/cluster.log" 2>&1 ||
	{ echo "bench: cannot make the cluster" >&2; cat "$tmp/cluster.log" >&2; exit 2; }
for _ in $(seq 200); do
	[ "$(redis-cli -p "${cports[0]}" cluster info | tr -d '\r' |
		grep -c -x -e cluster_state:ok -e cluster_slots_ok:16384)" = 2 ] && break
	sleep 0.05
done
# The master of the slot of lease "bench", and another.
bslot=$(redis-cli -p "${cports[0]}" cluster keyslot 'leaserun:{bench}')
for p in "${cports[@]:0:3}"; do
	if redis-cli -p "$p" cluster nodes | grep myself | awk -v s="$bslot" '
			{ for (i = 9; i <= NF; i++) { n = split($i, r, "-")
				if (r[1] <= s && s <= r[n]) f = 1 } }
			END { exit !f }'; then
		cown=$p
	else
		cother=$p
	fi
done
[ -n "${cown:-}" ] && [ -n "${cother:-}" ] ||
	{ echo "bench: no master of the slot of lease bench" >&2; exit 2; }
curl_own=redis+cluster://127.0.0.1:$cown
curl_other=redis+cluster://127.0.0.1:$cother
cc -O2 -o "$tmp/floor" "$(dirname "$0")/floor.c" -lhiredis ||
	{ echo "bench: cannot build bench/floor.c" >&2; exit 2; }

cat >"$tmp/cli.sh" <<'EOF'
#!/bin/sh
# The same lease by hand: SET NX PX with a random token, run, compare-and-delete.
p=$1
tok=$(cat /proc/sys/kernel/random/uuid)
[ "$(redis-cli -p "$p" set clilease "$tok" NX PX 10000)" = OK ] || exit 1
true
redis-cli -p "$p" eval "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0" 1 clilease "$tok" >/dev/null
EOF

short_run() {
	local r per=$((runs / rounds))

	echo "== one short run (hyperfine, $rounds rounds of $per runs each, no shell)"
	"$LEASERUN" -n -U "$url" bench true # loads the scripts once
	"$LEASERUN" -n -U "$curl_own" bench true
	for r in $(seq "$rounds"); do
		hyperfine -N --style none --warmup 10 --runs "$per" \
			--export-csv "$tmp/short.$r.csv" \
			-n "leaserun -n (redis)" "$LEASERUN -n -U $url bench true" \
			-n "flock -n" "flock -n $tmp/flock.lock true" \
			-n "redis-cli script" "sh $tmp/cli.sh $port" \
			-n "leaserun -n (file)" "$LEASERUN -n -U file://$ftmp bench true" \
			-n "floor (C client)" "$tmp/floor $port true" \
			-n "leaserun -n (cluster)" "$LEASERUN -n -U $curl_own bench true" \
			-n "leaserun -n (cluster via MOVED)" "$LEASERUN -n -U $curl_other bench true" \
			>/dev/null
	done

	# Each ratio within a round, the median of the rounds (rounds.awk).
	awk -F, -f "$(dirname "$0")/rounds.awk" -f /dev/stdin "$tmp"/short.*.csv <<'EOF'
	END {
		printf "\nmedian: leaserun %.2f ms, flock %.2f ms, redis-cli script %.2f ms\n",
			ms(1), ms(2), ms(3)
		v = ratio(1, 2)
		printf "leaserun / flock            = %.2fx (median of %d rounds, %.2f-%.2f; target <= 1.25x)\n",
			v, r, lo, hi
		v = ratio(3, 1)
		printf "redis-cli script / leaserun = %.2fx (%.2f-%.2f; target >= 4x)\n", v, lo, hi
		v = ratio(1, 4)
		printf "leaserun redis / file store = %.2fx (%.2f-%.2f: the cost of the network store)\n", v, lo, hi
		v = ratio(5, 2)
		printf "floor / flock               = %.2fx (%.2f-%.2f: connect, two round trips, nothing else)\n", v, lo, hi
		v = ratio(1, 5)
		printf "leaserun / floor            = %.2fx (%.2f-%.2f: what leaserun adds to the least a lease costs)\n", v, lo, hi
		v = ratio(6, 1)
		printf "cluster / single server     = %.2fx (%.2f-%.2f; target <= 1.15x)\n", v, lo, hi
		v = ratio(7, 1)
		printf "cluster, MOVED / single     = %.2fx (%.2f-%.2f: a seed that is not the slot's master)\n", v, lo, hi
	}
EOF
}

if [ "${SKIP_SHORT:-}" != 1 ]; then
	short_run
	echo
fi
echo "== hand-over with 20 waiters (holder's command ends -> next starts)"
handover "$url" redis
mkdir -p "$ftmp/locks"
handover "file://$ftmp/locks" file
echo "(target for redis: median under 5 ms on loopback)"
