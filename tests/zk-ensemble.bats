#!/usr/bin/env bats
# The ZooKeeper store against a real three-server ensemble on loopback:
# the leader dies while a job holds the lease.

load 'helpers'
load 'zk-server'

setup_file() {
	command -v java >/dev/null && [ -e /usr/share/java/zookeeper.jar ] ||
		{ echo "java and the ZooKeeper server are needed (Debian: zookeeper)" >&2; return 1; }
	[ -e "$LEASERUN_MODULE_DIR/zk.so" ] ||
		{ echo "no zk.so in $LEASERUN_MODULE_DIR" >&2; return 1; }
	ZK_DIR=$(mktemp -d)
	export ZK_DIR
	zk_ensemble "$ZK_DIR" 3
	export LEASERUN_URL="zk://$ZK_EPS"
}

teardown_file() {
	zk_stop_all "$ZK_DIR"
	rm -rf "$ZK_DIR"
}

teardown() {
	kill_bg
	true
}

# Brings every server that a test killed back, and waits until a leader
# leads them all.
all_up() {
	local i
	for i in 1 2 3; do
		[ -s "$ZK_DIR/zk$i/pid" ] || zk_start "$ZK_DIR" "$i"
	done
	for i in 1 2 3; do
		zk_wait_ready "$ZK_DIR" "$i"
	done
}

# A job that beats: appends a timestamp to its own file (in the directory
# given as its $0) every 50ms for about $2 seconds, and its fence to
# another.  Its interval is from its
# first beat to its last, whether it ends or is killed.
beat_cmd() {
	echo 'f=$0/beat.$$; echo "$LEASERUN_FENCE" > "$f.fence"; n=0; while [ $n -lt '"$(($2 * 20))"' ]; do date +%s%N >> "$f"; sleep 0.05; n=$((n + 1)); done'
}

# "first last fence" per job, for check_intervals.
intervals() {
	local f
	for f in "$1"/beat.*[0-9]; do
		echo "$(head -n1 "$f") $(tail -n1 "$f") $(cat "$f.fence")"
	done
}

@test "a lease on the ensemble works through any of its servers" {
	run "$LEASERUN" e1 sh -c 'echo $LEASERUN_FENCE'
	assert_success
	[ "$output" -gt 0 ]
	for ep in ${ZK_EPS//,/ }; do
		run "$LEASERUN" -U "zk://$ep" e1 true
		assert_success
	done
}

@test "the leader killed while a job holds the lease: never two holders" {
	d=$BATS_TEST_TMPDIR
	pids=()
	"$LEASERUN" -t 5s -w 60s e2 sh -c "$(beat_cmd _ 4)" "$d" \
		2>"$d/a.err" 3>&- &
	pids+=($!)
	wait_until 10 sh -c 'cat "$0"/beat.*[0-9] 2>/dev/null | grep -q .' "$d"
	for i in 1 2 3; do
		"$LEASERUN" -t 5s -w 60s e2 sh -c "$(beat_cmd _ 1)" "$d" \
			2>"$d/w$i.err" 3>&- &
		pids+=($!)
	done
	BG_PIDS="${pids[*]}"
	sleep 1 # let the holder run a while under the old leader
	leader=$(zk_leader "$ZK_DIR")
	[ -n "$leader" ]
	zk_kill "$ZK_DIR" "$leader"
	rcs=()
	for p in "${pids[@]}"; do
		rc=0
		wait "$p" || rc=$?
		rcs+=("$rc")
	done
	echo "exit statuses: ${rcs[*]}"
	cat "$d"/*.err
	# The holder either kept the lease through the election (0) or was
	# stopped in time (124); every waiter got it in the end.
	[[ ${rcs[0]} == 0 || ${rcs[0]} == 124 ]]
	assert_equal "${rcs[*]:1}" "0 0 0"
	intervals "$d" >"$d/log"
	assert_equal "$(wc -l <"$d/log")" 4
	run check_intervals "$d/log"
	assert_success
	all_up
}

@test "the leader killed under a holder that knows only the leader: it stops in time, a waiter takes over" {
	d=$BATS_TEST_TMPDIR
	leader=$(zk_leader "$ZK_DIR")
	[ -n "$leader" ]
	lurl=zk://127.0.0.1:$(zk_port "$ZK_DIR" "$leader")
	pids=()
	"$LEASERUN" -U "$lurl" -t 3s e4 sh -c "$(beat_cmd _ 20)" "$d" \
		2>"$d/a.err" 3>&- &
	pids+=($!)
	wait_until 10 sh -c 'cat "$0"/beat.*[0-9] 2>/dev/null | grep -q .' "$d"
	"$LEASERUN" -v -t 3s -w 60s e4 sh -c "$(beat_cmd _ 1)" "$d" \
		2>"$d/w.err" 3>&- &
	pids+=($!)
	BG_PIDS="${pids[*]}"
	wait_until 10 grep -q waiting "$d/w.err"
	zk_kill "$ZK_DIR" "$leader"
	rcs=()
	for p in "${pids[@]}"; do
		rc=0
		wait "$p" || rc=$?
		rcs+=("$rc")
	done
	echo "exit statuses: ${rcs[*]}"
	cat "$d"/*.err
	# No server left for the holder: it must stop before its session
	# can expire; the waiter gets the lease once it has.
	assert_equal "${rcs[*]}" "124 0"
	intervals "$d" >"$d/log"
	assert_equal "$(wc -l <"$d/log")" 2
	run check_intervals "$d/log"
	assert_success
	all_up
}

@test "faults: the leader killed while runs wait: every waiter runs in the end, one at a time" {
	d=$BATS_TEST_TMPDIR
	leader=$(zk_leader "$ZK_DIR")
	[ -n "$leader" ]
	lurl=zk://127.0.0.1:$(zk_port "$ZK_DIR" "$leader")
	hold e5 -t 20s
	job='s=$(date +%s%N); echo "$s $(date +%s%N) $LEASERUN_FENCE" >>"$0"'
	pids=
	for i in 1 2 3 4; do
		# One knows the leader alone, and must wait for it to return.
		u=$LEASERUN_URL
		[ "$i" = 4 ] && u=$lurl
		LEASERUN_URL=$u "$LEASERUN" -v -t 20s -w 90 e5 sh -c "$job" \
			"$d/log" 2>"$d/w$i.err" 3>&- &
		pids="$pids $!"
		wait_until 10 grep -q waiting "$d/w$i.err"
	done
	BG_PIDS="$BG_PIDS $pids"
	zk_kill "$ZK_DIR" "$leader"
	sleep 1
	release e5
	wait_holder
	sleep 2
	all_up
	bad=0
	for p in $pids; do
		wait_rc "$p"
		(( RC == 0 )) || bad=$((bad + 1))
	done
	cat "$d"/w*.err
	[ "$HRC" = 0 ] || [ "$HRC" = 124 ]
	assert_equal "$bad" 0
	assert_equal "$(grep -c . "$d/log")" 4
	run check_intervals "$d/log"
	assert_success
}

@test "a follower killed while a job holds the lease: the job carries on" {
	d=$BATS_TEST_TMPDIR
	# The job outlives the TTL: only renewals through the servers left
	# let it finish.
	"$LEASERUN" -t 5s e3 sh -c "$(beat_cmd _ 7)" "$d" 2>"$d/a.err" 3>&- &
	p=$!
	BG_PIDS=$p
	wait_until 10 sh -c 'cat "$0"/beat.*[0-9] 2>/dev/null | grep -q .' "$d"
	leader=$(zk_leader "$ZK_DIR")
	for i in 1 2 3; do
		if [ "$i" != "$leader" ]; then
			zk_kill "$ZK_DIR" "$i"
			break
		fi
	done
	rc=0
	wait "$p" || rc=$?
	cat "$d/a.err"
	assert_equal "$rc" 0
	all_up
}
