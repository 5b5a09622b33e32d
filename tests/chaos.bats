#!/usr/bin/env bats
# The chaos suite's checker (tests/chaos/check) fails a run that breaks a
# promise, and says which: runs it cannot pass, hand-made and real.

load helpers

CHECK=$LR_SRCDIR/tests/chaos/check
CHAOS=$LR_SRCDIR/tests/chaos/run

# A run directory by hand: meta, and empty logs to append to.  Times in
# the files are ns; ms() turns ms into them.
fake_run() {
	R=$BATS_TEST_TMPDIR/run
	rm -rf "$R"
	mkdir "$R"
	printf '%s\n' store=fake seed=1 ttl_ms=1000 workers=2 delta_ms=100 \
		lease= t0=0 t1=10000000000 >"$R/meta"
	: >"$R/events"
	: >"$R/faults"
	: >"$R/exits"
	: >"$R/leftovers"
}
ms() { echo $(($1 * 1000000)); }
# section RUNID FENCE START_MS LAST_MS [RC]: a grant whose section starts
# at START_MS and writes once a ms until LAST_MS (each write judged by
# the resource as the section would see it, so interleavings stay
# consistent), acquired and released as leaserun logs it.
# SLOT (default 0) and MODE (x, or s for --shared) say how it holds.
section() {
	local id=$1 f=$2 s=$3 e=$4 rc=${5:-0} t mode=${MODE:-x} how=
	echo "$(ms "$s") $id $f start 100 101 ${SLOT:-0} $mode" >>"$R/events"
	for ((t = s + 1; t <= e; t++)); do
		echo "$(ms "$t") $id $f write $t accept 0" >>"$R/events"
	done
	{
		echo "### $id"
		[ "$mode" = x ] || how=',"mode":"shared"'
		echo "{\"event\":\"acquired\",\"fence\":$f,\"slot\":${SLOT:-0}$how}"
		echo '{"event":"released"}'
	} >>"$R/log.w1"
	echo "$id $rc" >>"$R/exits"
}
# The resource's verdicts in time order, as the real one would give them.
judge() {
	sort -n -k1,1 "$R/events" | awk 'BEGIN { max = 0 }
		$4 == "write" { $6 = ($3 >= max) ? "accept" : "reject";
			$7 = max; if ($3 > max) max = $3 }
		{ print }' >"$R/events.sorted"
	mv "$R/events.sorted" "$R/events"
}
# fault T0 T1 KIND CLASS TARGET, in ms; CLASS "-" takes the kind's.
fault() {
	local class=$4
	[ "$class" != - ] || { [ "$3" = lstop ] && class=uncovered || class=covered; }
	echo "$(ms "$1") $(ms "$2") $3 $class $5 test" >>"$R/faults"
}

@test "grants one after another, fences going up: the run passes" {
	fake_run
	section w1.1 1 0 10
	section w2.1 2 11 20
	section w1.2 3 21 30
	judge
	run "$CHECK" "$R"
	assert_success
	assert_output --partial "chaos fake: PASS"
	assert_output --partial "acquisitions=3 sections=3"
	assert_output --partial "unexplained=0; late-stops=0 (max 0ms) stale-accepts=0 fence-repeats=0"
}

@test "an empty run fails: it tested nothing" {
	fake_run
	run "$CHECK" "$R"
	assert_failure 1
	assert_output --partial "harness: no grant: the run tested nothing"
}

@test "an overlap no fault explains fails the run" {
	fake_run
	section w1.1 1 0 20
	section w2.1 2 10 30
	judge
	run "$CHECK" "$R"
	assert_failure 1
	assert_output --partial "unexplained=1"
	assert_output --partial "unexplained overlap: w2.1 (fence 2) started at +0.010s, 10.0ms before w1.1 (fence 1)'s last event"
	# w1.1 saw w2.1's fence win and still exited 0.
	assert_output --partial "wrong exit: w1.1 exited 0: a later grant overlapped it"
}

# two_grants A_LAST B_START T0 T1 KIND TARGET: w1.1 (fence 1) from 0 to
# A_LAST ms, stopped (124); w2.1 (fence 2) from B_START for 30ms; one
# fault KIND from T0 to T1 ms on TARGET; then the checker, in $output.
two_grants() {
	fake_run
	section w1.1 1 0 "$1" 124
	section w2.1 2 "$2" $(($2 + 30))
	fault "$3" "$4" "$5" - "$6"
	judge
	run "$CHECK" "$R"
}

@test "an overlap under a stopped leaserun is explained, if it stops in time after SIGCONT" {
	two_grants 1200 1100 50 1150 lstop w1.1
	assert_success
	assert_output --partial "explained=1 window=0"
	# Going on more than the bound (100ms) after SIGCONT is not.
	two_grants 1300 1100 50 1150 lstop w1.1
	assert_failure 1
	assert_output --partial "explained=0 window=0 (max 0ms, bound 100ms) unexplained=1"
	assert_output --partial "faults near: lstop"
	# A stopped leaserun explains nothing about another holder.
	two_grants 1200 1100 50 1150 lstop w3.1
	assert_failure 1
	assert_output --partial "unexplained=1"
}

@test "a deletion's window is counted apart, up to the bound" {
	two_grants 140 101 90 100 del w1.1
	assert_success
	assert_output --partial "window=1 (max 40ms, bound 100ms) unexplained=0"
	# The old holder going on 150ms after the deletion: a failure.
	two_grants 250 101 90 100 del w1.1
	assert_failure 1
	assert_output --partial "window=0 (max 0ms, bound 100ms) unexplained=1"
	# A successor that came before the deletion began: a failure.
	two_grants 140 80 90 100 del w1.1
	assert_failure 1
	assert_output --partial "unexplained=1"
	# A covered fault that deletes nothing explains nothing.
	two_grants 140 101 90 100 sstop w1.1
	assert_failure 1
	assert_output --partial "unexplained=1"
}

@test "a holder that goes on after its lease was deleted fails the run, even alone" {
	fake_run
	section w1.1 1 0 400 124
	fault 90 100 del - w1.1
	judge
	run "$CHECK" "$R"
	assert_failure 1
	assert_output --partial "unexplained=0; late-stops=1 (max 300ms)"
	assert_output --partial "late stop: w1.1 (fence 1) logged its last event 300.0ms after del at +0.090s..+0.100s returned"
	# Stopped within the bound: it passes.
	fake_run
	section w1.1 1 0 190 124
	fault 90 100 kill9 - w1.1
	judge
	run "$CHECK" "$R"
	assert_success
	assert_output --partial "late-stops=0"
}

@test "a fence given twice fails the run, and so do the stale writes it let in" {
	fake_run
	section w1.1 7 0 10
	section w2.1 7 20 30
	judge
	run "$CHECK" "$R"
	assert_failure 1
	assert_output --partial "stale-accepts=10 fence-repeats=1 fence-down=0"
	assert_output --partial "fence repeat: fence 7 given to w1.1, w2.1"
	assert_output --partial "stale accept: w2.1's write at +0.021s accepted with fence 7 after w1.1 had written with fence 7"
}

@test "a fence given twice counts even when the second grant ran no section" {
	fake_run
	section w1.1 7 0 10
	judge
	printf '### w2.1\n{"event":"acquired","fence":7}\n' >>"$R/log.w1"
	run "$CHECK" "$R"
	assert_failure 1
	assert_output --partial "fence-repeats=1"
}

@test "a fence that goes down fails the run; its writes are refused" {
	fake_run
	section w1.1 9 0 10
	section w2.1 3 20 30
	judge
	run "$CHECK" "$R"
	assert_failure 1
	assert_output --partial "stale-accepts=0 fence-repeats=0 fence-down=1"
	assert_output --partial "fence down: w2.1 (fence 3) started at +0.020s after w1.1 (fence 9) had ended"
	grep -q 'w2.1 3 write 21 reject 9' "$R/events"
}

@test "a write the resource accepted below its highest fence fails the run" {
	fake_run
	section w1.1 9 0 10
	section w2.1 10 20 30
	judge
	echo "$(ms 31) w1.1 9 write 99 accept 10" >>"$R/events"
	run "$CHECK" "$R"
	assert_failure 1
	assert_output --partial "stale accept: w1.1's write at +0.031s accepted with fence 9 after w2.1 had written with fence 10"
}

@test "a process left running fails the run" {
	fake_run
	section w1.1 1 0 10
	judge
	echo "4242 /x/section run /tmp/run w1.1 3 5 1" >"$R/leftovers"
	run "$CHECK" "$R"
	assert_failure 1
	assert_output --partial "leftovers=1"
	assert_output --partial "leftover: still running at the end: 4242 /x/section"
}

@test "a run that ended in a crash or a sanitizer's report fails the run" {
	fake_run
	section w1.1 1 0 10 139
	section w2.1 2 11 20 86
	judge
	run "$CHECK" "$R"
	assert_failure 1
	assert_output --partial "odd-exits=2 gave-up=0; exits 86:1 139:1"
	assert_output --partial "odd exit: w1.1 exited 139"
}

# gave_up RUNID START_MS END_MS MSG: a run that never got the lease and
# ended 125 with MSG.
gave_up() {
	echo "$(ms "$2") $1" >>"$R/asks"
	{
		echo "### $1"
		echo "{\"level\":\"error\",\"event\":\"error\",\"msg\":\"$4\"}"
	} >>"$R/log.w2"
	echo "$1 125 $(ms "$3")" >>"$R/exits"
}

@test "a run that ended 125 on faults shorter than its wait fails the run; a fault as long as the wait excuses it" {
	fake_run
	echo wait_ms=3000 >>"$R/meta"
	section w1.1 1 0 10
	judge
	fault 100 1100 crash - -
	fault 1500 2000 sstop - -
	gave_up w2.1 50 1200 "cannot open redis://h: Connection refused"
	run "$CHECK" "$R"
	assert_failure 1
	assert_output --partial "gave-up=1;"
	assert_output --partial "gave up: w2.1 exited 125 after 1150ms of a 3000ms wait: cannot open redis://h: Connection refused; faults: crash at"
	# A store down for longer than the wait: 125 is the right answer.
	fake_run
	echo wait_ms=3000 >>"$R/meta"
	section w1.1 1 0 10
	judge
	fault 100 3200 crash - -
	gave_up w2.1 50 3100 "cannot open redis://h: Connection refused"
	run "$CHECK" "$R"
	assert_success
	assert_output --partial "gave-up=0;"
}

@test "a run that used up its wait through short faults, the last still on at its end, may end 125; one that ends before its wait is used up may not" {
	# short_faults START: a run with a 3 s wait that gave up at +3.1 s,
	# having started at START ms, through faults one after the other,
	# none as long as the wait, the last (a SIGSTOP of the server)
	# still on at its end.
	short_faults() {
		fake_run
		echo wait_ms=3000 >>"$R/meta"
		section w1.1 1 0 10
		judge
		fault 100 400 crash - -
		fault 1500 1800 restart - -
		fault 2900 4000 sstop - -
		gave_up w2.1 "$1" 3100 "cannot connect to MySQL at h: timed out"
	}
	# The wait ran out during the last fault: the last try met it.
	short_faults 50
	run "$CHECK" "$R"
	assert_success
	assert_output --partial "gave-up=0;"
	# The same faults, but the run gave up during the last before its
	# wait was used up.
	short_faults 1000
	run "$CHECK" "$R"
	assert_failure 1
	assert_output --partial "gave-up=1;"
	# Used up, but the store was back long before its end (more than
	# the TTL): a give-up.
	fake_run
	echo wait_ms=3000 >>"$R/meta"
	echo ttl_ms=500 >>"$R/meta"
	section w1.1 1 0 10
	judge
	fault 100 400 crash - -
	fault 1500 1800 restart - -
	gave_up w2.1 50 3100 "cannot connect to MySQL at h: timed out"
	run "$CHECK" "$R"
	assert_failure 1
	assert_output --partial "gave-up=1;"
}

@test "exit 0 after a lost lease fails the run, whoever saw the loss" {
	# leaserun itself logged it.
	fake_run
	section w1.1 1 0 10
	judge
	echo '{"event":"lost","reason":"gone"}' >>"$R/log.w1"
	run "$CHECK" "$R"
	assert_failure 1
	assert_output --partial "wrong exit: w1.1 exited 0: leaserun logged the loss"
	# Its release found the lease gone.
	fake_run
	section w1.1 1 0 10
	judge
	echo '{"event":"release-failed","msg":"could not release: the lease key leaserun:{x} was no longer ours at release"}' >>"$R/log.w1"
	run "$CHECK" "$R"
	assert_failure 1
	assert_output --partial "wrong-exits=1"
	assert_output --partial "its release said: could not release"
	# The resource refused its write for a later grant's fence.
	fake_run
	section w1.1 1 0 10
	section w2.1 2 5 9 124
	echo "$(ms 10) w1.1 1 write 11 reject 2" >>"$R/events"
	fault 4 5 del covered w1.1
	judge
	run "$CHECK" "$R"
	assert_failure 1
	assert_output --partial "window=1"
	assert_output --partial "wrong exit: w1.1 exited 0: a later grant overlapped it; the resource refused its write after w2.1 (fence 2), a later grant, had written"
	# The same run, stopped with 124 as it should be: it passes.
	sed -i 's/^w1.1 0$/w1.1 124/' "$R/exits"
	run "$CHECK" "$R"
	assert_success
}

@test "more holders at once than the limit fails the run, and so does a slot past it" {
	fake_run
	echo limit=2 >>"$R/meta"
	SLOT=0 section w1.1 1 0 20
	SLOT=1 section w2.1 2 5 25
	SLOT=2 section w3.1 3 10 30
	run "$CHECK" "$R"
	assert_failure 1
	assert_output --partial "at-once=3 (limit 2) too-many=1"
	assert_output --partial "too many at once: w3.1 (fence 3, slot 2) started at +0.010s while 2 of a limit of 2 ran"
	assert_output --partial "wrong grant: w3.1 (fence 3, slot 2): slot 2 of a limit of 2"
}

@test "a section killed at its start ran for no time: it does not count as running for ever" {
	# The lease lost just after the spawn: the command was killed with
	# SIGKILL before its first write, so its section has no event but
	# its start.  The next holders came after it, one at a time.
	fake_run
	section w1.1 1 0 10
	echo "$(ms 11) w2.1 2 start 100 101 0 x" >>"$R/events"
	printf '%s\n' '### w2.1' '{"event":"acquired","fence":2}' \
		'{"event":"lost","reason":"gone"}' >>"$R/log.w1"
	echo "w2.1 124" >>"$R/exits"
	section w1.2 3 20 30
	section w2.2 4 31 40
	judge
	run "$CHECK" "$R"
	assert_success
	assert_output --partial "at-once=1 (limit 1) too-many=0"
}

@test "a loss before the command started, then a grant that ran: exit 0 is right" {
	fake_run
	{
		echo '### w1.1'
		echo '{"event":"acquired","fence":1}'
		echo '{"event":"lost","msg":"lease lost before the command started: gone; trying again"}'
	} >>"$R/log.w1"
	section w1.1 2 5 10
	judge
	run "$CHECK" "$R"
	assert_success
	assert_output --partial "wrong-exits=0"
	# A loss after that grant still counts.
	echo '{"event":"lost","reason":"gone"}' >>"$R/log.w1"
	run "$CHECK" "$R"
	assert_failure 1
	assert_output --partial "wrong exit: w1.1 exited 0: leaserun logged the loss"
}

@test "two holders of one slot overlap: the run fails, though the limit held" {
	fake_run
	echo limit=3 >>"$R/meta"
	SLOT=1 section w1.1 1 0 20
	SLOT=1 section w2.1 2 10 30
	SLOT=0 section w3.1 3 12 14
	run "$CHECK" "$R"
	assert_failure 1
	assert_output --partial "unexplained=1"
	assert_output --partial "unexplained overlap: w2.1 (fence 2, slot 1) started at +0.010s"
	refute_output --partial "too many at once:"
}

@test "readers overlap each other; a writer beside one fails the run" {
	fake_run
	echo readers=2 >>"$R/meta"
	MODE=s section w1.1 1 0 20
	MODE=s section w2.1 2 5 25
	section w3.1 3 30 40
	run "$CHECK" "$R"
	assert_success
	assert_output --partial "overlaps: shared=1 explained=0 window=0"
	MODE=x section w4.1 4 35 45 # beside the writer w3.1
	MODE=s section w5.1 5 42 50 # a reader beside w4.1
	run "$CHECK" "$R"
	assert_failure 1
	assert_output --partial "unexplained=2"
	assert_output --partial "unexplained overlap: w4.1 (fence 4) started"
	assert_output --partial "unexplained overlap: w5.1 (fence 5, shared) started"
}

@test "a grant in the other mode than asked for fails the run" {
	fake_run
	echo readers=1 >>"$R/meta"
	MODE=s section w1.1 1 0 10
	section w2.1 2 11 20
	sed -i 's/,"mode":"shared"//' "$R/log.w1"
	run "$CHECK" "$R"
	assert_failure 1
	assert_output --partial "wrong grant: w1.1 (fence 1, shared): asked for a shared lease, leaserun logged an exclusive grant"
}

# chaos ARGS...: a real run of tests/chaos/run, in $output (shown if the
# test fails); the run directory a failed run keeps is removed.
chaos() {
	local d
	run "$CHAOS" "$@"
	echo "$output"
	d=$(sed -n 's/.*run directory kept: //p' <<<"$output")
	[ -z "$d" ] || rm -rf "$d"
}

@test "a real run of sections without leaserun fails: they overlap" {
	chaos -n -s 3 -w 3 -F none file
	assert_failure 1
	assert_output --partial "chaos file: FAIL"
	assert_output --regexp "unexplained=[1-9]"
	assert_output --partial "unexplained overlap: "
}

@test "a real run of leaserun on the file store, no faults: it passes" {
	chaos -s 3 -w 3 -F none file
	assert_success
	assert_output --partial "chaos file: PASS"
	assert_output --regexp "acquisitions=[1-9][0-9]* sections=[1-9]"
	assert_output --partial "faults=0 (none)"
}

@test "real runs of leaserun --limit 2 and --shared on the file store pass" {
	chaos -s 3 -w 4 -l 2 -F none file
	assert_success
	assert_output --partial "chaos file -l 2: PASS"
	assert_output --partial "at-once=2 (limit 2) too-many=0"
	# Three readers of five workers: with two of four, a loaded machine
	# (the ASan build in CI) once ran the whole time without two readers
	# at once, as a writer waiting at the gate holds back the readers
	# that come after it.
	chaos -s 3 -w 5 -r 3 -F none file
	assert_success
	assert_output --partial "chaos file -r 3: PASS"
	assert_output --regexp "overlaps: shared=[1-9]"
}

@test "a section that starts after a deletion of its own lease had returned fails the run, overlap or not" {
	# The holder's session ended (terminate, 20..30ms), and then its
	# command started: it ran on no lease at all.
	fake_run
	section w1.1 1 40 60 124
	fault 20 30 terminate - w1.1
	judge
	run "$CHECK" "$R"
	assert_failure 1
	assert_output --partial "lost-lease-starts=1"
	assert_output --partial "started on a lost lease: w1.1 (fence 1) started at +0.040s, 10.0ms after terminate"
	# A successor overlapping it is no window: the lease it deleted was
	# gone before the command started.
	fake_run
	section w1.1 1 40 60 124
	section w2.1 2 50 80
	fault 20 30 terminate - w1.1
	judge
	run "$CHECK" "$R"
	assert_failure 1
	assert_output --partial "window=0"
	assert_output --partial "unexplained=1"
	# A deletion still under way when the command started may have
	# landed after the start: the old window rule.
	fake_run
	section w1.1 1 40 60 124
	section w2.1 2 50 80
	fault 20 45 terminate - w1.1
	judge
	run "$CHECK" "$R"
	assert_success
	assert_output --partial "window=1"
	assert_output --partial "lost-lease-starts=0"
}

@test "the history of issue 31: a command started after its session ended and after a higher fence's section" {
	fake_run
	section w7.8 2844 0 1 0
	fault -100 -25 terminate - w4.9
	section w4.9 2843 5 33 124
	section w1.7 2845 20 40
	judge
	run "$CHECK" "$R"
	assert_failure 1
	assert_output --partial "fence down: w4.9 (fence 2843)"
	assert_output --partial "started on a lost lease: w4.9 (fence 2843)"
	assert_output --partial "unexplained=1"
}
