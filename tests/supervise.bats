#!/usr/bin/env bats
# The supervisor's renew, at-risk and loss paths, driven by the fault
# store (the file store with a renew that fails, stalls or says "lost").

load helpers

setup() {
	lockdir_setup
	T=$BATS_TEST_TMPDIR
	export LEASERUN_URL="fault://$LOCKDIR"
	BG_PIDS=
	EPERM_DIR=
}

# A test that fails half-way leaves nothing running (a stopped leaserun
# would stay for ever) and no setuid copy of setpriv behind.
teardown() {
	kill_bg
	# shellcheck disable=SC2086 # two paths, no spaces
	[ -z "$EPERM_DIR" ] || rm -rf $EPERM_DIR
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

# poll_fails_at_release ARGS...: "leaserun ARGS" in the background with
# its first poll() after $T/started exists failing, and the release
# paused once done; once it is, runs "$PAUSED" (a test of what is still
# alive at that moment), lets the run end and sets RC and OUT.
poll_fails_at_release() {
	echo "release.pause=after" > "$LOCKDIR/job.fault"
	lr_failing "poll:12:0:$T/started" -v "$@" >"$T/out" 2>&1 3>&- &
	pid=$!
	BG_PIDS=$pid
	wait_until 10 [ -e "$LOCKDIR/job.paused" ]
	eval "$PAUSED" && AT_RELEASE=ok || AT_RELEASE=failed
	rm "$LOCKDIR/job.paused"
	wait_rc "$pid"
	OUT=$(cat "$T/out")
	echo "$OUT"
}

@test "poll() failing while the command runs: 125, and the command's whole group is gone before the release" {
	# The loop cannot wait any more: leaserun ends, but first kills the
	# group (which ignores SIGTERM) and waits for it, then gives the
	# lease back; the group guard's kill at leaserun's exit would come
	# after the release, too late.
	PAUSED='dead "$(cat "$T/pid")" && dead "$(cat "$T/grand")"'
	poll_fails_at_release -t 3s job sh -c 'trap "" TERM; sleep 15 & echo $! > "$0/grand"; echo $$ > "$0/pid"; touch "$0/started"; wait' "$T"
	assert_equal "$RC" 125
	[ -e "$T/failed" ]
	assert_equal "$AT_RELEASE" ok
	run echo "$OUT"
	assert_line --partial "poll: Cannot allocate memory"
	assert_line --partial "command killed by signal 9"
	assert_line "leaserun: job: released"
}

@test "poll() failing after the command ended, its leftovers still running: 125, and they are gone before the release" {
	# The command exits; its child ignores SIGTERM and -k is long, so
	# the leftovers still run when the loop fails.
	PAUSED='dead "$(cat "$T/grand")"'
	poll_fails_at_release -t 6s -k 3s job sh -c 'trap "" TERM; sleep 15 & echo $! > "$0/grand"; touch "$0/started"' "$T"
	assert_equal "$RC" 125
	[ -e "$T/failed" ]
	assert_equal "$AT_RELEASE" ok
	run echo "$OUT"
	assert_line --partial "poll: Cannot allocate memory"
	assert_line --partial "stopping what is left of its process group"
	assert_line "leaserun: job: released"
}

@test "poll() interrupted (EINTR) while the command runs: the loop goes on" {
	run lr_failing "poll:4:0:$T/started" -t 3s job sh -c 'touch "$0/started"; sleep 2; exit 3' "$T"
	assert_equal "$status" 3
	[ -e "$T/failed" ]
	assert_output ""
}

@test "a store that grants too late five times running: each grant given back, then 125 and no command" {
	# A grant that leaves less than grace + renewal interval of the TTL
	# cannot be run on: given back, asked again; five in a row mean the
	# TTL is too short for this store.
	echo "acquire.delay=800" > "$LOCKDIR/job.fault"
	run lr -v -t 1s job touch "$T/ran"
	assert_equal "$status" 125
	[ ! -e "$T/ran" ]
	assert_equal "$(grep -c "giving it back and trying again" <<<"$output")" 5
	assert_output --regexp "the store took [0-9]+ms to grant the lease, too long for this TTL; use a longer --ttl"
	rm "$LOCKDIR/job.fault"
	lr -n -q job true
}

@test "a give-back before a retry that fails for good (not a fault that heals): 125 with its reason at the next try, not a wait to the end of -w" {
	printf 'run_start=stall\nrelease=fail\n' > "$LOCKDIR/job.fault"
	SECONDS=0
	run lr -t 6s -w 60s --once-per 1h job touch "$T/ran"
	echo "# ended after ${SECONDS}s"
	assert_equal "$status" 125
	[ ! -e "$T/ran" ]
	assert_line --partial "injected release failure"
	(( SECONDS < 30 ))
}

@test "--once-per: a run whose end cannot be recorded warns and keeps the command's status" {
	echo "run_end=fail" > "$LOCKDIR/job.fault"
	run lr --once-per 1h job sh -c 'exit 3'
	assert_equal "$status" 3
	assert_line --partial "could not record the end of the run: injected run_end failure"
}

@test "^Z (SIGTSTP) while waiting stops leaserun itself, and SIGCONT resumes the wait" {
	"$LEASERUN" job sh -c 'touch "$0/held"; sleep 2' "$T" 3>&- &
	holder=$!
	BG_PIDS=$holder
	wait_until 5 [ -e "$T/held" ]
	"$LEASERUN" -w 20s job touch "$T/second" 3>&- &
	waiter=$!
	BG_PIDS="$holder $waiter"
	sleep 0.3
	kill -TSTP "$waiter"
	wait_until 3 eval '[ "$(sed "s/.*) //" /proc/$waiter/stat | cut -c1)" = T ]'
	wait_rc "$holder"
	assert_equal "$RC" 0
	# Stopped, it cannot take the lease the holder gave back.
	sleep 0.5
	[ ! -e "$T/second" ]
	kill -CONT "$waiter"
	wait_rc "$waiter"
	assert_equal "$RC" 0
	[ -e "$T/second" ]
}

@test "--max-time that comes while an ended command's leftovers are stopped: the command's own status, the leftovers killed" {
	# The command exits at 0.3s; its children ignore SIGTERM, so they
	# are killed -k later, at 5.3s.  --max-time passes in between, at
	# 2s: nothing to time out, and no reason to kill them sooner.
	run lr -v --max-time 2s -k 5s job sh -c 'trap "" TERM; sleep 30 & echo $! > "$0/grand"; (sleep 3.5; touch "$0/past-max-time") & sleep 0.3; exit 5' "$T"
	assert_equal "$status" 5
	[ -e "$T/past-max-time" ]
	assert_line --partial "stopping what is left of its process group"
	refute_output --partial "max-time"
	dead "$(cat "$T/grand")"
}

@test "--max-time, then the grace deadline of renewals that keep failing: the command is killed at the max-time grace, 124, not lost" {
	# Renewals fail from the start (-t 6s: D 6s after the grant, the
	# grace deadline D - 2s); --max-time stops the command at 3s, which
	# ignores the signal; at 4s the grace deadline passes while it is
	# being timed out (the stop signal went already); at 5s the max-time
	# grace kills it, before D.
	echo "renew=fail" > "$LOCKDIR/job.fault"
	run --separate-stderr timeout -s KILL 15 "$LEASERUN" -v -t 6s -k 2s --max-time 3s --log-format json job sh -c 'trap "" TERM; while :; do sleep 0.05; done'
	assert_equal "$status" 124
	jq -e -s 'any(.[]; .event == "timed-out") and
		any(.[]; .event == "exited" and .how == "signal" and .status == 9) and
		any(.[]; .event == "stopped" and (.msg | test("max-time"))) and
		all(.[]; .event != "lost")' <<<"$stderr"
}

# unkillable_poll_fails ARGS...: as the user 54329, leaserun -v -t 3s ARGS,
# whose first poll() after @F@/started fails; ARGS's command starts (or
# is) a process of the user 54330 that writes its pid to @F@/other, which
# leaserun's SIGKILL cannot reach.  In ARGS, @D@ is a directory with a
# setuid setpriv (as sudo would be) that only root and 54329 may run,
# and @F@ one that anyone may write to; teardown removes both whatever
# becomes of the test.  Sets status, stderr and ALIVE (whether that
# process outlived leaserun).
unkillable_poll_fails() {
	local d f other a args=()
	d=$(mktemp -d /tmp/leaserun-eperm.XXXXXX)
	f=$(mktemp -d /tmp/leaserun-eperm-flag.XXXXXX)
	EPERM_DIR="$d $f"
	chown root:54329 "$d"
	chmod 710 "$d"
	cp "$(command -v setpriv)" "$d/setpriv"
	chown root:54329 "$d/setpriv"
	chmod 4750 "$d/setpriv"
	cp "$LEASERUN" "$d/leaserun"
	cp "$LR_BUILDDIR/.libs/failcall.so" "$d/failcall.so"
	mkdir "$d/locks"
	chown 54329 "$d/locks"
	chmod 1777 "$f"
	for a in "$@"; do
		a=${a//@D@/$d}
		args+=("${a//@F@/$f}")
	done
	run --separate-stderr timeout -s KILL 20 setpriv --reuid=54329 --regid=54329 --clear-groups \
		env LEASERUN_URL="file://$d/locks" LD_PRELOAD="$d/failcall.so" \
		LR_TEST_FAIL="poll:12:0:$f/started" \
		ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
		"$d/leaserun" -v -t 3s "${args[@]}"
	other=$(cat "$f/other" 2>/dev/null || true)
	ALIVE=no
	if [ -n "$other" ] && kill -0 "$other" 2>/dev/null; then ALIVE=yes; fi
	[ -z "$other" ] || kill -9 "$other" 2>/dev/null || true
	rm -rf "$d" "$f"
	EPERM_DIR=
}

@test "poll() failing while a member of the command's group that leaserun may not signal still runs: 125, and the lease is not given back" {
	needs_root "to run leaserun as one user and a member of its command's group as another"
	# The member may run on: the lease is left to expire, not given back
	# to a successor.
	unkillable_poll_fails job sh -c '@D@/setpriv --reuid=54330 --regid=54330 --clear-groups sh -c "echo \$\$ > @F@/other; exec sleep 30" & until [ -s @F@/other ]; do sleep 0.05; done; touch @F@/started; wait'
	assert_equal "$status" 125
	assert_equal "$ALIVE" yes
	[[ "$stderr" == *"poll: Cannot allocate memory"* ]]
	[[ "$stderr" != *" released"* ]]
	[[ "$stderr" == *"outlived SIGKILL"*"the lease is not given back; it ends with leaserun's session, or at its TTL, while that member may still run"* ]]
}

@test "--foreground: poll() failing while the command, which leaserun may not signal, still runs: 125, and the lease is not given back" {
	needs_root "to run leaserun as one user and its command as another"
	# In the foreground there is no group: the command alone, which
	# became another user, is not reaped.
	unkillable_poll_fails --foreground job @D@/setpriv --reuid=54330 --regid=54330 --clear-groups sh -c 'echo $$ > @F@/other; touch @F@/started; exec sleep 30'
	assert_equal "$status" 125
	assert_equal "$ALIVE" yes
	[[ "$stderr" == *"poll: Cannot allocate memory"* ]]
	[[ "$stderr" != *" released"* ]]
	[[ "$stderr" == *"outlived SIGKILL"*"the lease is not given back; it ends with leaserun's session, or at its TTL, while that member may still run"* ]]
}
