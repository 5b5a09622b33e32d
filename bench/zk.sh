#!/bin/bash
# bench/zk.sh - leaserun on ZooKeeper against flock(1) and leaserun's own
# file store, measured in one run on one machine; prints the ratios.
#
#   bench/zk.sh [BUILDDIR]      (default: the current directory)
#
# 1. Time per run: hyperfine (no shell) runs, alternately,
#      leaserun -U zk://... -n NAME true
#      leaserun -U file://DIR -n NAME true
#      flock -n FILE true
#    and prints the means, medians and the ratios to flock.  A ZooKeeper
#    run is: connect (session handshake), create the ephemeral sequential
#    node and list the directory (one round trip), watch our node, run
#    true, delete the node, close the session.  Each create, delete and
#    close is a write the server logs (fsync unless FORCESYNC=no).
# 2. Hand-over latency with WAITERS (default 20) waiters: a holder holds
#    the lease while the waiters queue up, then lets go; each job records
#    when its command started and ended.  The hand-over latency is the
#    next job's start minus the previous job's end: the command's exit,
#    release, the server's watch event, the next acquire, fork and exec.
#    Measured the same way for leaserun on ZooKeeper, leaserun on the file
#    store and flock(1) (whose waiters block in flock(2)); prints median
#    and 90th percentile and the ratios to flock.
#
# Starts its own ZooKeeper (tests/zk-server.bash: standalone, free loopback
# port, temporary directory, tickTime 200ms) and stops it by PID at the
# end.  Needs java and the zookeeper package, hyperfine and flock.
# RUNS=N sets hyperfine's runs (default 200).  FORCESYNC=yes|no (default
# yes, ZooKeeper's own default).  Build without sanitizers for figures
# worth quoting.
set -eu

builddir=$(cd "${1:-.}" && pwd)
srcdir=$(cd "$(dirname "$0")/.." && pwd)
LEASERUN=$builddir/leaserun
export LEASERUN_MODULE_DIR=$builddir/.libs
export LR_BUILDDIR=$builddir
runs=${RUNS:-200}
waiters=${WAITERS:-20}
for tool in java hyperfine flock; do
	command -v "$tool" >/dev/null || { echo "bench: needs $tool" >&2; exit 2; }
done
[ -e /usr/share/java/zookeeper.jar ] ||
	{ echo "bench: needs the ZooKeeper server (Debian: zookeeper)" >&2; exit 2; }
[ -x "$LEASERUN" ] || { echo "bench: no leaserun in $builddir" >&2; exit 2; }
[ -e "$LEASERUN_MODULE_DIR/zk.so" ] ||
	{ echo "bench: no zk.so in $LEASERUN_MODULE_DIR" >&2; exit 2; }
[ -x "$builddir/tests/freeport" ] ||
	{ echo "bench: run 'make tests/freeport' in $builddir first" >&2; exit 2; }
if nm -D "$LEASERUN" 2>/dev/null | grep -q __asan_init; then
	echo "bench: warning: $LEASERUN is built with ASan; figures are not representative" >&2
fi
# Nothing from the caller's environment may change what leaserun does:
# every LEASERUN_ variable goes but the module directory above.
# shellcheck disable=SC2046 # names: nothing to split or glob
unset $(compgen -v LEASERUN_ | grep -vx LEASERUN_MODULE_DIR) NOTIFY_SOCKET

# shellcheck source=../tests/zk-server.bash
. "$srcdir/tests/zk-server.bash"
tmp=$(mktemp -d /tmp/leaserun-bench.XXXXXX)
trap 'zk_stop_all "$tmp"; rm -rf "$tmp"' EXIT
export ZK_CFG="forceSync=${FORCESYNC:-yes}"
zk_standalone "$tmp" >/dev/null
zkurl=zk://$ZK_EP
mkdir "$tmp/locks"
echo "ZooKeeper $(zk_4lw "${ZK_EP#*:}" srvr | sed -n 's/^Zookeeper version: \([^-,]*\).*/\1/p') on $ZK_EP (forceSync=${FORCESYNC:-yes}); $runs runs each, $waiters waiters"

# ---- 1. time per run ----------------------------------------------------
hyperfine -N --warmup 20 --runs "$runs" --export-csv "$tmp/t.csv" \
	-n zk "$LEASERUN -U $zkurl -n bench true" \
	-n file "$LEASERUN -U file://$tmp/locks -n bench true" \
	-n flock "flock -n $tmp/flock.lock true" \
	>"$tmp/hyperfine.out" 2>&1 ||
	{ cat "$tmp/hyperfine.out" >&2; exit 1; }

# CSV: command,mean,stddev,median,user,system,min,max (seconds)
awk -F, 'NR > 1 { mean[$1] = $2; med[$1] = $4 }
	END {
		printf "time     zk %.2f ms (median %.2f)  file %.2f ms (median %.2f)  flock %.2f ms (median %.2f)\n",
			mean["zk"] * 1000, med["zk"] * 1000,
			mean["file"] * 1000, med["file"] * 1000,
			mean["flock"] * 1000, med["flock"] * 1000
		printf "         zk/flock %.1fx (median %.1fx)  zk/file %.1fx (median %.1fx)\n",
			mean["zk"] / mean["flock"], med["zk"] / med["flock"],
			mean["zk"] / mean["file"], med["zk"] / med["file"]
	}' "$tmp/t.csv"

# ---- 2. hand-over latency -----------------------------------------------
# shellcheck disable=SC2016 # expanded by the job's shell
job='echo "$(date +%s%N) $(date +%s%N)" >> "$0"'

# handover KIND: prints the hand-over latencies (ms), one per line.
handover() {
	local kind=$1 log=$tmp/ho.$1 gate=$tmp/gate.$1 i pids=()
	: >"$log"
	rm -f "$gate"
	mkfifo "$gate"
	case $kind in
	zk) hold=("$LEASERUN" -U "$zkurl" -q ho) wait=("$LEASERUN" -U "$zkurl" -q -w 120s ho) ;;
	file) hold=("$LEASERUN" -U "file://$tmp/locks" -q ho) wait=("$LEASERUN" -U "file://$tmp/locks" -q -w 120s ho) ;;
	flock) hold=(flock "$tmp/ho.lock") wait=(flock -w 120 "$tmp/ho.lock") ;;
	esac
	# shellcheck disable=SC2016 # expanded by the holder's shell
	"${hold[@]}" sh -c 'touch "$0.held"; cat "$0" >/dev/null' "$gate" &
	pids+=($!)
	for _ in $(seq 500); do [ -e "$gate.held" ] && break; sleep 0.01; done
	for ((i = 0; i < waiters; i++)); do
		"${wait[@]}" sh -c "$job" "$log" &
		pids+=($!)
	done
	# Let every waiter queue up (each is a process blocked in its wait).
	sleep 2
	echo go >"$gate"
	for i in "${pids[@]}"; do wait "$i"; done
	rm -f "$gate" "$gate.held"
	# Each line is "start end" of one command (both taken inside it, so
	# the same for every kind); hand-over = next start - previous end.
	sort -n "$log" | awk 'NR > 1 { printf "%.3f\n", ($1 - prev) / 1e6 } { prev = $2 }'
}

stats() {
	sort -n | awk '{ v[NR] = $1 } END {
		printf "%.2f %.2f\n", v[int((NR + 1) / 2)], v[int(NR * 0.9 + 0.5)] }'
}

read -r zk_med zk_p90 < <(handover zk | stats)
read -r fi_med fi_p90 < <(handover file | stats)
read -r fl_med fl_p90 < <(handover flock | stats)
awk -v zm="$zk_med" -v zp="$zk_p90" -v fim="$fi_med" -v fip="$fi_p90" \
	-v flm="$fl_med" -v flp="$fl_p90" -v n="$waiters" 'BEGIN {
	printf "handover zk %.2f ms (p90 %.2f)  file %.2f ms (p90 %.2f)  flock %.2f ms (p90 %.2f)  [%d waiters, median]\n",
		zm, zp, fim, fip, flm, flp, n
	printf "         zk/flock %.1fx  zk/file %.1fx (medians)\n", zm / flm, zm / fim }'
