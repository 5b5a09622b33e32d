#!/usr/bin/env bats
# The MySQL store against a real MariaDB (mariadb-install-db + mariadbd in
# a temporary directory, on a free loopback port).
# shellcheck disable=SC2016,SC2154 # $VAR for the child; bats sets stderr_lines

load 'helpers'
load 'mysql-server'

setup_file() {
	[ -e "$LEASERUN_MODULE_DIR/mysql.so" ] ||
		{ echo "no mysql.so in $LEASERUN_MODULE_DIR" >&2; return 1; }
	mysql_server_start
	export LEASERUN_URL="$MY_URL"
}

teardown_file() {
	mysql_server_stop
}

setup() {
	BG_PIDS=
	unset MYSQL_PWD
}

teardown() {
	kill_bg
	# The server must be running for the next test, whatever this one did.
	mysql_server_signal CONT || true
	kill -0 "$(my_pid)" 2>/dev/null || mysql_server_up || true
	galera_stop
	my_sql "SET GLOBAL read_only = 0;
		SET GLOBAL innodb_flush_log_at_trx_commit = 1;
		SET GLOBAL sql_mode = DEFAULT" || true
	# A database a test made of its own goes, with its grants, whether
	# the test passed or not.
	if [ -n "${OTHER_DB:-}" ]; then
		my_sql "DROP DATABASE IF EXISTS $OTHER_DB;
			DELETE FROM mysql.db WHERE Db = '$OTHER_DB';
			DELETE FROM mysql.tables_priv WHERE Db = '$OTHER_DB';
			DELETE FROM mysql.columns_priv WHERE Db = '$OTHER_DB';
			FLUSH PRIVILEGES" || true
	fi
}

# A lease name unique to this test.
name() { echo "my-$BATS_TEST_NUMBER"; }

# The connection holding the lock of lease $1 (the default prefix), or
# NULL.
holder_conn() { my_sql "SELECT IS_USED_LOCK('leaserun:$1')"; }
is_free() { [ "$(holder_conn "$1")" = NULL ]; }
is_held() { [ "$(holder_conn "$1")" != NULL ]; }
# sql_is SQL VALUE: SQL's answer is VALUE (a check for wait_until, which
# runs it again each time).
sql_is() { [ "$(my_sql "$1")" = "$2" ]; }

gone() {
	dead "$1" || [[ "$(ps -o stat= -p "$1")" == Z* ]]
}

@test "the command runs with LEASERUN_NAME, a fence and a LEASERUN_URL without the password" {
	run --separate-stderr lr "$(name)" sh -c 'echo "$LEASERUN_NAME|$LEASERUN_FENCE|$LEASERUN_URL"'
	assert_success
	[[ "$output" =~ ^$(name)\|[0-9]+\|mysql://lr@127.0.0.1:$MY_PORT/lr$ ]]
	refute_output --partial "$MY_PASSWORD"
}

@test "the exit status is the command's" {
	run lr "$(name)" sh -c 'exit 7'
	assert_failure 7
}

@test "mariadb:// is the same store" {
	LEASERUN_URL="mariadb://lr:$MY_PASSWORD@127.0.0.1:$MY_PORT/lr" \
		run lr "$(name)" sh -c 'echo $LEASERUN_FENCE'
	assert_success
	assert_output --regexp '^[1-9][0-9]*$'
}

@test "MYSQL_PWD authenticates a URL without a password and never reaches the command" {
	MYSQL_PWD=$MY_PASSWORD LEASERUN_URL=$MY_URL_NOPW \
		run --separate-stderr lr "$(name)" sh -c 'env | grep -c "^MYSQL_PWD=" || true'
	assert_success
	assert_output 0
}

@test "a password given with --url is not in ps while leaserun holds the lease" {
	ps_hides_password "$(name)" "$MY_PASSWORD" -t 30s --url="$MY_URL"
}

@test "a wrong password fails with 125 and one line that does not show the password" {
	LEASERUN_URL="mysql://lr:Wrong-Pw-123@127.0.0.1:$MY_PORT/lr" \
		run -125 --separate-stderr lr "$(name)" true
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == leaserun:* ]]
	[[ "$stderr" == *"Access denied"* ]]
	[[ "$stderr" != *Wrong-Pw-123* ]]
}

@test "a bad URL option, or no database, fails with 125 and one line" {
	LEASERUN_URL="$MY_URL?nosuch=1" run -125 --separate-stderr lr "$(name)" true
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *nosuch* ]]
	[[ "$stderr" != *"$MY_PASSWORD"* ]]
	LEASERUN_URL="mysql://lr:$MY_PASSWORD@127.0.0.1:$MY_PORT" \
		run -125 --separate-stderr lr "$(name)" true
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *DATABASE* ]]
}

@test "a URL of a kilobyte (a long user name): its one line is cut in the URL, not in the reason" {
	local port u
	port=$("$LR_BUILDDIR/tests/freeport")
	u=$(printf 'u%.0s' {1..1000})
	LEASERUN_URL="mysql://$u@127.0.0.1:$port/x" run -125 --separate-stderr lr -n "$(name)" true
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == "leaserun: $(name): cannot open mysql://uuuu"*"u...: cannot connect to MySQL at 127.0.0.1:$port: Connection refused" ]]
}

@test "several hosts: the first that answers is used" {
	dead=$("$LR_BUILDDIR/tests/freeport")
	LEASERUN_URL="mysql://lr:$MY_PASSWORD@127.0.0.1:$dead,127.0.0.1:$MY_PORT/lr" \
		run lr -n "$(name)" sh -c 'echo ok'
	assert_success
	assert_output ok
}

@test "a Unix socket by ?socket=" {
	LEASERUN_URL="mysql://lr:$MY_PASSWORD@/lr?socket=$MY_DIR/sock" \
		run lr "$(name)" sh -c 'echo ok'
	assert_success
	assert_output ok
}

@test "a URL without a user logs in as the login name (here over the socket, without a password)" {
	local me
	me=$(id -un)
	# root is there already, without a password (mysql-server.bash).
	[ "$me" = root ] || my_sql "CREATE USER IF NOT EXISTS '$me'@'localhost';
		GRANT ALL ON lr.* TO '$me'@'localhost'"
	LEASERUN_URL="mysql:///lr?socket=$MY_DIR/sock" \
		run lr "$(name)" sh -c 'echo ok'
	assert_success
	assert_output ok
	# Not an anonymous login: the session that holds the lock is the
	# login name's.
	n=$(name)
	LEASERUN_URL="mysql:///lr?socket=$MY_DIR/sock" \
		run lr "$n" mariadb --no-defaults -S "$MY_DIR/sock" -u root -N -B \
		-e "SELECT USER FROM information_schema.PROCESSLIST WHERE ID =
			(SELECT conn FROM lr.leaserun_fences WHERE name = 'leaserun:$n')"
	assert_success
	assert_output "$me"
}

# The live rows of leaserun_holders for lease $1: "lock slot lim shared"
# of each row whose connection holds its lock.
live_rows() {
	my_sql "SELECT lock_name, slot, lim, shared FROM lr.leaserun_holders
		WHERE name = 'leaserun:$1' AND IS_USED_LOCK(lock_name) <=> conn
		ORDER BY lock_name"
}

@test "--limit: slot K is the lock NAME#K, with a row in leaserun_holders; SQL holding #0 sends a run to slot 1" {
	n=$(name)
	start_holder "$n" -l 2
	run live_rows "$n"
	assert_output "$(printf 'leaserun:%s#0\t0\t2\t0' "$n")"
	is_free "$n" # the plain lease's lock is not a slot
	release "$n"
	assert_holder_rc 0
	# Released, its row goes.
	[ "$(my_sql "SELECT COUNT(*) FROM lr.leaserun_holders WHERE name = 'leaserun:$n'")" = 0 ]
	# GET_LOCK waits a little: the server may end the holder's
	# session, and free its lock, a moment after leaserun has exited.
	mariadb --no-defaults -u root -S "$MY_DIR/sock" -e \
		"SELECT GET_LOCK('leaserun:$n#0', 5); SELECT SLEEP(10)" >/dev/null &
	BG_PIDS="$BG_PIDS $!"
	wait_until 5 is_held "$n#0"
	run lr -n -l 2 "$n" sh -c 'echo "slot $LEASERUN_SLOT"'
	assert_success
	assert_output "slot 1"
}

@test "--shared: each holder holds NAME#rCONNECTION; SQL holding NAME keeps shared runs out" {
	n=$(name)
	start_holder "$n" -s
	h1=$HOLDER
	hold "$n-b" -s # another name: its rows are its own
	run live_rows "$n"
	assert_output --regexp "^leaserun:$n#r[0-9]+"$'\t0\t1\t1$'
	conn=$(my_sql "SELECT conn FROM lr.leaserun_holders WHERE name = 'leaserun:$n'")
	[ "$(my_sql "SELECT IS_USED_LOCK('leaserun:$n#r$conn')")" = "$conn" ]
	# A second shared run goes in beside it; an exclusive one does not.
	run lr -n -s "$n" true
	assert_success
	run lr -n "$n" true
	assert_failure 1
	release "$n"
	wait_rc "$h1"
	assert_equal "$RC" 0
	[ "$(my_sql "SELECT COUNT(*) FROM lr.leaserun_holders WHERE name = 'leaserun:$n'")" = 0 ]
	mariadb --no-defaults -u root -S "$MY_DIR/sock" -e \
		"SELECT GET_LOCK('leaserun:$n', 5); SELECT SLEEP(10)" >/dev/null &
	BG_PIDS="$BG_PIDS $!"
	wait_until 5 is_held "$n"
	run lr -n -s "$n" true
	assert_failure 1
}

@test "--limit without the right to write leaserun_holders: 125 and one line with the grant; a plain run works" {
	n=$(name)
	lr -l 2 "$n" true # (makes lr.leaserun_holders)
	my_sql "CREATE USER 'fenceonly'@'%' IDENTIFIED BY '$MY_PASSWORD';
		GRANT SELECT, INSERT, UPDATE ON lr.leaserun_fences TO 'fenceonly'@'%'"
	url="mysql://fenceonly:$MY_PASSWORD@127.0.0.1:$MY_PORT/lr"
	# A plain run cannot read the table either: it takes it as empty.
	LEASERUN_URL=$url run lr "$n" echo plain
	assert_success
	assert_output plain
	LEASERUN_URL=$url run -125 --separate-stderr lr -l 2 "$n" echo ran
	my_sql "DROP USER 'fenceonly'@'%'" || true
	assert_output ""
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"GRANT SELECT, INSERT, UPDATE, DELETE ON lr.leaserun_holders"* ]]
	[[ "$stderr" != *"$MY_PASSWORD"* ]]
}

@test "ssl-mode=REQUIRED or VERIFY_CA to a server without TLS fails with 125 and one line" {
	for m in REQUIRED VERIFY_CA VERIFY_IDENTITY; do
		LEASERUN_URL="$MY_URL?ssl-mode=$m" run -125 --separate-stderr lr -w 5s "$(name)" echo ran
		assert_output ""
		[ "${#stderr_lines[@]}" -eq 1 ]
		[[ "$stderr" == *"does not offer TLS"* || "$stderr" == *"SSL is required"* ]]
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

@test "the lock is GET_LOCK of the documented name: SQL and leaserun exclude each other" {
	n=$(name)
	start_holder "$n"
	is_held "$n"
	release "$n"
	assert_holder_rc 0
	is_free "$n"
	# A SQL client holding the lock keeps leaserun out.
	mariadb --no-defaults -u root -S "$MY_DIR/sock" -e \
		"SELECT GET_LOCK('leaserun:$n', 5); SELECT SLEEP(3)" >/dev/null &
	BG_PIDS="$BG_PIDS $!"
	wait_until 5 is_held "$n"
	run lr -n "$n" true
	assert_failure 1
}

@test "a long name maps to 64 characters: a readable head and a hash" {
	n=$(name)-$(printf 'x%.0s' $(seq 100))
	start_holder "$n"
	lock=$(my_sql "SELECT name FROM lr.leaserun_fences WHERE name LIKE 'leaserun:$(name)-%'")
	[ "${#lock}" -eq 64 ]
	[[ "$lock" == "leaserun:$(name)-xxx"*"~"* ]]
	run lr -n "$n" true
	assert_failure 1
	# Another long name with the same head is another lock.
	run lr -n "${n}y" true
	assert_success
}

@test "?prefix= keeps apart the leases of two prefixes" {
	n=$(name)
	start_holder "$n"
	LEASERUN_URL="$MY_URL?prefix=other:" run lr -n "$n" true
	assert_success
	[ "$(my_sql "SELECT IS_USED_LOCK('other:$n')")" = NULL ]
}

@test "?prefix= with a quote and a backslash is the lock of those characters, whatever the sql_mode" {
	local n pre=\'a\\b\'
	n=$(name)
	# The server's quoting of the same text (as NO_BACKSLASH_ESCAPES
	# does not change the hex).
	for mode in "" NO_BACKSLASH_ESCAPES; do
		my_sql "SET GLOBAL sql_mode = '$mode'"
		LEASERUN_URL="$MY_URL?prefix=%27a%5Cb%27" run lr -n "$n" \
			sh -c "mariadb --no-defaults -S '$MY_DIR/sock' -u root -N -B -e \"SELECT IS_USED_LOCK(CONCAT(X'$(printf %s "$pre" | od -An -tx1 | tr -d ' \n')', '$n')) IS NOT NULL\""
		assert_success
		assert_output 1
	done
	my_sql "SET GLOBAL sql_mode = DEFAULT"
	# A prefix that fills the buffer of its literal to the last byte
	# (94 bytes with a backslash: its hex is 11 + 188 + 1 bytes) fails
	# as too long, or runs; it never writes past it (the suite runs
	# under ASan in CI, where that would fail).
	pre=$(printf '%093d' 0)
	LEASERUN_URL="$MY_URL?prefix=%5C$pre" run lr -n "$n" true
	[ "$status" -eq 0 ] || [ "$status" -eq 125 ]
}

@test "--status shows the holder's host, pid and fence while held and exits 1 when free" {
	n=$(name)
	start_holder "$n"
	run lr --status "$n"
	assert_success
	assert_output --partial "$(hostname)"
	assert_output --partial "$BG"
	release "$n"
	assert_holder_rc 0
	run lr --status "$n"
	assert_failure 1
}

@test "--break kills the holder's connection: the holder exits 124 and the lock is free" {
	n=$(name)
	start_holder "$n"
	run lr --break "$n"
	assert_success
	wait_rc "$BG"; [ "$RC" = 124 ]
	dead "$CHILD"
	is_free "$n"
}

@test "renewals keep a lease longer than its TTL" {
	n=$(name)
	t0=$(now_ms)
	run lr -t 1s "$n" sh -c 'sleep 3; echo done'
	assert_success
	assert_output "done"
	(( $(now_ms) - t0 >= 3000 ))
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

@test "KILL CONNECTION of the holder's session kills the command at once: 124" {
	n=$(name)
	start_holder "$n" -t 10s
	t0=$(now_ms)
	my_sql "KILL CONNECTION $(holder_conn "$n")"
	wait_rc "$BG"; [ "$RC" = 124 ]
	t1=$(now_ms)
	dead "$CHILD"
	(( t1 - t0 < 1000 ))
	grep -q "ended our session" "$BATS_TEST_TMPDIR/$n.err"
}

@test "a stopped server: renewals time out and the command is stopped by the deadline: 124" {
	n=$(name)
	start_holder "$n" -t 2s -k 300ms
	t0=$(now_ms)
	mysql_server_signal STOP
	# Bounded: a holder that never stops must fail the test, not hang it.
	wait_until 5 dead "$BG"
	t1=$(now_ms)
	wait_rc "$BG"
	mysql_server_signal CONT
	[ "$RC" = 124 ]
	dead "$CHILD"
	# Stopped before the TTL ran out (plus a little scheduling slack).
	echo "# stopped after $((t1 - t0))ms" >&3
	(( t1 - t0 < 2500 ))
	grep -q "renew failed" "$BATS_TEST_TMPDIR/$n.err"
}

@test "faults: a waiter rides out a restart of the server, and then runs" {
	n=$(name)
	start_holder "$n"
	lr -w 20s "$n" echo ran >"$BATS_TEST_TMPDIR/w.out" 2>"$BATS_TEST_TMPDIR/w.err" &
	w=$!
	BG_PIDS="$BG_PIDS $w"
	sleep 0.5
	mysql_server_restart
	wait_rc "$BG"
	[ "$RC" = 124 ]
	wait_rc "$w"
	cat "$BATS_TEST_TMPDIR/w.err"
	[ "$RC" = 0 ]
	[ "$(cat "$BATS_TEST_TMPDIR/w.out")" = ran ]
}

@test "faults: a statement given up on, whose late answer is an error, does not end a waiting run" {
	n=$(name)
	lr -l 2 "$n-t" true # the table of holders
	start_holder "$n"
	# A session holds the table of fences: the waiting run's look at who
	# holds the lease (after its first try, which reads only the table of
	# holders) waits for it, past that look's deadline (1s), and the run
	# goes on waiting, the statement still in flight.
	mariadb --no-defaults -u root -S "$MY_DIR/sock" -e \
		"LOCK TABLES lr.leaserun_fences WRITE; SELECT SLEEP(5); UNLOCK TABLES" >/dev/null &
	BG_PIDS="$BG_PIDS $!"
	wait_until 5 sql_is "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'User sleep'" 1
	lr -w 30s "$n" echo ran >"$BATS_TEST_TMPDIR/w.out" 2>"$BATS_TEST_TMPDIR/w.err" &
	w=$!
	BG_PIDS="$BG_PIDS $w"
	q="SELECT ID FROM information_schema.PROCESSLIST WHERE USER = 'lr' AND STATE = 'Waiting for table metadata lock' AND INFO LIKE 'SELECT fence, host,%'"
	wait_until 5 sql_is "SELECT COUNT(*) FROM ($q) AS w" 1
	sleep 1.5 # past the look's deadline
	# Its late answer is an error, which the run's next try reads first.
	my_sql "KILL QUERY $(my_sql "$q")"
	sleep 1
	release "$n"
	assert_holder_rc 0
	wait_rc "$w"
	cat "$BATS_TEST_TMPDIR/w.err"
	[ "$RC" = 0 ]
	[ "$(cat "$BATS_TEST_TMPDIR/w.out")" = ran ]
}

@test "fences strictly increase from holder to holder" {
	n=$(name)
	a=$(lr "$n" sh -c 'echo $LEASERUN_FENCE')
	b=$(lr "$n" sh -c 'echo $LEASERUN_FENCE')
	c=$(lr "$n" sh -c 'echo $LEASERUN_FENCE')
	(( a < b && b < c ))
}

@test "fences keep growing when the fence row is deleted (a cleanup, an older backup restored)" {
	n=$(name)
	a=$(lr "$n" sh -c 'echo $LEASERUN_FENCE')
	b=$(lr "$n" sh -c 'echo $LEASERUN_FENCE')
	my_sql "DELETE FROM lr.leaserun_fences WHERE name = 'leaserun:$n'"
	[ "$(my_sql "SELECT COUNT(*) FROM lr.leaserun_fences WHERE name = 'leaserun:$n'")" = 0 ]
	c=$(lr "$n" sh -c 'echo $LEASERUN_FENCE')
	echo "fences: $a $b, the row deleted, then $c"
	(( a < b && b < c ))
}

@test "fences never repeat after a crash of the server (kill -9 and restart)" {
	n=$(name)
	log=$BATS_TEST_TMPDIR/fences
	for _ in $(seq 20); do
		lr "$n" sh -c 'echo $LEASERUN_FENCE' >>"$log"
	done
	start_holder "$n"
	cat "$BATS_TEST_TMPDIR/$n.fence" >>"$log"
	mysql_server_crash
	wait_rc "$BG"
	[ "$RC" = 124 ]
	next=$(lr -w 10s "$n" sh -c 'echo $LEASERUN_FENCE')
	max=$(sort -n "$log" | tail -n 1)
	echo "before the crash: $(sort -n "$log" | tr '\n' ' ')after: $next"
	[ "$(wc -l <"$log")" = 21 ]
	(( next > max ))
}

@test "without the right to create the table of fences: 125 and one line with the statement and the grant" {
	n=$(name)
	OTHER_DB=lr2
	my_sql "DROP DATABASE IF EXISTS lr2; CREATE DATABASE lr2;
		GRANT SELECT, INSERT, UPDATE ON lr2.* TO 'other'@'%'"
	LEASERUN_URL="mysql://other:$MY_PASSWORD@127.0.0.1:$MY_PORT/lr2" \
		run -125 --separate-stderr lr "$n" echo ran
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"CREATE TABLE IF NOT EXISTS leaserun_fences"* ]]
	[[ "$stderr" == *"GRANT CREATE ON lr2.*"* ]]
	assert_output ""
	is_free "$n"
	# A user that may create it makes it on first use.
	my_sql "GRANT CREATE ON lr2.* TO 'other'@'%'"
	LEASERUN_URL="mysql://other:$MY_PASSWORD@127.0.0.1:$MY_PORT/lr2" \
		run lr "$n" sh -c 'echo $LEASERUN_FENCE'
	assert_success
	# The first fence is the server's clock in microseconds (its floor).
	[[ $output =~ ^[1-9][0-9]{15}$ ]]
}

@test "a read-only server: 125 and one line" {
	my_sql "SET GLOBAL read_only = 1"
	run -125 --separate-stderr lr -n "$(name)" echo ran
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"read-only"* ]]
	assert_output ""
}

@test "a read-only server: a waiting run keeps no lock while it tries again, and runs once the server is writable" {
	n=$(name)
	# The fences' table first: without it the setup's batch would stop
	# before the lock, and take none.
	lr "$n-first" true
	my_sql "SET GLOBAL read_only = 1"
	lr -w 20s "$n" echo ran >"$BATS_TEST_TMPDIR/w.out" 2>"$BATS_TEST_TMPDIR/w.err" 3>&- &
	w=$!
	BG_PIDS="$BG_PIDS $w"
	# Each try takes the lock with its session's setup, which then finds
	# the server read-only: that session ends, and the lock with it.  A
	# lock kept between tries (a second apart) would be seen in every
	# look; a try itself, in a few (more on a busy machine).
	held=0
	for _ in $(seq 30); do
		is_free "$n" || held=$((held + 1))
		sleep 0.05
	done
	echo "# held in $held of 30 looks" >&3
	((held <= 10))
	my_sql "SET GLOBAL read_only = 0"
	wait_rc "$w"
	cat "$BATS_TEST_TMPDIR/w.err"
	[ "$RC" = 0 ]
	[ "$(cat "$BATS_TEST_TMPDIR/w.out")" = ran ]
}

@test "a Galera node (wsrep_on), whose GET_LOCK is its own, is refused with 125 and one line" {
	galera_start
	LEASERUN_URL=$GA_URL run -125 --separate-stderr lr -n "$(name)" echo ran
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"Galera node (wsrep_on)"* ]]
	assert_output ""
}

@test "innodb_flush_log_at_trx_commit other than 1: one warning that a fence may repeat after a crash" {
	my_sql "SET GLOBAL innodb_flush_log_at_trx_commit = 2"
	run --separate-stderr lr "$(name)" echo ran
	assert_success
	assert_output ran
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"innodb_flush_log_at_trx_commit is 2"* ]]
}

@test "a table of fences that is not InnoDB: one warning that a fence may repeat after a crash" {
	OTHER_DB=lr4
	my_sql "DROP DATABASE IF EXISTS lr4; CREATE DATABASE lr4;
		GRANT ALL ON lr4.* TO 'lr'@'%';
		CREATE TABLE lr4.leaserun_fences (name VARCHAR(64) CHARACTER SET
		utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY, fence BIGINT
		UNSIGNED NOT NULL, host VARCHAR(255) NOT NULL DEFAULT '', pid
		BIGINT NOT NULL DEFAULT 0, since_ms BIGINT NOT NULL DEFAULT 0,
		conn BIGINT UNSIGNED NOT NULL DEFAULT 0) ENGINE=MyISAM"
	LEASERUN_URL="mysql://lr:$MY_PASSWORD@127.0.0.1:$MY_PORT/lr4" \
		run --separate-stderr lr "$(name)" echo ran
	assert_success
	assert_output ran
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"leaserun_fences is MyISAM, not InnoDB"* ]]
	# A sql_mode that leaves the table's options out of SHOW CREATE TABLE
	# hides nothing: the engine is then asked of information_schema.
	my_sql "SET GLOBAL sql_mode = CONCAT(@@GLOBAL.sql_mode, ',NO_TABLE_OPTIONS')"
	LEASERUN_URL="mysql://lr:$MY_PASSWORD@127.0.0.1:$MY_PORT/lr4" \
		run --separate-stderr lr "$(name)" echo ran
	my_sql "SET GLOBAL sql_mode = DEFAULT"
	assert_success
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"leaserun_fences is MyISAM, not InnoDB"* ]]
	# An InnoDB table: not a word.
	my_sql "ALTER TABLE lr4.leaserun_fences ENGINE=InnoDB"
	LEASERUN_URL="mysql://lr:$MY_PASSWORD@127.0.0.1:$MY_PORT/lr4" \
		run --separate-stderr lr "$(name)" echo ran
	assert_success
	[ -z "$stderr" ]
}

@test "cron: without the table and the right to create it, --once-per fails with the statement to run" {
	n=$(name)
	LEASERUN_URL=$MY_URL lr "$n" true # (makes lr.leaserun_fences)
	OTHER_DB=lr3
	my_sql "DROP DATABASE IF EXISTS lr3; CREATE DATABASE lr3;
		GRANT SELECT, INSERT, UPDATE ON lr3.* TO 'other'@'%'"
	export LEASERUN_URL="mysql://other:$MY_PASSWORD@127.0.0.1:$MY_PORT/lr3"
	# The fences' table, made by root: only the runs' is missing.
	my_sql "CREATE TABLE lr3.leaserun_fences LIKE lr.leaserun_fences"
	run --separate-stderr lr --once-per 1m "$n" touch "$BATS_TEST_TMPDIR/ran"
	assert_equal "$status" 125
	echo "$stderr" >&3
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "--once-per needs the table lr3.leaserun_runs, which this user may not create; have it made: CREATE TABLE IF NOT EXISTS leaserun_runs \\(.*\\) ENGINE=InnoDB; GRANT SELECT, INSERT, UPDATE ON lr3.leaserun_runs TO the user\$"
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
	run lr --status --json "$n"
	assert_failure 1
	jq -e '.held == false and .last_run == null' <<<"$output"
	# The statement in the message is the one that works.
	my_sql "USE lr3; $(sed -n 's/.*have it made: \(CREATE TABLE [^;]*\);.*/\1/p' <<<"$stderr")"
	run lr --once-per 1m "$n" true
	assert_success
}

@test "cron: a user that may create it makes the table on first use" {
	my_sql "DROP TABLE IF EXISTS lr.leaserun_runs"
	run lr --once-per 1m "$(name)" true
	assert_success
	[ "$(my_sql "SELECT count(*) FROM lr.leaserun_runs")" = 1 ]
}

@test "cron: hosts 3 minutes apart run the job once per period, by the server's NOW(6)" {
	n=$(name)
	cron_once "$n"
	run my_sql "SELECT host, period_ms, status, ended_ms >= started_ms,
		started_ms > $(( $(date +%s) - 60 ))000 FROM lr.leaserun_runs
		WHERE name = 'leaserun:$n'"
	assert_output "$(hostname)	3000	0	1	1"
}

@test "cron: a failed run counts, and --status shows the last run" {
	cron_status "$(name)"
}

@test "cron: --max-time stops a hung job within the kill-after grace and frees the lease" {
	cron_max_time "$(name)"
}

@test "cron: --splay spreads the starts" {
	cron_splay "$(name)"
}

@test "--splay: the lock is free through the pause (the first try goes out after it, not with the session's setup)" {
	n=$(name)
	d=$BATS_TEST_TMPDIR
	# A pause drawn below an hour: once it is logged, nobody holds the
	# lock (unless it was drawn below the second this takes: 1 in 3600).
	lr -v --log-format json --splay 1h -n "$n" true 2>"$d/splay" 3>&- &
	p=$!
	BG_PIDS="$BG_PIDS $p"
	wait_until 5 grep -q '"splay"' "$d/splay"
	is_free "$n"
	kill "$p"
	wait_rc "$p"
}

@test "a grant too late to use whose give-back the server, stopped, leaves unanswered: the run waits on, and once the server wakes gives it back and runs on a new grant" {
	local n d=$BATS_TEST_TMPDIR pid
	n=$(name)
	export LEASERUN_FAULT_DIR=$d
	echo acquire.pause=after >"$d/$n.fault"
	LEASERUN_URL="fault+$MY_URL" "$LEASERUN" -v -t 3s -w 40s "$n" \
		sh -c 'echo "$LEASERUN_FENCE" >>"$0/ran"' "$d" 2>"$d/err" 3>&- &
	pid=$!
	BG_PIDS="$BG_PIDS $pid"
	wait_until 20 test -e "$d/$n.paused"
	rm -f "$d/$n.fault"
	# Held still past what a 3s TTL can run on: the grant is too late.
	sleep 2
	mysql_server_signal STOP
	rm -f "$d/$n.paused"
	# Its give-back goes unanswered, and when it is made again before
	# the next try the statement is still in flight: a fault that heals.
	wait_until 15 grep -q "is not answering; closing our session frees the lock; trying again" "$d/err"
	mysql_server_signal CONT
	wait_rc "$pid"
	cat "$d/err"
	assert_equal "$RC" 0
	assert_equal "$(grep -c . "$d/ran")" 1
	grep -q "giving it back and trying again" "$d/err"
}

@test "cron: bad --once-per, --max-time and --splay values are one line and 125" {
	cron_bad_values "$(name)"
}

@test "--status by a user who may read the fences but not the holders' table: that table counts as empty, as a missing one does" {
	n=$(name)
	lr -s "$n" true # (makes lr.leaserun_holders)
	lr --once-per 1m "$n" true # (makes lr.leaserun_runs)
	OTHER_DB=lr8
	my_sql "DROP DATABASE IF EXISTS lr8; CREATE DATABASE lr8;
		CREATE TABLE lr8.leaserun_fences LIKE lr.leaserun_fences;
		CREATE TABLE lr8.leaserun_runs LIKE lr.leaserun_runs;
		CREATE TABLE lr8.leaserun_holders LIKE lr.leaserun_holders;
		GRANT SELECT ON lr8.leaserun_fences TO 'other'@'%';
		GRANT SELECT ON lr8.leaserun_runs TO 'other'@'%'"
	LEASERUN_URL="mysql://other:$MY_PASSWORD@127.0.0.1:$MY_PORT/lr8" \
		run --separate-stderr lr --status "$n"
	# Not held: 1, and not 125 for the table it may not read.
	assert_equal "$status" 1
	assert_equal "$stderr" ""
}

@test "cron: a table of runs this user may read but not write (the table, a column), or that refuses the row: 125, one line saying which, the command not run" {
	n=$(name)
	lr --once-per 1m "$n" true # (makes lr.leaserun_runs)
	OTHER_DB=lr9
	my_sql "DROP DATABASE IF EXISTS lr9; CREATE DATABASE lr9;
		CREATE TABLE lr9.leaserun_fences LIKE lr.leaserun_fences;
		CREATE TABLE lr9.leaserun_runs LIKE lr.leaserun_runs;
		GRANT SELECT, INSERT, UPDATE ON lr9.leaserun_fences TO 'other'@'%';
		GRANT SELECT ON lr9.leaserun_runs TO 'other'@'%'"
	export LEASERUN_URL="mysql://other:$MY_PASSWORD@127.0.0.1:$MY_PORT/lr9"
	grant="this user may not use the table leaserun_runs that --once-per keeps runs in: GRANT SELECT, INSERT, UPDATE ON lr9.leaserun_runs to the user"
	run --separate-stderr lr --once-per 1m "$n" touch "$BATS_TEST_TMPDIR/ran"
	assert_equal "$status" 125
	assert_equal "$stderr" "leaserun: $n: cannot record the start of the run (--once-per 1m): MySQL at 127.0.0.1:$MY_PORT: $grant"
	# INSERT on one column only: refused for another column (1143).
	my_sql "GRANT INSERT (name), UPDATE ON lr9.leaserun_runs TO 'other'@'%'"
	run --separate-stderr lr --once-per 1m "$n" touch "$BATS_TEST_TMPDIR/ran"
	assert_equal "$status" 125
	assert_equal "$stderr" "leaserun: $n: cannot record the start of the run (--once-per 1m): MySQL at 127.0.0.1:$MY_PORT: $grant"
	# Every right, and a row the table refuses: the server's own error,
	# not a grant that would change nothing.
	my_sql "GRANT SELECT, INSERT, UPDATE ON lr9.leaserun_runs TO 'other'@'%';
		ALTER TABLE lr9.leaserun_runs MODIFY host VARCHAR(1) NOT NULL"
	run --separate-stderr lr --once-per 1m "$n" touch "$BATS_TEST_TMPDIR/ran"
	assert_equal "$status" 125
	assert_regex "$stderr" "^leaserun: $n: cannot record the start of the run \(--once-per 1m\): recording the run on MySQL at 127\.0\.0\.1:$MY_PORT failed: Data too long for column 'host' at row 1 \(1406\)\$"
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
}

@test "-l 2 with every slot taken and the plain lock held from SQL: refused as a run of --limit 1 would be, 125, one line" {
	n=$(name)
	lr -s "$n-x" true # (makes lr.leaserun_holders)
	mariadb --no-defaults -u root -S "$MY_DIR/sock" -e \
		"SELECT GET_LOCK('leaserun:$n', 5), GET_LOCK('leaserun:$n#0', 5), GET_LOCK('leaserun:$n#1', 5); SELECT SLEEP(10)" >/dev/null &
	BG_PIDS="$BG_PIDS $!"
	wait_until 5 is_held "$n#1"
	run --separate-stderr lr -n -l 2 "$n" touch "$BATS_TEST_TMPDIR/ran"
	assert_equal "$status" 125
	assert_equal "$stderr" "leaserun: $n: the lease is held with --limit 1 and this run asks for --limit 2: every run on a name must use the same limit"
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
}
