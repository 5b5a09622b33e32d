#!/usr/bin/env bats
# Many contenders on one name: never two holders, fences increase.

load helpers

setup() {
	lockdir_setup
}

@test "50 contenders on one name never overlap and their fences strictly increase" {
	log=$BATS_TEST_TMPDIR/intervals
	for i in $(seq 50); do
		"$LEASERUN" -w 120s job sh -c 's=$(date +%s%N); sleep 0.01; e=$(date +%s%N); echo "$s $e $LEASERUN_FENCE" >> '"$log" &
	done
	fails=0
	for job in $(jobs -p); do wait "$job" || fails=$((fails + 1)); done
	assert_equal "$fails" 0
	assert_equal "$(wc -l < "$log")" 50
	run check_intervals "$log"
	assert_success
	assert_output "50 intervals, no overlap, fences increase"
}

@test "the interval check catches an overlap" {
	printf '1 5 1\n4 8 2\n' > "$BATS_TEST_TMPDIR/bad"
	run check_intervals "$BATS_TEST_TMPDIR/bad"
	assert_failure
	printf '1 5 2\n6 8 2\n' > "$BATS_TEST_TMPDIR/bad"
	run check_intervals "$BATS_TEST_TMPDIR/bad"
	assert_failure
}
