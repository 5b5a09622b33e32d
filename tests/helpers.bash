# helpers.bash - shared by the bats files.  Real processes only.
bats_require_minimum_version 1.5.0
load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load coverage

: "${LEASERUN:?LEASERUN must name the leaserun binary (make check sets it)}"
: "${LR_BUILDDIR:=$(dirname "$LEASERUN")}"
export LEASERUN_MODULE_DIR="${LEASERUN_MODULE_DIR:-$LR_BUILDDIR/.libs}"

# Options a caller's environment could set must not leak into the tests:
# every LEASERUN_ variable goes, whatever its name, but the module
# directory and LEASERUN_URL, which a file's setup_file may export for its
# tests (this file is loaded again for each test, after setup_file).
# shellcheck disable=SC2046 # names: nothing to split or glob
unset $(compgen -v LEASERUN_ | grep -vx -e LEASERUN_MODULE_DIR -e LEASERUN_URL) \
	NOTIFY_SOCKET

lr() { "$LEASERUN" "$@"; }

# lr_failing CALL:ERRNO[:SKIP[:FILE]] ARGS...: leaserun with one call of
# its own failing (tests/failcall.c says when); $T/failed appears when it
# has.  ASan wants its runtime first in the link order, as for pdeath.so.
# Killed after 30 s: a leaserun that took a failure the wrong way (went
# on without its signals...) may never end.
lr_failing() {
	timeout -s KILL 30 env LD_PRELOAD="$LR_BUILDDIR/.libs/failcall.so" \
		LR_TEST_FAIL="$1" LR_TEST_FAIL_MARK="$T/failed" \
		ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
		"$LEASERUN" "${@:2}"
}

# kill_bg: a test's background processes, whatever became of the test:
# each pid in BG_PIDS is continued (a test may have stopped it) and killed.
kill_bg() {
	local p n
	for p in ${BG_PIDS:-}; do
		kill -CONT "$p" 2>/dev/null || true
		# In the mutation run's coverage pass (coverage.bash), TERM
		# first, for a second: a process killed by SIGKILL writes no
		# counts, and what it ran would look run by no test.
		if [ -n "${LR_COVERAGE_DIR:-}" ] && kill -TERM "$p" 2>/dev/null; then
			for n in 1 2 3 4 5 6 7 8 9 10; do
				kill -0 "$p" 2>/dev/null || break
				sleep 0.1
			done
		fi
		kill -9 "$p" 2>/dev/null || true
	done
}

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

# wait_rc PID: waits for a background job of this shell and sets RC to
# its exit status.  (Not in $(...): a subshell cannot wait for a job of
# its parent that is still running.)
wait_rc() { RC=0; wait "$1" || RC=$?; }

# down_for_good NAME REGEX: with the store down, a run with -w 3s ends
# 125 with one line matching REGEX once the wait has run out, not a
# second later; -n ends 125 at once; neither runs its command.
down_for_good() {
	local t0 t1
	t0=$(now_ms)
	run --separate-stderr "$LEASERUN" -w 3s "$1" touch "$BATS_TEST_TMPDIR/ran"
	t1=$(now_ms)
	assert_equal "$status" 125
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "$2"
	echo "# -w 3s gave up after $((t1 - t0))ms" >&3
	(( t1 - t0 >= 2500 && t1 - t0 < 4000 ))
	t0=$(now_ms)
	run --separate-stderr "$LEASERUN" -n "$1" touch "$BATS_TEST_TMPDIR/ran"
	t1=$(now_ms)
	assert_equal "$status" 125
	echo "# -n gave up after $((t1 - t0))ms" >&3
	(( t1 - t0 < 1500 ))
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
}

# all_waiters_run NAME N: N runs of NAME at once with -v -w 60, each a
# short command; every one must exit 0 having run.  Their stderr is in
# $BATS_TEST_TMPDIR/err, for the caller to look at what they rode out.
all_waiters_run() {
	local n=$1 i p pids= bad=0 d=$BATS_TEST_TMPDIR
	for ((i = 0; i < $2; i++)); do
		"$LEASERUN" -v -w 60 "$n" sh -c 'sleep 0.1; echo x >>"$0/ran"' \
			"$d" 2>>"$d/err" &
		pids="$pids $!"
	done
	BG_PIDS=$pids
	for p in $pids; do
		wait_rc "$p"
		(( RC == 0 )) || bad=$((bad + 1))
	done
	sed 's/^/# /' "$d/err" >&3
	assert_equal "$bad" 0
	assert_equal "$(wc -l <"$d/ran")" "$2"
}

# with_default_signals CMD...: execs CMD with every signal leaserun
# forwards at its default action: bash starts background jobs with INT
# and QUIT ignored (an inherited SIG_IGN is, by design, not forwarded).
with_default_signals() {
	exec perl "$LR_SRCDIR/tests/default-signals" "$@"
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

# all_exclusive LOG N PID...: the runs PID... (background jobs) all exit
# 0, and LOG has their N lines "start end fence", which check_intervals
# passes.
all_exclusive() {
	local log=$1 n=$2 p
	shift 2
	BG_PIDS="${BG_PIDS:-} $*"
	for p; do
		wait_rc "$p"
		[ "$RC" = 0 ]
	done
	[ "$(wc -l <"$log")" = "$n" ]
	run check_intervals "$log"
	assert_success
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

# hold NAME [leaserun options]: starts "leaserun OPTIONS NAME COMMAND" in
# the background, where COMMAND runs until it is killed or "release NAME"
# is called, and returns once COMMAND runs.  Sets HOLDER (leaserun's pid,
# a job of this shell, so that wait_rc, wait_holder and assert_holder_rc
# can wait for it) and CHILD (COMMAND's pid).  COMMAND's fence is in
# $BATS_TEST_TMPDIR/NAME.fence and leaserun's stderr in NAME.err there.
hold() {
	local n=$1 d=$BATS_TEST_TMPDIR
	shift
	# A test may start a holder of the same name again (ps_hides_password
	# does): what the last one left must not count for this one.
	rm -f "$d/$n.gate" "$d/$n.pid"
	mkfifo "$d/$n.gate"
	"$LEASERUN" "$@" "$n" sh -c \
		'echo "$LEASERUN_FENCE" > "$0.fence"; echo $$ > "$0.pid"; exec cat "$0.gate"' \
		"$d/$n" 2>"$d/$n.err" 3>&- &
	HOLDER=$!
	BG_PIDS="${BG_PIDS:-} $HOLDER"
	wait_until 15 exists "$d/$n.pid"
	CHILD=$(cat "$d/$n.pid")
	BG_PIDS="$BG_PIDS $CHILD"
}

# start_holder NAME [leaserun options]: hold, with leaserun's pid in BG as
# well (the name the Redis and PostgreSQL tests use for it).
start_holder() { hold "$@"; BG=$HOLDER; }

release() {
	timeout 5 sh -c 'echo go > "$1"' sh "$BATS_TEST_TMPDIR/$1.gate"
}

# Waits for the holder started by hold(); sets HRC to its exit status.
wait_holder() { wait_rc "$HOLDER"; HRC=$RC; }

# Waits for the holder started by hold() and checks its exit status.
assert_holder_rc() { wait_rc "$HOLDER"; assert_equal "$RC" "$1"; }

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

# --- One cron job across a fleet: --once-per, --max-time, --splay ------
# The same checks for every store (cron.bats for the file store, and each
# store's own file), against the store in LEASERUN_URL.  Periods are 3s;
# CRON_MARGIN_MS is how long after a period ends its record may still hold
# (etcd frees an expired lease within about a second).

# (Debian's faketime package, in the multiarch directory of the host.)
FAKETIME_LIB=$(printf '%s\n' /usr/lib/*/faketime/libfaketime.so.1 | head -n 1)

# skewed OFFSET CMD...: CMD with its wall clock OFFSET off ("-3m", "+3m")
# by libfaketime: clock_gettime(CLOCK_REALTIME), time(), stat() and the
# file times it reports are shifted; CLOCK_BOOTTIME and CLOCK_MONOTONIC
# stay real (FAKETIME_DONT_FAKE_MONOTONIC=1), as leaserun's own timing
# needs.  A sanitizer build wants its runtime first in the preload list
# or told not to mind.
skewed() {
	local off=$1
	shift
	[ -e "$FAKETIME_LIB" ] ||
		{ echo "no $FAKETIME_LIB: install faketime (.ci/install-deps)" >&2; return 1; }
	LD_PRELOAD=$FAKETIME_LIB FAKETIME=$off FAKETIME_DONT_FAKE_MONOTONIC=1 \
		FAKETIME_NO_CACHE=1 \
		ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
		"$@"
}

# sleep_until MS: sleeps until the Unix time MS (ms), if it is ahead.
sleep_until() {
	local left=$(($1 - $(now_ms)))
	((left <= 0)) || sleep "$((left / 1000)).$(printf '%03d' $((left % 1000)))"
}

# cron_once NAME: hosts whose clocks are 3 minutes apart share one slot of
# "--once-per 3s", judged by the store's clock:
#  1. a host 3 minutes behind runs the job; a host with the right time,
#     started while that job runs, waits for the lease and is held back
#     (exit 1, one notice naming the first host, how long ago, when next);
#  2. a host 3 minutes ahead is held back too;
#  3. once the period has passed, the host ahead runs it;
#  4. right after, the host behind and the right one, started together,
#     are both held back;
#  5. once that period has passed, the right one runs it.
# A store that judged by the local clock would run the job twice in 1 (the
# host behind wrote a start 3 minutes "ago") or not at all in 5 (the host
# ahead wrote a start 3 minutes "from now").
cron_once() {
	local n=$1 d=$BATS_TEST_TMPDIR margin=${CRON_MARGIN_MS:-500} a rc t pid
	local job='echo > "$0.started"; sleep 0.3; echo "$1 $PPID $LEASERUN_FENCE" >> "$0"'
	: >"$d/runs"
	[ $(($(skewed -3m date +%s) - $(date +%s))) -le -170 ]
	[ $(($(skewed +3m date +%s) - $(date +%s))) -ge 170 ]

	skewed -3m "$LEASERUN" -w 20s --once-per 3s "$n" sh -c "$job" "$d/runs" behind 2>"$d/1a.err" &
	a=$!
	BG_PIDS="${BG_PIDS:-} $a"
	wait_until 10 exists "$d/runs.started"
	t=$(now_ms)
	run --separate-stderr "$LEASERUN" -w 20s --once-per 3s "$n" sh -c "$job" "$d/runs" right
	assert_equal "$status" 1
	rc=0
	wait "$a" || rc=$?
	assert_equal "$rc" 0
	assert_equal "$(cut -d' ' -f1 "$d/runs")" behind
	pid=$(cut -d' ' -f2 "$d/runs")
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "^leaserun: $n: last run started [0-9.]+(ms|s) ago on $(hostname) pid $pid, fence [0-9]+; next run allowed in [0-9.]+(ms|s)\$"

	run --separate-stderr skewed +3m "$LEASERUN" --once-per 3s -n "$n" sh -c "$job" "$d/runs" ahead
	assert_equal "$status" 1
	assert_regex "$stderr" "last run started .* on $(hostname) pid $pid,"
	assert_equal "$(wc -l <"$d/runs")" 1

	sleep_until $((t + 3000 + margin))
	run skewed +3m "$LEASERUN" --once-per 3s -n "$n" sh -c "$job" "$d/runs" ahead
	assert_success
	t=$(now_ms)
	skewed -3m "$LEASERUN" -w 20s --once-per 3s "$n" sh -c "$job" "$d/runs" behind 2>"$d/4b.err" &
	a=$!
	BG_PIDS="$BG_PIDS $a"
	run "$LEASERUN" -w 20s --once-per 3s "$n" sh -c "$job" "$d/runs" right
	assert_equal "$status" 1
	rc=0
	wait "$a" || rc=$?
	assert_equal "$rc" 1
	grep -q "last run started .* ago on $(hostname) pid $(sed -n 2p "$d/runs" | cut -d' ' -f2)," "$d/4b.err"
	assert_equal "$(cut -d' ' -f1 "$d/runs" | tr '\n' ' ')" "behind ahead "

	sleep_until $((t + 3000 + margin))
	run "$LEASERUN" --once-per 3s -n "$n" sh -c "$job" "$d/runs" right
	assert_success
	assert_equal "$(cut -d' ' -f1 "$d/runs" | tr '\n' ' ')" "behind ahead right "
	# Fences grow run by run.
	[ "$(cut -d' ' -f3 "$d/runs" | sort -n | tr '\n' ' ')" = "$(cut -d' ' -f3 "$d/runs" | tr '\n' ' ')" ]
}

# cron_status NAME: a run that fails still counts (at most once: the next
# is held back), and --status shows it: who started it, with which fence,
# when it started and ended, its exit status, the period and when the next
# run is allowed; the same as JSON.
cron_status() {
	local n=$1 d=$BATS_TEST_TMPDIR fence
	run --separate-stderr "$LEASERUN" --once-per 1m "$n" sh -c 'echo "$LEASERUN_FENCE $PPID" > "$0"; exit 3' "$d/ran"
	assert_equal "$status" 3
	# Its start and its end recorded without a word.
	assert_equal "$stderr" ""
	read -r fence pid <"$d/ran"
	run "$LEASERUN" --once-per 1m -n "$n" true
	assert_equal "$status" 1
	# (etcd counts in whole seconds, down: "1m" then.)
	assert_output --regexp "fence $fence; next run allowed in ([0-9]+s|1m)\$"
	run "$LEASERUN" --once-per 1m -E 75 -q -n "$n" true
	assert_equal "$status" 75
	assert_output ""

	run --separate-stderr "$LEASERUN" --status "$n"
	assert_equal "$status" 1
	assert_line --regexp "^run: +started ([0-9T:-]+Z )?\\(?[0-9.]+(ms|s) ago\\)? on $(hostname) pid $pid, fence $fence\$"
	assert_line --regexp "^ended: +([0-9T:-]+Z, )?status 3\$"
	assert_line --regexp "^period: +1m, next run allowed in ([0-9]+s|1m)\$"

	run --separate-stderr "$LEASERUN" --status --json "$n"
	assert_equal "$status" 1
	echo "$output" >&3
	jq -e --arg host "$(hostname)" --argjson pid "$pid" --argjson f "$fence" '
		.held == false and .last_run.host == $host and
		.last_run.pid == $pid and .last_run.fence == $f and
		.last_run.status == 3 and .last_run.period_ms == 60000 and
		.last_run.ago_ms >= 0 and .last_run.ago_ms < 30000 and
		.last_run.next_in_ms > 30000 and .last_run.next_in_ms <= 60000 and
		(.last_run.started_ms == null or
		 .last_run.ended_ms >= .last_run.started_ms)' <<<"$output"

	# A lease never run with --once-per has no last run.
	run "$LEASERUN" --status --json "$n-never"
	assert_equal "$status" 1
	jq -e '.last_run == null' <<<"$output"
}

# cron_max_time NAME: --max-time on a job that ignores the stop signal:
# the signal at 1s, SIGKILL after the -k grace (500ms), exit 124, logged
# and counted as timed out, not lost; the lease is free at once.
cron_max_time() {
	local n=$1 d=$BATS_TEST_TMPDIR t0 t1
	t0=$(now_ms)
	# (timeout: a leaserun that never sent SIGKILL would wait for ever.)
	run --separate-stderr timeout -s KILL 10 \
		"$LEASERUN" -v --log-format json --max-time 1s -k 500ms \
		--metrics-file "$d/m.prom" "$n" sh -c '
		exec 2>/dev/null # sh reports the sleep that TERM ended
		trap "echo term >> \"$0\"" TERM
		while :; do sleep 0.05; done' "$d/term"
	t1=$(now_ms)
	assert_equal "$status" 124
	echo "took $((t1 - t0))ms" >&3
	((t1 - t0 >= 1450 && t1 - t0 < 1500 + 2500))
	assert_equal "$(cat "$d/term")" term
	jq -e -s 'any(.[]; .event == "timed-out" and .max_time_ms == 1000 and .signal == 15) and
		any(.[]; .event == "exited" and .how == "signal" and .status == 9) and
		any(.[]; .event == "released") and
		any(.[]; .event == "stopped" and (.msg | test("max-time"))) and
		all(.[]; .event != "lost")' <<<"$stderr"
	[ "$(metric "$d/m.prom" "leaserun_run_timeouts_total{name=\"$n\",")" = 1 ]
	[ "$(metric "$d/m.prom" "leaserun_lease_lost_total{name=\"$n\",")" = 0 ]
	[ "$(metric "$d/m.prom" "leaserun_run_last_exit_status{name=\"$n\",")" = 124 ]
	run "$LEASERUN" -n "$n" true
	assert_success
}

# cron_splay NAME: five runs started together with --splay 1s each wait
# their own random time below 1s before the first attempt, so their
# starts spread; each command starts no earlier than its splay.
cron_splay() {
	local n=$1 d=$BATS_TEST_TMPDIR i t0 pids= s start
	t0=$(now_ms)
	for i in 1 2 3 4 5; do
		"$LEASERUN" -v --log-format json --splay 1s -n "$n-$i" \
			sh -c 'echo $(($(date +%s%N) / 1000000)) > "$0"' "$d/start.$i" \
			2>"$d/splay.$i" &
		pids="$pids $!"
	done
	BG_PIDS="${BG_PIDS:-} $pids"
	for i in $pids; do
		wait "$i"
	done
	for i in 1 2 3 4 5; do
		s=$(jq -s 'map(select(.event == "splay"))[0].splay_ms' "$d/splay.$i")
		start=$(cat "$d/start.$i")
		echo "run $i: splay ${s}ms, command started after $((start - t0))ms" >&3
		((s >= 0 && s < 1000))
		((start - t0 >= s))
		echo "$s"
	done >"$d/splays"
	# Five draws below 1s all within 100ms of each other: 1 in 2000.
	(($(sort -n "$d/splays" | tail -n1) - $(sort -n "$d/splays" | head -n1) >= 100))
}

# cron_bad_values NAME: bad values are one line and 125; nothing runs.
cron_bad_values() {
	local n=$1 d=$BATS_TEST_TMPDIR
	for args in "--once-per 0" "--once-per 0s" "--max-time abc" "--max-time 0" \
		"--splay -1s" "--once-per 5x"; do
		# shellcheck disable=SC2086 # one option and its value
		run --separate-stderr "$LEASERUN" $args "$n" touch "$d/ran"
		assert_equal "$status" 125
		assert_equal "${#stderr_lines[@]}" 1
		assert_regex "$stderr" "^leaserun: invalid --(once-per|max-time|splay) '"
	done
	run --separate-stderr env LEASERUN_ONCE_PER=0 "$LEASERUN" "$n" touch "$d/ran"
	assert_equal "$status" 125
	assert_regex "$stderr" "^leaserun: invalid LEASERUN_ONCE_PER '0': must be more than 0"
	run --separate-stderr env LEASERUN_MAX_TIME=abc "$LEASERUN" "$n" touch "$d/ran"
	assert_equal "$status" 125
	run --separate-stderr env LEASERUN_SPLAY=-1 "$LEASERUN" "$n" touch "$d/ran"
	assert_equal "$status" 125
	[ ! -e "$d/ran" ]
}

# lost_before_start URL NAME END [OPTION...]: the lease ended in the
# stretch between its grant and its command's start.  Runs leaserun on
# fault+URL (tests/be-fault.c) with a pause right after the grant;
# during it, runs END (a command that ends the lease in the store:
# deletes the key, ends the session...), then lets leaserun go on.  Sets
# RC; in $BATS_TEST_TMPDIR: runs (one line per start of the command,
# with its fence), err (leaserun's stderr).
lost_before_start() {
	local url=$1 n=$2 end=$3 d=$BATS_TEST_TMPDIR pid
	shift 3
	export LEASERUN_FAULT_DIR=$d
	echo acquire.pause=after >"$d/$n.fault"
	rm -f "$d/$n.paused" "$d/runs"
	LEASERUN_URL="fault+$url" "$LEASERUN" -v "$@" "$n" sh -c \
		'echo "$LEASERUN_FENCE" >>"$0/runs"' "$d" 2>"$d/err" &
	pid=$!
	BG_PIDS="$BG_PIDS $pid"
	wait_until 20 test -e "$d/$n.paused"
	# Granted, and paused before the command: end the lease now; the
	# retry (if any) is not paused again.
	rm -f "$d/$n.fault"
	eval "$end"
	rm -f "$d/$n.paused"
	wait_rc "$pid"
	echo "# rc $RC; $(grep -c . "$d/runs" 2>/dev/null || echo 0) start(s)" >&3
}

# assert_lost_before_start_retried: after lost_before_start with a wait,
# the command ran once, on a second grant with a higher fence, and
# leaserun said why it tried again.
assert_lost_before_start_retried() {
	local d=$BATS_TEST_TMPDIR first
	cat "$d/err" >&3
	assert_equal "$RC" 0
	assert_equal "$(grep -c . "$d/runs")" 1
	grep -q "lease lost before the command started: .*; trying again" "$d/err"
	first=$(sed -n 's/.*acquired.*fence \([0-9]*\).*/\1/p' "$d/err" | head -n 1)
	[ -n "$first" ] && (( $(cat "$d/runs") > first ))
}

# assert_lost_before_start_ended: the same with -n: 124, and the command
# never ran.
assert_lost_before_start_ended() {
	local d=$BATS_TEST_TMPDIR
	cat "$d/err" >&3
	assert_equal "$RC" 124
	[ ! -e "$d/runs" ]
	grep -q "lease lost before the command started: .*; not running it" "$d/err"
	grep -q "the command did not run" "$d/err"
}
