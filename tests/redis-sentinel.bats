#!/usr/bin/env bats
# The Redis store under Sentinel (redis+sentinel://, rediss+sentinel://)
# against real servers: a master, two replicas and three sentinels on
# loopback (redis-sentinel.bash), failovers by kill -9 and SIGSTOP of the
# master, and durable grants (WAIT).

load 'helpers'
load 'certs'
load 'redis-sentinel'

setup_file() {
	[ -e "$LEASERUN_MODULE_DIR/redis.so" ] ||
		{ echo "no redis.so in $LEASERUN_MODULE_DIR" >&2; return 1; }
	sentinel_start
}

teardown_file() {
	sentinel_stop
}

setup() {
	BG_PIDS=
	export LEASERUN_URL=$SN_URL
}

teardown() {
	local p
	kill_bg
	for p in $SN_NODES; do
		kill -CONT "$(sn_node_pid "$p")" 2>/dev/null || true
	done
	# A test that started a topology of its own stops it: teardown_file
	# knows only the one setup_file started.
	if [ -n "${SN_TLS:-}" ]; then
		sentinel_stop
	fi
}

name() { echo "sn-$BATS_TEST_NUMBER"; }
keyof() { echo "leaserun:{$1}"; }

# A command that records "START LAST FENCE" (ns, ns, its fence) in
# DIR/iv.PID, written whole every 10ms until MS have passed, so that a
# command killed on the way leaves its last sign of life.  It writes
# through DIR/tmp.PID, which a command killed between the write and the
# rename leaves behind: that is why the name does not match iv.*.
# Arguments: DIR MS.
section='s=$(date +%s%N); f=$0/iv.$$; t=$0/tmp.$$; end=$((s + $1 * 1000000))
while :; do
	now=$(date +%s%N)
	echo "$s $now $LEASERUN_FENCE" >"$t"; mv -f "$t" "$f"
	[ "$now" -ge "$end" ] && break
	sleep 0.01
done'

# failover_under_load HOW: a holder whose command runs for 5s, three
# waiters behind it, and HOW (kill or stop) done to the master a second
# in.  The sentinels move the master; the holder renews there (its grant
# and renewals were on the replicas before they counted) or is stopped
# in time (124); the waiters move there and each get the lease.  No two
# commands overlap, and the fences increase.
failover_under_load() {
	local d=$BATS_TEST_TMPDIR n m h p pids= i
	n=$(name)
	m=$(sn_master_port)
	"$LEASERUN" -t 6s "$n" sh -c "$section" "$d" 5000 2>"$d/h.err" &
	h=$!
	BG_PIDS="$h"
	wait_until 10 sh -c "ls '$d'/iv.* >/dev/null 2>&1"
	for i in 1 2 3; do
		"$LEASERUN" -t 8s -w 60s "$n" sh -c "$section" "$d" 300 \
			2>"$d/w$i.err" &
		pids="$pids $!"
	done
	BG_PIDS="$h $pids"
	sleep 1
	if [ "$1" = kill ]; then
		kill -9 "$(sn_node_pid "$m")"
	else
		kill -STOP "$(sn_node_pid "$m")"
	fi
	sn_wait_failover "$m"
	echo "# the master moved from $m to $(sn_master_port)" >&3
	wait_rc "$h"
	echo "# the holder: $RC" >&3
	[ "$RC" = 0 ] || [ "$RC" = 124 ] || { cat "$d/h.err"; return 1; }
	for p in $pids; do
		wait_rc "$p"
		[ "$RC" = 0 ] || { cat "$d"/w*.err; return 1; }
	done
	cat "$d"/iv.* >"$d/log"
	[ "$(wc -l <"$d/log")" = 4 ] || { ls "$d"; cat "$d/log"; return 1; }
	run check_intervals "$d/log"
	echo "# $output" >&3
	assert_success
	# The old master joins again, as a replica of the new one.
	if [ "$1" = kill ]; then
		sn_revive "$m"
	else
		kill -CONT "$(sn_node_pid "$m")"
		sn_rejoin "$m"
	fi
}

@test "redis+sentinel:// asks the sentinels for the master: the lease is there, and LEASERUN_URL has neither password" {
	n=$(name)
	m=$(sn_master_port)
	run --separate-stderr "$LEASERUN" "$n" sh -c \
		"echo \"\$LEASERUN_URL\"; REDISCLI_AUTH='$SN_DATA_PW' redis-cli -p $m exists '$(keyof "$n")'"
	assert_success
	[ -z "$stderr" ]
	assert_line --index 1 1
	[[ ${lines[0]} == redis+sentinel://127.0.0.1:*/$SN_MASTER ]]
	[[ ${lines[0]} != *"$SN_DATA_PW"* && ${lines[0]} != *"$SN_SENTINEL_PW"* ]]
	# --status asks there too.
	start_holder "$n" -t 30s
	run "$LEASERUN" --status "$n"
	assert_success
	assert_output --partial "pid $BG"
}

@test "a grant and each renewal reach a majority before they count: WAIT 1 of 2 replicas, and the replicas have the key" {
	n=$(name)
	m=$(sn_master_port)
	sn_cli "$m" config resetstat >/dev/null
	start_holder "$n" -t 1500ms
	for p in $SN_NODES; do
		[ "$(sn_cli "$p" exists "$(keyof "$n")")" = 1 ]
	done
	sleep 1.2 # two renewals
	kill "$BG"
	wait_rc "$BG"
	calls=$(sn_cli "$m" info commandstats | tr -d '\r' |
		sed -n 's/^cmdstat_wait:calls=\([0-9]*\),.*/\1/p')
	echo "# $calls WAITs" >&3
	((calls >= 3))
	# replicas=all waits for both; replicas=0 for none.
	sn_cli "$m" config resetstat >/dev/null
	LEASERUN_URL="$SN_URL&replicas=all" run -0 "$LEASERUN" "$n" true
	LEASERUN_URL="$SN_URL&replicas=0" run -0 "$LEASERUN" "$n" true
	[ "$(sn_cli "$m" info commandstats | tr -d '\r' |
		sed -n 's/^cmdstat_wait:calls=\([0-9]*\),.*/\1/p')" = 1 ]
}

@test "a grant the replicas do not acknowledge is given back: 125 and one line, and the command does not run" {
	n=$(name)
	m=$(sn_master_port)
	set -- $SN_NODES
	r1=$1 r2=$2
	[ "$r1" != "$m" ] || r1=$3
	[ "$r2" != "$m" ] || r2=$3
	# One replica stopped: the default (a majority: 1 of 2) goes on,
	# replicas=all cannot.
	kill -STOP "$(sn_node_pid "$r1")"
	run --separate-stderr "$LEASERUN" -t 2s "$n" sh -c 'echo ran'
	assert_success
	assert_output ran
	# Replicas that may come back are waited for as long as -w says,
	# then 125 with the last error.
	LEASERUN_URL="$SN_URL&replicas=all" run -125 --separate-stderr \
		"$LEASERUN" -w 2s -t 2s "$n" sh -c 'echo ran'
	echo "# $stderr" >&3
	[ -z "$output" ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"the grant reached 1 of 2 replicas"*"(replicas=all)"* ]]
	[ "$(sn_cli "$m" exists "$(keyof "$n")")" = 0 ]
	# Both stopped: a grant only the master has could die with it, and
	# its command run twice after a failover.  None runs.
	kill -STOP "$(sn_node_pid "$r2")"
	run -125 --separate-stderr "$LEASERUN" -w 2s -t 2s "$n" sh -c 'echo ran'
	kill -CONT "$(sn_node_pid "$r1")" "$(sn_node_pid "$r2")"
	echo "# $stderr" >&3
	[ -z "$output" ]
	[[ "$stderr" == *"the grant reached 0 of 1 replicas"*"(replicas=auto)"* ]]
	[ "$(sn_cli "$m" exists "$(keyof "$n")")" = 0 ]
}

@test "the master killed (kill -9) while a command holds the lease and three wait: one command at a time, fences increase" {
	failover_under_load kill
}

@test "the master stopped (SIGSTOP) while a command holds the lease and three wait: one command at a time, fences increase" {
	failover_under_load stop
}

@test "both passwords given with -U are not in ps while leaserun holds the lease" {
	ps_hides_password "$(name)" "$SN_SENTINEL_PW" -t 30s -U "$SN_URL"
	ps_hides_password "$(name)-2" "$SN_DATA_PW" -t 30s -U "$SN_URL"
}

@test "a wrong sentinel password, an unknown master or no sentinel: 125 and one line without the passwords" {
	n=$(name)
	LEASERUN_URL=${SN_URL/sentinel_password=/sentinel_password=x} \
		run -125 --separate-stderr "$LEASERUN" "$n" true
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"sentinel at 127.0.0.1:"*"authentication failed"* ]]
	[[ "$stderr" != *"$SN_SENTINEL_PW"* && "$stderr" != *"$SN_DATA_PW"* ]]
	LEASERUN_URL=${SN_URL/\/$SN_MASTER/\/nosuch} \
		run -125 --separate-stderr "$LEASERUN" "$n" true
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"knows no master named 'nosuch'"* ]]
	# No sentinel answers: that may heal, so -n tries once, and -w
	# gives up once the wait runs out.
	port=$("$LR_BUILDDIR/tests/freeport")
	LEASERUN_URL="redis+sentinel://127.0.0.1:$port/$SN_MASTER" \
		run -125 --separate-stderr "$LEASERUN" -n "$n" true
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"cannot connect to sentinel at 127.0.0.1:"*"Connection refused"* ]]
	t0=$(now_ms)
	LEASERUN_URL="redis+sentinel://127.0.0.1:$port/$SN_MASTER" \
		run -125 --separate-stderr "$LEASERUN" -w 2s "$n" true
	t1=$(now_ms)
	echo "# no sentinel, -w 2s: 125 after $((t1 - t0))ms" >&3
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"Connection refused"* ]]
	(( t1 - t0 >= 1500 && t1 - t0 < 3000 ))
	LEASERUN_URL="redis+sentinel://127.0.0.1" \
		run -125 --separate-stderr "$LEASERUN" "$n" true
	[[ "$stderr" == *"expected redis+sentinel://HOST:PORT[,HOST:PORT...]/MASTER"* ]]
}

@test "faults: the master killed (kill -9) while two workers loop with -w 20, the sentinels slow to promote: no run ends 125" {
	local d=$BATS_TEST_TMPDIR n m w pids=
	n=$(name)
	m=$(sn_master_port)
	# Each worker runs leaserun again and again until told to stop,
	# noting every exit status.
	for w in 1 2; do
		(
			while [ ! -e "$d/stop" ]; do
				rc=0
				"$LEASERUN" -v -t 1s -w 20 "$n" sh -c "$section" "$d" 100 \
					2>>"$d/w$w.err" || rc=$?
				echo "$rc" >>"$d/w$w.rc"
			done
		) &
		pids="$pids $!"
	done
	BG_PIDS=$pids
	# The sentinels take 6s to call the master down, longer than a
	# run's open or acquire may take (5s, 1s): they go on naming the
	# dead master, which refuses connections, until they promote.
	for p in $SN_SENTINELS; do
		sn_sentinel_cli "$p" sentinel set "$SN_MASTER" down-after-milliseconds 6000 >/dev/null
	done
	sleep 1.5
	kill -9 "$(sn_node_pid "$m")"
	sn_wait_failover "$m"
	echo "# the master moved from $m to $(sn_master_port)" >&3
	# Runs after the failover too.
	sleep 2
	touch "$d/stop"
	for p in $pids; do
		wait "$p"
	done
	# Not before: a sentinel whose next ping of the new master is due
	# in a second would call it down 500ms after the change, and fail
	# over again while the first new master still takes writes (two
	# masters: two holders).
	for p in $SN_SENTINELS; do
		sn_sentinel_cli "$p" sentinel set "$SN_MASTER" down-after-milliseconds 500 >/dev/null
	done
	cat "$d"/w*.rc | sort | uniq -c | sed 's/^/# exit status: /' >&3
	grep -h -e "trying again" -e "answers again" "$d"/w*.err | sort | uniq -c | head -n 8 >&3
	# None gave up: each rode the failover out and ran (a run that
	# held the lease as the master died may end 124).
	[ "$(cat "$d"/w*.rc | grep -cvx -e 0 -e 124)" = 0 ] ||
		{ cat "$d"/w*.err; return 1; }
	(( $(cat "$d"/w*.rc | wc -l) >= 6 ))
	cat "$d"/iv.* >"$d/log"
	run check_intervals "$d/log"
	[ "$status" = 0 ] || { echo "$output"; sort -n "$d/log"; cat "$d"/w*.err; }
	assert_success
	sn_revive "$m"
}

@test "faults: a list of sentinels whose first is down: the next one names the master" {
	port=$("$LR_BUILDDIR/tests/freeport")
	LEASERUN_URL=${SN_URL/@127.0.0.1:/@127.0.0.1:$port,127.0.0.1:} \
		run --separate-stderr "$LEASERUN" -n "$(name)" sh -c 'echo ran'
	assert_success
	assert_output ran
}

@test "faults: a sentinel that names a master nobody listens for (cut off from the others): the next sentinel is asked" {
	local d=$BATS_TEST_TMPDIR t0 t1
	# tests/hostile.py: a sentinel that answers 127.0.0.1:1.
	python3 "$LR_SRCDIR/tests/hostile.py" redis deadmaster "$d/port" &
	BG_PIDS=$!
	wait_until 10 test -s "$d/port"
	t0=$(now_ms)
	LEASERUN_URL=${SN_URL/@127.0.0.1:/@127.0.0.1:$(cat "$d/port"),127.0.0.1:} \
		run --separate-stderr "$LEASERUN" -v -w 10 "$(name)" sh -c 'echo ran'
	t1=$(now_ms)
	echo "# ran after $((t1 - t0))ms: $stderr" >&3
	assert_success
	assert_output ran
	(( t1 - t0 < 3000 ))
}

@test "faults: a sentinel that names a replica as the master (its view behind a failover): the next sentinel is asked, and the run runs" {
	local d=$BATS_TEST_TMPDIR m r p
	m=$(sn_master_port)
	for p in $SN_NODES; do
		[ "$p" != "$m" ] && { r=$p; break; }
	done
	HOSTILE_MASTER_PORT=$r python3 "$LR_SRCDIR/tests/hostile.py" redis deadmaster "$d/port" &
	BG_PIDS=$!
	wait_until 10 test -s "$d/port"
	LEASERUN_URL=${SN_URL/@127.0.0.1:/@127.0.0.1:$(cat "$d/port"),127.0.0.1:} \
		run --separate-stderr "$LEASERUN" -w 5 "$(name)" sh -c 'echo ran'
	assert_success
	assert_output ran
	[ -s "$d/port.conns" ]
	# With that sentinel alone, it may heal (the failover ends): the run
	# waits it out until -w runs out, past the 5s of one open.
	t0=$(now_ms)
	LEASERUN_URL="redis+sentinel://:$SN_DATA_PW@127.0.0.1:$(cat "$d/port")/$SN_MASTER" \
		run -125 --separate-stderr "$LEASERUN" -t 1s -w 9 "$(name)" true
	t1=$(now_ms)
	echo "# after $((t1 - t0))ms: $stderr" >&3
	[[ "${stderr_lines[-1]}" == *"127.0.0.1:$r (master $SN_MASTER) is not the master (role:slave): a failover is under way"* ]]
	(( t1 - t0 >= 8000 ))
}

@test "faults: a master named by a sentinel answers READONLY (demoted by a failover since): the next sentinel is asked, and the run runs" {
	local d=$BATS_TEST_TMPDIR
	python3 "$LR_SRCDIR/tests/hostile.py" redis readonly "$d/port" &
	BG_PIDS=$!
	wait_until 10 test -s "$d/port"
	LEASERUN_URL=${SN_URL/@127.0.0.1:/@127.0.0.1:$(cat "$d/port"),127.0.0.1:} \
		run --separate-stderr "$LEASERUN" -w 5 "$(name)" sh -c 'echo ran'
	echo "# $stderr" >&3
	assert_success
	assert_output ran
	# Asked as a sentinel, then as the master.
	(( $(wc -l <"$d/port.conns") >= 2 ))
}

@test "faults: a master named by a sentinel answers BUSY (a script runs): the next sentinel is asked; alone, it is waited out until -w" {
	local d=$BATS_TEST_TMPDIR t0 t1
	python3 "$LR_SRCDIR/tests/hostile.py" redis busy "$d/port" &
	BG_PIDS=$!
	wait_until 10 test -s "$d/port"
	LEASERUN_URL=${SN_URL/@127.0.0.1:/@127.0.0.1:$(cat "$d/port"),127.0.0.1:} \
		run --separate-stderr "$LEASERUN" -w 5 "$(name)" sh -c 'echo ran'
	assert_success
	assert_output ran
	t0=$(now_ms)
	LEASERUN_URL="redis+sentinel://:$SN_DATA_PW@127.0.0.1:$(cat "$d/port")/$SN_MASTER" \
		run -125 --separate-stderr "$LEASERUN" -t 1s -w 9 "$(name)" true
	t1=$(now_ms)
	echo "# after $((t1 - t0))ms: $stderr" >&3
	[[ "${stderr_lines[-1]}" == *"(master $SN_MASTER): BUSY Redis is busy running a script."* ]]
	(( t1 - t0 >= 8000 ))
}

@test "faults: a master named by a sentinel closes the connection at the WAIT behind a grant: the next sentinel is asked, and the run runs" {
	local d=$BATS_TEST_TMPDIR
	python3 "$LR_SRCDIR/tests/hostile.py" redis waitcut "$d/port" &
	BG_PIDS=$!
	wait_until 10 test -s "$d/port"
	LEASERUN_URL=${SN_URL/@127.0.0.1:/@127.0.0.1:$(cat "$d/port"),127.0.0.1:} \
		run --separate-stderr "$LEASERUN" -w 5 "$(name)" sh -c 'echo ran'
	echo "# $stderr" >&3
	assert_success
	assert_output ran
	(( $(wc -l <"$d/port.conns") >= 2 ))
}

@test "faults: a master that answers WAIT after the grant's step gave up on it: the late answer is never read as the next command's; waited out until -w" {
	local d=$BATS_TEST_TMPDIR t0 t1
	python3 "$LR_SRCDIR/tests/hostile.py" redis waitlate "$d/port" &
	BG_PIDS=$!
	wait_until 10 test -s "$d/port"
	t0=$(now_ms)
	LEASERUN_URL="redis+sentinel://:$SN_DATA_PW@127.0.0.1:$(cat "$d/port")/$SN_MASTER" \
		run -125 --separate-stderr "$LEASERUN" -t 1s -w 5 "$(name)" true
	t1=$(now_ms)
	echo "# after $((t1 - t0))ms: $stderr" >&3
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"(master $SN_MASTER): WAIT: no answer within "* ]]
	(( t1 - t0 >= 4000 ))
}

@test "a master named by a sentinel whose role is 40 characters long: 125, and the line shows its first 31" {
	local d=$BATS_TEST_TMPDIR
	python3 "$LR_SRCDIR/tests/hostile.py" redis longrole "$d/port" &
	BG_PIDS=$!
	wait_until 10 test -s "$d/port"
	LEASERUN_URL="redis+sentinel://:$SN_DATA_PW@127.0.0.1:$(cat "$d/port")/$SN_MASTER" \
		run -125 --separate-stderr "$LEASERUN" -n "$(name)" true
	echo "# $stderr" >&3
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"is not the master (role:$(printf 'x%.0s' $(seq 31))): a failover is under way" ]]
}

@test "a sentinel that names a master at no port (99999): 125 and one line that shows what it said" {
	local d=$BATS_TEST_TMPDIR
	python3 "$LR_SRCDIR/tests/hostile.py" redis badmaster "$d/port" &
	BG_PIDS=$!
	wait_until 10 test -s "$d/port"
	LEASERUN_URL="redis+sentinel://127.0.0.1:$(cat "$d/port")/$SN_MASTER" \
		run -125 --separate-stderr "$LEASERUN" -w 2 "$(name)" true
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"sentinel at 127.0.0.1:$(cat "$d/port"): a master at '127.0.0.1:99999'?"* ]]
}

@test "no password for the data nodes (the sentinels' only): 125 at once and one line that says how to give one" {
	t0=$(now_ms)
	LEASERUN_URL=${SN_URL/:$SN_DATA_PW@/} \
		run -125 --separate-stderr "$LEASERUN" -w 10 "$(name)" true
	t1=$(now_ms)
	echo "# after $((t1 - t0))ms: $stderr" >&3
	(( t1 - t0 < 3000 ))
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"NOAUTH"*"(give a password in the URL or REDISCLI_AUTH)" ]]
	[[ "$stderr" != *"$SN_SENTINEL_PW"* ]]
}

@test "a user who may not WAIT: 125 and one line with the server's reason, and the command does not run" {
	local d=$BATS_TEST_TMPDIR m
	m=$(sn_master_port)
	sn_cli "$m" acl setuser nowait on '>Nowait-pw-1' '~*' '&*' +@all -wait >/dev/null
	LEASERUN_URL=${SN_URL/:$SN_DATA_PW@/nowait:Nowait-pw-1@} \
		run -125 --separate-stderr "$LEASERUN" -w 5 "$(name)" touch "$d/ran"
	sn_cli "$m" acl deluser nowait >/dev/null
	echo "# $stderr" >&3
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"WAIT: NOPERM"* ]]
	[ ! -e "$d/ran" ]
}

@test "rediss+sentinel://: TLS to the sentinels and the data nodes, through a failover" {
	command -v openssl >/dev/null || { echo "openssl is needed" >&2; return 1; }
	[ -e "$LEASERUN_MODULE_DIR/redis-tls.so" ] || { echo "no redis-tls.so" >&2; return 1; }
	sentinel_stop
	sentinel_start tls
	export LEASERUN_URL=$SN_URL
	run --separate-stderr "$LEASERUN" "$(name)" sh -c 'echo "$LEASERUN_URL"'
	assert_success
	[[ $output == "rediss+sentinel://127.0.0.1:"*"/$SN_MASTER?cacert=$SN_DIR/ca.crt" ]]
	# Certificates are checked on the sentinels as on the data nodes.
	LEASERUN_URL=${SN_URL/ca.crt/other.crt} \
		run -125 --separate-stderr "$LEASERUN" "$(name)" true
	[[ "$stderr" == *"sentinel at 127.0.0.1:"*"certificate verify failed"* ]]
	failover_under_load kill
}
