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
	LEASERUN_STATE NOTIFY_SOCKET LEASERUN_LIMIT

lr() { "$LEASERUN" "$@"; }

# needs_root WHY: a test that needs root fails without it, so that a run
# as root (CI) can never pass by skipping it.  A build that runs as a user
# by design sets LR_SKIP_ROOT_TESTS=1 (debian/rules does), and there the
# test is skipped, which bats reports as a skip.
needs_root() {
	[ "$(id -u)" = 0 ] && return 0
	[ -n "${LR_SKIP_ROOT_TESTS:-}" ] && skip "needs root $1"
	echo "needs root $1" >&2
	return 1
}

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

# ended CMD...: runs CMD and prints how it ended, "exit N" or "signal N",
# which $? cannot tell apart (128+N is also an exit status).
ended() {
	perl -e 'system(@ARGV) == -1 and die "exec: $!\n";
		printf "%s %d\n", $? & 127 ? ("signal", $? & 127) : ("exit", $? >> 8)' -- "$@"
}

# A command that ignores SIGTERM and writes its start, then a heartbeat
# every 10ms, as wall-clock ms, to DIR/start and DIR/beat (whole lines
# only, so a SIGKILL between two writes cannot leave a torn one).  Run as
# sh -c "$BEATER" DIR.
BEATER='exec perl -MTime::HiRes=time,sleep -e '\''
	$SIG{TERM} = "IGNORE"; my $d = shift;
	sub put { open my $f, ">", "$d/$_[0].new" or die; print $f int(time() * 1000), "\n";
		close $f; rename "$d/$_[0].new", "$d/$_[0]" }
	put("start"); while (1) { put("beat"); sleep 0.01 }'\'' "$0"'

# ran_past DIR MS: how far past its start + MS the beater's last beat was
# (negative: it was stopped in time).
ran_past() { echo $(($(cat "$1/beat") - $(cat "$1/start") - $2)); }
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
	BG_PIDS="${BG_PIDS:-} $h"
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
		any(.[]; .event == "conflict" and .holder == $who)' <<<"$stderr" ||
		{ echo "$stderr"; return 1; }

	kill -TERM "$h"
	local hrc=0
	wait "$h" || hrc=$?
	[ "$hrc" = 143 ]
	run "$LEASERUN" --status --json "$n"
	assert_failure 1
	jq -e '.held == false and .host == null and .pid == null' <<<"$output"

	# One acquired, nothing lost; the run ended by SIGTERM: 143.
	grep -qx "leaserun_lease_acquired_total{name=\"$n\",store=\"[a-z]*\"} 1" "$d/m.prom"
	grep -qx "leaserun_lease_lost_total{name=\"$n\",store=\"[a-z]*\"} 0" "$d/m.prom"
	grep -qx "leaserun_run_last_exit_status{name=\"$n\",store=\"[a-z]*\"} 143" "$d/m.prom"
	grep -qx "leaserun_lease_hold_seconds_count{name=\"$n\",store=\"[a-z]*\"} 1" "$d/m.prom"
}

# metric FILE LINE-PREFIX: the value of the first sample that starts so.
metric() { awk -v p="$2" 'index($0, p) == 1 { print $NF; exit }' "$1"; }

# ops_loss_seen NAME ERRFILE METRICS: a holder started with --log-format
# json and --metrics-file METRICS, its stderr in ERRFILE, ended with 124
# after the store took its lease away: the JSON events say so with a
# reason, the metrics count it, its state directory is gone.
ops_loss_seen() {
	local n=$1 err=$2 m=$3
	jq -e -s 'any(.[]; .event == "lost" and .level == "warning" and
		(.reason | length) > 0)' "$err"
	jq -e -s 'any(.[]; .event == "acquired" and .fence > 0)' "$err"
	[ "$(metric "$m" "leaserun_lease_lost_total{name=\"$n\",")" = 1 ]
	[ "$(metric "$m" "leaserun_lease_acquired_total{name=\"$n\",")" = 1 ]
	[ "$(metric "$m" "leaserun_run_last_exit_status{name=\"$n\",")" = 124 ]
}

# ops_warn_recover NAME STOP CONT: a holder with --warn-signal USR1 whose
# store STOP (a command) makes unresponsive and CONT brings back before
# the stop signal is due: the command hears USR1 as soon as a renewal
# fails, --check then says at-risk, the lease is renewed again and the
# command ends normally, still holding it.
ops_warn_recover() {
	local n=$1 stop=$2 cont=$3 d=$BATS_TEST_TMPDIR h hrc=0
	"$LEASERUN" -v -t 6s -k 300ms --warn-signal USR1 --log-format json \
		--metrics-file "$d/w.prom" "$n" sh -c '
		exec 2>"$0/child.err" # sh reports the sleep that USR1 ended
		trap "\"\$LEASERUN\" --check --json > \"\$0/warn\"" USR1
		echo $$ > "$0/w.pid"
		while [ ! -e "$0/done" ]; do sleep 0.05; done
		"$LEASERUN" --check --json > "$0/after"' "$d" 2>"$d/w.err" &
	h=$!
	BG_PIDS="${BG_PIDS:-} $h"
	wait_until 10 exists "$d/w.pid"
	$stop
	wait_until 15 exists "$d/warn" || { $cont; return 1; }
	$cont
	wait_until 10 grep -q 'renewed again' "$d/w.err"
	touch "$d/done"
	wait "$h" || hrc=$?
	[ "$hrc" = 0 ]
	jq -e '.held and .state == "at-risk"' "$d/warn"
	jq -e '.held and .state == "held"' "$d/after"
	jq -e -s 'any(.[]; .event == "at-risk" and (.msg | test("signal 10")))' "$d/w.err"
	(( $(metric "$d/w.prom" "leaserun_heartbeat_failures_total{name=\"$n\",") >= 1 ))
	[ "$(metric "$d/w.prom" "leaserun_lease_lost_total{name=\"$n\",")" = 0 ]
	[ "$(metric "$d/w.prom" "leaserun_run_last_exit_status{name=\"$n\",")" = 0 ]
}

# --- Shared by the store test files (redis, pg, etcd, zk) ---

# Milliseconds since the epoch.
now_ms() { echo $(($(date +%s%N) / 1000000)); }

# Waits (bounded, 15 s) until a file exists.
wait_file() {
	local i
	for i in $(seq 300); do
		[ -e "$1" ] && return 0
		sleep 0.05
	done
	echo "timed out waiting for $1" >&2
	return 1
}

# Waits (bounded, up to $2 tenths of a second) until pid $1 is gone (a
# zombie is gone: whoever inherited it may take its time to reap it).
wait_gone() {
	local i
	for i in $(seq "${2:-100}"); do
		dead "$1" && return 0
		sleep 0.1
	done
	return 1
}

# hold NAME [leaserun options]: a holder whose command runs until it is
# killed or release() is called; returns once the command runs.  Sets
# HOLDER (leaserun's pid), CHILD (the command's pid), HOLDER_RC_FILE.
hold() {
	local name=$1
	shift
	mkfifo "$BATS_TEST_TMPDIR/gate.$name"
	rm -f "$BATS_TEST_TMPDIR/started.$name"
	HOLDER_RC_FILE=$BATS_TEST_TMPDIR/rc.$name
	(
		rc=0 # the test's errexit holds in here too
		"$LEASERUN" "$@" "$name" sh -c \
			'echo $$ > "$0/child.$1"; echo "$LEASERUN_FENCE" > "$0/fence.$1"; touch "$0/started.$1"; exec cat "$0/gate.$1"' \
			"$BATS_TEST_TMPDIR" "$name" 2>"$BATS_TEST_TMPDIR/err.$name" || rc=$?
		echo "$rc" >"$HOLDER_RC_FILE"
	) 3>&- &
	HOLDER_SUB=$!
	BG_PIDS="${BG_PIDS:-} $HOLDER_SUB"
	wait_file "$BATS_TEST_TMPDIR/started.$name"
	HOLDER=$(pgrep -P "$HOLDER_SUB" -x leaserun | head -n1)
	[ -n "$HOLDER" ]
	CHILD=$(cat "$BATS_TEST_TMPDIR/child.$name")
	BG_PIDS="$BG_PIDS $HOLDER $CHILD"
}

release() {
	timeout 5 sh -c 'echo go > "$1"' sh "$BATS_TEST_TMPDIR/gate.$1"
}

# Waits for the holder started by hold(); sets HRC to its exit status.
wait_holder() {
	wait "$HOLDER_SUB" || true
	HRC=$(cat "$HOLDER_RC_FILE")
}

# Waits for the holder started by hold() (in this shell, not in a $(...):
# a subshell cannot wait for it) and checks its exit status.
assert_holder_rc() {
	wait "$HOLDER_SUB" || true
	assert_equal "$(cat "$HOLDER_RC_FILE")" "$1"
}

# Starts "leaserun [OPTS] NAME sh -c 'echo $$ > pidfile; exec sleep 60'"
# in the background; sets BG (leaserun's pid) and CHILD (the command's),
# whose fence is in $BATS_TEST_TMPDIR/NAME.fence.
start_holder() {
	local n=$1; shift
	"$LEASERUN" "$@" "$n" sh -c "echo \$LEASERUN_FENCE > '$BATS_TEST_TMPDIR/$n.fence'; echo \$\$ > '$BATS_TEST_TMPDIR/$n.pid'; exec sleep 60" \
		2>"$BATS_TEST_TMPDIR/$n.err" &
	BG=$!
	BG_PIDS="$BG_PIDS $BG"
	wait_until 10 exists "$BATS_TEST_TMPDIR/$n.pid"
	CHILD=$(cat "$BATS_TEST_TMPDIR/$n.pid")
	BG_PIDS="$BG_PIDS $CHILD"
}

# ps_hides_password NAME PASSWORD OPTION...: a holder started as
# "leaserun OPTION... NAME command", where OPTION... gives the store's URL
# with PASSWORD on the command line (and LEASERUN_URL is empty), gets the
# lease with it; yet while its command runs, /proc/PID/cmdline (what ps
# shows) has as many '*' in its place, and leaserun has warned.
ps_hides_password() {
	local n=$1 pw=$2 d=$BATS_TEST_TMPDIR hrc=0
	shift 2
	LEASERUN_URL= start_holder "$n" "$@"
	tr '\0' '\n' < "/proc/$BG/cmdline" > "$d/argv"
	kill -TERM "$BG"
	wait "$BG" || hrc=$?
	cat "$d/argv"
	[ "$hrc" = 143 ]
	# (Not "! grep": bash's errexit ignores a negated command.)
	[ "$(grep -cF -- "$pw" "$d/argv" "$d/$n.err" | grep -vc ':0$')" = 0 ]
	grep -qE -- "[:=][*]{${#pw}}([@&]|\$)" "$d/argv"
	grep -q "visible in ps" "$d/$n.err"
}
