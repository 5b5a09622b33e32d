#!/usr/bin/env bats
# The ZooKeeper store against a real ZooKeeper (standalone, free loopback
# port, tickTime 200ms so sessions of half a second work).

load 'helpers'
load 'zk-server'

setup_file() {
	command -v java >/dev/null && [ -e /usr/share/java/zookeeper.jar ] ||
		{ echo "java and the ZooKeeper server are needed (Debian: zookeeper)" >&2; return 1; }
	[ -e "$LEASERUN_MODULE_DIR/zk.so" ] ||
		{ echo "no zk.so in $LEASERUN_MODULE_DIR" >&2; return 1; }
	ZK_DIR=$(mktemp -d)
	export ZK_DIR
	zk_standalone "$ZK_DIR"
	export LEASERUN_URL="zk://$ZK_EP"
}

teardown_file() {
	zk_stop_all "$ZK_DIR"
	rm -rf "$ZK_DIR"
}

teardown() {
	kill_bg
	# A test that stopped the server must not leave it stopped.
	[ -s "$ZK_DIR/zk1/pid" ] && kill -CONT "$(cat "$ZK_DIR/zk1/pid")" 2>/dev/null
	[ -s "$ZK_DIR/zk1/pid" ] || { zk_start "$ZK_DIR" 1; zk_wait_ready "$ZK_DIR" 1; }
	true
}

# The lock nodes of lease $1 (under /leaserun unless $2 gives the dir),
# one per line.
nodes() { zk_cli "$ZK_EP" "ls ${2:-/leaserun/$1}" | tail -n1 | tr -d '[],' | tr ' ' '\n' | grep '^lock-' || true; }
nnodes() { nodes "$@" | grep -c . || true; }
# Deletes lease $1's lock node, as another client would; tries again
# while the client fails (a JVM slow to start on a loaded machine), until
# a listing that worked shows no lock node.
delete_node() {
	local i n l
	for i in 1 2 3 4 5; do
		n=$(nodes "$1")
		[ -z "$n" ] || zk_cli "$ZK_EP" "delete /leaserun/$1/$n" >/dev/null || true
		l=$(zk_cli "$ZK_EP" "ls /leaserun/$1" | tail -n1)
		[[ $l == \[* && $l != *lock-* ]] && return 0
		sleep 0.2
	done
	echo "# could not delete the node of $1" >&3
	return 1
}

# A command line that appends "start end fence" for check_intervals.
interval_cmd() {
	echo 's=$(date +%s%N); sleep '"$2"'; echo "$s $(date +%s%N) $LEASERUN_FENCE" >> '"$1"
}

@test "a command runs under the lease and its fence is its node's creation zxid" {
	hold t1
	node=$(nodes t1)
	[ -n "$node" ]
	run zk_cli "$ZK_EP" "stat /leaserun/t1/$node"
	czxid=$(printf '%s\n' "$output" | sed -n 's/^cZxid = //p')
	[ -n "$czxid" ]
	assert_equal "$(cat "$BATS_TEST_TMPDIR/t1.fence")" "$((czxid))"
	assert_output --partial "ephemeralOwner = 0x"
	refute_output --partial "ephemeralOwner = 0x0"$'\n'
	release t1
	assert_holder_rc 0
	assert_equal "$(nnodes t1)" 0
}

@test "the command's exit status is passed through and LEASERUN_URL is given" {
	run --separate-stderr "$LEASERUN" t2 sh -c 'echo "$LEASERUN_NAME $LEASERUN_URL"; exit 7'
	assert_failure 7
	assert_output "t2 zk://$ZK_EP"
	[ -z "$stderr" ]
}

@test "the command gets no descriptor of the store" {
	# Only what the test itself passed down; no socket, epoll or timer.
	# (No pipeline: the shell opens and closes its pipes while ls reads
	# the list, and a descriptor gone by then is an error line.)
	run "$LEASERUN" t3 sh -c 'ls -l /proc/$$/fd/'
	assert_success
	assert_output --partial " 0 -> "
	refute_output --partial "socket:"
	refute_output --partial "anon_inode:"
}

@test "-n gives up at once when the lease is held, and leaves no node behind" {
	hold t4
	t0=$(now_ms)
	run "$LEASERUN" -n t4 true
	assert_failure 1
	[ $(($(now_ms) - t0)) -lt 1500 ]
	run "$LEASERUN" -n -E 3 t4 true
	assert_failure 3
	assert_equal "$(nnodes t4)" 1
	release t4
	assert_holder_rc 0
	assert_equal "$(nnodes t4)" 0
}

@test "-w gives up when the wait runs out, and leaves no node behind" {
	hold t5
	t0=$(now_ms)
	run "$LEASERUN" -w 700ms t5 true
	assert_failure 1
	el=$(($(now_ms) - t0))
	[ "$el" -ge 650 ] && [ "$el" -lt 2500 ]
	assert_equal "$(nnodes t5)" 1
	release t5
	assert_holder_rc 0
}

@test "a waiter gets the lease as soon as the holder is done, not after the TTL" {
	hold t6 -t 20s
	f1=$(cat "$BATS_TEST_TMPDIR/t6.fence")
	(
		rc=0
		"$LEASERUN" -v -t 20s -w 30s t6 sh -c 'date +%s%N > "$0/got"; echo $LEASERUN_FENCE > "$0/f2"' "$BATS_TEST_TMPDIR" \
			2>"$BATS_TEST_TMPDIR/w.err" || rc=$?
		echo "$rc" >"$BATS_TEST_TMPDIR/wrc"
	) 3>&- &
	BG_PIDS="$BG_PIDS $!"
	wait_until 10 grep -q waiting "$BATS_TEST_TMPDIR/w.err"
	t0=$(date +%s%N)
	release t6
	wait_file "$BATS_TEST_TMPDIR/wrc"
	assert_equal "$(cat "$BATS_TEST_TMPDIR/wrc")" 0
	lat=$((($(cat "$BATS_TEST_TMPDIR/got") - t0) / 1000000))
	echo "hand-over ${lat}ms"
	[ "$lat" -lt 1500 ]
	[ "$(cat "$BATS_TEST_TMPDIR/f2")" -gt "$f1" ]
	assert_holder_rc 0
}

@test "a waiter whose predecessor gives up waits on the one before it" {
	hold t23 -t 20s
	"$LEASERUN" -v -w 3s t23 true 2>"$BATS_TEST_TMPDIR/w1.err" 3>&- &
	w1=$!
	BG_PIDS="$BG_PIDS $w1"
	wait_until 5 grep -q waiting "$BATS_TEST_TMPDIR/w1.err"
	(
		rc=0
		"$LEASERUN" -v -t 20s -w 30s t23 sh -c 'date +%s%N > "$0/got"' "$BATS_TEST_TMPDIR" \
			2>"$BATS_TEST_TMPDIR/w2.err" || rc=$?
		echo "$rc" >"$BATS_TEST_TMPDIR/wrc"
	) 3>&- &
	BG_PIDS="$BG_PIDS $!"
	wait_until 5 grep -q waiting "$BATS_TEST_TMPDIR/w2.err"
	# The first waiter gives up; the second now watches the holder.
	rc=0
	wait "$w1" || rc=$?
	assert_equal "$rc" 1
	assert_equal "$(nnodes t23)" 2
	t0=$(date +%s%N)
	release t23
	wait_file "$BATS_TEST_TMPDIR/wrc"
	assert_equal "$(cat "$BATS_TEST_TMPDIR/wrc")" 0
	lat=$((($(cat "$BATS_TEST_TMPDIR/got") - t0) / 1000000))
	echo "hand-over ${lat}ms"
	[ "$lat" -lt 1500 ]
	assert_holder_rc 0
}

@test "a signal to leaserun goes to the command, and the lease is given back" {
	hold t24
	kill -TERM "$HOLDER"
	assert_holder_rc 143
	run "$LEASERUN" -n t24 true
	assert_success
}

@test "a waiter stopped by a signal leaves no node behind" {
	hold t25
	"$LEASERUN" -v -w 30s t25 true 2>"$BATS_TEST_TMPDIR/w.err" 3>&- &
	w=$!
	BG_PIDS="$BG_PIDS $w"
	wait_until 10 grep -q waiting "$BATS_TEST_TMPDIR/w.err"
	assert_equal "$(nnodes t25)" 2
	kill -TERM "$w"
	rc=0
	wait "$w" || rc=$?
	assert_equal "$rc" 143
	assert_equal "$(nnodes t25)" 1
	release t25
	assert_holder_rc 0
}

@test "--status shows the holder, and exits 1 when the lease is free" {
	hold t7
	run "$LEASERUN" --status t7
	assert_success
	assert_output --partial "held"
	assert_output --partial "$(hostname) pid $HOLDER"
	assert_output --partial "fence:   $(cat "$BATS_TEST_TMPDIR/t7.fence")"
	release t7
	assert_holder_rc 0
	run "$LEASERUN" --status t7
	assert_failure 1
	assert_output --partial "free"
	run "$LEASERUN" --status never-used
	assert_failure 1
}

@test "our node deleted by another client stops the command at once with 124" {
	hold t8 -t 30s
	node=$(nodes t8)
	run zk_cli "$ZK_EP" "delete /leaserun/t8/$node"
	t0=$(now_ms)
	wait_gone "$HOLDER" 30
	wait_gone "$CHILD" 10
	[ $(($(now_ms) - t0)) -lt 2000 ]
	assert_holder_rc 124
	grep -q "was deleted" "$BATS_TEST_TMPDIR/t8.err"
}

# Between the grant and the command's start, leaserun held still there
# (lost_before_start, helpers.bash); a TTL that outlasts the Java clients
# by far, so that the grant is not too old to use when it goes on.
@test "our node deleted between the grant and the command's start: the command never runs on it, and runs once on a new grant within -w" {
	lost_before_start "zk://$ZK_EP" t27 'delete_node t27' -t 30s -w 10
	assert_lost_before_start_retried
	grep -q "our node /leaserun/t27/lock-.* was deleted" "$BATS_TEST_TMPDIR/err"
	assert_equal "$(nnodes t27)" 0
}

@test "our node deleted between the grant and the command's start, with -n: 124, and the command never ran" {
	lost_before_start "zk://$ZK_EP" t28 'delete_node t28' -t 30s -n
	assert_lost_before_start_ended
	assert_equal "$(nnodes t28)" 0
}

@test "our session ended by the server between the grant and the command's start: the command never runs on it, and runs once on a new grant within -w" {
	# A client takes the session over, so the server closes our
	# connection, with no event: only the server can say the session is
	# gone.
	lost_before_start "zk://$ZK_EP" t29 \
		'zk_end_session "$ZK_EP" /leaserun/t29 >/dev/null' -t 30s -w 10
	assert_lost_before_start_retried
	grep -q "the session expired" "$BATS_TEST_TMPDIR/err"
	assert_equal "$(nnodes t29)" 0
}

@test "--break removes the holder: it is stopped at once with 124 and a waiter takes over" {
	hold t9 -t 30s
	(
		rc=0
		"$LEASERUN" -v -w 30s t9 true 2>"$BATS_TEST_TMPDIR/w.err" || rc=$?
		echo "$rc" >"$BATS_TEST_TMPDIR/wrc"
	) 3>&- &
	BG_PIDS="$BG_PIDS $!"
	wait_until 10 grep -q waiting "$BATS_TEST_TMPDIR/w.err"
	t0=$(now_ms)
	run "$LEASERUN" --break t9
	assert_success
	wait_gone "$HOLDER" 20
	wait_file "$BATS_TEST_TMPDIR/wrc"
	[ $(($(now_ms) - t0)) -lt 2000 ]
	assert_holder_rc 124
	assert_equal "$(cat "$BATS_TEST_TMPDIR/wrc")" 0
	run "$LEASERUN" --break t9
	assert_success
}

@test "kill -9 of leaserun: the command dies with it, the lease is free after the session timeout" {
	hold t10 -t 4s
	kill -9 "$HOLDER"
	t0=$(now_ms)
	wait_gone "$CHILD" 20
	run "$LEASERUN" --status t10
	assert_success
	run "$LEASERUN" -w 10s t10 true
	assert_success
	el=$(($(now_ms) - t0))
	echo "free after ${el}ms"
	# The session outlives us by the TTL less the time since the last
	# renewal (R = TTL/3), to a tick.
	[ "$el" -ge 2500 ] && [ "$el" -lt 6500 ]
}

@test "leaserun stopped for less than the TTL keeps the lease" {
	hold t11 -t 3s
	kill -STOP "$HOLDER"
	sleep 0.5 # shorter than the TTL
	kill -CONT "$HOLDER"
	sleep 1.5 # past a renewal (R = 1s)
	run "$LEASERUN" -n t11 true
	assert_failure 1
	release t11
	assert_holder_rc 0
}

@test "leaserun stopped past the TTL: a waiter takes over, and the command is stopped with 124" {
	hold t12 -t 1500ms
	(
		rc=0
		"$LEASERUN" -v -w 20s t12 true 2>"$BATS_TEST_TMPDIR/w.err" || rc=$?
		echo "$rc" >"$BATS_TEST_TMPDIR/wrc"
	) 3>&- &
	BG_PIDS="$BG_PIDS $!"
	wait_until 10 grep -q waiting "$BATS_TEST_TMPDIR/w.err"
	kill -STOP "$HOLDER"
	wait_file "$BATS_TEST_TMPDIR/wrc"
	assert_equal "$(cat "$BATS_TEST_TMPDIR/wrc")" 0
	kill -CONT "$HOLDER"
	wait_gone "$HOLDER" 30
	wait_gone "$CHILD" 10
	assert_holder_rc 124
}

@test "the server stopped for less than the TTL: the command goes on" {
	hold t13 -t 4s
	zpid=$(cat "$ZK_DIR/zk1/pid")
	kill -STOP "$zpid"
	sleep 1 # shorter than the TTL
	kill -CONT "$zpid"
	sleep 2 # past a renewal after the pause
	alive "$CHILD"
	release t13
	assert_holder_rc 0
}

@test "the server stopped past the TTL: the command is stopped with 124" {
	hold t14 -t 1500ms
	zpid=$(cat "$ZK_DIR/zk1/pid")
	kill -STOP "$zpid"
	t0=$(now_ms)
	wait_gone "$HOLDER" 50
	el=$(($(now_ms) - t0))
	kill -CONT "$zpid"
	wait_gone "$CHILD" 10
	assert_holder_rc 124
	echo "stopped after ${el}ms"
	[ "$el" -lt 3000 ]
	zk_wait_ready "$ZK_DIR" 1
}

@test "a waiter rides out a server pause longer than its own TTL" {
	hold t26 -t 10s
	(
		rc=0
		"$LEASERUN" -v -t 1500ms -w 30s t26 true 2>"$BATS_TEST_TMPDIR/w.err" || rc=$?
		echo "$rc" >"$BATS_TEST_TMPDIR/wrc"
	) 3>&- &
	BG_PIDS="$BG_PIDS $!"
	wait_until 10 grep -q waiting "$BATS_TEST_TMPDIR/w.err"
	zpid=$(cat "$ZK_DIR/zk1/pid")
	kill -STOP "$zpid"
	sleep 3 # past the waiter's TTL, within the holder's
	kill -CONT "$zpid"
	zk_wait_ready "$ZK_DIR" 1
	[ ! -e "$BATS_TEST_TMPDIR/wrc" ]
	release t26
	assert_holder_rc 0
	wait_file "$BATS_TEST_TMPDIR/wrc"
	grep -v -e waiting -e acquired -e started -e exited -e released "$BATS_TEST_TMPDIR/w.err" || true
	assert_equal "$(cat "$BATS_TEST_TMPDIR/wrc")" 0
}

@test "a server restart that outlasts the TTL: the command is stopped with 124, the session expires" {
	hold t15 -t 1500ms
	zk_kill "$ZK_DIR" 1
	wait_gone "$HOLDER" 50
	assert_holder_rc 124
	zk_start "$ZK_DIR" 1
	zk_wait_ready "$ZK_DIR" 1
	# The old session lives on in the server's log until it expires.
	run "$LEASERUN" -w 10s t15 sh -c 'echo $LEASERUN_FENCE'
	assert_success
	[ "$output" -gt "$(cat "$BATS_TEST_TMPDIR/t15.fence")" ]
}

@test "a restart within the TTL keeps the lease (the session survives)" {
	# A TTL that outlasts a slow machine's Java start by far.
	hold t16 -t 20s -v
	zk_kill "$ZK_DIR" 1
	zk_start "$ZK_DIR" 1
	zk_wait_ready "$ZK_DIR" 1
	# The disconnect makes it renew at once (the first renewal was due
	# only after 6.7s); that renewal rides out the restart.
	wait_until 15 grep -q "renewed" "$BATS_TEST_TMPDIR/t16.err"
	cat "$BATS_TEST_TMPDIR/t16.err"
	alive "$CHILD"
	run "$LEASERUN" -n t16 true
	assert_failure 1
	release t16
	assert_holder_rc 0
}

@test "a server that takes the connection but never answers it is left in time" {
	# What ZooKeeper 3.8 does to a client that connects while it starts:
	# it takes the connection, and neither answers nor closes it.  The
	# client alone would wait 2/3 of the session timeout (6.7s here).
	# A proxy stands in for the restart, so Java's start time is not in
	# what we measure.
	command -v socat >/dev/null || { echo "socat is not installed" >&2; return 1; }
	local px t0 t1
	px=$("$LR_BUILDDIR/tests/freeport")
	proxy_up() {
		setsid socat "TCP-LISTEN:$px,bind=127.0.0.1,reuseaddr,fork" \
			"TCP:$ZK_EP" 2>/dev/null &
		PROXY=$!
		BG_PIDS="$BG_PIDS $PROXY"
		wait_until 10 listening "$px"
	}
	listening() { [ -n "$(ss -Htln "( sport = :$1 )")" ]; }
	proxy_up
	LEASERUN_URL="zk://127.0.0.1:$px" hold t16b -t 10s -v
	kill -9 -- "-$PROXY" # the proxy and the connection through it
	{ wait "$PROXY"; } 2>/dev/null || true
	socat -d -d -u "TCP-LISTEN:$px,bind=127.0.0.1,reuseaddr" OPEN:/dev/null \
		2>"$BATS_TEST_TMPDIR/socat.log" &
	BG_PIDS="$BG_PIDS $!"
	wait_until 10 grep -q "accepting connection" "$BATS_TEST_TMPDIR/socat.log"
	t0=$(now_ms)
	# socat closed its listening socket on the accept: the port is free.
	proxy_up
	wait_until 10 grep -q "renewed" "$BATS_TEST_TMPDIR/t16b.err"
	t1=$(now_ms)
	cat "$BATS_TEST_TMPDIR/t16b.err"
	echo "renewed $((t1 - t0))ms after the silent server took the connection"
	# A handshake gets a tenth of the TTL (1s), then the next try.
	[ $((t1 - t0)) -lt 4000 ]
	alive "$CHILD"
	release t16b
	assert_holder_rc 0
}

@test "wrong credentials fail with 125 and one line that does not show the password" {
	export LEASERUN_URL="zk://alice:right-pw@$ZK_EP"
	hold t17
	export LEASERUN_URL="zk://alice:Wr0ngPassw0rd@$ZK_EP"
	run --separate-stderr "$LEASERUN" -n t17 true
	assert_failure 125
	assert_equal "${#stderr_lines[@]}" 1
	[[ $stderr == *NOAUTH* ]]
	[[ $stderr != *Wr0ngPassw0rd* ]]
	export LEASERUN_URL="zk://$ZK_EP"
	run --separate-stderr "$LEASERUN" -w 1s t17 true
	assert_failure 125
	assert_equal "${#stderr_lines[@]}" 1
	release t17
	assert_holder_rc 0
}

@test "a password given with --url is not in ps while leaserun holds the lease" {
	ps_hides_password t17b right-pw -t 30s --url="zk://alice:right-pw@$ZK_EP"
}

@test "other users cannot delete our node; the holder goes on" {
	export LEASERUN_URL="zk://alice:right-pw@$ZK_EP"
	hold t18
	node=$(nodes t18)
	run zk_cli "$ZK_EP" "delete /leaserun/t18/$node"
	assert_output --partial "Insufficient permission"
	run zk_cli "$ZK_EP" "addauth digest mallory:pw" "delete /leaserun/t18/$node" "getAcl /leaserun/t18/$node"
	assert_output --partial "Insufficient permission"
	assert_output --partial "'world,'anyone"
	run --separate-stderr env LEASERUN_URL="zk://mallory:pw@$ZK_EP" "$LEASERUN" --break t18
	assert_failure 125
	alive "$CHILD"
	run env LEASERUN_URL="zk://$ZK_EP" "$LEASERUN" --status t18
	assert_success
	assert_output --partial "pid $HOLDER"
	release t18
	assert_holder_rc 0
}

@test "a lease directory that lets anyone delete is reported when used with credentials" {
	run "$LEASERUN" t19 true
	assert_success
	run --separate-stderr env LEASERUN_URL="zk://alice:right-pw@$ZK_EP" "$LEASERUN" t19 true
	assert_success
	[[ $stderr == *"lets anyone delete"* ]]
}

@test "50 contenders: no overlap, and fences strictly increase" {
	log=$BATS_TEST_TMPDIR/log
	pids=()
	for i in $(seq 50); do
		"$LEASERUN" -t 5s -w 120s t20 sh -c "$(interval_cmd "$log" 0.01)" 3>&- &
		pids+=($!)
	done
	BG_PIDS="$BG_PIDS ${pids[*]}"
	fails=0
	for p in "${pids[@]}"; do
		wait "$p" || fails=$((fails + 1))
	done
	assert_equal "$fails" 0
	assert_equal "$(wc -l <"$log")" 50
	run check_intervals "$log"
	assert_success
	assert_equal "$(nnodes t20)" 0
}

@test "waiters get the lease in the order they arrived" {
	hold t21
	log=$BATS_TEST_TMPDIR/order
	pids=()
	for i in $(seq 12); do
		"$LEASERUN" -v -w 60s t21 sh -c "echo $i >> '$log'" \
			2>"$BATS_TEST_TMPDIR/w$i.err" 3>&- &
		pids+=($!)
		wait_until 5 grep -q waiting "$BATS_TEST_TMPDIR/w$i.err"
	done
	BG_PIDS="$BG_PIDS ${pids[*]}"
	release t21
	for p in "${pids[@]}"; do
		wait "$p"
	done
	assert_equal "$(tr '\n' ' ' <"$log")" "1 2 3 4 5 6 7 8 9 10 11 12 "
	assert_holder_rc 0
}

@test "a chroot and ?root= choose where the nodes live" {
	export LEASERUN_URL="zk://$ZK_EP/app/env?root=/locks"
	hold t22
	assert_equal "$(nnodes t22 /app/env/locks/t22)" 1
	run "$LEASERUN" --status t22
	assert_success
	assert_output --partial "pid $HOLDER"
	release t22
	assert_holder_rc 0
	assert_equal "$(nnodes t22 /app/env/locks/t22)" 0
}

@test "?root= with trailing slashes, and root=/ (the leases right under the chroot)" {
	export LEASERUN_URL="zk://$ZK_EP/app2?root=/locks//"
	hold t22b
	assert_equal "$(nnodes t22b /app2/locks/t22b)" 1
	release t22b
	assert_holder_rc 0
	export LEASERUN_URL="zk://$ZK_EP/app3?root=/"
	hold t22c
	assert_equal "$(nnodes t22c /app3/t22c)" 1
	release t22c
	assert_holder_rc 0
}

@test "nodes in a lease directory that leaserun did not make are neither holders nor waiters" {
	# slot2- without its number, a lock- name without a sequence number,
	# sem without its limit: what a person could leave there by hand.
	zk_cli "$ZK_EP" "create /leaserun" "create /leaserun/handmade" \
		"create /leaserun/handmade/slot2-" "create /leaserun/handmade/lock-not-a-sequence" \
		"create /leaserun/handmade/sem-x" >/dev/null
	run zk_cli "$ZK_EP" "ls /leaserun/handmade"
	assert_output --partial "[lock-not-a-sequence, sem-x, slot2-]"
	run "$LEASERUN" --status handmade
	assert_failure 1
	assert_output --partial "free"
	run --separate-stderr "$LEASERUN" -n handmade sh -c 'echo ran'
	assert_success
	assert_output "ran"
	# (zk_cli's status is its grep's: nothing printed is 1.)
	zk_cli "$ZK_EP" "delete /leaserun/handmade/slot2-" \
		"delete /leaserun/handmade/lock-not-a-sequence" \
		"delete /leaserun/handmade/sem-x" >/dev/null || true
}

@test "--status of a holder's node that we may not read: 125 and one line naming NOAUTH, not a free lease" {
	# A lock node another ZooKeeper user made, readable by that user
	# alone.
	zk_cli "$ZK_EP" "addauth digest bob:pw" "create /leaserun" "create /leaserun/noread" \
		"create /leaserun/noread/lock-bob-0000000000 h auth::cdrwa" >/dev/null || true
	run --separate-stderr "$LEASERUN" --status noread
	assert_failure 125
	assert_equal "${#stderr_lines[@]}" 1
	assert_equal "$stderr" "leaserun: noread: cannot inspect noread on zk://$ZK_EP: ZooKeeper at $ZK_EP: get /leaserun/noread/lock-bob-0000000000: not allowed (NOAUTH: wrong credentials, or the node belongs to another ZooKeeper user)"
	zk_cli "$ZK_EP" "addauth digest bob:pw" "delete /leaserun/noread/lock-bob-0000000000" >/dev/null || true
}

@test "bad zk URLs are refused with 125 and a reason" {
	run "$LEASERUN" -U "zk://$ZK_EP?bogus=1" u1 true
	assert_failure 125
	assert_output --partial "unknown zk URL option 'bogus'"
	run "$LEASERUN" -U "zk://127.0.0.1:99999" u1 true
	assert_failure 125
	assert_output --partial "bad port"
	run "$LEASERUN" -U "zk:///chroot" u1 true
	assert_failure 125
	assert_output --partial "no host"
	run "$LEASERUN" -U "zk://$ZK_EP?root=relative" u1 true
	assert_failure 125
	assert_output --partial "bad root"
	run "$LEASERUN" -U "zk://$ZK_EP?root=/zookeeper" u1 true
	assert_failure 125
	run "$LEASERUN" -U "zk://alice@$ZK_EP" u1 true
	assert_failure 125
	assert_output --partial "need both user and password"
}

@test "a chroot or root with an empty, . or .. component is refused in one line, before any connection" {
	# Port 1: nothing listens, so only a path that passed gets as far
	# as connecting.
	for p in /a/../b /a/./b /a//b /a/.. /. /a/; do
		run --separate-stderr "$LEASERUN" -U "zk://127.0.0.1:1$p" -n u1 true
		assert_equal "$status" 125
		assert_equal "$stderr" "leaserun: u1: cannot open zk://127.0.0.1:1$p: zk URL: bad chroot path '$p'"
	done
	run --separate-stderr "$LEASERUN" -U "zk://127.0.0.1:1/?root=/a/../b" -n u1 true
	assert_equal "$status" 125
	assert_regex "$stderr" "bad root"
	# Names that only begin with dots are names.
	run --separate-stderr "$LEASERUN" -U "zk://127.0.0.1:1/a/.x/..y/...?root=/.l" -n u1 true
	assert_equal "$status" 125
	assert_equal "$stderr" "leaserun: u1: cannot open zk://127.0.0.1:1/a/.x/..y/...?root=/.l: cannot connect to ZooKeeper at 127.0.0.1:1: Connection refused"
}

@test "an unreachable server: -n fails with 125 at once and one line naming it" {
	port=$("$LR_BUILDDIR/tests/freeport")
	t0=$(now_ms)
	run --separate-stderr "$LEASERUN" -n -U "zk://127.0.0.1:$port" u2 true
	assert_failure 125
	[ $(($(now_ms) - t0)) -lt 3000 ]
	assert_equal "${#stderr_lines[@]}" 1
	[[ $stderr == *"cannot connect to ZooKeeper at 127.0.0.1:$port: Connection refused"* ]]
}

@test "a server that never answers, or hangs up at once: -n fails with 125 and says so" {
	command -v socat >/dev/null || { echo "socat is not installed" >&2; return 1; }
	# against SOCAT_OPTS EXPECTED: a socat server on a free port that
	# reads and writes nothing back, then the one line leaserun says.
	against() {
		port=$("$LR_BUILDDIR/tests/freeport")
		socat $1 "TCP-LISTEN:$port,bind=127.0.0.1,reuseaddr,fork" OPEN:/dev/null &
		BG_PIDS="$BG_PIDS $!"
		wait_until 10 eval '[ -n "$(ss -Htln "( sport = :$port )")" ]'
		run --separate-stderr "$LEASERUN" -n -U "zk://127.0.0.1:$port" -t 1s u2 true
		assert_failure 125
		assert_equal "${#stderr_lines[@]}" 1
		[[ $stderr == *"cannot connect to ZooKeeper at 127.0.0.1:$port: $2"* ]]
	}
	against -u "Connection timed out"
	# Without -u, socat closes its side as soon as /dev/null is read out.
	against "" "the server closed the connection"
}

@test "faults: a waiter rides out a crash of the server and its start 2s later, keeps its place, and then runs" {
	hold f1 -t 30s
	held=$(nodes f1)
	"$LEASERUN" -v -t 20s -w 60 f1 sh -c 'echo ran >"$0/waiter"' "$BATS_TEST_TMPDIR" \
		2>"$BATS_TEST_TMPDIR/waiter.err" 3>&- &
	waiter=$!
	BG_PIDS="$BG_PIDS $waiter"
	wait_until 10 grep -q waiting "$BATS_TEST_TMPDIR/waiter.err"
	# The waiter's node: names sort by token, not by sequence.
	place=$(nodes f1 | grep -vx "$held")
	[ -n "$place" ]
	zk_kill "$ZK_DIR" 1
	sleep 2
	zk_start "$ZK_DIR" 1
	zk_wait_ready "$ZK_DIR" 1
	sleep 1
	alive "$waiter"
	# Its session outlived the restart: the same node, the same place.
	nodes f1 | grep -qx "$place"
	release f1
	wait_holder
	wait_rc "$waiter"
	sed 's/^/# /' "$BATS_TEST_TMPDIR/waiter.err" >&3
	assert_equal "$HRC" 0
	assert_equal "$RC" 0
	[ -e "$BATS_TEST_TMPDIR/waiter" ]
}

@test "faults: a run started while the server is down gets the lease once it is up within the wait" {
	zk_kill "$ZK_DIR" 1
	"$LEASERUN" -v -w 60 f2 sh -c 'echo ran >"$0/ran"' "$BATS_TEST_TMPDIR" \
		2>"$BATS_TEST_TMPDIR/err" 3>&- &
	pid=$!
	BG_PIDS="$BG_PIDS $pid"
	sleep 2.5
	alive "$pid"
	zk_start "$ZK_DIR" 1
	zk_wait_ready "$ZK_DIR" 1
	wait_rc "$pid"
	sed 's/^/# /' "$BATS_TEST_TMPDIR/err" >&3
	assert_equal "$RC" 0
	[ -e "$BATS_TEST_TMPDIR/ran" ]
	# Said once, not at every try.
	assert_equal "$(grep -c "trying again" "$BATS_TEST_TMPDIR/err")" 1
	grep -q "Connection refused" "$BATS_TEST_TMPDIR/err"
}

@test "faults: a run started while the server is paused (SIGSTOP) runs once it resumes" {
	zpid=$(cat "$ZK_DIR/zk1/pid")
	kill -STOP "$zpid"
	# An open gets 5s: the pause outlasts it.
	"$LEASERUN" -v -t 2s -w 40 f3 sh -c 'echo ran >"$0/ran"' \
		"$BATS_TEST_TMPDIR" 2>"$BATS_TEST_TMPDIR/err" 3>&- &
	pid=$!
	BG_PIDS="$BG_PIDS $pid"
	sleep 6.5
	alive "$pid"
	kill -CONT "$zpid"
	wait_rc "$pid"
	sed 's/^/# /' "$BATS_TEST_TMPDIR/err" >&3
	assert_equal "$RC" 0
	[ -e "$BATS_TEST_TMPDIR/ran" ]
	grep -q "trying again until the wait runs out" "$BATS_TEST_TMPDIR/err"
}

@test "faults: the server down for good: 125 with the last error once the wait runs out, not later; -n at once" {
	zk_kill "$ZK_DIR" 1
	down_for_good f4 "cannot connect to ZooKeeper at $ZK_EP: Connection refused"
}

@test "faults: a wrong password fails at once, even with a long wait" {
	LEASERUN_URL="zk://alice:right-pw@$ZK_EP" hold f5
	t0=$(now_ms)
	LEASERUN_URL="zk://alice:Wr0ngPassw0rd@$ZK_EP" run --separate-stderr \
		"$LEASERUN" -w 60 f5 true
	t1=$(now_ms)
	assert_equal "$status" 125
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "NOAUTH"
	refute_regex "$stderr" "Wr0ngPassw0rd"
	(( t1 - t0 < 3000 ))
	release f5
	assert_holder_rc 0
}

@test "a password in clear to a host that is not loopback is warned of, once" {
	# Nothing answers at TEST-NET-1: -n gives up by its 2s connect.
	LEASERUN_URL="zk://alice:right-pw@192.0.2.1:2181" run --separate-stderr \
		"$LEASERUN" -n f6 true
	assert_equal "$status" 125
	assert_equal "$(grep -c "in clear" <<<"$stderr")" 1
	refute_regex "$stderr" "right-pw"
	LEASERUN_URL="zk://alice:right-pw@127.0.0.1:1" run --separate-stderr \
		"$LEASERUN" -n f6 true
	refute_regex "$stderr" "in clear"
	LEASERUN_URL="zk://192.0.2.1:2181" run --separate-stderr \
		"$LEASERUN" -n f6 true
	refute_regex "$stderr" "in clear"
}

@test "one server of a list down: the next one is used" {
	port=$("$LR_BUILDDIR/tests/freeport")
	run --separate-stderr "$LEASERUN" -U "zk://127.0.0.1:$port,$ZK_EP" u3 true
	assert_success
	[ -z "$stderr" ]
}

@test "a TTL beyond the server's maximum session timeout is cut to what it grants, with a warning" {
	run --separate-stderr "$LEASERUN" -t 40s u4 true
	assert_success
	[[ $stderr == *"granted a session timeout of 30000ms instead of the TTL 40000ms"* ]]
}

@test "the client library prints nothing of its own" {
	run --separate-stderr "$LEASERUN" u5 sh -c 'echo ok'
	assert_success
	assert_output ok
	assert_equal "$stderr" ""
	zpid=$(cat "$ZK_DIR/zk1/pid")
	hold u5 -t 2s
	kill -STOP "$zpid"
	sleep 1 # long enough for the client to time out and reconnect
	kill -CONT "$zpid"
	release u5
	assert_holder_rc 0
	run grep -v '^leaserun: ' "$BATS_TEST_TMPDIR/u5.err"
	assert_output ""
}

@test "operations: --status --json, a waiter's events, --check and metrics on ZooKeeper" {
	# The holder's session lives as long as it does: no TTL to show.
	ops_check t-ops none fence
}

@test "operations: our node deleted: a lost event with its reason, counted in the metrics" {
	hold t-ops2 -t 30s -v --log-format json --metrics-file "$BATS_TEST_TMPDIR/m.prom"
	node=$(nodes t-ops2)
	run zk_cli "$ZK_EP" "delete /leaserun/t-ops2/$node"
	assert_holder_rc 124
	ops_loss_seen t-ops2 "$BATS_TEST_TMPDIR/t-ops2.err" "$BATS_TEST_TMPDIR/m.prom"
}

# cut_proxy PATTERN [drop|delay=MS] [skip=N]: a proxy to the server that
# lets the first request holding PATTERN run on it (with drop: loses it
# before it reaches the server), loses its reply and closes the
# connection (tests/cutproxy); with delay=MS it loses nothing and closes
# nothing, but that request and all that follows it on its connection
# reach the server MS late; with skip=N, the first N requests holding
# PATTERN pass and the fault is at the next.  Its URL in CUT_URL,
# $BATS_TEST_TMPDIR/cut made when it cut (or held back).
cut_proxy() {
	local d=$BATS_TEST_TMPDIR env=() a
	rm -f "$d/cut" "$d/cport"
	for a in "${@:2}"; do
		case $a in
		drop) env+=(CUTPROXY_DROP=1) ;;
		delay=*) env+=(CUTPROXY_DELAY=${a#delay=}) ;;
		skip=*) env+=(CUTPROXY_SKIP=${a#skip=}) ;;
		esac
	done
	env "${env[@]}" "$LR_BUILDDIR/tests/cutproxy" "${ZK_EP##*:}" "$1" "$d/cut" >"$d/cport" &
	BG_PIDS="${BG_PIDS:-} $!"
	wait_until 5 test -s "$d/cport"
	CUT_URL="zk://127.0.0.1:$(cat "$d/cport")"
}

# The czxid of node $1, in decimal.
czxid() { echo $(($(zk_cli "$ZK_EP" "stat $1" | sed -n 's/^cZxid = //p'))); }

@test "faults: a create whose reply is lost: the node it made is found by its token and held, its czxid the fence; one it did not make is made again" {
	# lc's directory is there: the create makes our node, and the
	# listing after the reconnect shows it, with our token.
	run "$LEASERUN" lc true
	assert_success
	cut_proxy "/leaserun/lc/lock-"
	hold lc -t 10s -w 20s --url="$CUT_URL"
	[ -e "$BATS_TEST_TMPDIR/cut" ]
	assert_equal "$(nnodes lc)" 1
	node=$(nodes lc)
	# That very node (the first run's was 0), not one made after it.
	[[ $node == *-0000000001 ]]
	assert_equal "$(cat "$BATS_TEST_TMPDIR/lc.fence")" "$(czxid "/leaserun/lc/$node")"
	release lc
	assert_holder_rc 0
	assert_equal "$(nnodes lc)" 0
	# lcb's is not: that create fails on the server, and the listing
	# after the reconnect has no node of ours; the directory and the
	# node are made, once.
	cut_proxy "/leaserun/lcb/lock-"
	hold lcb -t 10s -w 20s --url="$CUT_URL"
	[ -e "$BATS_TEST_TMPDIR/cut" ]
	assert_equal "$(nnodes lcb)" 1
	node=$(nodes lcb)
	[[ $node == *-0000000000 ]]
	assert_equal "$(cat "$BATS_TEST_TMPDIR/lcb.fence")" "$(czxid "/leaserun/lcb/$node")"
	release lcb
	assert_holder_rc 0
	assert_equal "$(nnodes lcb)" 0
}

@test "faults: a create whose reply is lost, and the look at the node then found by its token held up on the way past -w: 1 (gave up waiting), not an error" {
	d=$BATS_TEST_TMPDIR
	# lh's directory is there, with a node of sequence 0 made and gone.
	run "$LEASERUN" lh true
	assert_success
	# Two proxies in a row: the first cuts the create (it runs, its
	# reply is lost); the second holds back the first request naming
	# the node it made (of sequence 1), the exists that learns its czxid.
	CUTPROXY_DELAY=3000 "$LR_BUILDDIR/tests/cutproxy" "${ZK_EP##*:}" "-0000000001" "$d/held" >"$d/hport" &
	BG_PIDS="$BG_PIDS $!"
	wait_until 5 test -s "$d/hport"
	"$LR_BUILDDIR/tests/cutproxy" "$(cat "$d/hport")" "/leaserun/lh/lock-" "$d/cut" >"$d/cport" &
	BG_PIDS="$BG_PIDS $!"
	wait_until 5 test -s "$d/cport"
	run --separate-stderr "$LEASERUN" -t 20s -w 1500ms --url="zk://127.0.0.1:$(cat "$d/cport")" lh true
	[ -e "$d/cut" ]
	[ -e "$d/held" ]
	assert_failure 1
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "^leaserun: lh: .*gave up waiting$"
}

@test "faults: a semaphore's slot create whose reply is lost: the slot node made is found and held, no other slot taken" {
	cut_proxy "/leaserun/f6/slot2-"
	d=$BATS_TEST_TMPDIR
	mkfifo "$d/gate"
	"$LEASERUN" -t 10s -w 20s -l 2 --url="$CUT_URL" f6 sh -c \
		'echo "$LEASERUN_FENCE $LEASERUN_SLOT" > "$0/got"; exec cat "$0/gate"' "$d" \
		2>"$d/err" 3>&- &
	HOLDER=$!
	BG_PIDS="$BG_PIDS $HOLDER"
	wait_file "$d/got"
	[ -e "$d/cut" ]
	# The slot node alone: the queue node was deleted after the claim.
	run zk_cli "$ZK_EP" "ls /leaserun/f6"
	assert_line --partial "[slot2-0]"
	assert_equal "$(cat "$d/got")" "$(czxid /leaserun/f6/slot2-0) 0"
	echo go >"$d/gate"
	assert_holder_rc 0
	run zk_cli "$ZK_EP" "ls /leaserun/f6"
	assert_line --partial "[]"
}

@test "faults: a semaphore's slot create lost before it reaches the server: claimed again, granted once, slot 0" {
	cut_proxy "/leaserun/f9/slot2-" drop
	d=$BATS_TEST_TMPDIR
	run --separate-stderr "$LEASERUN" -v -t 10s -w 20s -l 2 --url="$CUT_URL" f9 sh -c \
		'echo "$LEASERUN_FENCE $LEASERUN_SLOT"; ls "$0"' "$d"
	[ -e "$d/cut" ]
	assert_success
	printf '%s\n' "$stderr"
	assert_equal "$(grep -c acquired <<<"$stderr")" 1
	[[ $stderr != *lost* ]]
	[[ ${lines[0]} == *" 0" ]]
	run zk_cli "$ZK_EP" "ls /leaserun/f9"
	assert_line --partial "[]"
}

@test "faults: a semaphore's queue node whose delete is lost is deleted at the next renewal: the next run takes the other slot while the first holds" {
	# The first request naming a node of sequence 0 is the delete of
	# the first run's queue node, after its claim: it never runs.
	cut_proxy "-0000000000" drop
	d=$BATS_TEST_TMPDIR
	mkfifo "$d/gate"
	"$LEASERUN" -t 3s -l 2 --url="$CUT_URL" f10 sh -c \
		'echo "$LEASERUN_SLOT" > "$0/a"; exec cat "$0/gate"' "$d" 2>"$d/a.err" 3>&- &
	HOLDER=$!
	BG_PIDS="$BG_PIDS $HOLDER"
	wait_file "$d/a"
	[ -e "$d/cut" ]
	assert_equal "$(cat "$d/a")" 0
	run --separate-stderr "$LEASERUN" -t 3s -l 2 -w 10s f10 sh -c 'echo "$LEASERUN_SLOT"'
	assert_success
	assert_output 1
	alive "$HOLDER"
	echo go >"$d/gate"
	assert_holder_rc 0
	run zk_cli "$ZK_EP" "ls /leaserun/f10"
	assert_line --partial "[]"
}

@test "faults: a waiter whose node is deleted unseen (the watch on it was lost with its connection) takes a new place when its turn comes" {
	hold f11 -t 20s
	# The holder's node is of sequence 0, the waiter's 1: the first
	# request naming it is the exists that puts the waiter's watch on
	# it, which is lost before it reaches the server.
	cut_proxy "-0000000001" drop
	d=$BATS_TEST_TMPDIR
	"$LEASERUN" -t 20s -w 30s --url="$CUT_URL" f11 sh -c 'echo ran > "$0/ran"' "$d" 2>"$d/w.err" 3>&- &
	w=$!
	BG_PIDS="$BG_PIDS $w"
	wait_until 10 test -e "$d/cut"
	wait_until 10 eval '[ "$(nnodes f11)" = 2 ]'
	mine=$(nodes f11 | grep -- -0000000001)
	zk_cli "$ZK_EP" "delete /leaserun/f11/$mine" || true
	assert_equal "$(nnodes f11)" 1
	sleep 0.5
	alive "$w"
	release f11
	assert_holder_rc 0
	wait_rc "$w"
	cat "$d/w.err"
	assert_equal "$RC" 0
	[ -e "$d/ran" ]
	assert_equal "$(nnodes f11)" 0
}

@test "faults: a waiter whose node is deleted while its watch on it is held up on the way takes a new place at once, not at the holder's release" {
	hold f13 -t 20s
	# The holder's node is of sequence 0, the waiter's 1: the first
	# request naming it is the exists that watches it, which reaches
	# the server 4s late; the node is deleted meanwhile, so the answer
	# says it is gone.
	cut_proxy "-0000000001" delay=4000
	d=$BATS_TEST_TMPDIR
	"$LEASERUN" -t 20s -w 30s --url="$CUT_URL" f13 sh -c 'echo ran > "$0/ran"' "$d" 2>"$d/w.err" 3>&- &
	w=$!
	BG_PIDS="$BG_PIDS $w"
	wait_until 10 test -e "$d/cut"
	mine=$(nodes f13 | grep -- -0000000001)
	zk_cli "$ZK_EP" "delete /leaserun/f13/$mine" || true
	# A new place while the holder still holds, not at its release.
	wait_until 10 eval 'nodes f13 | grep -q -- -0000000002'
	alive "$w"
	[ ! -e "$d/ran" ]
	release f13
	assert_holder_rc 0
	wait_rc "$w"
	cat "$d/w.err"
	assert_equal "$RC" 0
	[ -e "$d/ran" ]
	assert_equal "$(nnodes f13)" 0
}

@test "faults: a waiter whose watch request is held up on the way past its -w gives up with 1 (held), not an error" {
	hold f14 -t 20s
	cut_proxy "-0000000001" delay=3000
	run --separate-stderr "$LEASERUN" -t 20s -w 1500ms --url="$CUT_URL" f14 true
	[ -e "$BATS_TEST_TMPDIR/cut" ]
	assert_failure 1
	assert_equal "$stderr" "leaserun: f14: held by another; gave up waiting"
	release f14
	assert_holder_rc 0
}

@test "faults: a semaphore's first waiter whose watch on the taken slots is held up on the way past its -w gives up with 1 (held), not an error" {
	hold f16 -t 20s -l 2
	"$LEASERUN" -t 20s -l 2 f16 sleep 30 3>&- &
	BG_PIDS="$BG_PIDS $!"
	wait_until 10 eval 'zk_cli "$ZK_EP" "ls /leaserun/f16" | grep -q "slot2-0, slot2-1"'
	# The waiter's first request naming a slot node is the exists that
	# watches them.
	cut_proxy "/leaserun/f16/slot2-" delay=3000
	run --separate-stderr "$LEASERUN" -t 20s -l 2 -w 1500ms --url="$CUT_URL" f16 true
	[ -e "$BATS_TEST_TMPDIR/cut" ]
	assert_failure 1
	assert_equal "$stderr" "leaserun: f16: held by another; gave up waiting"
	release f16
	assert_holder_rc 0
}

@test "faults: a semaphore's slot create held up on the way past the run's -w: 1 (gave up waiting), not an error, and no slot taken" {
	cut_proxy "/leaserun/f17/slot2-" delay=3000
	run --separate-stderr "$LEASERUN" -t 20s -l 2 -w 1500ms --url="$CUT_URL" f17 true
	[ -e "$BATS_TEST_TMPDIR/cut" ]
	assert_failure 1
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "^leaserun: f17: .*gave up waiting$"
	# (Its queue node lives on until the session times out: the proxy
	# held back the session's close too, and dropped it with the
	# connection.)
	run zk_cli "$ZK_EP" "ls /leaserun/f17"
	refute_output --partial "slot2-"
}

@test "faults: a waiter stopped past its TTL three times gets three new sessions and keeps one wait set: no descriptor leaks" {
	hold f7 -t 20s
	held=$(nodes f7)
	d=$BATS_TEST_TMPDIR
	# (Without -v: -v opens a handle of its own to name the holder.)
	"$LEASERUN" -t 1s -w 60s f7 true 2>"$d/w.err" 3>&- &
	w=$!
	BG_PIDS="$BG_PIDS $w"
	wait_until 10 eval '[ "$(nnodes f7)" = 2 ]'
	fds0=$(ls /proc/$w/fd | wc -l)
	for i in 1 2 3; do
		place=$(nodes f7 | grep -vx "$held")
		kill -STOP "$w"
		# The server expires its session and deletes its node.
		wait_until 15 eval '! nodes f7 | grep -qx "$place"'
		kill -CONT "$w"
		# A new session, and a new node in the queue.
		wait_until 15 eval '[ "$(nnodes f7)" = 2 ]' || { cat "$d/w.err"; false; }
		alive "$w"
	done
	fds=$(ls /proc/$w/fd | wc -l)
	echo "descriptors: $fds0 at first, $fds after three new sessions"
	assert_equal "$fds" "$fds0"
	release f7
	assert_holder_rc 0
	wait_rc "$w"
	assert_equal "$RC" 0
}

@test "faults: a --break whose reply is lost: 125 and one line saying the connection was lost; the holder was stopped all the same" {
	hold f8 -t 20s
	cut_proxy "/leaserun/f8/lock-"
	run --separate-stderr "$LEASERUN" --break --url="$CUT_URL" f8
	[ -e "$BATS_TEST_TMPDIR/cut" ]
	assert_failure 125
	assert_equal "${#stderr_lines[@]}" 1
	assert_equal "$stderr" "leaserun: f8: cannot break f8: ZooKeeper at 127.0.0.1:${CUT_URL##*:}: break: not connected (lost the connection; no server answered in time)"
	assert_holder_rc 124
	assert_equal "$(nnodes f8)" 0
}

@test "faults: --status whose read of the holder's node loses its reply asks again: the holder is shown, not a free lease" {
	hold f12 -t 20s
	# The listing names the lease's directory alone; the first request
	# naming a lock node is the read of the holder's.
	cut_proxy "/leaserun/f12/lock-"
	run --separate-stderr "$LEASERUN" --status --url="$CUT_URL" f12
	[ -e "$BATS_TEST_TMPDIR/cut" ]
	assert_success
	assert_output --partial "held"
	assert_output --partial "$(hostname) pid $HOLDER"
	assert_output --partial "fence:   $(cat "$BATS_TEST_TMPDIR/f12.fence")"
	release f12
	assert_holder_rc 0
}

# --- one cron job across a fleet (helpers.bash) ---

@test "cron: hosts 3 minutes apart run the job once per period, by the server's node times" {
	cron_once zk-cron-once
	# What ZooKeeper holds: the record and the clock it was stamped by,
	# beside the lock nodes (none left).
	run zk_cli "$ZK_EP" "get /leaserun/zk-cron-once/run"
	assert_output --regexp "[0-9]+ 3000 [0-9]+ [0-9]+ 0 [0-9]+ $(hostname)"
	run zk_cli "$ZK_EP" "ls /leaserun/zk-cron-once"
	assert_output --partial "[clock, run]"
	assert_equal "$(nnodes zk-cron-once)" 0
}

@test "cron: a failed run counts, and --status shows the last run" {
	cron_status zk-cron-status
}

@test "cron: --max-time stops a hung job within the kill-after grace and frees the lease" {
	cron_max_time zk-cron-max
	assert_equal "$(nnodes zk-cron-max)" 0
}

@test "cron: --splay spreads the starts" {
	cron_splay zk-cron-splay
}

@test "cron: a clock node another ZooKeeper user made cannot be stamped, also after a lost reply: 125, one line naming NOAUTH, the job never runs" {
	# The lease directory made without credentials, so anyone may queue
	# in it; the clock node then made by alice, which only she may set.
	run "$LEASERUN" zk-cron-noauth true
	assert_success
	run env LEASERUN_URL="zk://alice:right-pw@$ZK_EP" "$LEASERUN" --once-per 1h zk-cron-noauth true
	assert_success
	# And the first stamp's reply is lost (the connection dies): the
	# stamp is tried again, and refused.
	cut_proxy "/leaserun/zk-cron-noauth/clock"
	# (-n: a failure that heals would be ridden out by taking the lease
	# again; the stamp must be tried again within the one round.)
	run --separate-stderr "$LEASERUN" -n --url="$CUT_URL" --once-per 1h zk-cron-noauth sh -c 'echo ran'
	[ -e "$BATS_TEST_TMPDIR/cut" ]
	assert_failure 125
	assert_output ""
	assert_equal "${#stderr_lines[@]}" 1
	[[ $stderr == *"cannot record the start of the run (--once-per 1h): ZooKeeper at ${CUT_URL#zk://}: set /leaserun/zk-cron-noauth/clock: not allowed (NOAUTH: wrong credentials, or the node belongs to another ZooKeeper user)" ]]
	assert_equal "$(nnodes zk-cron-noauth)" 0
}

@test "cron: a run record whose write loses its reply is read again: recorded once, the job runs once, the next run is held back" {
	# The record ("FENCE PERIOD START END STATUS PID HOST") is the only
	# request with " HOST" in it; its first write runs on the server and
	# its reply is lost.
	cut_proxy " $(hostname)"
	# (-n: the write is looked at again within the one round, not by
	# taking the lease again.)
	run --separate-stderr "$LEASERUN" -n --url="$CUT_URL" --once-per 1h zk-cron-cut sh -c 'echo ran'
	[ -e "$BATS_TEST_TMPDIR/cut" ]
	assert_success
	assert_output "ran"
	[ -z "$stderr" ]
	run zk_cli "$ZK_EP" "get /leaserun/zk-cron-cut/run"
	assert_output --regexp "[0-9]+ 3600000 [0-9]+ [0-9]+ 0 [0-9]+ $(hostname)"
	run --separate-stderr "$LEASERUN" --once-per 1h -n zk-cron-cut sh -c 'echo ran'
	assert_failure 1
	assert_output ""
	assert_regex "$stderr" "last run started .* on $(hostname) pid [0-9]+, fence [0-9]+; next run allowed in 59m"
}

# on_paused_call NAME OP CMD [OPTION...]: leaserun -v on fault+zk, paused
# before its store call OP (tests/be-fault.c); during the pause, CMD (a
# fault: ends the session...), then it goes on.  Its command appends its
# fence to $BATS_TEST_TMPDIR/ran; sets RC, its stderr in .../err.
on_paused_call() {
	local n=$1 op=$2 fault=$3 d=$BATS_TEST_TMPDIR pid
	shift 3
	export LEASERUN_FAULT_DIR=$d
	echo "$op.pause=before" >"$d/$n.fault"
	LEASERUN_URL="fault+zk://$ZK_EP" "$LEASERUN" -v "$@" "$n" \
		sh -c 'echo "$LEASERUN_FENCE" >>"$0/ran"' "$d" 2>"$d/err" 3>&- &
	pid=$!
	BG_PIDS="$BG_PIDS $pid"
	wait_until 20 test -e "$d/$n.paused"
	rm -f "$d/$n.fault"
	eval "$fault"
	rm -f "$d/$n.paused"
	wait_rc "$pid"
	cat "$d/err" >&3
}

@test "cron: a start that cannot be recorded in time, then a give-back that no server answers in time: the next grant is a new node with a higher fence, not the one still held, and the run runs once" {
	local n=zk-cron-unreleased d=$BATS_TEST_TMPDIR pid
	export LEASERUN_FAULT_DIR=$d
	# The start's record and the give-back both time out (the server
	# slow at that moment): the give-back never reaches the store.
	printf 'run_start=stall\nrelease.pause=before\nrelease=stall\n' >"$d/$n.fault"
	LEASERUN_URL="fault+zk://$ZK_EP" "$LEASERUN" -v -t 6s -w 30s --once-per 1h "$n" \
		sh -c 'echo "$LEASERUN_FENCE" >>"$0/ran"' "$d" 2>"$d/err" 3>&- &
	pid=$!
	BG_PIDS="$BG_PIDS $pid"
	wait_until 20 test -e "$d/$n.paused"
	# From now on the store answers.
	rm -f "$d/$n.fault" "$d/$n.paused"
	wait_rc "$pid"
	cat "$d/err"
	assert_equal "$RC" 0
	assert_equal "$(grep -c . "$d/ran")" 1
	first=$(sed -n 's/.*acquired.*fence \([0-9]*\).*/\1/p' "$d/err" | head -1)
	(( $(cat "$d/ran") > first ))
}

@test "cron: the session ended by the server just before the run's start is recorded: a failure that heals, the run is recorded on a new grant and runs once" {
	on_paused_call zk-cron-end run_start \
		'zk_end_session "$ZK_EP" /leaserun/zk-cron-end >/dev/null' \
		-t 20s -w 20s --once-per 1h
	assert_equal "$RC" 0
	grep -q "cannot record the start of the run (--once-per 1h): ZooKeeper at $ZK_EP: get: the session expired; trying again" "$BATS_TEST_TMPDIR/err"
	assert_equal "$(grep -c . "$BATS_TEST_TMPDIR/ran")" 1
	run zk_cli "$ZK_EP" "get /leaserun/zk-cron-end/run"
	assert_output --regexp "^$(cat "$BATS_TEST_TMPDIR/ran") 3600000 [0-9]+ [0-9]+ 0 "
}

@test "cron: the clock node made by another between our look and our create of it: looked at again, the run recorded and run once" {
	# On a new lease the first request naming the clock is its stamp
	# (no node), the second its create: that one reaches the server 3s
	# late, after another client made the node.
	cut_proxy "/leaserun/zk-cron-race/clock" delay=3000 skip=1
	d=$BATS_TEST_TMPDIR
	"$LEASERUN" -t 20s -n --url="$CUT_URL" --once-per 1h zk-cron-race sh -c 'echo ran >>"$0/ran"' "$d" \
		2>"$d/err" 3>&- &
	pid=$!
	BG_PIDS="$BG_PIDS $pid"
	wait_until 10 test -e "$d/cut"
	zk_cli "$ZK_EP" "create /leaserun/zk-cron-race/clock" >/dev/null || true
	wait_rc "$pid"
	cat "$d/err"
	assert_equal "$RC" 0
	assert_equal "$(cat "$d/ran")" ran
	run zk_cli "$ZK_EP" "get /leaserun/zk-cron-race/run"
	assert_output --regexp "[0-9]+ 3600000 [0-9]+ [0-9]+ 0 [0-9]+ $(hostname)"
}

@test "cron: the clock node's create whose reply is lost: looked at again, the run recorded and run once" {
	# The second request naming the clock on a new lease is its create.
	cut_proxy "/leaserun/zk-cron-cut2/clock" skip=1
	run --separate-stderr "$LEASERUN" -t 20s -n --url="$CUT_URL" --once-per 1h zk-cron-cut2 sh -c 'echo ran'
	[ -e "$BATS_TEST_TMPDIR/cut" ]
	assert_success
	assert_output "ran"
	[ -z "$stderr" ]
	run zk_cli "$ZK_EP" "get /leaserun/zk-cron-cut2/run"
	assert_output --regexp "[0-9]+ 3600000 [0-9]+ [0-9]+ 0 [0-9]+ $(hostname)"
}

@test "cron: the session ended by the server while the job runs: 124, and the end of the run cannot be recorded, said at once" {
	hold zk-cron-ended -t 20s -v --once-per 1h
	# Held still, so that it cannot take its session back meanwhile.
	kill -STOP "$HOLDER"
	zk_end_session "$ZK_EP" /leaserun/zk-cron-ended >/dev/null
	t0=$(now_ms)
	kill -CONT "$HOLDER"
	wait_gone "$HOLDER" 50
	assert_holder_rc 124
	el=$(($(now_ms) - t0))
	cat "$BATS_TEST_TMPDIR/zk-cron-ended.err"
	echo "ended ${el}ms after it went on"
	grep -q "could not record the end of the run: ZooKeeper at $ZK_EP: get: the session expired" "$BATS_TEST_TMPDIR/zk-cron-ended.err"
	# (A store that waited for an answer that cannot come would take 2s.)
	[ "$el" -lt 1500 ]
}

@test "cron: bad --once-per, --max-time and --splay values are one line and 125" {
	cron_bad_values zk-cron-bad
}
