#!/usr/bin/env bats
# Every row of the exit table (leaserun(1), EXIT STATUS).

load helpers

setup() {
	lockdir_setup
}

@test "the command's exit status is leaserun's" {
	run lr job true
	assert_success
	run lr job sh -c 'exit 3'
	assert_equal "$status" 3
	run lr job -c 'exit 200'
	assert_equal "$status" 200
}

@test "a command killed by a signal is re-raised: the caller sees the same death" {
	# Re-raised means leaserun itself died of the signal, not exit(138),
	# which a shell's $? would show the same.
	run ended "$LEASERUN" job sh -c 'kill -USR1 $$'
	assert_output "signal 10"
	run ended "$LEASERUN" job sh -c 'kill -TERM $$'
	assert_output "signal 15"
	run ended "$LEASERUN" job sh -c 'exit 138'
	assert_output "exit 138"
}

@test "as PID 1 (a container's init), which its own signal cannot end: a command killed by a signal gives exit 128 + the signal" {
	needs_root "for a PID namespace"
	run ended unshare --pid --fork "$LEASERUN" job sh -c 'kill -TERM $$'
	assert_output "exit 143"
	run ended unshare --pid --fork "$LEASERUN" job sh -c 'kill -USR1 $$'
	assert_output "exit 138"
}

@test "a re-raised fatal signal does not dump core" {
	cd "$BATS_TEST_TMPDIR"
	# The command itself may not dump (ulimit -c 0 in it); leaserun may.
	run bash -c 'ulimit -c unlimited; "$LEASERUN" job sh -c "ulimit -c 0; kill -QUIT \$\$"; echo "status=$?"'
	assert_output --partial "status=131"
	refute_output --partial "core dumped"
	run bash -c 'ls core* 2>/dev/null | wc -l'
	assert_output 0
}

@test "a busy lease with -n exits 1" {
	"$LEASERUN" job sleep 5 &
	holder=$!
	wait_until 3 exists "$LOCKDIR/job.lock"
	wait_until 3 lr --status job
	run lr -n job true
	assert_equal "$status" 1
	kill "$holder"; wait "$holder" || true
}

@test "-E sets the exit status of a conflict" {
	"$LEASERUN" job sleep 5 &
	holder=$!
	wait_until 3 lr --status job
	run lr -n -E 75 job true
	assert_equal "$status" 75
	run lr -w 200ms -E 0 job false
	assert_equal "$status" 0
	kill "$holder"; wait "$holder" || true
}

@test "-w gives up with exit 1 when the wait runs out" {
	"$LEASERUN" job sleep 5 &
	holder=$!
	wait_until 3 lr --status job
	start=$(date +%s%N)
	run lr -w 300ms job true
	end=$(date +%s%N)
	assert_equal "$status" 1
	# It waited, and it did not wait for the holder.
	(( (end - start) >= 300000000 ))
	(( (end - start) < 4000000000 ))
	kill "$holder"; wait "$holder" || true
}

@test "a lease lost while the command runs gives 124" {
	echo "renew=lost" > "$LOCKDIR/job.fault"
	run lr -U "fault://$LOCKDIR" -t 1s job sleep 10
	assert_equal "$status" 124
}

@test "a release that finds the lease not ours gives 124, whatever the command's status or signal" {
	echo "release=lost" > "$LOCKDIR/job.fault"
	run lr -U "fault://$LOCKDIR" job true
	assert_equal "$status" 124
	run lr -U "fault://$LOCKDIR" job sh -c 'exit 3'
	assert_equal "$status" 124
	# 124 wins over re-raising the command's signal (USR1 would be 138).
	run bash -c '"$LEASERUN" -U "fault://$LOCKDIR" job sh -c "kill -USR1 \$\$" & wait $!; echo "status=$?"'
	assert_output --partial "status=124"
	assert_output --partial "the lease was lost before the command ended"
	# A command that never ran keeps its own status.
	run -127 lr -U "fault://$LOCKDIR" job no-such-command-here
	assert_equal "$status" 127
}

@test "leaserun's own failure gives 125" {
	run lr -U "file://$LOCKDIR/missing" job true
	assert_equal "$status" 125
	assert_output --partial "cannot use lock directory $LOCKDIR/missing"
}

@test "a command that cannot be executed gives 126" {
	printf 'echo hi\n' > "$BATS_TEST_TMPDIR/noexec"
	chmod 644 "$BATS_TEST_TMPDIR/noexec"
	run lr job "$BATS_TEST_TMPDIR/noexec"
	assert_equal "$status" 126
	assert_output --partial "cannot run"
}

@test "a command that is not found gives 127" {
	run -127 lr job no-such-command-here
	assert_equal "$status" 127
	assert_output --partial "cannot run 'no-such-command-here': No such file or directory"
}

@test "a command that cannot run still releases the lease" {
	run -127 lr -v job no-such-command-here
	assert_equal "$status" 127
	# Released, not left to expire (the file store's lock would go with
	# leaserun anyway).
	assert_line "leaserun: job: released"
	run lr -n job true
	assert_success
}

@test "leaserun as a PID namespace's init, which a signal's default action cannot end: a command killed by SIGTERM still gives 143" {
	needs_root "for a PID namespace"
	# A container's entry point: raising the command's signal on itself
	# does nothing to PID 1, so leaserun exits 128+15 instead.
	run timeout -s KILL 30 unshare -pf "$LEASERUN" job sh -c 'echo ran; kill -TERM $$'
	assert_equal "$status" 143
	assert_output ran
}
