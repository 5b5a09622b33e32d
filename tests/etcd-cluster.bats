#!/usr/bin/env bats
# The etcd store against a real three-member etcd cluster on loopback.

load 'helpers'
load 'etcd-server'

setup_file() {
	command -v etcd >/dev/null && command -v etcdctl >/dev/null ||
		{ echo "etcd and etcdctl are needed (Debian: etcd-server, etcd-client)" >&2; return 1; }
	[ -e "$LEASERUN_MODULE_DIR/etcd.so" ] ||
		{ echo "no etcd.so in $LEASERUN_MODULE_DIR" >&2; return 1; }
	LRE_DIR=$(etcd_tmpdir)
	export LRE_DIR
	etcd_cluster "$LRE_DIR" 3
	export LRE_EPS LRE_NAMES
}

teardown_file() {
	etcd_stop_all "$LRE_DIR"
	rm -rf "$LRE_DIR"
}

teardown() {
	kill_bg
	# A member a test stopped runs again.
	if [ -f "$BATS_TEST_TMPDIR/stopped" ]; then
		kill -CONT "$(cat "$BATS_TEST_TMPDIR/stopped")" 2>/dev/null || true
	fi
}

# (Before the test that kills the leader: it needs all three members.)
@test "our member stopped while the key is deleted through another, between the grant and the command's start: the command never runs on it" {
	leader=$(etcd_leader "$LRE_DIR")
	[ -n "$leader" ]
	# A follower that goes on serving us would apply the delete; stopped,
	# it sends no watch event, and only a read through the others can
	# tell.  The quorum stays with the other two.
	for m in $LRE_NAMES; do [ "$m" != "$leader" ] && break; done
	mep=$(etcd_ep "$LRE_DIR" "$m")
	others=$(echo "$LRE_EPS" | tr ',' '\n' | grep -vx "$mep" | paste -sd,)
	cp "$LRE_DIR/$m.pid" "$BATS_TEST_TMPDIR/stopped"
	lost_before_start "etcd://$mep,$others?timeout=300ms" job0 \
		'kill -STOP "$(cat "$BATS_TEST_TMPDIR/stopped")"
		etcdctl --endpoints "$others" del --prefix leaserun/job0/ >/dev/null' \
		-w 10
	kill -CONT "$(cat "$BATS_TEST_TMPDIR/stopped")"
	etcd_wait_healthy "$LRE_DIR" "$m"
	assert_lost_before_start_retried
	grep -Eq "etcd key leaserun/job0/[0-9a-f]+ is gone" "$BATS_TEST_TMPDIR/err"
}

@test "faults: the leader is killed while runs wait: every waiter runs in the end, one at a time" {
	leader=$(etcd_leader "$LRE_DIR")
	[ -n "$leader" ]
	lep=$(etcd_ep "$LRE_DIR" "$leader")
	others=$(echo "$LRE_EPS" | tr ',' '\n' | grep -vx "$lep" | paste -sd,)
	log=$BATS_TEST_TMPDIR/log
	job='s=$(date +%s%N); [ "$1" = h ] && until [ -e "$0.go" ]; do sleep 0.05; done
		echo "$s $(date +%s%N) $LEASERUN_FENCE" >>"$0"'
	LEASERUN_URL="etcd://$lep,$others" "$LEASERUN" -t 10s lw sh -c "$job" \
		"$log" h 2>"$log.h" 3>&- &
	h=$!
	BG_PIDS=$h
	keys() { etcdctl --endpoints "$others" get --prefix --keys-only leaserun/lw/ | grep -c .; }
	# The holder first: a waiter started with it could take the lease
	# before it, run at once, and leave fewer than four waiting.
	wait_until 15 eval '[ "$(keys)" = 1 ]'
	pids=
	for i in 1 2 3 4; do
		# Two talk to the leader first, one to the others first; one
		# knows the leader alone, and must wait for it to come back.
		case $i in
		1 | 3) u="etcd://$lep,$others" ;;
		2) u="etcd://$others,$lep" ;;
		4) u="etcd://$lep" ;;
		esac
		LEASERUN_URL=$u "$LEASERUN" -v -w 60 lw sh -c "$job" "$log" w \
			2>"$log.w$i" 3>&- &
		pids="$pids $!"
	done
	BG_PIDS="$h $pids"
	wait_until 15 eval '[ "$(keys)" = 5 ]'
	etcd_kill "$LRE_DIR" "$leader"
	sleep 1
	touch "$log.go"
	wait_rc "$h"
	hrc=$RC
	sleep 2
	etcd_restart "$LRE_DIR" "$leader"
	bad=0
	for p in $pids; do
		wait_rc "$p"
		(( RC == 0 )) || bad=$((bad + 1))
	done
	cat "$log".w* | sed 's/^/# /' >&3
	grep -q "trying again until the wait runs out" "$log.w4"
	[ "$hrc" = 0 ] || [ "$hrc" = 124 ]
	assert_equal "$bad" 0
	assert_equal "$(grep -c . "$log")" $((4 + (hrc == 0)))
	check_intervals "$log"
}

@test "the leader is killed while a job holds: the job keeps its lease or is stopped, never two holders" {
	leader=$(etcd_leader "$LRE_DIR")
	[ -n "$leader" ]
	lep=$(etcd_ep "$LRE_DIR" "$leader")
	others=$(echo "$LRE_EPS" | tr ',' '\n' | grep -vx "$lep" | paste -sd,)
	log=$BATS_TEST_TMPDIR/log
	# The job talks to the leader first, so it has to fail over.
	(
		LEASERUN_URL="etcd://$lep,$others" "$LEASERUN" -t 5s job \
			sh -c 'echo "$(date +%s%N) a-start $LEASERUN_FENCE" >> "$0"
				trap "echo \$(date +%s%N) a-end term >> $0; exit 143" TERM
				sleep 5 & wait
				echo "$(date +%s%N) a-end ok" >> "$0"' \
			"$log" 2>"$log.a" && rc=0 || rc=$?
		echo "$(date +%s%N) a-exit $rc" >>"$log"
	) 3>&- &
	a=$!
	BG_PIDS="$a"
	for _ in $(seq 100); do grep -q a-start "$log" 2>/dev/null && break; sleep 0.05; done
	grep -q a-start "$log"
	# A contender, queued through the other members.
	(
		LEASERUN_URL="etcd://$others,$lep" "$LEASERUN" -w 30s job \
			sh -c 'echo "$(date +%s%N) b-start $LEASERUN_FENCE" >> "$0"' \
			"$log" 2>"$log.b" && rc=0 || rc=$?
		echo "$(date +%s%N) b-exit $rc" >>"$log"
	) 3>&- &
	b=$!
	BG_PIDS="$a $b"
	sleep 0.5
	etcd_kill "$LRE_DIR" "$leader"
	wait "$a"
	wait "$b"
	sed 's/^/# /' "$log" "$log.a" "$log.b" >&3
	a_rc=$(awk '$2 == "a-exit" { print $3 }' "$log")
	b_rc=$(awk '$2 == "b-exit" { print $3 }' "$log")
	[ "$a_rc" = 0 ] || [ "$a_rc" = 124 ]
	assert_equal "$b_rc" 0
	# B's command started only after A's command was gone (its last
	# words, or leaserun's exit if it was killed outright), with a
	# larger fence.
	a_end=$(awk '$2 == "a-end" { print $1 }' "$log")
	[ -n "$a_end" ] || a_end=$(awk '$2 == "a-exit" { print $1 }' "$log")
	b_start=$(awk '$2 == "b-start" { print $1 }' "$log")
	[ "$b_start" -gt "$a_end" ]
	a_fence=$(awk '$2 == "a-start" { print $3 }' "$log")
	b_fence=$(awk '$2 == "b-start" { print $3 }' "$log")
	[ "$b_fence" -gt "$a_fence" ]
}

@test "with the leader gone, the two members left still serve the lease" {
	run "$LEASERUN" -U "etcd://$LRE_EPS" job2 sh -c 'echo "$LEASERUN_FENCE"'
	assert_success
	[ "$output" -gt 0 ]
}
