#!/usr/bin/env bats
# Servers that misbehave (tests/hostile.py): no reply may crash leaserun,
# hold it past its deadline or make it eat memory.  Each case asserts the
# exit status, the time against the deadline and the peak memory.
# shellcheck disable=SC2154 # bats sets status and output

load helpers

setup() {
	BG_PIDS=
	T=$BATS_TEST_TMPDIR
}

teardown() {
	kill_bg
}

# hostile PROTO MODE: starts tests/hostile.py; sets HPORT.
hostile() {
	rm -f "$T/port"
	python3 "$LR_SRCDIR/tests/hostile.py" "$1" "$2" "$T/port" &
	BG_PIDS="$BG_PIDS $!"
	wait_until 10 test -s "$T/port"
	HPORT=$(cat "$T/port")
}

# url PROTO: a URL of PROTO's store at the hostile server.
url() {
	case $1 in
	pg) echo "postgres://lr:Hunter2-pw@127.0.0.1:$HPORT/db" ;;
	redis) echo "redis://:Hunter2-pw@127.0.0.1:$HPORT" ;;
	etcd) echo "etcd://127.0.0.1:$HPORT" ;;
	zk) echo "zk://127.0.0.1:$HPORT" ;;
	mysql) echo "mysql://lr:Hunter2-pw@127.0.0.1:$HPORT/db" ;;
	esac
}

# measured ARGS...: runs leaserun ARGS on the store at $URL under
# /usr/bin/time, at most 60s;
# sets status, output (stderr and stdout), MS (elapsed) and KB (peak
# resident memory).
# Under AddressSanitizer, freed memory waits in a quarantine of 256 MB
# before it is reused: without it, the peak measures what leaserun keeps,
# not what ASan keeps for it.
measured() {
	local t0 t1
	t0=$(now_ms)
	run --separate-stderr env LEASERUN_URL="$URL" \
		ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0" \
		/usr/bin/time -f %M -o "$T/mem" \
		timeout -s KILL 60 "$LEASERUN" "$@"
	t1=$(now_ms)
	MS=$((t1 - t0))
	KB=$(tail -n 1 "$T/mem")
	echo "# $*: status $status in ${MS}ms, ${KB} KB: $stderr" >&3
}

# no_secret: nothing leaserun printed shows the password.
no_secret() {
	[[ "$stderr$output" != *Hunter2-pw* ]]
}

# store_built PROTO: the store's module is there.
store_built() {
	local m=$1
	[ -e "$LEASERUN_MODULE_DIR/$m.so" ] ||
		fail "no $m.so in $LEASERUN_MODULE_DIR: build with --with-$m"
}

@test "every store, a server that accepts and never answers: -n gives up by its 2s connect, 125" {
	for p in pg redis etcd zk mysql; do
		store_built "$p"
		hostile "$p" silent
		URL=$(url "$p")
		measured -n -t 20s job touch "$T/ran"
		assert_equal "$status" 125
		(( MS < 4000 && KB < 65536 ))
		no_secret
		kill_bg
		BG_PIDS=
	done
	[ ! -e "$T/ran" ]
}

@test "every store, a server that answers garbage, resets, or answers a byte a second: 125 within -w" {
	for p in pg redis etcd zk mysql; do
		store_built "$p"
		for m in garbage reset slow; do
			hostile "$p" "$m"
			URL=$(url "$p")
			measured -w 2s -t 20s job touch "$T/ran"
			assert_equal "$status" 125
			(( MS < 4000 && KB < 65536 ))
			no_secret
			kill_bg
			BG_PIDS=
		done
	done
	[ ! -e "$T/ran" ]
}

@test "every store over TLS, a server that closes the connection in the handshake, as one that shuts down does: a waiting run tries again until -w" {
	for p in pg redis etcd; do
		store_built "$p"
		[ "$p" = pg ] || store_built "$p-tls"
		hostile "$p" eof
		case $p in
		pg) URL="postgres://lr:Hunter2-pw@127.0.0.1:$HPORT/db?sslmode=require" ;;
		redis) URL="rediss://:Hunter2-pw@127.0.0.1:$HPORT" ;;
		etcd) URL="etcds://127.0.0.1:$HPORT" ;;
		esac
		measured -w 2s -t 20s job touch "$T/ran"
		assert_equal "$status" 125
		# Not the first failure: the last, at the end of the wait.
		(( MS >= 1900 && MS < 4000 ))
		no_secret
		kill_bg
		BG_PIDS=
	done
	[ ! -e "$T/ran" ]
}

@test "PostgreSQL: notices without end during the startup do not hold the open past its deadline" {
	store_built pg
	hostile pg notices
	URL=$(url pg)
	measured -n job touch "$T/ran"
	assert_equal "$status" 125
	assert_regex "$stderr" "cannot open .*(timed out|did not answer)"
	(( MS < 4000 && KB < 65536 ))
	no_secret
	[ ! -e "$T/ran" ]
}

@test "PostgreSQL: a server older than 9.6 is refused with 125 at once, saying which version and why" {
	store_built pg
	hostile pg old
	URL=$(url pg)
	measured -w 5s job touch "$T/ran"
	assert_equal "$status" 125
	assert_equal "$stderr" "leaserun: job: cannot open postgres://lr@127.0.0.1:$HPORT/db: PostgreSQL at 127.0.0.1:$HPORT is version 9.5: leaserun needs 9.6 or later (pg_logical_emit_message() makes each fence durable)"
	(( MS < 2000 ))
	# It does not heal: one connection, not a wait.
	assert_equal "$(wc -l < "$T/port.conns")" 1
	[ ! -e "$T/ran" ]
}

@test "PostgreSQL: the session's setup answered with a connection error (08006, as a pooler that lost its server says it): a waiting run tries again until its wait runs out, then 125 with the error" {
	store_built pg
	hostile pg setupfail
	URL=$(url pg)
	measured -n job touch "$T/ran"
	assert_equal "$status" 125
	assert_equal "$stderr" "leaserun: job: cannot open postgres://lr@127.0.0.1:$HPORT/db: setting up the session on PostgreSQL at 127.0.0.1:$HPORT failed: ERROR: server connection lost"
	assert_equal "$(wc -l < "$T/port.conns")" 1
	measured -w 2s job touch "$T/ran"
	assert_equal "$status" 125
	(( MS >= 1900 && MS < 5000 ))
	# Tried again on new connections while the wait lasted.
	(( $(wc -l < "$T/port.conns") >= 3 ))
	[[ "$stderr" == *"setting up the session on PostgreSQL at 127.0.0.1:$HPORT failed: ERROR: server connection lost" ]]
	[ ! -e "$T/ran" ]
}

@test "PostgreSQL: the pooler check's second connection refused its SELECT pg_backend_pid(): 125 with the error, no command" {
	store_built pg
	hostile pg poolcheck
	URL=$(url pg)
	measured -n job touch "$T/ran"
	assert_equal "$status" 125
	assert_equal "$stderr" "leaserun: job: cannot open postgres://lr@127.0.0.1:$HPORT/db: the pooler check on PostgreSQL at 127.0.0.1:$HPORT failed: ERROR: permission denied for function pg_backend_pid"
	assert_equal "$(wc -l < "$T/port.conns")" 2
	[ ! -e "$T/ran" ]
}

@test "PostgreSQL: a message header that claims 2 GB: 125 at once, no 2 GB allocated" {
	store_built pg
	hostile pg huge
	URL=$(url pg)
	measured -w 3s job touch "$T/ran"
	assert_equal "$status" 125
	(( MS < 5000 && KB < 65536 ))
	no_secret
	[ ! -e "$T/ran" ]
}

@test "PostgreSQL: rows without end: cut off at 8 MB, 125 at once, memory bounded" {
	store_built pg
	hostile pg endless
	URL=$(url pg)
	# -n: one try (a waiting run tries again, and its last try may be
	# cut off or out of time as the wait runs out).
	measured -n job touch "$T/ran"
	assert_equal "$status" 125
	assert_regex "$stderr" "an answer ran past 8 MB, on which leaserun closed the connection"
	assert_equal "${#stderr_lines[@]}" 1
	(( MS < 2000 && KB < 65536 ))
	no_secret
	[ ! -e "$T/ran" ]
}

@test "PostgreSQL: a row whose header claims 1 GB, sent at 60 MB/s: cut off once 8 MB have come, 125 at once, memory bounded" {
	store_built pg
	hostile pg hugerow
	URL=$(url pg)
	measured -n job touch "$T/ran"
	assert_equal "$status" 125
	assert_regex "$stderr" "an answer ran past 8 MB, on which leaserun closed the connection"
	assert_equal "${#stderr_lines[@]}" 1
	# Under AddressSanitizer, libpq's buffer of 1 GB (grown by doubling,
	# each step copied) costs time, and freeing it poisons its shadow,
	# 128 MB: ASan's time and memory, not leaserun's.
	max_ms=2000 max_kb=65536
	if ldd "$LEASERUN" | grep -q libasan; then
		max_ms=5000 max_kb=$((65536 + 131072))
	fi
	(( MS < max_ms && KB < max_kb ))
	# A server that sends faster than leaserun reads is bounded only by
	# libpq, which reads on while bytes keep coming (leaserun-postgresql(7),
	# Guards).
	no_secret
	[ ! -e "$T/ran" ]
}

# ---- ZooKeeper ----

@test "ZooKeeper: a reply whose length prefix claims 2 GB: 125 at once, nothing of it allocated" {
	store_built zk
	hostile zk huge
	URL=$(url zk)
	measured -w 3s job touch "$T/ran"
	assert_equal "$status" 125
	assert_regex "$stderr" "unexpected reply: a length of 2147483647 bytes"
	assert_equal "${#stderr_lines[@]}" 1
	(( MS < 2000 && KB < 65536 ))
	[ ! -e "$T/ran" ]
}

@test "ZooKeeper: a server that sends without end does not hold a run past its wait" {
	store_built zk
	hostile zk endless
	URL=$(url zk)
	measured -w 3s -t 20s job touch "$T/ran"
	assert_equal "$status" 125
	(( MS >= 2500 && MS < 5000 && KB < 65536 ))
	measured -n -t 20s job touch "$T/ran"
	assert_equal "$status" 125
	(( MS < 4000 && KB < 65536 ))
	[ ! -e "$T/ran" ]
}

@test "ZooKeeper: a server that answers as read-only, which we never ask for: 125 at once, one line saying so" {
	store_built zk
	hostile zk readonly
	URL=$(url zk)
	measured -w 5s job touch "$T/ran"
	assert_equal "$status" 125
	assert_equal "${#stderr_lines[@]}" 1
	[[ $stderr == *"ZooKeeper at 127.0.0.1:$HPORT: the server answered as read-only (is it ZooKeeper?)" ]]
	(( MS < 3000 ))
	[ ! -e "$T/ran" ]
}

@test "ZooKeeper: credentials the server refuses: 125 at once, one line saying so, without the password" {
	store_built zk
	hostile zk authfail
	URL="zk://lr:Hunter2-pw@127.0.0.1:$HPORT"
	measured -w 5s job touch "$T/ran"
	assert_equal "$status" 125
	assert_equal "${#stderr_lines[@]}" 1
	[[ $stderr == *"ZooKeeper at 127.0.0.1:$HPORT: create: authentication failed" ]]
	[[ $stderr != *Hunter2-pw* ]]
	(( MS < 3000 ))
	[ ! -e "$T/ran" ]
}

@test "ZooKeeper: --status and --break when the server refuses our credentials: 125 at once, one line saying so" {
	store_built zk
	hostile zk authfail
	URL="zk://lr:Hunter2-pw@127.0.0.1:$HPORT"
	for op in --status --break; do
		measured $op job
		assert_equal "$status" 125
		assert_equal "${#stderr_lines[@]}" 1
		[[ $stderr == *"ZooKeeper at 127.0.0.1:$HPORT: list: authentication failed" ]]
		[[ $stderr != *Hunter2-pw* ]]
		(( MS < 3000 ))
	done
}

# ---- etcd ----
# hostile.py's etcd modes speak HTTP/2 and answer every gRPC request
# stream (the first round trip is the lease grant, the transaction and the
# watch: streams 1, 3, 5) with HEADERS (200, application/grpc), then
# misbehave in its DATA.

@test "etcd: a reply whose gRPC message prefix claims 2^31-1 bytes: 125 at once, no 2 GB allocated" {
	store_built etcd
	hostile etcd huge
	URL=$(url etcd)
	measured -w 3s job touch "$T/ran"
	assert_equal "$status" 125
	assert_regex "$stderr" "cannot reach etcd at .*: the reply is too large"
	assert_equal "${#stderr_lines[@]}" 1
	(( MS < 2000 && KB < 65536 ))
	no_secret
	[ ! -e "$T/ran" ]
}

@test "etcd: a server that sends empty DATA frames without end, never a whole message, does not hold a run past its wait" {
	store_built etcd
	hostile etcd endless
	URL=$(url etcd)
	measured -w 3s -t 20s job touch "$T/ran"
	assert_equal "$status" 125
	assert_regex "$stderr" "no answer from .* in time"
	(( MS >= 2500 && MS < 5000 && KB < 65536 ))
	no_secret
	measured -n -t 20s job touch "$T/ran"
	assert_equal "$status" 125
	(( MS < 4000 && KB < 65536 ))
	no_secret
	[ ! -e "$T/ran" ]
}

# hostile.py's fake etcd (etcd fake modes) grants, queues our key, watches
# it, reads it back, renews and releases as etcd does, and misbehaves at
# one step.

@test "etcd: a lease grant that etcd refuses: 125 at once, in one line with etcd's reason" {
	store_built etcd
	hostile etcd grantfail
	URL=$(url etcd)
	measured -w 5s job touch "$T/ran"
	assert_equal "$status" 125
	assert_equal "$stderr" "leaserun: job: etcd lease grant failed at 127.0.0.1:$HPORT: bad lease TTL"
	(( MS < 3000 ))
	[ ! -e "$T/ran" ]
}

@test "etcd: a lock transaction whose reply lacks our key (no answers, no listing, a listing without it): 125 at once, the command never runs" {
	store_built etcd
	for mode in txnempty txnnorange txnnokey; do
		hostile etcd "$mode"
		URL=$(url etcd)
		measured -w 5s job touch "$T/ran"
		assert_equal "$status" 125
		assert_equal "${#stderr_lines[@]}" 1
		assert_regex "$stderr" "etcd lock transaction: our key leaserun/job/[0-9a-f]+ is missing from the reply"
		(( MS < 3000 ))
		[ ! -e "$T/ran" ]
	done
}

@test "etcd: a TTL granted shorter than the one asked for: renewed at a third of the granted TTL" {
	store_built etcd
	hostile etcd shortttl
	URL=$(url etcd)
	measured -v -t 9s job sleep 3
	assert_equal "$status" 0
	assert_regex "$stderr" "the store granted a TTL of 2000ms; renewing every 666ms"
	# Every 0.67s for 3s; at the TTL asked for, every 3s: once.
	(( $(wc -l <"$T/port.ka") >= 3 ))
}

@test "etcd: a watch on our key that etcd never confirms: the run gives up when its wait runs out, and says so" {
	store_built etcd
	hostile etcd watchsilent
	URL=$(url etcd)
	measured -w 2s job touch "$T/ran"
	assert_equal "$status" 125
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "etcd watch on leaserun/job/[0-9a-f]+: no answer from 127.0.0.1:$HPORT in time"
	(( MS >= 1900 && MS < 5000 ))
	[ ! -e "$T/ran" ]
}

@test "etcd: the connection closed while the watch on our key is set up: tried again until the wait runs out, then 125 with the reason" {
	store_built etcd
	hostile etcd watchcut
	URL=$(url etcd)
	measured -w 3s job touch "$T/ran"
	assert_equal "$status" 125
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "cannot reach etcd at 127.0.0.1:$HPORT: the server closed the connection"
	(( MS >= 2900 && MS < 6000 ))
	(( $(wc -l <"$T/port.conns") >= 3 ))
	[ ! -e "$T/ran" ]
}

@test "etcd: a watch on our key that etcd cancels as it confirms it: 125, the command never runs" {
	store_built etcd
	hostile etcd watchcancel
	URL=$(url etcd)
	measured -w 5s job touch "$T/ran"
	assert_equal "$status" 125
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "etcd watch canceled: revision 5 is compacted"
	[ ! -e "$T/ran" ]
}

@test "etcd: a keepalive stream that etcd ends unanswered at each renewal (an error, or grpc-status 0): no renewal counts, the command is stopped before the TTL runs out (124)" {
	store_built etcd
	for mode in kastatus kaok; do
		hostile etcd "$mode"
		URL=$(url etcd)
		measured -v -t 3s job sh -c 'sleep 6; touch "$0/ran"' "$T"
		assert_equal "$status" 124
		refute_regex "$stderr" "renewed in"
		if [ "$mode" = kastatus ]; then
			assert_regex "$stderr" "renew failed \\(etcd lease keepalive at 127.0.0.1:$HPORT: leader changed\\)"
		else
			assert_regex "$stderr" "renew failed \\(cannot reach etcd at 127.0.0.1:$HPORT: the keepalive stream ended\\)"
		fi
		(( MS < 3500 ))
		[ ! -e "$T/ran" ]
	done
}

# ---- Redis ----------------------------------------------------------------
# hostile.py's Redis modes log in, grant and watch as a server would, and
# misbehave at one step.

@test "Redis: a renewal answered by a line without end: the command is stopped before the deadline, 124, memory bounded" {
	store_built redis
	hostile redis endless
	URL=$(url redis)
	measured -t 3s job sh -c 'touch "$0/ran"; sleep 30' "$T"
	assert_equal "$status" 124
	[ -e "$T/ran" ]
	# Granted at the start: the deadline is 3s later.
	(( MS < 3000 && KB < 65536 ))
	no_secret
}

@test "Redis: replies that claim or stream 100M elements, arrays of arrays, a 1 GB string, 2^31-1 elements: 125 at once, memory bounded" {
	store_built redis
	for m in hugearray deeparray hugebulk maxheader; do
		hostile redis "$m"
		URL=$(url redis)
		measured -w 10s job touch "$T/ran"
		assert_equal "$status" 125
		assert_regex "$stderr" "acquire: protocol error: a (reply larger|line or string longer) than [0-9]+ MiB"
		(( MS < 2000 && KB < 65536 ))
		no_secret
		kill_bg
		BG_PIDS=
	done
	[ ! -e "$T/ran" ]
}

@test "Redis: a malformed reply to the --once-per run start ({5, x}): 125 and one line, no crash" {
	store_built redis
	hostile redis onceper
	URL=$(url redis)
	measured --once-per 1h job touch "$T/ran"
	assert_equal "$status" 125
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "cannot record the start of the run .*run start: unexpected reply"
	(( MS < 2000 && KB < 65536 ))
	no_secret
	[ ! -e "$T/ran" ]
}

@test "Redis: a run start's reply that is neither granted nor a record ({2, now}), or a record with an integer field: 125 and one line" {
	store_built redis
	for m in onceper2 onceper0; do
		hostile redis "$m"
		URL=$(url redis)
		measured --once-per 1h job touch "$T/ran"
		assert_equal "$status" 125
		assert_equal "${#stderr_lines[@]}" 1
		assert_regex "$stderr" "cannot record the start of the run .*run start: unexpected reply"
		[ ! -e "$T/ran" ]
	done
}

@test "Redis: a waiter whose watch connection meets LOADING (at CLIENT ID or SUBSCRIBE): what may heal is waited out until -w, then 125 and one line that quotes it" {
	store_built redis
	for m in idloading subloading; do
		hostile redis "$m"
		URL=$(url redis)
		measured -w 3 job touch "$T/ran"
		assert_equal "$status" 125
		assert_equal "${#stderr_lines[@]}" 1
		assert_regex "$stderr" ": SUBSCRIBE: LOADING Redis is loading the dataset in memory\$"
		(( MS >= 2500 ))
		[ ! -e "$T/ran" ]
	done
}

@test "Redis: a waiter whose watch connection is told NOAUTH at CLIENT ID (a password turned on since): 125 at once, and one line that says how to give one" {
	store_built redis
	hostile redis idnoauth
	URL=$(url redis)
	measured -w 10 job touch "$T/ran"
	assert_equal "$status" 125
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" ": NOAUTH Authentication required. \(give a password in the URL or REDISCLI_AUTH\)\$"
	(( MS < 3000 ))
	[ ! -e "$T/ran" ]
}

@test "Redis: a reply nobody asked for on the idle command connection: the holder drops it, connects again and keeps the lease" {
	store_built redis
	hostile redis stray
	URL=$(url redis)
	measured -v -t 3s job sleep 1
	assert_equal "$status" 0
	# The command connection, the watch's, and the command connection
	# again, for the renewal that follows at once.
	assert_equal "$(wc -l <"$T/port.conns")" 3
	assert_regex "$stderr" "renewed in [0-9]+ms"
}

@test "Redis: a waiter's command connection closed, with the lease another's, between its grant and its command's start: the watch it carried is not trusted, the key is read, and the command runs once, on the next grant" {
	store_built redis
	hostile redis grantcut
	URL=$(url redis)
	measured -v -w 5 job sh -c 'echo x >>"$0/runs"' "$T"
	assert_equal "$status" 0
	assert_equal "$(grep -c . "$T/runs")" 1
	assert_regex "$stderr" "lease lost before the command started: [^
]*was deleted or taken by another client; trying again"
	assert_regex "$stderr" "command exited with status 0"
}

@test "Redis: a waiter's watch connection closed by the server as its grant is answered: dropped before the command starts, and opened again at once, with no renewal needed to start the watch" {
	store_built redis
	hostile redis grantwatchcut
	URL=$(url redis)
	measured -v -t 30s -w 5 job sleep 0.5
	assert_equal "$status" 0
	# The command connection, the watch's, and the watch's again.
	assert_equal "$(wc -l <"$T/port.conns")" 3
	[[ "$stderr" != *renewed* ]]
}

@test "Redis: a waiter's watch connection that sends what is no reply: dropped and opened again, and the run waits on (1 once -w runs out)" {
	store_built redis
	hostile redis watchgarbage
	URL=$(url redis)
	measured -w 2 job touch "$T/ran"
	assert_equal "$status" 1
	# The command connection, the watch's, and the watch's again.
	assert_equal "$(wc -l <"$T/port.conns")" 3
	[ ! -e "$T/ran" ]
}

@test "Redis: a waiter's watch connection that sends a message whose channel is no name: ignored, and the run waits on (1 once -w runs out)" {
	store_built redis
	hostile redis watchbadmsg
	URL=$(url redis)
	measured -w 2 job touch "$T/ran"
	assert_equal "$status" 1
	# The command connection and the watch's: not dropped for it.
	assert_equal "$(wc -l <"$T/port.conns")" 2
	[ ! -e "$T/ran" ]
}

@test "Redis: a run start held back by a record without fence or pid: 1, and the notice names the host alone, with no fence" {
	store_built redis
	hostile redis oncepernil
	URL=$(url redis)
	measured --once-per 1h job touch "$T/ran"
	assert_equal "$status" 1
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "last run started [^;]* ago on h; next run allowed in "
	[ ! -e "$T/ran" ]
}

@test "Redis: an acquire answered with one element, {1}: 125, an unexpected reply, the command does not run" {
	store_built redis
	hostile redis shortgrant
	URL=$(url redis)
	measured -w 5s job touch "$T/ran"
	assert_equal "$status" 125
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "^leaserun: job: redis at 127\.0\.0\.1:$HPORT: acquire: unexpected reply\$"
	[ ! -e "$T/ran" ]
}

@test "Redis: a grant whose fence is nil, negative, of 21 digits, or below the run's first: 125, the command does not run" {
	store_built redis
	for m in nilfence negfence longfence fencedown; do
		hostile redis "$m"
		URL=$(url redis)
		measured -w 5s job touch "$T/ran"
		assert_equal "$status" 125
		assert_regex "$stderr" "unexpected reply from the store: a grant with fence"
		if [ "$m" = fencedown ]; then
			assert_regex "$stderr" "fence 500, not above the fence of an earlier grant"
		else
			assert_regex "$stderr" "fence 0, out of range"
		fi
		(( MS < 2000 && KB < 65536 ))
		kill_bg
		BG_PIDS=
	done
	[ ! -e "$T/ran" ]
}

# ---- MySQL ----------------------------------------------------------------
# hostile.py's MySQL modes greet as MySQL 8.0, take any login and answer
# the session's setup, then misbehave where the mode says.

# cluster_refused MODE WHAT: a server that says it is a node of a cluster
# whose GET_LOCK() locks are each node's own (WHAT, a regex) is refused:
# 125, one line that says why, and the command never runs.
cluster_refused() {
	store_built mysql
	hostile mysql "$1"
	URL=$(url mysql)
	measured -w 3s job touch "$T/ran"
	assert_equal "$status" 125
	assert_regex "$stderr" "is $2: its GET_LOCK\(\) locks are its own"
	assert_equal "${#stderr_lines[@]}" 1
	no_secret
	[ ! -e "$T/ran" ]
}

@test "MySQL: a server that says it is a Group Replication member: refused, 125, one line saying why" {
	cluster_refused grouprepl "a Group Replication member \(group_replication_group_name is set\)"
}

@test "MySQL: a MySQL-built Galera node (wsrep_on ON in SHOW VARIABLES): refused, 125, one line saying why" {
	cluster_refused galera "a Galera node \(wsrep_on\)"
}

@test "MySQL: a server that closes the connection as TLS starts, as one that restarts does: a waiting run tries again until -w" {
	store_built mysql
	hostile mysql tlsdrop
	URL="$(url mysql)?ssl-mode=REQUIRED"
	measured -w 2s job touch "$T/ran"
	assert_equal "$status" 125
	# (Our ClientHello may meet the close, or arrive after it.)
	assert_regex "$stderr" "TLS handshake failed: (unexpected eof|Connection reset by peer)"
	assert_equal "${#stderr_lines[@]}" 1
	# Not the first failure: the last, at the end of the wait.
	(( MS >= 1900 && MS < 4000 ))
	# Tried again with a growing pause (50 ms, doubled up to a second),
	# not in a loop: about 7 tries in 2 s (a pause stuck at 50 ms: 30).
	n=$(wc -l < "$T/port.conns")
	echo "# $n connections in $MS ms" >&3
	(( n >= 3 && n <= 12 ))
	no_secret
	[ ! -e "$T/ran" ]
}

@test "MySQL: rows without end: cut off at 8 MB, 125 at once, memory bounded" {
	store_built mysql
	hostile mysql endless
	URL=$(url mysql)
	measured -w 3s job touch "$T/ran"
	assert_equal "$status" 125
	assert_regex "$stderr" "the answer runs past 8 MB .*the connection was closed"
	assert_equal "${#stderr_lines[@]}" 1
	(( MS < 2000 && KB < 65536 ))
	no_secret
	[ ! -e "$T/ran" ]
}

@test "MySQL: packets of 16 MB that never end, in the greeting or in an answer: 125 within -w, none of it kept" {
	store_built mysql
	for m in huge hugerow; do
		hostile mysql "$m"
		URL=$(url mysql)
		measured -w 2s -t 20s job touch "$T/ran"
		assert_equal "$status" 125
		assert_regex "$stderr" "the server sent a packet of 16777215 bytes, past the bound of 1048576"
		assert_equal "${#stderr_lines[@]}" 1
		(( MS < 4000 && KB < 65536 ))
		no_secret
		kill_bg
		BG_PIDS=
	done
	[ ! -e "$T/ran" ]
}

@test "MySQL: caching_sha2_password's fast login, and a switch to mysql_native_password: the right password runs the command, a wrong one is refused, 125, one line" {
	store_built mysql
	for m in sha2 switch; do
		hostile mysql "$m"
		URL=$(url mysql)
		measured -w 2s job touch "$T/ran.$m"
		assert_equal "$status" 0
		[ -e "$T/ran.$m" ]
		no_secret
		URL=${URL/Hunter2-pw/Wrong-pw}
		measured -w 2s job touch "$T/wrong.$m"
		assert_equal "$status" 125
		assert_regex "$stderr" "Access denied for user 'lr'"
		assert_equal "${#stderr_lines[@]}" 1
		[ ! -e "$T/wrong.$m" ]
		kill_bg
		BG_PIDS=
	done
}

@test "MySQL: a server that wants the password itself over a connection without TLS gets nothing: 125, one line naming ssl-mode" {
	store_built mysql
	hostile mysql sha2full
	URL=$(url mysql)
	measured -w 3s job touch "$T/ran"
	assert_equal "$status" 125
	assert_regex "$stderr" "wants the password in clear \(caching_sha2_password\), which leaserun sends only over TLS or a Unix socket: add ssl-mode="
	assert_equal "${#stderr_lines[@]}" 1
	# A refusal, not a fault: no second try.
	(( MS < 2000 ))
	grep -qx "login lr" "$T/port.got"
	run ! grep -q cleartext "$T/port.got"
	no_secret
	[ ! -e "$T/ran" ]
}

@test "MySQL: a login method leaserun does not speak (client_ed25519): 125, one line naming it" {
	store_built mysql
	hostile mysql ed25519
	URL=$(url mysql)
	measured -w 3s job touch "$T/ran"
	assert_equal "$status" 125
	assert_regex "$stderr" "wants the login method client_ed25519, which leaserun does not speak"
	assert_equal "${#stderr_lines[@]}" 1
	(( MS < 2000 ))
	[ ! -e "$T/ran" ]
}

@test "MySQL: ssl-mode=REQUIRED to a server that offers no TLS: refused before the login goes out, 125, one line" {
	store_built mysql
	hostile mysql notls
	for mode in REQUIRED VERIFY_CA VERIFY_IDENTITY; do
		URL="$(url mysql)?ssl-mode=$mode"
		measured -w 3s job touch "$T/ran"
		assert_equal "$status" 125
		assert_regex "$stderr" "the server does not offer TLS"
		assert_equal "${#stderr_lines[@]}" 1
		(( MS < 2000 ))
	done
	[ ! -e "$T/port.got" ]
	[ ! -e "$T/ran" ]
}

@test "MySQL: bytes sent with the greeting, before TLS, as one who answers in the server's place could: refused at once, never read as if they came over TLS" {
	store_built mysql
	hostile mysql tlsinject
	URL="$(url mysql)?ssl-mode=VERIFY_IDENTITY"
	measured -w 3s job touch "$T/ran"
	assert_equal "$status" 125
	assert_regex "$stderr" "the server sent bytes after its greeting, before TLS"
	assert_equal "${#stderr_lines[@]}" 1
	(( MS < 2000 ))
	no_secret
	[ ! -e "$T/ran" ]
}

@test "MySQL: answers without end, each saying another follows: cut off at once, 125, memory bounded" {
	store_built mysql
	hostile mysql moreflood
	URL=$(url mysql)
	measured -w 3s job touch "$T/ran"
	assert_equal "$status" 125
	assert_regex "$stderr" "the server sent more answers than statements"
	assert_equal "${#stderr_lines[@]}" 1
	(( MS < 2000 && KB < 65536 ))
	[ ! -e "$T/ran" ]
}

# ---- MySQL: packets no server sends (hostile.py's w-NAME modes) ----------

# wire_refused MODE REGEX: the server of MODE is refused: 125, one line
# matching REGEX (after "cannot open ...: "), within -w, the command not
# run, nothing said of the password.
wire_refused() {
	rm -f "$T/port.got" "$T/port.conns"
	hostile mysql "w-$1"
	URL=$(url mysql)
	measured -w 1s job touch "$T/ran"
	assert_equal "$status" 125
	assert_regex "$stderr" "^leaserun: job: cannot open mysql://lr@127\.0\.0\.1:$HPORT/db: $2\$"
	assert_equal "${#stderr_lines[@]}" 1
	(( MS < 3000 ))
	no_secret
	[ ! -e "$T/ran" ]
	kill_bg
	BG_PIDS=
}

@test "MySQL: greetings no server sends (an error, protocol 9, cut short, before 4.1, without its nonce): 125, one line saying what" {
	store_built mysql
	at="cannot connect to MySQL at 127\.0\.0\.1:[0-9]+"
	# Too many connections heals: tried again until -w, then said.
	wire_refused greeterr "$at: Too many connections \(hostile\)"
	wire_refused greet9 "$at: not a MySQL server \(its greeting is not of protocol 10\)"
	# Cut short in the 10 reserved bytes, or without PROTOCOL_41.
	wire_refused greetshort "$at: the server speaks a protocol older than MySQL 4\.1's"
	wire_refused greet40 "$at: the server speaks a protocol older than MySQL 4\.1's"
	wire_refused greetnononce "$at: a greeting without its nonce"
}

@test "MySQL: a greeting of 1 MB, the largest packet taken: the buffer grows to the bound, the login goes on, the command runs" {
	store_built mysql
	hostile mysql w-greetbig
	URL=$(url mysql)
	measured -w 3s job sh -c 'echo "fence $LEASERUN_FENCE"'
	assert_equal "$status" 0
	assert_equal "$output" "fence 5"
	assert_equal "$stderr" ""
}

@test "MySQL: login answers no server sends (empty, a switch to a long name or without a nonce, a step out of place, fast logins without end): 125, one line" {
	store_built mysql
	at="cannot connect to MySQL at 127\.0\.0\.1:[0-9]+: the server sent"
	wire_refused loginempty "$at an empty packet in the login"
	wire_refused loginlong "$at a login method with a long name"
	wire_refused loginnononce "$at a login switch without a nonce"
	# caching_sha2_password's "fast login done" to mysql_native_password;
	# to caching_sha2_password, a step that is neither 3 nor 4; a 0x02.
	wire_refused loginstep "$at a login step out of place"
	wire_refused loginstep3 "$at a login step out of place"
	wire_refused login2 "$at a login step out of place"
	wire_refused loginloop "$at a login without end"
}

@test "MySQL: answers no server sends (empty, an OK cut short or with a length of 0xff, a 1-byte error, 0 columns, a column too many, a row cut short or too long): 125, one line" {
	store_built mysql
	at="setting up the session on MySQL at 127\.0\.0\.1:[0-9]+ failed:"
	wire_refused ansempty "$at the server sent an empty packet \(2027\)"
	wire_refused ansokshort "$at the server sent an OK that does not parse \(2027\)"
	wire_refused ansokff "$at the server sent an OK that does not parse \(2027\)"
	# An error packet without a code or a message: the client's own.
	wire_refused anserr1 "$at error 2027 \(2027\)"
	wire_refused ans0cols "$at the server sent an answer that does not parse \(2027\)"
	wire_refused anscoldefs "$at the server sent too many column definitions \(2027\)"
	# A column whose length runs past the row, and a row with a byte
	# too many.
	wire_refused ansrowshort "$at the server sent a row that does not parse \(2027\)"
	wire_refused ansrowlong "$at the server sent a row that does not parse \(2027\)"
	# An error after the first row: the rows go, the error is said.
	wire_refused ansrowerr "$at Query execution was interrupted \(1317\)"
}

@test "MySQL: an answer that says the server killed our session: tried again until -w, 125, one line, and nothing more written to the session it ended" {
	store_built mysql
	wire_refused anskilled "setting up the session on MySQL at 127\.0\.0\.1:[0-9]+ failed: Connection was killed \(1927\)"
	run ! grep -q quit "$T/port.got"
	grep -q "^sql SET SESSION" "$T/port.got"
	# A fault that heals (the session ended, not refused): tried again.
	(( MS >= 900 ))
	(( $(grep -c accepted "$T/port.conns") >= 2 ))
}

@test "MySQL: the fence as a 3-byte length-encoded integer: read as the same number" {
	store_built mysql
	hostile mysql w-fence3
	URL=$(url mysql)
	measured -w 3s job sh -c 'echo "fence $LEASERUN_FENCE"'
	assert_equal "$status" 0
	assert_equal "$output" "fence 5"
	assert_equal "$stderr" ""
}

@test "MySQL: the end of the session sent unasked with the grant's last answer (an error packet, a header and 0xff alone, an OK): lost before the command starts, tried again on a new session" {
	store_built mysql
	for m in err:'Connection was killed' errmore:'Connection was killed' \
		five:'the server ended the session unasked' \
		ok:'the server ended the session unasked'; do
		rm -f "$T/port.got" "$T/port.conns"
		hostile mysql "w-tail${m%%:*}"
		URL=$(url mysql)
		measured -w 3s job sh -c 'echo "fence $LEASERUN_FENCE"'
		assert_equal "$status" 0
		assert_equal "$output" "fence 6"
		assert_regex "$stderr" "^leaserun: job: lease lost before the command started: MySQL at 127\.0\.0\.1:$HPORT ended our session \(${m#*:}\): the lock went with it; trying again\$"
		assert_equal "${#stderr_lines[@]}" 1
		assert_equal "$(grep -c accepted "$T/port.conns")" 2
		kill_bg
		BG_PIDS=
	done
}

@test "MySQL: the end of the session sent unasked while the command runs (an error packet, a header and 0xff alone, an OK): the lease is lost, 124, the command stopped, nothing more written to that session" {
	store_built mysql
	for m in err:'Connection was killed' errmore:'Connection was killed' \
		five:'the server ended the session unasked' \
		ok:'the server ended the session unasked'; do
		rm -f "$T/port.got" "$T/port.conns"
		hostile mysql "w-later${m%%:*}"
		URL=$(url mysql)
		measured -w 3s job sh -c 'sleep 20; touch "$1"' sh "$T/ran"
		assert_equal "$status" 124
		assert_equal "${stderr_lines[0]}" "leaserun: job: lease lost: MySQL at 127.0.0.1:$HPORT ended our session (${m#*:}): the lock went with it; killing the command"
		assert_equal "${stderr_lines[1]}" "leaserun: job: the command was stopped because the lease was lost"
		assert_equal "${#stderr_lines[@]}" 2
		(( MS < 5000 ))
		run ! grep -q quit "$T/port.got"
		kill_bg
		BG_PIDS=
	done
	[ ! -e "$T/ran" ]
}

@test "MySQL: a MariaDB built without Galera (no @@wsrep_on): the setup is asked again without it, and the command runs" {
	store_built mysql
	hostile mysql w-nogalera
	URL=$(url mysql)
	measured -w 3s job sh -c 'echo "fence $LEASERUN_FENCE"'
	assert_equal "$status" 0
	assert_equal "$output" "fence 5"
	assert_equal "$stderr" ""
	# Asked once with @@wsrep_on, refused, once without it; no third time.
	assert_equal "$(grep -c '^sql SELECT CONNECTION_ID()' "$T/port.got")" 2
	assert_equal "$(grep -c '^sql SET SESSION' "$T/port.got")" 2
}

@test "MySQL: --break on a holder whose connection KILL never ends: 125 at the deadline, one line; a holder that cannot be asked about again: 125 at once" {
	store_built mysql
	hostile mysql w-breakstuck
	URL=$(url mysql)
	measured -t 2s --break job
	assert_equal "$status" 125
	assert_equal "$stderr" "leaserun: job: cannot break job: MySQL at 127.0.0.1:$HPORT: the holders' connections did not end in time"
	# Asked again every 20 ms or so, until the deadline (TTL, 2 s).
	(( MS >= 1900 && MS < 5000 ))
	n=$(grep -c "^sql SELECT IS_USED_LOCK('lr:hostile')\$" "$T/port.got")
	echo "# asked $n times" >&3
	(( n >= 10 && n <= 110 ))
	grep -qx "sql KILL CONNECTION 42" "$T/port.got"
	kill_bg
	BG_PIDS=
	rm -f "$T/port.got"
	hostile mysql w-breakfail
	URL=$(url mysql)
	measured -t 2s --break job
	assert_equal "$status" 125
	assert_equal "$stderr" "leaserun: job: cannot break job: IS_USED_LOCK on MySQL at 127.0.0.1:$HPORT failed: Query execution was interrupted (1317)"
	(( MS < 1500 ))
}

@test "MySQL: a renewal that finds another connection's session, or ours without the lock: 124, one line saying which, the command stopped, and no RELEASE_LOCK on a session whose lock is not ours" {
	store_built mysql
	for m in changed:'our session changed \(connection 7, now 8\): a proxy in between hands sessions around, and the lock does not stay with this connection' \
		notours:'our session \(connection 7\) no longer holds the lock'; do
		rm -f "$T/port.got"
		hostile mysql "w-${m%%:*}"
		URL=$(url mysql)
		measured -w 1s -t 1s job sh -c 'sleep 20; touch "$1"' sh "$T/ran"
		assert_equal "$status" 124
		assert_regex "${stderr_lines[0]}" "^leaserun: job: lease lost: MySQL at 127\.0\.0\.1:$HPORT: ${m#*:}; killing the command\$"
		assert_equal "${stderr_lines[1]}" "leaserun: job: the command was stopped because the lease was lost"
		assert_equal "${#stderr_lines[@]}" 2
		run ! grep -q RELEASE_LOCK "$T/port.got"
		kill_bg
		BG_PIDS=
	done
	[ ! -e "$T/ran" ]
}

@test "MySQL: a fence the server refuses to write (read-only), and a RELEASE_LOCK that fails too: each try's session is ended, so the lock it took goes with it; one that succeeds keeps the session" {
	store_built mysql
	hostile mysql w-givebackfail
	URL=$(url mysql)
	measured -w 1s job touch "$T/ran"
	assert_equal "$status" 125
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "read-only"
	[ ! -e "$T/ran" ]
	# Tried again, each time on a new session: as many sessions as
	# tries, each try's give-back asked for once.
	tries=$(grep -c "^sql SELECT IF(IS_USED_LOCK" "$T/port.got")
	echo "# $tries tries" >&3
	(( tries >= 2 ))
	assert_equal "$(grep -c '^sql SET SESSION' "$T/port.got")" "$tries"
	assert_equal "$(grep -c '^sql SELECT RELEASE_LOCK' "$T/port.got")" "$tries"
	assert_equal "$(grep -c accepted "$T/port.conns")" "$tries"
	# A give-back that succeeds keeps the session for the next try.
	kill_bg
	BG_PIDS=
	rm -f "$T/port.got" "$T/port.conns"
	hostile mysql w-givebackok
	URL=$(url mysql)
	measured -w 1s job touch "$T/ran"
	assert_equal "$status" 125
	[ ! -e "$T/ran" ]
	tries=$(grep -c "^sql SELECT IF(IS_USED_LOCK" "$T/port.got")
	(( tries >= 2 ))
	assert_equal "$(grep -c '^sql SELECT RELEASE_LOCK' "$T/port.got")" "$tries"
	assert_equal "$(grep -c '^sql SET SESSION' "$T/port.got")" 1
	assert_equal "$(grep -c accepted "$T/port.conns")" 1
}

@test "MySQL: a prefix too long for the lock's name (?prefix= of 120 bytes): 125, one line, before any statement" {
	store_built mysql
	rm -f "$T/port.got"
	hostile mysql w-none
	URL="$(url mysql)?prefix=$(printf 'p%.0s' {1..120})"
	measured -w 1s job touch "$T/ran"
	assert_equal "$status" 125
	assert_equal "$stderr" "leaserun: job: cannot open mysql://lr@127.0.0.1:$HPORT/db?prefix=$(printf 'p%.0s' {1..120}): MySQL: the lease name or prefix is too long"
	run ! grep -q "^sql" "$T/port.got"
	[ ! -e "$T/ran" ]
}

@test "MySQL: a switch to mysql_clear_password over a Unix socket: the password with its NUL, or a NUL alone for a user without one; the command runs" {
	store_built mysql
	rm -f "$T/port"
	python3 "$LR_SRCDIR/tests/hostile.py" mysql-unix w-clear "$T/port" &
	BG_PIDS="$BG_PIDS $!"
	wait_until 10 test -s "$T/port"
	for u in lr:Hunter2-pw anon; do
		URL="mysql://$u@/db?socket=$T/port.sock"
		measured -w 2s job sh -c 'echo "fence $LEASERUN_FENCE"'
		assert_equal "$status" 0
		assert_equal "$output" "fence 5"
		assert_equal "$stderr" ""
	done
	grep -qx "cleartext lr" "$T/port.got"
	grep -qx "cleartext anon" "$T/port.got"
	run ! grep -q "cleartext refused" "$T/port.got"
}

@test "a server that quotes the password it was refused: a secret URL parameter is masked as it was sent (decoded), not only as written" {
	store_built redis
	hostile redis echoauth
	# sentinel_password is sent decoded: p@ss!w0rd.
	URL="redis+sentinel://127.0.0.1:$HPORT/m?sentinel_password=p%40ss%21w0rd"
	measured -n job touch "$T/ran"
	assert_equal "$status" 125
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "authentication failed: WRONGPASS '\*{9}' is not the password"
	[[ "$stderr" != *w0rd* ]]
	[ ! -e "$T/ran" ]
}

@test "MySQL: an ssl-ca file that cannot be read or holds no certificate: 125 before the handshake, one line naming the file" {
	store_built mysql
	hostile mysql tlsdrop
	echo "not a certificate" > "$T/bad.pem"
	for ca in "$T/missing.pem" "$T/bad.pem"; do
		URL="$(url mysql)?ssl-mode=VERIFY_CA&ssl-ca=$ca"
		measured -w 5s job touch "$T/ran"
		assert_equal "$status" 125
		# (The reason is the TLS library's: no such file, no
		# certificate found.)
		assert_regex "$stderr" "^leaserun: job: cannot open mysql://lr@127\.0\.0\.1:$HPORT/db\?ssl-mode=VERIFY_CA&ssl-ca=$ca: cannot connect to MySQL at 127\.0\.0\.1:$HPORT: $ca: [a-zA-Z].*\$"
		assert_equal "${#stderr_lines[@]}" 1
		# Refused, not a fault that heals: no second try (tries
		# would go on to the end of -w).
		(( MS < 3000 ))
	done
	[ ! -e "$T/ran" ]
}

@test "MySQL: two hosts, the first ends each session it sets up (ER_CONNECTION_KILLED): a fault of that host, so the second one is tried and the command runs" {
	store_built mysql
	hostile mysql w-anskilled
	P1=$HPORT
	rm -f "$T/port"
	python3 "$LR_SRCDIR/tests/hostile.py" mysql w-none "$T/port2" &
	BG_PIDS="$BG_PIDS $!"
	wait_until 10 test -s "$T/port2"
	URL="mysql://lr:Hunter2-pw@127.0.0.1:$P1,127.0.0.1:$(cat "$T/port2")/db"
	measured -w 3s job sh -c 'echo "fence $LEASERUN_FENCE"'
	assert_equal "$status" 0
	assert_equal "$output" "fence 5"
	# Once to the first host, then the second, in the same try.
	assert_equal "$(grep -c accepted "$T/port.conns")" 1
	assert_equal "$(grep -c accepted "$T/port2.conns")" 1
}

@test "MySQL: a server that takes statements together: setup, first try and look in one round trip; a look answered without a row asked again; an error among a later answer's rows: 125, one line" {
	store_built mysql
	for m in none nolook; do
		rm -f "$T/port.got"
		hostile mysql "w-multi-$m"
		URL=$(url mysql)
		measured -w 2s job sh -c 'echo "fence $LEASERUN_FENCE"'
		assert_equal "$status" 0
		assert_equal "$output" "fence 5"
		assert_equal "$stderr" ""
		# The try in the batch only; the look again after it only when
		# its answer had no row to go by.
		assert_equal "$(grep -c '^sql SELECT IF(IS_USED_LOCK' "$T/port.got")" 1
		looks=$(grep -c '^sql SELECT COALESCE(IS_USED_LOCK' "$T/port.got")
		assert_equal "$looks" "$([ "$m" = none ] && echo 1 || echo 2)"
		kill_bg
		BG_PIDS=
	done
	wire_refused multi-rowerr "setting up the session on MySQL at 127\.0\.0\.1:[0-9]+ failed: Query execution was interrupted \(1317\)"
}

@test "MySQL: greeted with a login method leaserun does not speak, then switched to one it does: no scramble in the first answer, the password's in the second; the command runs" {
	store_built mysql
	hostile mysql w-unknownmethod
	URL=$(url mysql)
	measured -w 2s job sh -c 'echo "fence $LEASERUN_FENCE"'
	assert_equal "$status" 0
	assert_equal "$output" "fence 5"
	assert_equal "$stderr" ""
	grep -qx "login scramble 0" "$T/port.got"
}

@test "MySQL: a user name too long for the login packet: 125 at once, nothing sent" {
	store_built mysql
	hostile mysql w-none
	u=$(printf 'u%.0s' {1..1000})
	URL="mysql://$u:Hunter2-pw@127.0.0.1:$HPORT/db"
	measured -w 2s job touch "$T/ran"
	assert_equal "$status" 125
	assert_equal "${#stderr_lines[@]}" 1
	(( MS < 1500 ))
	# The URL is cut in the line, so that the reason ends it.
	[[ "$stderr" == *"...: "*"the user name is too long"* ]]
	run ! grep -q "login" "$T/port.got"
	no_secret
	[ ! -e "$T/ran" ]
}

@test "MySQL: a semaphore's try answered after its deadline: that session is ended (its late answer may hold a slot), the next try on a new one gets slot 0" {
	store_built mysql
	hostile mysql w-slotslow
	URL=$(url mysql)
	measured -t 1s -w 5s -l 2 job sh -c 'echo "slot $LEASERUN_SLOT"'
	assert_equal "$status" 0
	assert_equal "$output" "slot 0"
	assert_equal "$(grep -c '^sql SELECT CASE WHEN GET_LOCK' "$T/port.got")" 2
	assert_equal "$(grep -c accepted "$T/port.conns")" 2
	assert_equal "$(grep -c '^sql SET SESSION' "$T/port.got")" 2
}
