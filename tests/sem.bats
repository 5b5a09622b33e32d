#!/usr/bin/env bats
# More than one holder: --limit N (a semaphore of N slots) and --shared
# (shared holders beside one exclusive holder): the command line, and the
# scenarios of sem.bash on the file store, which needs no server.  The
# network stores run the same scenarios in sem-stores.bats.

load 'helpers'
load 'sem'

@test "cli: --limit takes 1 to 1000, and LEASERUN_LIMIT" {
	use file
	for bad in 0 1001 x -1 ''; do
		run -125 "$LEASERUN" -l "$bad" "$N" true
		assert_output --partial "invalid --limit '$bad': expected 1 to 1000"
	done
	LEASERUN_LIMIT=0 run -125 "$LEASERUN" "$N" true
	assert_output --partial "invalid LEASERUN_LIMIT '0'"
	LEASERUN_LIMIT=2 run -0 "$LEASERUN" "$N" sh -c 'echo "$LEASERUN_SLOT"'
	assert_output 0
	# The option wins over the variable.
	holder a -l 3
	running a
	LEASERUN_LIMIT=2 run -0 "$LEASERUN" -n -l 3 "$N" sh -c 'echo "$LEASERUN_SLOT"'
	assert_output 1
	LEASERUN_LIMIT=3 run -0 "$LEASERUN" -n "$N" sh -c 'echo "$LEASERUN_SLOT"'
	assert_output 1
}

@test "cli: --shared goes with --limit 1 only; -x undoes -s; --slot goes with --break" {
	use file
	run -125 "$LEASERUN" -s -l 3 "$N" true
	assert_output --partial "--shared and --limit 3 exclude each other"
	run -125 "$LEASERUN" --slot 1 "$N" true
	assert_output --partial "--slot goes with --break"
	run -125 "$LEASERUN" --break --slot 1000 "$N"
	assert_output --partial "invalid --slot '1000'"
	run -0 "$LEASERUN" -s -l 1 "$N" true
	# Last one wins, as in flock: -s -x is exclusive.
	holder a -s
	running a
	run -1 "$LEASERUN" -n -s -x "$N" true
	run -0 "$LEASERUN" -n -x -s "$N" true
}

@test "cli: a store that says it cannot do --limit or --shared is refused (125)" {
	use file
	# The test-only fault store wraps the file store but does not
	# claim either capability.
	run -125 "$LEASERUN" -U "fault://$LOCKDIR" -l 2 "$N" true
	assert_output --partial "the fault store cannot let more than one hold a lease (--limit 2)"
	run -125 "$LEASERUN" -U "fault://$LOCKDIR" -s "$N" true
	assert_output --partial "the fault store has no shared leases (--shared)"
	[ ! -e "$LOCKDIR/$N.lock" ] # refused before the store was opened
	run -0 "$LEASERUN" -U "fault://$LOCKDIR" "$N" true
}

@test "cli: --once-per goes with a plain lease only" {
	use file
	run -125 "$LEASERUN" --once-per 1m -l 2 "$N" true
	assert_output --partial "--once-per goes with a plain lease only, not with --limit"
	run -125 "$LEASERUN" --once-per 1m -s "$N" true
	assert_output --partial "not with --shared"
	run -0 "$LEASERUN" --once-per 1m "$N" true
}

@test "cli: the command gets LEASERUN_SLOT, 0 for a plain lease, never an inherited one" {
	use file
	LEASERUN_SLOT=7 run -0 "$LEASERUN" "$N" sh -c 'echo "$LEASERUN_SLOT"; env | grep -c "^LEASERUN_SLOT="'
	assert_output $'0\n1'
}

@test "cli: waiting and conflict lines name the first holder and how many more" {
	use file
	holder a -l 2
	running a
	holder b -l 2
	running b
	run -1 "$LEASERUN" -n -l 2 "$N" true
	assert_output --regexp "held by $(hostname) pid [0-9]+ and 1 more; not waiting"
}

@test "file: 20 contenders with --limit 3 run at most 3 at once, and 3" { use file; twenty_contenders; }
@test "file: kill -9 of a holder frees its slot" { use file; kill_frees_slot; }
@test "file: a run with another limit than the holders' is refused (125)" { use file; limit_mismatch; }
@test "file: shared holders overlap, an exclusive one overlaps nothing" { use file; shared_exclusive; }
@test "file: with a run waiting at the gate, another limit is refused at once, not after the wait" {
	use file
	three_holders -l 3 -t 5s
	"$LEASERUN" -l 3 -w 60s "$N" true 2>"$D/w.err" &
	BG_PIDS="$BG_PIDS $!"
	# The waiter holds the gate (DIR/NAME.gate) while it waits.
	wait_until 10 sh -c '! flock -n "$0" true' "$LOCKDIR/$N.gate"
	t0=$(now_ms)
	run -125 "$LEASERUN" -w 20s -l 2 "$N" true
	t1=$(now_ms)
	assert_output --partial "held with --limit 3 and this run asks for --limit 2"
	(( t1 - t0 < 3000 ))
}
@test "file: a waiting exclusive run is not passed by later shared ones" { use file; writer_first; }
@test "file: util-linux's flock scenarios" { use file; flock_scenarios; }
@test "file: --status lists the slots, --break --slot stops one" { use file; status_and_break; }
