# helpers.bash - shared by the bats files.  Real processes only.
bats_require_minimum_version 1.5.0
load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'

: "${LEASERUN:?LEASERUN must name the leaserun binary (make check sets it)}"
: "${LR_BUILDDIR:=$(dirname "$LEASERUN")}"
export LEASERUN_MODULE_DIR="${LEASERUN_MODULE_DIR:-$LR_BUILDDIR/.libs}"

# Options a caller's environment could set must not leak into the tests.
unset LEASERUN_TTL LEASERUN_RENEW LEASERUN_WAIT LEASERUN_KILL_AFTER \
	LEASERUN_SIGNAL LEASERUN_CONFLICT_EXIT_CODE LEASERUN_LOG_FORMAT \
	LEASERUN_URL_FILE LEASERUN_WARN_SIGNAL LEASERUN_METRICS_FILE \
	LEASERUN_STATE NOTIFY_SOCKET

lr() { "$LEASERUN" "$@"; }

# A fresh lock directory per test, used through LEASERUN_URL.
lockdir_setup() {
	LOCKDIR=$(mktemp -d "${BATS_TEST_TMPDIR:-/tmp}/locks.XXXXXX")
	export LOCKDIR
	export LEASERUN_URL="file://$LOCKDIR"
}

# wait_until SECONDS CMD...: runs CMD every 20ms until it succeeds or
# SECONDS pass (then fails, so a test never hangs).
wait_until() {
	local limit=$(($(date +%s%N) + ${1%.*} * 1000000000)); shift
	until "$@"; do
		if (($(date +%s%N) > limit)); then
			echo "timed out waiting for: $*" >&2
			return 1
		fi
		sleep 0.02
	done
}

alive() { kill -0 "$1" 2>/dev/null; }
# A zombie is dead too: it waits only for its parent to reap it.
dead() {
	! kill -0 "$1" 2>/dev/null ||
		[ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)" = Z ]
}
exists() { [ -s "$1" ]; }

# wait_rc PID: waits for a background job of this shell, sets rc.
wait_rc() { rc=0; wait "$1" || rc=$?; }

# with_default_signals CMD...: execs CMD with INT and QUIT at their default
# action (bash starts background jobs with them ignored).
with_default_signals() {
	exec perl -e '$SIG{$_} = "DEFAULT" for qw(INT QUIT); exec @ARGV or die "exec: $!"' -- "$@"
}

# check_intervals LOG: lines "start end fence"; no two intervals overlap
# and fences strictly increase in the order the intervals happened.
check_intervals() {
	sort -n "$1" | awk '
		NR > 1 && $1 < prev_end { printf "overlap at line %d: %s starts before %s\n", NR, $1, prev_end; bad = 1 }
		NR > 1 && $3 <= prev_fence { printf "fence %s not above %s\n", $3, prev_fence; bad = 1 }
		{ prev_end = $2; prev_fence = $3; n++ }
		END { if (!bad) printf "%d intervals, no overlap, fences increase\n", n; exit bad }'
}

# ops_check NAME TTL FENCE: what operations see of a holder on the store in
# LEASERUN_URL, the same shape for every store.  TTL is "ttl" when the
# store's lease expires by itself (ttl_left_ms is a number) or "none";
# FENCE is "fence" when --status knows the fence, or "none".  Checks:
# --status --json names the holder (host, pid, since, fence, TTL left);
# a waiter's JSON events name the holder; the command's --check agrees
# with its LEASERUN_FENCE; the metrics file counts what happened.
ops_check() {
	local n=$1 ttl=$2 fence=$3 d=$BATS_TEST_TMPDIR h f t0
	t0=$(($(date +%s%N) / 1000000))
	"$LEASERUN" -t 6s --metrics-file "$d/m.prom" "$n" sh -c '
		echo "$LEASERUN_FENCE" > "$0/fence"
		"$LEASERUN" --check --json > "$0/check" || echo "rc=$?" >> "$0/check"
		echo $$ > "$0/pid"; exec sleep 60' "$d" 2>"$d/h.err" &
	h=$!
	BG_PIDS="$BG_PIDS $h"
	wait_until 10 exists "$d/pid"
	BG_PIDS="$BG_PIDS $(cat "$d/pid")"
	f=$(cat "$d/fence")

	# The command's own view, without the store.
	jq -e --argjson f "$f" '.held and .state == "held" and .fence == $f and
		.left_ms > 4000 and .left_ms <= 6000' "$d/check"

	run --separate-stderr "$LEASERUN" --status --json "$n"
	assert_success
	echo "$output" >&3
	jq -e --arg host "$(hostname)" --argjson pid "$h" --argjson f "$f" \
		--argjson t0 "$t0" --arg ttl "$ttl" --arg fence "$fence" '
		.held and .name != null and .store != null and
		.host == $host and .pid == $pid and
		.since_ms >= $t0 - 2000 and .since_ms <= $t0 + 10000 and
		(.since | test("^[0-9-]+T[0-9:]+Z$")) and
		(if $ttl == "ttl" then .ttl_left_ms > 0 and .ttl_left_ms <= 6000
		 else .ttl_left_ms == null end) and
		(if $fence == "fence" then .fence == $f else true end)' \
		<<<"$output"

	# A waiter says whom it waits for, and so does its conflict.
	run --separate-stderr "$LEASERUN" -v --log-format json -w 1s "$n" true
	assert_failure 1
	jq -e -s --arg who "$(hostname) pid $h" '
		any(.[]; .event == "waiting" and .holder == $who) and
		any(.[]; .event == "conflict" and .holder == $who)' <<<"$stderr"

	kill -TERM "$h"
	wait_rc "$h"
	[ "$rc" = 143 ]
	run "$LEASERUN" --status --json "$n"
	assert_failure 1
	jq -e '.held == false and .host == null and .pid == null' <<<"$output"

	# One acquired, nothing lost; the run ended by SIGTERM: 143.
	grep -qx "leaserun_acquired_total{name=\"$n\",store=\"[a-z]*\"} 1" "$d/m.prom"
	grep -qx "leaserun_lost_total{name=\"$n\",store=\"[a-z]*\"} 0" "$d/m.prom"
	grep -qx "leaserun_last_exit_status{name=\"$n\",store=\"[a-z]*\"} 143" "$d/m.prom"
	grep -qx "leaserun_hold_seconds_count{name=\"$n\",store=\"[a-z]*\"} 1" "$d/m.prom"
}

# metric FILE LINE-PREFIX: the value of the first sample that starts so.
metric() { awk -v p="$2" 'index($0, p) == 1 { print $NF; exit }' "$1"; }
