#!/usr/bin/env bats
# The PostgreSQL store against a real PostgreSQL (initdb + pg_ctl in a
# temporary directory, on a free loopback port), and a real pgbouncer.
# shellcheck disable=SC2016,SC2154 # $VAR for the child; bats sets stderr_lines

load 'helpers'
load 'pg-server'

setup_file() {
	[ -e "$LEASERUN_MODULE_DIR/pg.so" ] ||
		{ echo "no pg.so in $LEASERUN_MODULE_DIR" >&2; return 1; }
	pg_server_start
	export LEASERUN_URL="$PG_URL"
}

teardown_file() {
	pg_server_stop
}

setup() {
	BG_PIDS=
	unset PGPASSWORD
}

teardown() {
	kill_bg
	standby_stop
	# The server must be running for the next test, whatever this one did.
	pg_server_signal CONT || true
	[ -e "$PG_DIR/data/postmaster.pid" ] || pg_server_up || true
	pg_sql "ALTER ROLE lr RESET ALL" >/dev/null 2>&1 || true
	pg_sql "ALTER ROLE lr CONNECTION LIMIT -1" >/dev/null 2>&1 || true
	if [ -n "${PG_REGRANT:-}" ]; then
		pg_sql "GRANT EXECUTE ON FUNCTION $PG_REGRANT TO PUBLIC" >/dev/null 2>&1 || true
	fi
	if [ -n "${PG_REGRANT_LOCKS:-}" ]; then
		pg_sql "GRANT SELECT ON pg_locks TO PUBLIC" >/dev/null 2>&1 || true
	fi
	if [ -n "${PG_RESET_SYSTEM:-}" ]; then
		pg_sql "ALTER SYSTEM RESET ALL" >/dev/null 2>&1 || true
		pg_sql "SELECT pg_reload_conf()" >/dev/null 2>&1 || true
	fi
}

# The table of --once-per, made as a role that may create it would make
# it, if an earlier test dropped it: every test passes alone.
runs_table() {
	[ -n "$(pg_sql "SELECT 1 FROM pg_tables WHERE tablename = 'leaserun_runs'")" ] &&
		return
	pg_sql "GRANT CREATE ON SCHEMA public TO lr" >/dev/null
	"$LEASERUN" --once-per 1ms pg-runs-table true
	pg_sql "REVOKE CREATE ON SCHEMA public FROM lr" >/dev/null
}

# A lease name unique to this test.
name() { echo "pg-$BATS_TEST_NUMBER"; }

# The documented key of a lease name, computed by SQL.
keyof() {
	pg_sql "SELECT ('x' || substr(md5('leaserun:' || '$1'), 1, 16))::bit(64)::bigint"
}

# Granted advisory locks on the key of lease $1 (0 or 1).
held_count() {
	pg_sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'
		AND granted AND objsubid = 1
		AND classid = (($(keyof "$1") >> 32) & 4294967295)
		AND objid = ($(keyof "$1") & 4294967295)"
}
is_held() { [ "$(held_count "$1")" = 1 ]; }
is_free() { [ "$(held_count "$1")" = 0 ]; }

# Backend pid of the leaserun session holding lease $1.
holder_backend() {
	pg_sql "SELECT pid FROM pg_stat_activity
		WHERE application_name LIKE 'leaserun:$1@%'"
}

# Is leaserun pid $2's backend waiting on the advisory lock of lease $1?
queued() {
	[ "$(pg_sql "SELECT count(*) FROM pg_stat_activity
		WHERE application_name LIKE 'leaserun:$1@%:$2'
		AND wait_event_type = 'Lock' AND wait_event = 'advisory'")" = 1 ]
}
nobody_queued() {
	[ "$(pg_sql "SELECT count(*) FROM pg_locks
		WHERE locktype = 'advisory' AND NOT granted")" = 0 ]
}

# Dead, or a zombie nobody reaps (its parent leaserun was killed, and PID 1
# in a container may not reap).
gone() {
	dead "$1" || [[ "$(ps -o stat= -p "$1")" == Z* ]]
}

@test "a plaintext session to localhost or over the server's Unix socket is not warned of as crossing the network" {
	for url in "postgresql://lr:$PG_PASSWORD@localhost:$PG_PORT/postgres?sslmode=disable" \
		"postgresql://lr:$PG_PASSWORD@/postgres?host=$PG_DIR&port=$PG_PORT&sslmode=disable"; do
		LEASERUN_URL=$url run --separate-stderr lr job echo ran
		assert_success
		assert_output ran
		assert_equal "$stderr" ""
	done
}

@test "the command runs with LEASERUN_NAME, a fence and a LEASERUN_URL without the password" {
	run --separate-stderr lr "$(name)" sh -c 'echo "$LEASERUN_NAME|$LEASERUN_FENCE|$LEASERUN_URL"'
	assert_success
	[[ "$output" =~ ^$(name)\|[0-9]+\|postgresql://lr@127.0.0.1:$PG_PORT/postgres\?sslmode=disable$ ]]
	refute_output --partial "$PG_PASSWORD"
}

@test "the exit status is the command's" {
	run lr "$(name)" sh -c 'exit 7'
	assert_failure 7
}

@test "PGPASSWORD authenticates a URL without a password and never reaches the command" {
	PGPASSWORD=$PG_PASSWORD LEASERUN_URL=$PG_URL_NOPW \
		run --separate-stderr lr "$(name)" sh -c 'env | grep -c "^PGPASSWORD=" || true'
	assert_success
	assert_output 0
}

@test "PGPASSFILE supplies the password as it does for psql" {
	pf=$BATS_TEST_TMPDIR/pgpass
	echo "127.0.0.1:$PG_PORT:*:lr:$PG_PASSWORD" > "$pf"
	chmod 600 "$pf"
	PGPASSFILE=$pf LEASERUN_URL=$PG_URL_NOPW run lr "$(name)" true
	assert_success
	PGPASSFILE=/nonexistent LEASERUN_URL=$PG_URL_NOPW run -125 lr "$(name)" true
}

@test "a password given with --url, in the user information or as ?password=, is not in ps while leaserun holds the lease" {
	ps_hides_password "$(name)" "$PG_PASSWORD" -t 30s --url="$PG_URL"
	ps_hides_password "$(name)" "$PG_PASSWORD" -t 30s -U "$PG_URL_NOPW&password=$PG_PASSWORD"
}

@test "a wrong password fails with 125 and one line that does not show the password" {
	LEASERUN_URL="postgresql://lr:Wrong-Pw-123@127.0.0.1:$PG_PORT/postgres" \
		run -125 --separate-stderr lr "$(name)" true
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == leaserun:* ]]
	[[ "$stderr" == *"password authentication failed"* ]]
	[[ "$stderr" != *Wrong-Pw-123* ]]
}

@test "a URL libpq cannot parse: 125, and libpq's message, which repeats the URI, without the password" {
	for u in 'postgres://u:s3cretPW@[::1' 'postgres://u:s3cretPW@[]/db' \
		'postgres://u:s3cretPW@[::1]x/db' 'postgres://u:s3cret%50W@[::1' \
		'postgres://u@[::1?password=s3cret%50W'; do
		LEASERUN_URL=$u run --separate-stderr "$LEASERUN" -n "$(name)" true
		assert_equal "$status" 125
		echo "$stderr" >&3
		assert_regex "$stderr" 'URI.*"postgres://u[:@].*\*\*\*'
		refute_regex "$stderr" "s3cret"
		LEASERUN_URL=$u run --separate-stderr "$LEASERUN" --log-format json -n "$(name)" true
		assert_equal "$status" 125
		jq -e . <<<"$stderr" >/dev/null
		refute_regex "$stderr" "s3cret"
	done
}

@test "a password with libpq's default sslmode=prefer: one warning that the server could have it in clear, and how to require TLS" {
	nossl=${PG_URL%%\?*}
	LEASERUN_URL=$nossl run --separate-stderr "$LEASERUN" "$(name)" true
	assert_success
	assert_equal "$stderr" "leaserun: $(name): PostgreSQL at 127.0.0.1:$PG_PORT: the password goes out with sslmode=prefer, which lets a server (or whoever answers in its place) that declines TLS have it in clear, as this one did; add sslmode=verify-full (or require) to the URL, or set PGSSLMODE"
	# PGSSLMODE=disable is a choice, on loopback: nothing to say.
	PGSSLMODE=disable LEASERUN_URL=$nossl run --separate-stderr "$LEASERUN" "$(name)" true
	assert_success
	assert_equal "$stderr" ""
	# require: the connection fails rather than go out in clear.
	LEASERUN_URL="$nossl?sslmode=require" run --separate-stderr "$LEASERUN" "$(name)" true
	assert_equal "$status" 125
	refute_regex "$stderr" "$PG_PASSWORD"
}

@test "a server that refuses connections: -n fails with 125 at once" {
	port=$("$LR_BUILDDIR/tests/freeport")
	LEASERUN_URL="postgresql://lr@127.0.0.1:$port/postgres" \
		run -125 --separate-stderr lr -n "$(name)" true
	[ "${#stderr_lines[@]}" -eq 1 ]
	# libpq's two lines, the second indented, made one: "; " between
	# them, and the indent gone.
	[[ "$stderr" == *"Connection refused; Is the server running"* ]]
}

# A hot standby of the test server, in its own directory and on its own
# port (pg_basebackup -R: it streams from the primary), for a test that
# stops it itself (teardown stops it too, by its pid file).
standby_start() {
	SB_DIR=$(mktemp -d "${TMPDIR:-/tmp}/leaserun-pgsb.XXXXXX")
	chmod 755 "$SB_DIR"
	[ "$(id -u)" != 0 ] || chown postgres: "$SB_DIR"
	SB_PORT=$("$LR_BUILDDIR/tests/freeport")
	pg_as "$PG_BIN/pg_basebackup" -h "$PG_DIR" -p "$PG_PORT" -U postgres \
		-D "$SB_DIR/data" -R -X stream -c fast
	pg_as "$PG_BIN/pg_ctl" -D "$SB_DIR/data" -l "$SB_DIR/server.log" -w -t 30 \
		-o "${PG_OPTS//$PG_PORT/$SB_PORT} -c unix_socket_directories=$SB_DIR" \
		start >/dev/null
	SB_URL=${PG_URL//:$PG_PORT\//:$SB_PORT/}
}

standby_stop() {
	[ -n "${SB_DIR:-}" ] || return 0
	pg_as "$PG_BIN/pg_ctl" -D "$SB_DIR/data" -m immediate -w -t 30 stop \
		>/dev/null 2>&1 || pg_stop_pidfile "$SB_DIR/data/postmaster.pid"
	rm -rf "$SB_DIR"
	SB_DIR=
}

@test "a standby: -n refuses it with 125; a run that waits gets the lease once a failover promotes it" {
	standby_start
	[ "$(pg_sql "SELECT pg_is_in_recovery()")" = f ]
	n=$(name)
	LEASERUN_URL=$SB_URL run -125 --separate-stderr lr -n "$n" true
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"127.0.0.1:$SB_PORT is a standby (in recovery)"* ]]
	# In recovery may be a failover under way: -w tries again until the
	# standby is promoted, and then runs on it.
	LEASERUN_URL=$SB_URL lr -w 30s "$n" sh -c 'echo "$LEASERUN_FENCE"' \
		>"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err" &
	pid=$!
	BG_PIDS="$BG_PIDS $pid"
	sleep 1.5
	kill -0 "$pid"
	pg_as "$PG_BIN/pg_ctl" -D "$SB_DIR/data" -w -t 30 promote >/dev/null
	wait_rc "$pid"
	standby_stop
	cat "$BATS_TEST_TMPDIR/err"
	[ "$RC" = 0 ]
	[ "$(cat "$BATS_TEST_TMPDIR/out")" -ge 1 ]
}

@test "a server that does not answer: connecting gives up by the deadline with 125" {
	kill -STOP "$(pg_pid)"
	t0=$(now_ms)
	run -125 --separate-stderr lr -n -t 2s "$(name)" true
	t1=$(now_ms)
	# The deadline's own words, not an errno's ("Connection timed out").
	[[ "$stderr" == *"cannot connect to PostgreSQL at "*": timed out"* ]]
	# -n: one open, of at most 2s.
	echo "# -n gave up after $((t1 - t0))ms" >&3
	(( t1 - t0 < 3000 ))
	# -w: a timed-out open is tried again (one open takes at most 5s)
	# until the wait runs out, and not later.
	t0=$(now_ms)
	run -125 --separate-stderr lr -w 7s -t 2s "$(name)" true
	t1=$(now_ms)
	kill -CONT "$(pg_pid)"
	[[ "$stderr" == *"timed out"* ]]
	echo "# -w 7s gave up after $((t1 - t0))ms" >&3
	(( t1 - t0 >= 6500 && t1 - t0 < 8000 ))
}

@test "poll() failing while connecting: 125 with one line that names the error, and no command" {
	T=$BATS_TEST_TMPDIR
	run --separate-stderr lr_failing poll:12 job touch "$T/ran"
	assert_equal "$status" 125
	[ -e "$T/failed" ]
	[ ! -e "$T/ran" ]
	assert_regex "$stderr" "^leaserun: job: cannot open postgresql://lr@127\.0\.0\.1:$PG_PORT/[^ ]*: cannot connect to PostgreSQL at 127\.0\.0\.1:$PG_PORT: Cannot allocate memory\$"
}

@test "poll() interrupted (EINTR), or back before its time with nothing ready, while connecting: the wait goes on, and the run succeeds" {
	T=$BATS_TEST_TMPDIR
	for fail in poll:4 poll:0; do
		rm -f "$T/failed"
		run --separate-stderr lr_failing "$fail" job echo ran
		assert_success
		[ -e "$T/failed" ]
		assert_equal "$output" ran
		assert_equal "$stderr" ""
	done
}

@test "-n exits 1 (or the -E code) while another holds the lease" {
	n=$(name)
	start_holder "$n"
	run lr -n "$n" true
	assert_failure 1
	run lr -n -E 42 "$n" true
	assert_failure 42
}

@test "the lock is the documented advisory key: SQL and leaserun exclude each other" {
	n=$(name)
	start_holder "$n"
	run pg_sql "SELECT pg_try_advisory_lock(('x' || substr(md5('leaserun:' || '$n'), 1, 16))::bit(64)::bigint)"
	assert_output f
	kill "$BG"
	wait_until 5 is_free "$n"
	# Now SQL holds it, in a psql session that lives for 3 seconds.
	"$PG_BIN/psql" -X -q -h "$PG_DIR" -p "$PG_PORT" -U postgres -d postgres -c \
		"SELECT pg_advisory_lock($(keyof "$n"))" -c "SELECT pg_sleep(3)" >/dev/null &
	BG_PIDS="$BG_PIDS $!"
	wait_until 5 is_held "$n"
	run lr -n "$n" true
	assert_failure 1
	run lr --status "$n"
	assert_success
	assert_output --partial "application_name"
}

@test "pg_stat_activity names the lease and the holder" {
	n=$(name)
	start_holder "$n"
	run pg_sql "SELECT application_name FROM pg_stat_activity WHERE application_name LIKE 'leaserun:$n@%'"
	# "#FENCE" once it holds the lock, so that --status can show it.
	fence=$(cat "$BATS_TEST_TMPDIR/$n.fence")
	assert_output "leaserun:$n@$(hostname | cut -c1-24):$BG#$fence"
}

@test "a long name is cut so that the fence always fits application_name" {
	n=pg-$(printf 'x%.0s' $(seq 80))
	start_holder "$n"
	fence=$(cat "$BATS_TEST_TMPDIR/$n.fence")
	run pg_sql "SELECT application_name FROM pg_stat_activity WHERE application_name LIKE 'leaserun:pg-%'"
	assert_regex "$output" "^leaserun:pg-x+@.*:$BG#$fence\$"
	(( ${#output} <= 63 ))
	run lr --status --json "$n"
	assert_success
	jq -e --argjson f "$fence" '.fence == $f' <<<"$output"
}

@test "--status shows the holder's host and pid while held and exits 1 when free" {
	n=$(name)
	run lr --status "$n"
	assert_failure 1
	assert_output --partial "free"
	start_holder "$n"
	run lr --status "$n"
	assert_success
	assert_output --partial "held"
	assert_output --partial "pid $BG"
	assert_output --partial "$(hostname | cut -c1-24)"
	assert_output --partial "since:"
}

@test "a waiter queues on the server, without polling, and gets the lease at once when the holder ends" {
	n=$(name)
	"$LEASERUN" "$n" sh -c "echo > '$BATS_TEST_TMPDIR/h.started'; sleep 1.5; date +%s%N > '$BATS_TEST_TMPDIR/h.end'" &
	h=$!
	wait_until 5 exists "$BATS_TEST_TMPDIR/h.started"
	"$LEASERUN" -w 10 "$n" sh -c "date +%s%N > '$BATS_TEST_TMPDIR/w.start'" &
	w=$!
	BG_PIDS="$h $w"
	# The waiter's backend waits on the advisory lock.
	wait_until 5 queued "$n" "$w"
	wait_rc "$h"; [ "$RC" = 0 ]
	wait_rc "$w"; [ "$RC" = 0 ]
	gap=$(( ($(cat "$BATS_TEST_TMPDIR/w.start") - $(cat "$BATS_TEST_TMPDIR/h.end")) / 1000000 ))
	echo "hand-over took ${gap}ms" >&3
	(( gap < 400 ))
}

@test "a waiter keeps its one session, and so its place in the lock queue, however long it waits" {
	local n w p1 p2
	n=$(name)
	start_holder "$n"
	"$LEASERUN" -w 30s "$n" true 2>/dev/null &
	w=$!
	BG_PIDS="$BG_PIDS $w"
	wait_until 10 queued "$n" "$w"
	p1=$(pg_sql "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity WHERE application_name LIKE 'leaserun:$n@%:$w'")
	# leaserun looks at its wait now and then (about every second).
	sleep 3
	p2=$(pg_sql "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity WHERE application_name LIKE 'leaserun:$n@%:$w'")
	assert_equal "$p2" "$p1"
	queued "$n" "$w"
	release "$n"
	assert_holder_rc 0
	wait_rc "$w"
	assert_equal "$RC" 0
}

@test "role defaults for idle_session_timeout, statement_timeout and lock_timeout do not end a hold or a wait" {
	n=$(name)
	pg_sql "ALTER ROLE lr SET idle_session_timeout = '300ms'"
	pg_sql "ALTER ROLE lr SET statement_timeout = '300ms'"
	pg_sql "ALTER ROLE lr SET lock_timeout = '300ms'"
	"$LEASERUN" -t 3s "$n" sleep 1.5 &
	h=$!
	BG_PIDS=$h
	wait_until 5 is_held "$n"
	run lr -w 10 "$n" true
	wait_rc "$h"
	pg_sql "ALTER ROLE lr RESET ALL"
	[ "$RC" = 0 ]
	assert_success
}

@test "TCP keepalives are on at both ends of a holder's connection" {
	command -v ss >/dev/null || skip "ss (iproute2) is not installed"
	n=$(name)
	start_holder "$n" -t 6s
	# A socket with data in flight shows its retransmit timer ("on")
	# instead, so look a few times.  The first probe goes after a third
	# of the TTL (2s), not after the system's default of two hours.
	wait_until 5 keepalive_on_both_ends 2100
}

# keepalive_on_both_ends MS: both ends of the holder's connection run a
# keepalive timer, due in at most MS.
keepalive_on_both_ends() {
	local out ms
	out=$(ss -tno state established "( sport = :$PG_PORT or dport = :$PG_PORT )")
	[ "$(grep -c 'timer:(keepalive' <<<"$out")" -ge 2 ] || return 1
	# "timer:(keepalive,1.9sec,0)" or "timer:(keepalive,950ms,0)"
	for ms in $(grep -o 'timer:(keepalive,[0-9.]*[a-z]*' <<<"$out" |
		awk -F, '{ v = $2; if (v ~ /ms$/) { sub(/ms/, "", v); print int(v) }
			else if (v ~ /sec$/) { sub(/sec/, "", v); print int(v * 1000) }
			else if (v ~ /min$/) { sub(/min/, "", v); print int(v * 60000) }
			else print 999999999 }'); do
		if [ "$ms" -gt "$1" ]; then
			echo "a keepalive timer is due in ${ms}ms (> $1ms)" >&2
			return 1
		fi
	done
}

@test "-w gives up after the duration with 1 and leaves the lock queue" {
	n=$(name)
	start_holder "$n"
	t0=$(now_ms)
	run lr -w 1s "$n" true
	t1=$(now_ms)
	assert_failure 1
	(( t1 - t0 >= 900 && t1 - t0 < 3000 ))
	# No backend is left waiting for the lock.
	wait_until 3 nobody_queued
}

@test "fences strictly increase from holder to holder" {
	n=$(name)
	a=$(lr "$n" sh -c 'echo $LEASERUN_FENCE')
	b=$(lr "$n" sh -c 'echo $LEASERUN_FENCE')
	c=$(lr "$n" sh -c 'echo $LEASERUN_FENCE')
	(( a < b && b < c ))
}

# fences_survive_a_crash NAME: grants in quick succession, the last one
# got by a waiter (pg_advisory_lock) and still held when the server
# crashes; after the restart, the next fence is above every fence handed
# out before.  The WAL writer writes asynchronous commits every
# wal_writer_delay (200ms); at 10s it certainly has not written the
# loop's when the server crashes, so a fence that was not flushed before
# its command started is handed out again.
fences_survive_a_crash() {
	local n=$1 log=$BATS_TEST_TMPDIR/fences w next max
	PG_RESET_SYSTEM=1
	pg_sql "ALTER SYSTEM SET wal_writer_delay = '10s'" >/dev/null
	pg_sql "SELECT pg_reload_conf()" >/dev/null
	for _ in $(seq 20); do
		lr "$n" sh -c 'echo $LEASERUN_FENCE' >>"$log"
	done
	start_holder "$n"
	cat "$BATS_TEST_TMPDIR/$n.fence" >>"$log"
	"$LEASERUN" -w 10 "$n" sh -c "echo \$LEASERUN_FENCE >> '$log'; echo x > '$BATS_TEST_TMPDIR/w.held'; exec sleep 60" 2>"$BATS_TEST_TMPDIR/w.err" &
	w=$!
	BG_PIDS="$BG_PIDS $w"
	wait_until 5 queued "$n" "$w"
	kill "$BG"
	wait_until 5 exists "$BATS_TEST_TMPDIR/w.held"
	pg_server_crash
	wait_rc "$w"
	next=$(lr "$n" sh -c 'echo $LEASERUN_FENCE')
	max=$(sort -n "$log" | tail -n 1)
	echo "fences before the crash: $(sort -n "$log" | tr '\n' ' ')after: $next"
	[ "$RC" = 124 ]
	[ "$(wc -l <"$log")" = 22 ]
	(( next > max ))
}

@test "fences never repeat after a server crash: each is flushed before its command starts" {
	fences_survive_a_crash "$(name)"
}

@test "fences never repeat after a server crash, with synchronous_commit off for the role" {
	pg_sql "ALTER ROLE lr SET synchronous_commit = off"
	fences_survive_a_crash "$(name)"
}

@test "without EXECUTE on pg_logical_emit_message a grant fails with 125 and says why" {
	n=$(name)
	PG_REGRANT="pg_logical_emit_message(boolean, text, text)"
	pg_sql "REVOKE EXECUTE ON FUNCTION $PG_REGRANT FROM PUBLIC"
	run -125 --separate-stderr lr "$n" echo ran
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"permission denied for function pg_logical_emit_message"* ]]
	assert_output ""
	is_free "$n"
}

@test "pg_terminate_backend of the holder kills the command at once: 124" {
	n=$(name)
	start_holder "$n"
	t0=$(now_ms)
	pg_sql "SELECT pg_terminate_backend($(holder_backend "$n"))" >/dev/null
	wait_rc "$BG"; [ "$RC" = 124 ]
	t1=$(now_ms)
	dead "$CHILD"
	(( t1 - t0 < 1000 ))
	grep -q "ended our session" "$BATS_TEST_TMPDIR/$n.err"
}

# Is leaserun pid $2 waiting for two slots of lease $1, a session each?
queued_on_both() {
	[ "$(pg_sql "SELECT count(*) FROM pg_stat_activity
		WHERE application_name LIKE 'leaserun:$1@%:$2'
		AND wait_event_type = 'Lock' AND wait_event = 'advisory'")" = 2 ]
}

# slots_taken NAME: two holders take both slots of NAME with -l 2; each
# writes "PID SLOT" of its command to $BATS_TEST_TMPDIR/{a,b}.slot.
slots_taken() {
	local id d=$BATS_TEST_TMPDIR
	for id in a b; do
		"$LEASERUN" -l 2 "$1" sh -c 'echo $$ $LEASERUN_SLOT >"$0"; exec sleep 60' \
			"$d/$id.slot" 2>"$d/$id.err" &
		BG_PIDS="$BG_PIDS $!"
		wait_until 15 exists "$d/$id.slot"
		BG_PIDS="$BG_PIDS $(cut -d ' ' -f 1 "$d/$id.slot")"
	done
}

# slot_waiter NAME [OPTION...]: a run of -l 2 -w 30s that writes its slot
# to $BATS_TEST_TMPDIR/c.slot, once queued on both slots; sets c, its pid.
slot_waiter() {
	local n=$1 d=$BATS_TEST_TMPDIR
	shift
	"$LEASERUN" "$@" -l 2 -w 30s "$n" sh -c 'echo "$LEASERUN_SLOT" >"$0"' \
		"$d/c.slot" 2>"$d/c.err" &
	c=$!
	BG_PIDS="$BG_PIDS $c"
	wait_until 10 queued_on_both "$n" "$c"
}

# waiter_backend NAME PID first|last: the backend of leaserun PID's first
# session (slot 0's, which holds the gate) or its newest.
waiter_backend() {
	local order=
	[ "$3" = first ] || order=DESC
	pg_sql "SELECT pid FROM pg_stat_activity
		WHERE application_name LIKE 'leaserun:$1@%:$2'
		ORDER BY backend_start $order LIMIT 1"
}

# Leaserun pid $2 waits on both slots of lease $1 again, without backend $3.
requeued() {
	queued_on_both "$1" "$2" &&
		[ -z "$(pg_sql "SELECT pid FROM pg_stat_activity WHERE pid = $3")" ]
}

@test "--limit 2: a waiter queued on both slots whose second session is terminated queues again, and gets the next slot freed" {
	local n d=$BATS_TEST_TMPDIR one first second
	n=$(name)
	slots_taken "$n"
	slot_waiter "$n"
	first=$(waiter_backend "$n" "$c" first)
	second=$(waiter_backend "$n" "$c" last)
	# An administrator ends the session that waits for slot 1 (the newer).
	[ "$(pg_sql "SELECT pg_terminate_backend($second)")" = t ]
	# It waits on, on both slots again, and nothing of it runs yet; its
	# first session, which holds its place at the gate, is the same, and
	# stays so.
	wait_until 10 requeued "$n" "$c" "$second"
	sleep 1
	queued_on_both "$n" "$c"
	assert_equal "$(waiter_backend "$n" "$c" first)" "$first"
	alive "$c"
	[ ! -e "$d/c.slot" ]
	one=$(grep -l ' 1$' "$d/a.slot" "$d/b.slot")
	kill "$(cut -d ' ' -f 1 "$one")"
	wait_rc "$c"
	cat "$d/c.err"
	assert_equal "$RC" 0
	assert_equal "$(cat "$d/c.slot")" 1
}

@test "--limit 2: a waiter whose second session is terminated and cannot open another (the role's connection limit) starts again, and gets the next slot freed" {
	local n d=$BATS_TEST_TMPDIR one
	n=$(name)
	slots_taken "$n"
	slot_waiter "$n" -v
	# Room for the two holders' sessions and one more (teardown lifts it).
	pg_sql "ALTER ROLE lr CONNECTION LIMIT 3" >/dev/null
	[ "$(pg_sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name LIKE 'leaserun:$n@%:$c'
		ORDER BY backend_start DESC LIMIT 1")" = t ]
	sleep 1
	alive "$c"
	[ ! -e "$d/c.slot" ]
	# It said why it starts over.
	grep -q "too many connections.*the wait for the slots starts over" "$d/c.err"
	# It did not go on waiting for slot 0 alone: slot 1, freed, is its.
	one=$(grep -l ' 1$' "$d/a.slot" "$d/b.slot")
	kill "$(cut -d ' ' -f 1 "$one")"
	wait_rc "$c"
	cat "$d/c.err"
	assert_equal "$RC" 0
	assert_equal "$(cat "$d/c.slot")" 1
}

@test "--limit 2: a waiter whose wait for slot 0 is cancelled (pg_cancel_backend) starts again, and gets slot 0 once freed" {
	local n d=$BATS_TEST_TMPDIR one first
	n=$(name)
	slots_taken "$n"
	slot_waiter "$n" -v
	first=$(waiter_backend "$n" "$c" first)
	# The statement of the first session (slot 0's wait) is cancelled;
	# the session stays, and leaserun ends it to start again.
	[ "$(pg_sql "SELECT pg_cancel_backend($first)")" = t ]
	wait_until 10 requeued "$n" "$c" "$first"
	alive "$c"
	[ ! -e "$d/c.slot" ]
	one=$(grep -l ' 0$' "$d/a.slot" "$d/b.slot")
	kill "$(cut -d ' ' -f 1 "$one")"
	wait_rc "$c"
	cat "$d/c.err"
	assert_equal "$RC" 0
	assert_equal "$(cat "$d/c.slot")" 0
}

@test "--limit 2: a waiter whose wait for slot 1 is cancelled (pg_cancel_backend) waits for it again, and gets slot 1 once freed" {
	local n d=$BATS_TEST_TMPDIR one
	n=$(name)
	slots_taken "$n"
	slot_waiter "$n" -v
	[ "$(pg_sql "SELECT pg_cancel_backend(pid) FROM pg_stat_activity
		WHERE application_name LIKE 'leaserun:$n@%:$c'
		ORDER BY backend_start DESC LIMIT 1")" = t ]
	sleep 1
	alive "$c"
	[ ! -e "$d/c.slot" ]
	one=$(grep -l ' 1$' "$d/a.slot" "$d/b.slot")
	kill "$(cut -d ' ' -f 1 "$one")"
	wait_rc "$c"
	cat "$d/c.err"
	assert_equal "$RC" 0
	assert_equal "$(cat "$d/c.slot")" 1
}

@test "--limit 2: a waiter queued on both slots whose first session is terminated waits on, and gets the next slot freed" {
	local n d=$BATS_TEST_TMPDIR one first
	n=$(name)
	slots_taken "$n"
	slot_waiter "$n" -v
	first=$(waiter_backend "$n" "$c" first)
	# An administrator ends the store's own session (the older), which
	# holds the gate and waits for slot 0.
	[ "$(pg_sql "SELECT pg_terminate_backend($first)")" = t ]
	wait_until 10 requeued "$n" "$c" "$first"
	alive "$c"
	[ ! -e "$d/c.slot" ]
	one=$(grep -l ' 0$' "$d/a.slot" "$d/b.slot")
	kill "$(cut -d ' ' -f 1 "$one")"
	wait_rc "$c"
	cat "$d/c.err"
	assert_equal "$RC" 0
	assert_equal "$(cat "$d/c.slot")" 0
}

@test "--limit 2: a waiter granted slot 1, on its second session, then its backend terminated: 124 at once" {
	local n d=$BATS_TEST_TMPDIR one
	n=$(name)
	slots_taken "$n"
	"$LEASERUN" -l 2 -w 30s "$n" sh -c 'echo $$ $LEASERUN_SLOT >"$0"; exec sleep 60' \
		"$d/c.slot" 2>"$d/c.err" &
	c=$!
	BG_PIDS="$BG_PIDS $c"
	# Queued on both slots at once: slot 0 on its first session, slot 1
	# on a second; slot 1 is freed, so the second one wins and becomes
	# the lease's.
	wait_until 10 queued_on_both "$n" "$c"
	one=$(grep -l ' 1$' "$d/a.slot" "$d/b.slot")
	kill "$(cut -d ' ' -f 1 "$one")"
	wait_until 15 exists "$d/c.slot"
	BG_PIDS="$BG_PIDS $(cut -d ' ' -f 1 "$d/c.slot")"
	assert_equal "$(cut -d ' ' -f 2 "$d/c.slot")" 1
	t0=$(now_ms)
	# Granted, its session is named with its fence too.
	[ "$(pg_sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name LIKE 'leaserun:$n@%:$c#%'")" = t ]
	wait_rc "$c"
	t1=$(now_ms)
	cat "$d/c.err"
	assert_equal "$RC" 124
	(( t1 - t0 < 1000 ))
	dead "$(cut -d ' ' -f 1 "$d/c.slot")"
	# The reason is the backend's FATAL, which only the notice receiver
	# of the session that now holds the lock hears.
	grep -q "ended our session (terminating connection due to administrator command)" "$d/c.err"
}

@test "the session ended between the grant and the command's start: the command never runs on it, and runs once on a new grant within -w" {
	n=$(name)
	lost_before_start "$PG_URL" "$n" \
		'pg_sql "SELECT pg_terminate_backend($(holder_backend "$n"))" >/dev/null' -w 20
	assert_lost_before_start_retried
	grep -q "ended our session" "$BATS_TEST_TMPDIR/err"
	is_free "$n"
}

@test "the session ended between the grant and the command's start, with -n: 124, and the command never ran" {
	n=$(name)
	lost_before_start "$PG_URL" "$n" \
		'pg_sql "SELECT pg_terminate_backend($(holder_backend "$n"))" >/dev/null' -n
	assert_lost_before_start_ended
	is_free "$n"
}

@test "a server restart kills the command at once: 124" {
	n=$(name)
	# TTL 30s: the first renewal would come after 10s.
	start_holder "$n" -t 30s
	t0=$(now_ms)
	pg_server_restart
	wait_rc "$BG"; [ "$RC" = 124 ]
	t1=$(now_ms)
	dead "$CHILD"
	(( t1 - t0 < 6000 ))
	grep -q "ended our session" "$BATS_TEST_TMPDIR/$n.err"
	# And the store works again.
	run lr -n "$n" true
	assert_success
}

# queued_waiter NAME WAIT: a run with -v -w WAIT that writes "waiter" in
# the test's directory, started in the background ($waiter, its stderr
# in waiter.err) and queued behind NAME's holder.
queued_waiter() {
	"$LEASERUN" -v -w "$2" "$1" sh -c 'echo ran >"$0/waiter"' \
		"$BATS_TEST_TMPDIR" 2>"$BATS_TEST_TMPDIR/waiter.err" &
	waiter=$!
	BG_PIDS="$BG_PIDS $waiter"
	wait_until 10 queued "$1" "$waiter"
}

@test "faults: a waiter rides out a crash of the server and its start 2s later, and then runs" {
	n=$(name)
	start_holder "$n" -t 30s
	queued_waiter "$n" 40
	pg_server_down
	sleep 2
	pg_server_up
	wait_rc "$BG"
	assert_equal "$RC" 124
	wait_rc "$waiter"
	cat "$BATS_TEST_TMPDIR/waiter.err" >&3
	assert_equal "$RC" 0
	[ -e "$BATS_TEST_TMPDIR/waiter" ]
	grep -q "trying again until the wait runs out" "$BATS_TEST_TMPDIR/waiter.err"
	grep -q "the store answers again" "$BATS_TEST_TMPDIR/waiter.err"
}

@test "faults: a waiter queued behind a holder rides out a restart of the server, and runs within seconds" {
	n=$(name)
	start_holder "$n" -t 30s
	queued_waiter "$n" 20
	t0=$(now_ms)
	# -m fast: the server ends every session with a FATAL, the
	# holder's and the waiter's, which is waiting in pg_advisory_lock
	# (or was just handed the lock the holder's end freed).
	pg_server_restart
	wait_rc "$BG"
	assert_equal "$RC" 124
	wait_rc "$waiter"
	t1=$(now_ms)
	cat "$BATS_TEST_TMPDIR/waiter.err" >&3
	assert_equal "$RC" 0
	[ -e "$BATS_TEST_TMPDIR/waiter" ]
	# Not at the end of its wait: a session the restart ended is
	# replaced at the next try.
	(( t1 - t0 < 10000 ))
}

@test "faults: a run started while the server is down gets the lease once it is up within the wait" {
	n=$(name)
	pg_server_down
	"$LEASERUN" -v -w 40 "$n" sh -c 'echo ran >"$0/ran"' "$BATS_TEST_TMPDIR" \
		2>"$BATS_TEST_TMPDIR/err" &
	pid=$!
	BG_PIDS=$pid
	sleep 2.5
	alive "$pid"
	pg_server_up
	wait_rc "$pid"
	cat "$BATS_TEST_TMPDIR/err" >&3
	assert_equal "$RC" 0
	[ -e "$BATS_TEST_TMPDIR/ran" ]
	# Said once, not at every try.
	assert_equal "$(grep -c "trying again" "$BATS_TEST_TMPDIR/err")" 1
	assert_equal "$(grep -c "the store answers again" "$BATS_TEST_TMPDIR/err")" 1
}

@test "faults: the server down for good: 125 with the last error once the wait runs out, not later; -n at once" {
	n=$(name)
	pg_server_down
	t0=$(now_ms)
	run --separate-stderr "$LEASERUN" -w 3s "$n" touch "$BATS_TEST_TMPDIR/ran"
	t1=$(now_ms)
	pg_server_up
	assert_equal "$status" 125
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "cannot open .*Connection refused"
	echo "# gave up after $((t1 - t0))ms" >&3
	(( t1 - t0 >= 2500 && t1 - t0 < 4000 ))
	pg_server_down
	t0=$(now_ms)
	run --separate-stderr "$LEASERUN" -n "$n" touch "$BATS_TEST_TMPDIR/ran"
	t1=$(now_ms)
	pg_server_up
	assert_equal "$status" 125
	(( t1 - t0 < 1500 ))
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
}

@test "faults: a wrong password fails at once, even with a long wait" {
	t0=$(now_ms)
	LEASERUN_URL="postgresql://lr:wrong@127.0.0.1:$PG_PORT/postgres?sslmode=disable" \
		run --separate-stderr "$LEASERUN" -w 60 "$(name)" true
	t1=$(now_ms)
	assert_equal "$status" 125
	assert_regex "$stderr" "password authentication failed"
	(( t1 - t0 < 3000 ))
}

@test "faults: more waiters than the server lets in at once all run in the end" {
	n=$(name)
	# A connection limit for the role: the server answers 53300, as it
	# does when max_connections is reached.
	pg_sql "ALTER ROLE lr CONNECTION LIMIT 4" >/dev/null
	all_waiters_run "$n" 12
	pg_sql "ALTER ROLE lr CONNECTION LIMIT -1" >/dev/null
	# The limit was met, and ridden out.
	grep -q "too many connections" "$BATS_TEST_TMPDIR/err"
}

@test "kill -9 of leaserun: the command is gone and the lock is free at once" {
	n=$(name)
	start_holder "$n"
	kill -9 "$BG"
	wait_until 1 gone "$CHILD"
	wait_until 1 is_free "$n"
	run lr -n "$n" true
	assert_success
}

@test "a stopped server: renewals time out and the command is stopped by the deadline: 124" {
	n=$(name)
	start_holder "$n" -t 2s -k 300ms
	t0=$(now_ms)
	pg_server_signal STOP
	wait_rc "$BG"
	t1=$(now_ms)
	pg_server_signal CONT
	[ "$RC" = 124 ]
	dead "$CHILD"
	# Stopped before the TTL ran out (plus a little scheduling slack).
	(( t1 - t0 < 2500 ))
	grep -q "renew failed" "$BATS_TEST_TMPDIR/$n.err"
}

@test "a stopped leaserun keeps its session (nobody else gets the lock) and stops the command when it wakes past its deadline" {
	n=$(name)
	d=$BATS_TEST_TMPDIR
	# Through a subshell: bash's own wait is unreliable for a job that
	# was stopped.
	(
		"$LEASERUN" -t 2s "$n" sh -c "echo \$\$ > '$d/child'; exec sleep 60" 2>"$d/err" &
		echo $! > "$d/lr"
		rc=0
		wait $! || rc=$?
		echo $rc > "$d/rc"
	) &
	BG_PIDS=$!
	wait_until 10 exists "$d/child"
	lrpid=$(cat "$d/lr")
	CHILD=$(cat "$d/child")
	BG_PIDS="$BG_PIDS $lrpid $CHILD"
	kill -STOP "$lrpid"
	sleep 2.5 # let the TTL run out while leaserun is stopped
	run lr -n "$n" true
	assert_failure 1
	kill -CONT "$lrpid"
	wait_until 5 exists "$d/rc"
	[ "$(cat "$d/rc")" = 124 ]
	dead "$CHILD"
	grep -q "deadline passed" "$d/err"
	wait_until 2 is_free "$n"
}

@test "a waiter whose wait is cancelled (pg_cancel_backend) queues again, silently, and runs only once the holder ends" {
	local n d=$BATS_TEST_TMPDIR w
	n=$(name)
	start_holder "$n"
	"$LEASERUN" -w 30s "$n" sh -c 'date +%s%N > "$0"' "$d/w.start" 2>"$d/w.err" &
	w=$!
	BG_PIDS="$BG_PIDS $w"
	wait_until 10 queued "$n" "$w"
	[ "$(pg_sql "SELECT pg_cancel_backend(pid) FROM pg_stat_activity
		WHERE application_name LIKE 'leaserun:$n@%:$w'")" = t ]
	# The cancelled wait gave nothing: the waiter queues again, on the
	# same session, and its command does not run while the holder holds.
	sleep 1
	wait_until 10 queued "$n" "$w"
	[ ! -e "$d/w.start" ]
	alive "$CHILD"
	release "$n"
	assert_holder_rc 0
	wait_rc "$w"
	assert_equal "$RC" 0
	[ -e "$d/w.start" ]
	# Nothing was lost on the way: no word of it.
	run cat "$d/w.err"
	assert_output ""
}

@test "--status: a lock taken from SQL under an application_name that only starts as leaserun's is shown as SQL's, with its backend" {
	local n app p b
	n=$(name)
	for app in "leaserun:$n" "leaserun:$n:7"; do
		PGAPPNAME=$app "$PG_BIN/psql" -X -q -h "$PG_DIR" -p "$PG_PORT" \
			-U postgres -d postgres -c "SELECT pg_advisory_lock($(keyof "$n"))" \
			-c "SELECT pg_sleep(60)" >/dev/null 2>&1 &
		p=$!
		BG_PIDS="$BG_PIDS $p"
		wait_until 5 is_held "$n"
		b=$(pg_sql "SELECT pid FROM pg_stat_activity WHERE application_name = '$app'")
		run lr --status "$n"
		assert_success
		assert_output --partial "local (backend $b, application_name \"$app\")"
		pg_sql "SELECT pg_terminate_backend($b)" >/dev/null
		wait_until 5 is_free "$n"
	done
}

@test "without SELECT on pg_locks: --status and --list fail with 125 and the server's error; a holder's renewals fail, say why, and go on once it is granted again" {
	local n
	n=$(name)
	start_holder "$n" -t 3s
	PG_REGRANT_LOCKS=1
	pg_sql "REVOKE SELECT ON pg_locks FROM PUBLIC" >/dev/null
	run -125 --separate-stderr lr --status "$n"
	assert_equal "$stderr" "leaserun: $n: cannot inspect $n on $PG_URL_NOPW: reading pg_locks on PostgreSQL at 127.0.0.1:$PG_PORT failed: ERROR: permission denied for view pg_locks"
	run -125 --separate-stderr lr --list
	assert_equal "${#stderr_lines[@]}" 1
	[[ "$stderr" == *": reading pg_locks on PostgreSQL at 127.0.0.1:$PG_PORT failed: ERROR: permission denied for view pg_locks" ]]
	wait_until 5 grep -q "renew failed" "$BATS_TEST_TMPDIR/$n.err"
	pg_sql "GRANT SELECT ON pg_locks TO PUBLIC" >/dev/null
	grep "renew failed (checking pg_locks on PostgreSQL at 127.0.0.1:$PG_PORT failed: ERROR: permission denied for view pg_locks)" \
		"$BATS_TEST_TMPDIR/$n.err"
	# Renewed again in time: the command still runs, the lock is its.
	sleep 3
	alive "$CHILD"
	is_held "$n"
	release "$n"
	assert_holder_rc 0
}

@test "--break of a holder whose backend cannot exit (stopped): 125 by the deadline, naming the backend that did not exit" {
	local n b
	n=$(name)
	start_holder "$n"
	b=$(holder_backend "$n")
	kill -STOP "$b"
	run --separate-stderr lr -w 2s --break "$n"
	kill -CONT "$b"
	assert_equal "$status" 125
	assert_equal "$stderr" "leaserun: $n: cannot break $n: PostgreSQL at 127.0.0.1:$PG_PORT: the holder's backend $b did not exit in time"
	# Once it can, it exits, and the holder with it.
	wait_rc "$BG"; [ "$RC" = 124 ]
	wait_until 5 is_free "$n"
}

@test "a grant too late to use whose give-back the server, stopped, leaves unanswered: the run waits on, and once the server wakes gives it back and runs on a new grant" {
	local n d=$BATS_TEST_TMPDIR pid
	n=$(name)
	export LEASERUN_FAULT_DIR=$d
	echo acquire.pause=after >"$d/$n.fault"
	LEASERUN_URL="fault+$PG_URL" "$LEASERUN" -v -t 3s -w 40s "$n" \
		sh -c 'echo "$LEASERUN_FENCE" >>"$0/ran"' "$d" 2>"$d/err" 3>&- &
	pid=$!
	BG_PIDS="$BG_PIDS $pid"
	wait_until 20 test -e "$d/$n.paused"
	rm -f "$d/$n.fault"
	# Held still past what a 3s TTL can run on: the grant is too late.
	sleep 2
	pg_server_signal STOP
	rm -f "$d/$n.paused"
	# Its give-back goes unanswered, and when it is made again before
	# the next try the unlock is still in flight: a fault that heals.
	wait_until 15 grep -q "is not answering; closing our session frees the lock; trying again" "$d/err"
	pg_server_signal CONT
	wait_rc "$pid"
	cat "$d/err"
	assert_equal "$RC" 0
	assert_equal "$(grep -c . "$d/ran")" 1
	grep -q "giving it back and trying again" "$d/err"
}

read_only_now() {
	[ "$(pg_sql "SHOW default_transaction_read_only")" = on ]
}

@test "cron: a server made read-only (default_transaction_read_only) under a job: its end is not recorded, said in one line; the next start fails with 125 and the server's error" {
	local n d=$BATS_TEST_TMPDIR
	runs_table
	n=$(name)
	hold "$n" --once-per 1m
	PG_RESET_SYSTEM=1
	pg_sql "ALTER SYSTEM SET default_transaction_read_only = on" >/dev/null
	pg_sql "SELECT pg_reload_conf()" >/dev/null
	# Once a new session has it, the postmaster has reloaded and told
	# every backend, the holder's too (which reads it before its next
	# statement).
	wait_until 5 read_only_now
	release "$n"
	wait_holder
	assert_equal "$HRC" 0
	grep -x "leaserun: $n: could not record the end of the run: recording the end of the run on PostgreSQL at 127.0.0.1:$PG_PORT failed: ERROR: cannot execute UPDATE in a read-only transaction" "$d/$n.err"
	run --separate-stderr "$LEASERUN" --once-per 1ms "$n" touch "$d/ran"
	assert_equal "$status" 125
	[ ! -e "$d/ran" ]
	assert_equal "$stderr" "leaserun: $n: cannot record the start of the run (--once-per 1ms): recording the run on PostgreSQL at 127.0.0.1:$PG_PORT failed: ERROR: cannot execute SELECT in a read-only transaction"
	# Without the table, creating it fails alike.
	PGOPTIONS='-c default_transaction_read_only=off' pg_sql "DROP TABLE leaserun_runs" >/dev/null
	PGOPTIONS='-c default_transaction_read_only=off' pg_sql "GRANT CREATE ON SCHEMA public TO lr" >/dev/null
	run --separate-stderr "$LEASERUN" --once-per 1ms "$n" touch "$d/ran"
	PGOPTIONS='-c default_transaction_read_only=off' pg_sql "REVOKE CREATE ON SCHEMA public FROM lr" >/dev/null
	assert_equal "$status" 125
	[ ! -e "$d/ran" ]
	assert_equal "$stderr" "leaserun: $n: cannot record the start of the run (--once-per 1ms): creating the table leaserun_runs on PostgreSQL at 127.0.0.1:$PG_PORT failed: ERROR: cannot execute CREATE TABLE in a read-only transaction"
}

@test "cron: without SELECT on leaserun_runs, --status says it cannot read the last run, and the GRANT to run" {
	local n
	runs_table
	n=$(name)
	run "$LEASERUN" --once-per 1ms "$n" true
	assert_success
	pg_sql "REVOKE SELECT ON leaserun_runs FROM lr" >/dev/null
	run --separate-stderr "$LEASERUN" --status "$n"
	pg_sql "GRANT SELECT ON leaserun_runs TO lr" >/dev/null
	assert_equal "$status" 1
	assert_output --partial "free"
	[[ "$stderr" == *"cannot read the last run: PostgreSQL at 127.0.0.1:$PG_PORT: role lr may not use the table leaserun_runs that --once-per keeps runs in: GRANT SELECT, INSERT, UPDATE ON leaserun_runs TO lr" ]]
}

@test "a connection reset under the holder (the server's socket aborted, as a firewall or a host does): 124 at once, and says so" {
	local n b lport t0 t1
	n=$(name)
	start_holder "$n"
	b=$(holder_backend "$n")
	lport=$(pg_sql "SELECT client_port FROM pg_stat_activity WHERE pid = $b")
	t0=$(now_ms)
	# The server's end of the holder's connection is aborted: a reset
	# reaches leaserun.
	ss -K -t src 127.0.0.1 sport = ":$PG_PORT" dport = ":$lport" >/dev/null
	# Bounded: an ss -K that did nothing must fail the test, not hang it.
	wait_until 5 eval '! alive "$BG"'
	wait_rc "$BG"; [ "$RC" = 124 ]
	t1=$(now_ms)
	dead "$CHILD"
	(( t1 - t0 < 1000 ))
	grep -F "PostgreSQL at 127.0.0.1:$PG_PORT ended our session (Connection reset by peer): the lock went with it" \
		"$BATS_TEST_TMPDIR/$n.err"
}

@test "without EXECUTE on pg_advisory_unlock the release fails, says why in one line, and the session's end frees the lock" {
	local n
	n=$(name)
	start_holder "$n"
	PG_REGRANT="pg_advisory_unlock(bigint)"
	pg_sql "REVOKE EXECUTE ON FUNCTION pg_advisory_unlock(bigint) FROM PUBLIC" >/dev/null
	release "$n"
	wait_holder
	pg_sql "GRANT EXECUTE ON FUNCTION pg_advisory_unlock(bigint) TO PUBLIC" >/dev/null
	assert_equal "$HRC" 0
	grep -Fx "leaserun: $n: could not release: pg_advisory_unlock on PostgreSQL at 127.0.0.1:$PG_PORT failed: ERROR: permission denied for function pg_advisory_unlock" \
		"$BATS_TEST_TMPDIR/$n.err"
	wait_until 5 is_free "$n"
}

@test "the holder's own end of its connection aborted (ss -K: a reset goes to the server, which frees the lock at once): 124 at once, and says so" {
	local n b lport t0 t1
	n=$(name)
	start_holder "$n"
	b=$(holder_backend "$n")
	lport=$(pg_sql "SELECT client_port FROM pg_stat_activity WHERE pid = $b")
	t0=$(now_ms)
	ss -K -t src 127.0.0.1 sport = ":$lport" dport = ":$PG_PORT" >/dev/null
	# The server has ended the session and freed the lock: the command
	# must not run on until the TTL (10s) runs out.
	wait_until 5 eval '! alive "$BG"'
	wait_rc "$BG"; [ "$RC" = 124 ]
	t1=$(now_ms)
	dead "$CHILD"
	(( t1 - t0 < 1000 ))
	grep -F "PostgreSQL at 127.0.0.1:$PG_PORT ended our session (Software caused connection abort): the lock went with it" \
		"$BATS_TEST_TMPDIR/$n.err"
	wait_until 2 is_free "$n"
}

@test "--break terminates the holder's backend: the holder exits 124 and the lock is free" {
	n=$(name)
	start_holder "$n"
	run lr --break "$n"
	assert_success
	wait_rc "$BG"; [ "$RC" = 124 ]
	dead "$CHILD"
	is_free "$n"
}

@test "--break without the privilege to terminate the holder fails with 125 and says why" {
	n=$(name)
	start_holder "$n"
	LEASERUN_URL="postgresql://other:$PG_PASSWORD@127.0.0.1:$PG_PORT/postgres" \
		run -125 --separate-stderr lr --break "$n"
	[[ "$stderr" == *"pg_signal_backend"* ]]
	alive "$CHILD"
	is_held "$n"
}

@test "pgbouncer in transaction mode is refused with a clear message" {
	pgbouncer_start transaction
	LEASERUN_URL=$BOUNCER_URL run -125 --separate-stderr lr "$(name)" true
	pg_stop_pidfile "$PG_DIR/pgbouncer.pid"
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"transaction pooler"* ]]
	[[ "$stderr" != *"$PG_PASSWORD"* ]]
}

@test "pgbouncer in transaction mode that hands each statement to the next server connection: the pooler check passes, the try finds the backend changed: 125, naming both backends" {
	local n i re
	n=$(name)
	BOUNCER_ROUND_ROBIN=1 pgbouncer_start transaction
	# Three server connections in the pool, taken in turn: the setup, the
	# pooler check and the try each run on another.
	for i in 1 2 3; do
		"$PG_BIN/psql" -X -q -A -t -c 'SELECT pg_sleep(1)' "$BOUNCER_URL" >/dev/null &
	done
	wait
	LEASERUN_URL=$BOUNCER_URL run --separate-stderr lr -n "$n" touch "$BATS_TEST_TMPDIR/ran"
	backends=" $(pg_sql "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity WHERE usename = 'lr'") "
	pg_stop_pidfile "$PG_DIR/pgbouncer.pid"
	echo "# $status: $stderr; backends:$backends" >&3
	assert_equal "$status" 125
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
	assert_equal "${#stderr_lines[@]}" 2
	[[ "${stderr_lines[0]}" == *"is behind a connection pooler: this works only in session mode"* ]]
	re="PostgreSQL at 127.0.0.1:$BOUNCER_PORT: our backend changed \(pid ([0-9]+), now ([0-9]+)\): a transaction pooler is in between"
	[[ "${stderr_lines[1]}" =~ $re ]]
	[ "${BASH_REMATCH[1]}" != "${BASH_REMATCH[2]}" ]
	[[ "$backends" == *" ${BASH_REMATCH[1]} "* ]]
	[[ "$backends" == *" ${BASH_REMATCH[2]} "* ]]
}

@test "pgbouncer in session mode works, with a warning" {
	pgbouncer_start session
	LEASERUN_URL=$BOUNCER_URL run --separate-stderr lr "$(name)" sh -c 'echo ran'
	pg_stop_pidfile "$PG_DIR/pgbouncer.pid"
	assert_success
	assert_output ran
	[[ "$stderr" == *"session mode"* ]]
}

@test "50 contenders: no overlap, fences strictly increase" {
	n=$(name)
	log=$BATS_TEST_TMPDIR/log
	pids=
	for _ in $(seq 50); do
		"$LEASERUN" -w 120 "$n" sh -c "s=\$(date +%s%N); sleep 0.01; echo \"\$s \$(date +%s%N) \$LEASERUN_FENCE\" >> '$log'" &
		pids="$pids $!"
	done
	BG_PIDS=$pids
	for p in $pids; do
		wait_rc "$p"; [ "$RC" = 0 ]
	done
	[ "$(wc -l < "$log")" = 50 ]
	run check_intervals "$log"
	assert_success
}

@test "operations: --status --json, a waiter's events, --check and metrics on PostgreSQL" {
	# A session lock has no TTL (null); the fence comes from the
	# holder's application_name.
	ops_check "$(name)" none fence
}

@test "operations: pg_terminate_backend: a lost event with its reason, counted in the metrics" {
	n=$(name)
	start_holder "$n" -v --log-format json --metrics-file "$BATS_TEST_TMPDIR/m.prom"
	pg_sql "SELECT pg_terminate_backend($(holder_backend "$n"))" >/dev/null
	wait_rc "$BG"
	[ "$RC" = 124 ]
	ops_loss_seen "$n" "$BATS_TEST_TMPDIR/$n.err" "$BATS_TEST_TMPDIR/m.prom"
}

pg_freeze() { pg_server_signal STOP; }
pg_thaw() { pg_server_signal CONT; }

@test "operations: a stopped server: --warn-signal at the first failed renewal, renewed again when it wakes" {
	ops_warn_recover "$(name)" pg_freeze pg_thaw
}

# --- one cron job across a fleet (helpers.bash) ---
# The runs live in the table leaserun_runs.  The role lr may not create
# tables in the public schema (PostgreSQL 15), so the first test shows
# the refusal, and then lets lr create it, as leaserun-postgresql(7) says.

@test "cron: without the table and the right to create it, --once-per fails with the statement to run" {
	pg_sql "DROP TABLE IF EXISTS leaserun_runs" >/dev/null
	run --separate-stderr "$LEASERUN" --once-per 1m "$(name)" touch "$BATS_TEST_TMPDIR/ran"
	assert_equal "$status" 125
	echo "$stderr" >&3
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "--once-per needs the table leaserun_runs, which role lr may not create here; have it made: CREATE TABLE leaserun_runs \\(name text PRIMARY KEY, .*status int\\); GRANT SELECT, INSERT, UPDATE ON leaserun_runs TO lr\$"
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
	# Nothing is held, and --status says there is no run.
	run "$LEASERUN" --status --json "$(name)"
	assert_failure 1
	jq -e '.held == false and .last_run == null' <<<"$output"
	# The statement in the message is the one that works.
	pg_sql "$(sed -n 's/.*have it made: \(CREATE TABLE [^;]*\);.*/\1/p' <<<"$stderr")" >/dev/null
	pg_sql "GRANT SELECT, INSERT, UPDATE ON leaserun_runs TO lr" >/dev/null
	run "$LEASERUN" --once-per 1m "$(name)" true
	assert_success
	# Without UPDATE the next run cannot record its start: 125 again.
	pg_sql "REVOKE UPDATE ON leaserun_runs FROM lr" >/dev/null
	run --separate-stderr "$LEASERUN" --once-per 1ms "$(name)" true
	pg_sql "DROP TABLE leaserun_runs" >/dev/null
	assert_equal "$status" 125
	assert_regex "$stderr" "role lr may not use the table leaserun_runs .*: GRANT SELECT, INSERT, UPDATE ON leaserun_runs TO lr\$"
}

@test "cron: a role that may create it makes the table on first use" {
	pg_sql "DROP TABLE IF EXISTS leaserun_runs" >/dev/null
	pg_sql "GRANT CREATE ON SCHEMA public TO lr" >/dev/null
	run "$LEASERUN" --once-per 1m "$(name)" true
	pg_sql "REVOKE CREATE ON SCHEMA public FROM lr" >/dev/null
	assert_success
	[ "$(pg_sql "SELECT tableowner FROM pg_tables WHERE tablename = 'leaserun_runs'")" = lr ]
}

@test "cron: hosts 3 minutes apart run the job once per period, by the server's now()" {
	runs_table
	n=$(name)
	cron_once "$n"
	# What the server holds: the last start, by its own clock.
	run pg_sql "SELECT name, host, period_ms, status, ended >= started,
		started > now() - interval '1 minute' FROM leaserun_runs WHERE name = '$n'"
	assert_output "$n|$(hostname)|3000|0|t|t"
}

@test "cron: a failed run counts, and --status shows the last run" {
	runs_table
	cron_status "$(name)"
}

@test "cron: --max-time stops a hung job within the kill-after grace and frees the lease" {
	runs_table
	cron_max_time "$(name)"
}

@test "cron: --splay spreads the starts" {
	runs_table
	cron_splay "$(name)"
}

@test "cron: bad --once-per, --max-time and --splay values are one line and 125" {
	cron_bad_values "$(name)"
}
