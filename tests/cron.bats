#!/usr/bin/env bats
# One cron job across a fleet: --once-per, --max-time and --splay on the
# file store, and what the core does with them whatever the store.  Each
# network store's file runs the same checks (helpers.bash) on its server.

load helpers

setup() {
	lockdir_setup
	BG_PIDS=
}

teardown() {
	kill_bg
}

@test "two hosts, one 3 minutes behind and one ahead, run the job once per period by the kernel's clock" {
	cron_once job
}

@test "a failed run counts, and --status shows the last run, its end and the next allowed" {
	cron_status job
}

@test "once the period is over, --status says the next run is allowed now, and it is" {
	run "$LEASERUN" --once-per 1s job true
	assert_success
	sleep 1.2
	run --separate-stderr "$LEASERUN" --status job
	assert_equal "$status" 1
	assert_line --regexp "^period: +1s, next run allowed now\$"
	run --separate-stderr "$LEASERUN" --status --json job
	jq -e '.last_run.next_in_ms == 0' <<<"$output"
	run "$LEASERUN" --once-per 1s -n job true
	assert_success
}

@test "--max-time stops a job that ignores the signal within the kill-after grace and frees the lease" {
	cron_max_time job
}

@test "--splay spreads the starts of runs started together" {
	cron_splay job
}

@test "bad --once-per, --max-time and --splay values are one line and 125" {
	cron_bad_values job
}

@test "the file store keeps the run in NAME.run, stamped by the kernel's clock whatever the host's" {
	local before after start
	before=$(now_ms)
	run skewed -3m "$LEASERUN" --once-per 1m job sh -c 'echo "$LEASERUN_FENCE $PPID"'
	assert_success
	after=$(now_ms)
	read -r fence pid <<<"$output"
	cat "$LOCKDIR/job.run" >&3
	run cat "$LOCKDIR/job.run"
	assert_line "fence=$fence"
	assert_line "host=$(hostname)"
	assert_line "pid=$pid"
	assert_line "period=60000"
	assert_line "status=0"
	start=$(sed -n 's/^start=//p' "$LOCKDIR/job.run")
	# The kernel's time (the coarse clock that stamps files may lag by a
	# tick), not the host's 3 minutes behind.
	((start >= before - 1000 && start <= after))
	[ -e "$LOCKDIR/job.clock" ]
}

@test "the file store: removing the lock and counter files does not let a run in again within its period" {
	run "$LEASERUN" --once-per 1h job true
	assert_success
	rm "$LOCKDIR/job.lock" "$LOCKDIR/job.fence"
	run "$LEASERUN" --once-per 1h job touch "$BATS_TEST_TMPDIR/ran"
	assert_failure 1
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
}

@test "while a run holds the lease, --status says it has not ended yet" {
	hold job --once-per 1m
	run "$LEASERUN" --status job
	assert_success
	assert_line --regexp "^run: +started .* on $(hostname) pid $HOLDER, fence $(cat "$BATS_TEST_TMPDIR/job.fence")\$"
	assert_line --regexp "^ended: +not yet\$"
	release job
	assert_holder_rc 0
	run "$LEASERUN" --status job
	assert_line --regexp "^ended: +[0-9T:-]+Z, status 0\$"
}

@test "a store that cannot record the start: 125, the command never runs, the lease is given back" {
	export LEASERUN_URL="fault://$LOCKDIR"
	echo run_start=fail >"$LOCKDIR/job.fault"
	run --separate-stderr "$LEASERUN" --once-per 1m job touch "$BATS_TEST_TMPDIR/ran"
	assert_equal "$status" 125
	assert_regex "$stderr" "cannot record the start of the run \\(--once-per 1m\\): injected run_start failure"
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
	rm "$LOCKDIR/job.fault"
	run "$LEASERUN" -n --once-per 1m job true
	assert_success
}

@test "a store that cannot record the start for now: a run that may wait records it later and runs once; -n gives 125" {
	export LEASERUN_URL="fault://$LOCKDIR"
	echo run_start=stall >"$LOCKDIR/job.fault"
	run --separate-stderr "$LEASERUN" -n -t 3s --once-per 1m job touch "$BATS_TEST_TMPDIR/ran"
	assert_equal "$status" 125
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
	"$LEASERUN" -v -w 20 -t 3s --once-per 1m job sh -c 'echo x >>"$0/ran"' \
		"$BATS_TEST_TMPDIR" 2>"$BATS_TEST_TMPDIR/err" &
	pid=$!
	BG_PIDS=$pid
	sleep 2
	alive "$pid"
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
	rm "$LOCKDIR/job.fault"
	wait_rc "$pid"
	cat "$BATS_TEST_TMPDIR/err" >&3
	assert_equal "$RC" 0
	assert_equal "$(cat "$BATS_TEST_TMPDIR/ran")" x
	# Said once, and its end once.
	assert_equal "$(grep -c "cannot record the start.*trying again until the wait runs out" "$BATS_TEST_TMPDIR/err")" 1
	assert_equal "$(grep -c "the store answers again" "$BATS_TEST_TMPDIR/err")" 1
	# Recorded once: the next run in the period is held back.
	run "$LEASERUN" -n --once-per 1m job true
	assert_equal "$status" 1
}

@test "a run held back by --once-per is counted, and exits with -E" {
	run "$LEASERUN" --once-per 1m --metrics-file "$BATS_TEST_TMPDIR/m.prom" job true
	assert_success
	run "$LEASERUN" --once-per 1m -E 3 --metrics-file "$BATS_TEST_TMPDIR/m.prom" job true
	assert_equal "$status" 3
	[ "$(metric "$BATS_TEST_TMPDIR/m.prom" 'leaserun_run_skipped_total{name="job",')" = 1 ]
	[ "$(metric "$BATS_TEST_TMPDIR/m.prom" 'leaserun_lease_acquired_total{name="job",')" = 2 ]
	[ "$(metric "$BATS_TEST_TMPDIR/m.prom" 'leaserun_lease_conflicts_total{name="job",')" = 0 ]
	[ "$(metric "$BATS_TEST_TMPDIR/m.prom" 'leaserun_run_last_exit_status{name="job",')" = 3 ]
}

@test "a signal ends the splay at once, before any attempt" {
	local p t0 rc=0
	t0=$(now_ms)
	"$LEASERUN" -v --splay 1h job touch "$BATS_TEST_TMPDIR/ran" 2>"$BATS_TEST_TMPDIR/err" &
	p=$!
	BG_PIDS=$p
	wait_until 10 grep -q "(--splay)" "$BATS_TEST_TMPDIR/err"
	kill -TERM "$p"
	wait "$p" || rc=$?
	assert_equal "$rc" 143
	(($(now_ms) - t0 < 5000))
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
	[ ! -e "$LOCKDIR/job.lock" ]
}

@test "the splay does not count against -w" {
	# Draws until a splay longer than 800ms comes: only then would a -w
	# of 2s counted from the start have run out before the lease comes
	# free, 1.3s after the splay.
	local i s p rc t0
	hold job
	for i in 1 2 3 4 5 6; do
		rc=0
		"$LEASERUN" -v --log-format json --splay 3s -w 2s job true \
			2>"$BATS_TEST_TMPDIR/w.$i" &
		p=$!
		BG_PIDS="$BG_PIDS $p"
		t0=$(now_ms)
		wait_until 10 grep -q '"event":"splay"' "$BATS_TEST_TMPDIR/w.$i"
		s=$(jq -s 'map(select(.event == "splay"))[0].splay_ms' "$BATS_TEST_TMPDIR/w.$i")
		if ((s > 800)); then
			sleep_until $((t0 + s + 1300))
			release job
			assert_holder_rc 0
			wait "$p" || rc=$?
			assert_equal "$rc" 0
			grep -q '"event":"waiting"' "$BATS_TEST_TMPDIR/w.$i"
			return 0
		fi
		wait "$p" || rc=$?
		assert_equal "$rc" 1
	done
	fail "six splays in a row of 800ms or less"
}

@test "under a faked clock leaserun still renews on time (its timers are its own)" {
	run --separate-stderr skewed -3m "$LEASERUN" -v -t 1s job sleep 2
	assert_success
	echo "$stderr" >&3
	# Every third of the TTL: 5 or 6 renewals in 2s; none if the timer
	# followed the faked clock.
	(($(grep -c renewed <<<"$stderr") >= 4))
	# bash's own time: the CPU leaserun (a child) used, user and system.
	TIMEFORMAT='%U %S'
	{ time skewed +3m "$LEASERUN" -t 1s job sleep 1 2>/dev/null; } 2>"$BATS_TEST_TMPDIR/cpu"
	echo "cpu: $(cat "$BATS_TEST_TMPDIR/cpu")" >&3
	# A timer that fires at once makes the loop spin for the whole second.
	awk '{ exit !($1 + $2 < 0.5) }' "$BATS_TEST_TMPDIR/cpu"
}
