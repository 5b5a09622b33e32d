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

@test "Redis: a grant whose fence is nil, negative, or below the run's first: 125, the command does not run" {
	store_built redis
	for m in nilfence negfence fencedown; do
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
