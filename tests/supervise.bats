#!/usr/bin/env bats
# The supervisor's renew, at-risk and loss paths, driven by the fault
# store (the file store with a renew that fails, stalls or says "lost").

load helpers

setup() {
	lockdir_setup
	T=$BATS_TEST_TMPDIR
	export LEASERUN_URL="fault://$LOCKDIR"
}

@test "renewals that keep failing stop the command with --signal before the deadline: 124" {
	echo "renew=fail" > "$LOCKDIR/job.fault"
	run lr -t 1s -k 400ms job sh -c 'trap "echo got-term; exit 0" TERM; sleep 10 & wait'
	assert_equal "$status" 124
	assert_output --partial "got-term"
	assert_output --partial "renew failed (injected renew failure)"
	assert_output --partial "the command was stopped because the lease was lost"
}

@test "a command that ignores the stop signal is killed before the deadline" {
	echo "renew=fail" > "$LOCKDIR/job.fault"
	run lr -t 1s job sh -c "$BEATER" "$T"
	assert_equal "$status" 124
	# The lease was granted before the command started, so its deadline
	# is less than the TTL after the start; SIGKILL goes 100ms before it.
	past=$(ran_past "$T" 1000)
	echo "last beat ${past}ms past start + TTL"
	(( past < 0 ))
}

@test "--signal chooses the stop signal" {
	echo "renew=fail" > "$LOCKDIR/job.fault"
	run lr -t 1s --signal INT job sh -c 'trap "echo got-int; exit 0" INT; trap "echo got-term; exit 0" TERM; sleep 10 & wait'
	assert_equal "$status" 124
	assert_output --partial "got-int"
	refute_output --partial "got-term"
}

@test "a renew that stalls cannot delay the stop" {
	echo "renew=stall" > "$LOCKDIR/job.fault"
	run lr -t 1s job sh -c "$BEATER" "$T"
	assert_equal "$status" 124
	past=$(ran_past "$T" 1000)
	echo "last beat ${past}ms past start + TTL"
	(( past < 0 ))
}

@test "certain loss kills the command's whole group at once" {
	"$LEASERUN" -t 3s job sh -c 'trap "echo term > '"$T"'/term" TERM; sleep 30 & echo $! > '"$T"'/grand; echo $$ > '"$T"'/pid; wait' &
	pid=$!
	wait_until 5 exists "$T/grand"
	echo "renew=lost" > "$LOCKDIR/job.fault"
	# The next renew is at most TTL/3 = 1s away; SIGKILL follows it.
	wait_until 3 dead "$(cat "$T/pid")"
	wait_until 1 dead "$(cat "$T/grand")"
	wait_rc "$pid"
	assert_equal "$RC" 124
	# At once means no stop signal and no grace: someone else may hold
	# the lease already.
	[ ! -e "$T/term" ]
}

@test "renewals that fail and then recover keep the command running" {
	printf 'renew=fail\n' > "$LOCKDIR/job.fault"
	# The command outlives the TTL: only renewals that work again let it
	# finish.
	"$LEASERUN" -v -t 3s job sh -c 'sleep 4.5; echo done > '"$T"'/done' 2> "$T/log" &
	pid=$!
	wait_until 3 grep -q 'renew failed' "$T/log"
	rm "$LOCKDIR/job.fault"
	wait_rc "$pid"
	assert_equal "$RC" 0
	[ -e "$T/done" ]
	grep -q 'renewed again' "$T/log"
}

@test "leftover members of the command's group are stopped before the release" {
	"$LEASERUN" -U "file://$LOCKDIR" job sh -c 'sleep 30 & echo $! > '"$T"'/left; exit 0' &
	pid=$!
	wait_rc "$pid"
	assert_equal "$RC" 0
	dead "$(cat "$T/left")"
	run lr -U "file://$LOCKDIR" -n job true
	assert_success
}

@test "leaserun and its command stopped past the TTL: the command is killed on resume" {
	"$LEASERUN" -t 1s job sh -c 'echo $$ > '"$T"'/pid; exec sleep 30' &
	pid=$!
	wait_until 5 exists "$T/pid"
	child=$(cat "$T/pid")
	kill -STOP "$pid" "$child"
	sleep 1.5
	kill -CONT "$pid"
	wait_until 3 dead "$child"
	wait_rc "$pid"
	assert_equal "$RC" 124
}

@test "a successful acquire whose release fails still exits with the command's status" {
	echo "release=fail" > "$LOCKDIR/job.fault"
	run lr job sh -c 'exit 7'
	assert_equal "$status" 7
	assert_output --partial "could not release: injected release failure"
}

@test "a release that finds the lease lost: 124, a lost event with its reason, counted, and --check never says held after the command" {
	printf 'release.delay=300\nrelease=lost\n' > "$LOCKDIR/job.fault"
	# A process the command leaves outside its group asks --check until
	# leaserun has ended (500 tries at most), without bats' fd 3.
	run --separate-stderr lr -v --log-format json --metrics-file "$T/m.prom" job sh -c '
		setsid sh -c "i=0; while [ \$i -lt 500 ]; do
			\"\$LEASERUN\" --check --json >> \"\$0/checks\"
			grep -q ended \"\$0/checks\" && exit
			i=\$((i + 1)); sleep 0.02; done" "$0" </dev/null >/dev/null 2>&1 3>&- &
		until [ -s "$0/checks" ]; do sleep 0.01; done
		exit 0' "$T"
	assert_equal "$status" 124
	jq -e -s 'any(.[]; .event == "lost" and .level == "warning" and
		(.reason | test("injected release loss")))' <<<"$stderr"
	jq -e -s 'map(.event) | index("exited") < index("lost")' <<<"$stderr"
	assert_equal "$(metric "$T/m.prom" 'leaserun_lease_lost_total{name="job",')" 1
	assert_equal "$(metric "$T/m.prom" 'leaserun_run_last_exit_status{name="job",')" 124
	wait_until 10 grep -q ended "$T/checks"
	cat "$T/checks"
	# Held while the command ran; then releasing (not held) while the
	# release took its time; then ended, never "released".
	jq -e -s '.[0].held and .[0].state == "held"' "$T/checks"
	jq -e -s 'any(.[]; .held == false and .state == "releasing")' "$T/checks"
	jq -e -s '.[-1] == {"held": false, "state": "ended"}' "$T/checks"
	jq -e -s 'map(.state) | (index("releasing") < index("ended")) and
		(rindex("held") < index("releasing")) and
		(index("released") == null)' "$T/checks"
}

@test "an acquire that fails is leaserun's failure: 125 and no command" {
	echo "acquire=fail" > "$LOCKDIR/job.fault"
	run lr job sh -c 'echo ran'
	assert_equal "$status" 125
	refute_output --partial "ran"
	assert_output --partial "injected acquire failure"
}

@test "a signal while waiting ends leaserun by that signal and leaves nothing" {
	"$LEASERUN" job sleep 5 &
	holder=$!
	wait_until 5 lr --status job
	"$LEASERUN" job true &
	waiter=$!
	sleep 0.3
	kill -TERM "$waiter"
	wait_rc "$waiter"
	assert_equal "$RC" 143
	kill "$holder"; wait "$holder" || true
	run lr -n job true
	assert_success
}

@test "slow renewals: one slow-heartbeat warning per run, with a safe TTL, counted" {
	# TTL 3s, renewals every second that take 350ms: more than a tenth.
	echo "renew.delay=350" > "$LOCKDIR/job.fault"
	run --separate-stderr lr -v -t 3s --renew 1s --log-format json --metrics-file "$T/m.prom" job sleep 5.5
	assert_success
	jq -e -s '[.[] | select(.event == "renewed")] | length >= 4' <<<"$stderr"
	jq -e -s '[.[] | select(.event == "slow-heartbeat")] | length == 1' <<<"$stderr"
	# Not before two slow renewals; then p99, TTL and a safe TTL.
	jq -e -s 'map(.event) | [indices("renewed")[1], index("slow-heartbeat")] |
		.[0] < .[1]' <<<"$stderr"
	jq -e -s '.[] | select(.event == "slow-heartbeat") | .level == "warning" and
		.p99_ms >= 350 and .renewals == 2 and .ttl_ms == 3000 and
		.safe_ttl_ms >= 10 * .p99_ms and .safe_ttl_ms < 10 * .p99_ms + 1000 and
		.safe_ttl_ms % 1000 == 0 and (.msg | test("TTL of [0-9]+s or more"))' <<<"$stderr"
	assert_equal "$(metric "$T/m.prom" 'leaserun_heartbeat_slow_total{name="job",')" 1
}

@test "fast renewals, or one slow renewal alone, give no slow-heartbeat warning" {
	run --separate-stderr lr -v -t 3s --renew 300ms --log-format json --metrics-file "$T/m.prom" job sleep 3.5
	assert_success
	jq -e -s '[.[] | select(.event == "renewed")] | length >= 10' <<<"$stderr"
	refute_regex "$stderr" "slow-heartbeat"
	assert_equal "$(metric "$T/m.prom" 'leaserun_heartbeat_slow_total{name="job",')" 0
	# The first renewal takes 350ms (TTL 3s), the next ones do not.
	echo "renew.delay=350" > "$LOCKDIR/job.fault"
	"$LEASERUN" -v -t 3s --renew 1s --log-format json job sleep 4.5 2> "$T/err" &
	pid=$!
	wait_until 5 grep -q '"event":"renewed"' "$T/err"
	rm "$LOCKDIR/job.fault"
	wait_rc "$pid"
	assert_equal "$RC" 0
	jq -e -s '[.[] | select(.event == "renewed")] | length >= 3' "$T/err"
	jq -e -s '[.[] | select(.event == "renewed")][0].latency_ms >= 350' "$T/err"
	run grep -c slow-heartbeat "$T/err"
	assert_output 0
}
