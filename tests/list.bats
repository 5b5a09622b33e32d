#!/usr/bin/env bats
# leaserun --list: the command line, and the scenarios of list.bash on the
# file store, which needs no server.  The network stores run the same
# scenarios in list-stores.bats.

load 'helpers'
load 'sem'
load 'list'

@test "cli: --list takes no command and none of a run's options: one line, 125" {
	use file
	local o
	for o in "-- true" "-c true" "x y" "-w 1" "-n" "-t 5s" "-l 2" "-s" \
		"--once-per 1h" "--slot 1" "--metrics-file $D/m"; do
		# shellcheck disable=SC2086 # the words of o are options
		case $o in
		"-- "* | "x y") run -125 "$LEASERUN" --list $o ;;
		*) run -125 "$LEASERUN" $o --list ;;
		esac
		assert_equal "${#lines[@]}" 1
		assert_output --regexp '^leaserun: --list (takes no|takes one pattern and no command)'
	done
	run -125 "$LEASERUN" --list --status x
	assert_output --partial "exclude each other"
	run -125 "$LEASERUN" --list ''
	assert_output --partial "empty pattern"
	# A run's settings in the environment are no options given.
	LEASERUN_WAIT=5s LEASERUN_TTL=3s run -0 "$LEASERUN" --list
}

@test "file: a lock directory not made yet holds no lease: the header, exit 0" {
	run -0 "$LEASERUN" -U "file://$BATS_TEST_TMPDIR/never" --list
	assert_equal "${#lines[@]}" 1
	assert_line -n 0 --partial "NAME"
}

@test "file: nothing held: the header only, or [] (exit 0)" { use file; list_nothing_held; }
@test "file: an exclusive holder: name, host, pid, since, no TTL, fence, no waiters" { use file; list_exclusive; }
@test "file: two shared holders and 2 of 3 slots: a line per holder" { use file; list_shared_and_slots; }
@test "file: PATTERN is a glob over names, all by default" { use file; list_pattern; }
@test "file: a waiting run counts in WAITERS and in --status" { use file; list_waiters; }

@test "file: waiters of a semaphore count once, whatever slot files they wait on" {
	use file
	holds a "$N" -l 2
	holds b "$N" -l 2
	"$LEASERUN" -l 2 -w 60s "$N" true 2>/dev/null &
	"$LEASERUN" -l 2 -w 60s "$N" true 2>/dev/null &
	BG_PIDS="$BG_PIDS $(jobs -p | xargs)"
	wait_until 15 waiting "$N" 2
	sleep 0.3
	waiting "$N" 2
}

@test "file: a lock directory that cannot be read: 125, one line" {
	local d=$BATS_TEST_TMPDIR/locks
	mkdir -m 700 "$d"
	"$LEASERUN" -U "file://$d" x true
	chmod 000 "$d"
	if [ "$(id -u)" = 0 ]; then
		# root reads it all the same: a file in the way instead.
		chmod 700 "$d"
		rm -rf "$d"
		printf x >"$d"
		d=$d/sub
	fi
	run -125 --separate-stderr "$LEASERUN" -U "file://$d" --list
	assert_equal "${#stderr_lines[@]}" 1
}
