#!/usr/bin/env bats
# The Redis store against a real redis-server (in a temporary directory,
# on a free loopback port and a Unix socket, appendonly yes with
# appendfsync always; the tests of a server without persistence turn it
# off, and teardown turns it on again).

load 'helpers'
load 'redis-server'
load 'redis-faults'

setup_file() {
	[ -e "$LEASERUN_MODULE_DIR/redis.so" ] ||
		{ echo "no redis.so in $LEASERUN_MODULE_DIR" >&2; return 1; }
	redis_server_start
	export LEASERUN_URL="$REDIS_URL"
}

teardown_file() {
	redis_server_stop
}

setup() { redis_test_setup; }
teardown() { redis_test_teardown; }

# read_backs GRANTS: the GETs since the last reset that no script did:
# every script does one GET itself, and a granting acquire a second (the
# fence counter).
read_backs() {
	local gets
	gets=$(rcli info commandstats | calls_of get)
	echo $((gets - $(script_calls) - $1))
}

@test "rediss:// from a leaserun whose redis.so has no redis-tls.so beside it: 125 and why, never a plaintext session" {
	T=$BATS_TEST_TMPDIR
	mkdir "$T/mods"
	cp "$LEASERUN_MODULE_DIR/redis.so" "$T/mods/"
	# The server speaks plaintext: a client that went on without TLS
	# would be served, and run the command.
	LEASERUN_MODULE_DIR=$T/mods run --separate-stderr timeout -s KILL 30 "$LEASERUN" -U "rediss://127.0.0.1:$REDIS_PORT" -w 3s "$(name)" touch "$T/ran"
	assert_equal "$status" 125
	[ ! -e "$T/ran" ]
	assert_regex "$stderr" "this leaserun has no TLS support \($T/mods/redis-tls.so is missing"
}

@test "the command runs with LEASERUN_NAME, a fence and a LEASERUN_URL without the password" {
	run --separate-stderr lr "$(name)" sh -c 'echo "$LEASERUN_NAME|$LEASERUN_FENCE|$LEASERUN_URL"'
	assert_success
	assert_output --regexp "^$(name)\|[1-9][0-9]*\|redis://127.0.0.1:$REDIS_PORT\$"
	refute_output --partial "$REDIS_PASSWORD"
}

@test "the exit status is the command's" {
	run lr "$(name)" sh -c 'exit 7'
	assert_failure 7
}

# The server's clock in microseconds.
server_us() { rcli time | tr -d '\r' | paste -sd' ' | awk '{ printf "%d%06d\n", $1, $2 }'; }

@test "the lease is the documented key: token, fence, pid, since and host, with a TTL" {
	n=$(name)
	before=$(server_us)
	start_holder "$n" -t 5s
	after=$(server_us)
	fence=$(cat "$BATS_TEST_TMPDIR/$n.fence")
	run rcli get "$(keyof "$n")"
	[[ "$output" =~ ^[^\ ]+\ $fence\ $BG\ [0-9]{13}\ $(hostname)$ ]]
	ttl=$(rcli pttl "$(keyof "$n")")
	(( ttl > 0 && ttl <= 5000 ))
	# The first fence of a name is the server's clock in microseconds.
	[ "$(rcli get "leaserun:fence:{$n}")" = "$fence" ]
	(( before <= fence && fence <= after ))
	# The token never reaches the command's environment.
	token=$(rcli get "$(keyof "$n")" | cut -d' ' -f1)
	run grep -qz "$token" "/proc/$CHILD/environ"
	assert_failure 1
}

@test "a key set by another client (SET NX) keeps leaserun out" {
	n=$(name)
	rcli set "$(keyof "$n")" "someone 99 1 0 elsewhere" px 10000 >/dev/null
	run lr -n "$n" true
	assert_failure 1
	run lr --status "$n"
	assert_success
	assert_output --partial "elsewhere pid 1"
	assert_output --partial "fence:   99"
}

@test "REDISCLI_AUTH authenticates a URL without a password and never reaches the command" {
	REDISCLI_AUTH=$REDIS_PASSWORD LEASERUN_URL=$REDIS_URL_NOPW \
		run --separate-stderr lr "$(name)" sh -c 'env | grep -c "^REDISCLI_AUTH=" || true'
	assert_success
	assert_output 0
}

@test "an ACL user with the documented rights takes, renews and releases the lease, with no warning" {
	n=$(name)
	LEASERUN_URL=$REDIS_ACL_URL run --separate-stderr lr -t 600ms "$n" sh -c 'sleep 1; echo $LEASERUN_URL'
	assert_success
	assert_output "redis://lr@127.0.0.1:$REDIS_PORT"
	[ -z "$stderr" ]
	is_free "$n"
}

# acl_user NAME RULES...: an ACL user NAME (password $LR_PASSWORD) with the
# documented key rights and the given channel and command rules; prints
# its URL.
acl_user() {
	local u=$1
	shift
	rcli acl setuser "$u" reset on ">$LR_PASSWORD" '~leaserun:*' "$@" >/dev/null
	echo "redis://$u:$LR_PASSWORD@127.0.0.1:$REDIS_PORT"
}

# conns: how many connections the server has accepted (this one too).
conns() { rcli info stats | tr -d '\r' | sed -n 's/^total_connections_received://p'; }

@test "a short run costs one connection; a longer one opens the watch's second 20ms after the grant" {
	n=$(name)
	# One for leaserun, one for conns itself.  (A loaded machine may
	# stretch a run past 20ms: one of five runs must do with one.)
	for _ in 1 2 3 4 5; do
		c0=$(conns)
		lr -n "$n" true
		c1=$(conns)
		[ $((c1 - c0)) = 2 ] && break
	done
	[ $((c1 - c0)) = 2 ]
	lr -n "$n" sleep 0.3
	c2=$(conns)
	[ $((c2 - c1)) = 3 ]
	# A first try that finds the lease busy subscribes and tries again:
	# two connections, and the run still exits 1.
	start_holder "$n" -t 10s
	watch_on
	c3=$(conns)
	run lr -n "$n" true
	assert_failure 1
	c4=$(conns)
	[ $((c4 - c3)) = 3 ]
}

@test "an ACL user without CLIENT rights: one warning, and the key is checked at each renew" {
	n=$(name)
	url=$(acl_user lr-noclient '&leaserun:*' '&__redis__:invalidate' \
		'&__keyspace@*__:leaserun:*' +@all -@dangerous +info -client)
	LEASERUN_URL=$url start_holder "$n" -t 3s
	# The watch starts 20ms after the grant, and with it the warning.
	wait_until 2 grep -q "cannot watch the lease key" "$BATS_TEST_TMPDIR/$n.err"
	run grep -c "cannot watch the lease key (CLIENT ID: NOPERM" "$BATS_TEST_TMPDIR/$n.err"
	assert_output 1
	# No watch: the deletion is seen at the next renew (R = 1s), 124.
	rcli del "$(keyof "$n")" >/dev/null
	wait_rc "$BG"
	[ "$RC" = 124 ]
	grep -q "gone or held by another owner" "$BATS_TEST_TMPDIR/$n.err"
}

@test "an ACL user who may not run INFO: one warning that the replicas cannot be counted, with the server's reason, however many renewals" {
	n=$(name)
	url=$(acl_user lr-noinfo '&leaserun:*' '&__redis__:invalidate' \
		'&__keyspace@*__:leaserun:*' +@all -@dangerous)
	LEASERUN_URL=$url run --separate-stderr lr -t 600ms "$n" sleep 1.5
	assert_success
	echo "# $stderr" >&3
	run grep -c "cannot count the replicas (INFO replication: NOPERM" <<<"$stderr"
	assert_output 1
	is_free "$n"
}

@test "an ACL user who may not SUBSCRIBE: one warning at once; renew checks the key and a waiter still gets the lease" {
	n=$(name)
	url=$(acl_user lr-nosub '&leaserun:*' +@all -@dangerous +info)
	t0=$(now_ms)
	LEASERUN_URL=$url start_holder "$n" -t 3s
	# Refused at once (when the watch starts, 20ms after the grant), not
	# after a timeout waiting for a reply per channel.
	wait_until 2 grep -q "cannot watch the lease key" "$BATS_TEST_TMPDIR/$n.err"
	(( $(now_ms) - t0 < 1000 ))
	run grep -c "cannot watch the lease key (SUBSCRIBE: NOPERM" "$BATS_TEST_TMPDIR/$n.err"
	assert_output 1
	# (The waiter polls with backoff.)
	LEASERUN_URL=$url "$LEASERUN" -w 10s "$n" sh -c 'echo $LEASERUN_FENCE' \
		>"$BATS_TEST_TMPDIR/w.out" 2>"$BATS_TEST_TMPDIR/w.err" &
	w=$!
	BG_PIDS="$BG_PIDS $w"
	sleep 0.3
	kill "$BG"
	wait_rc "$w"
	[ "$RC" = 0 ]
	(( $(cat "$BATS_TEST_TMPDIR/w.out") > $(cat "$BATS_TEST_TMPDIR/$n.fence") ))
	# Renew alone: a deletion is seen at the next renew, 124.
	LEASERUN_URL=$url start_holder "$n-2" -t 3s
	rcli del "$(keyof "$n-2")" >/dev/null
	wait_rc "$BG"
	[ "$RC" = 124 ]
}

@test "a wrong password fails with 125 and one line that does not show the password" {
	LEASERUN_URL="redis://:Wrong-Pw-123@127.0.0.1:$REDIS_PORT" \
		run -125 --separate-stderr lr "$(name)" true
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == leaserun:* ]]
	[[ "$stderr" == *"authentication failed"* ]]
	[[ "$stderr" != *Wrong-Pw-123* ]]
}

@test "a password given with -U is not in ps while leaserun holds the lease" {
	ps_hides_password "$(name)" "$REDIS_PASSWORD" -t 30s -U "$REDIS_URL"
	ps_hides_password "$(name)" "$LR_PASSWORD" -t 30s --url="$REDIS_ACL_URL"
}

@test "a wrong ACL user fails with 125 and one line that names the user, not the password" {
	LEASERUN_URL="redis://nobody:$LR_PASSWORD@127.0.0.1:$REDIS_PORT" \
		run -125 --separate-stderr lr "$(name)" true
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"as user 'nobody' failed"* ]]
	[[ "$stderr" != *"$LR_PASSWORD"* ]]
}

@test "no password for a server that needs one fails with 125 and says how to give one" {
	LEASERUN_URL=$REDIS_URL_NOPW run -125 --separate-stderr lr "$(name)" true
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *NOAUTH*REDISCLI_AUTH* ]]
	LEASERUN_URL=$REDIS_URL_NOPW run -125 --separate-stderr lr --status "$(name)"
	[[ "$stderr" == *NOAUTH* ]]
}

@test "faults: a server that refuses connections for good: 125 with the last error once the wait runs out, not later; -n at once" {
	port=$("$LR_BUILDDIR/tests/freeport")
	t0=$(now_ms)
	LEASERUN_URL="redis://127.0.0.1:$port" run -125 --separate-stderr \
		lr -w 3s "$(name)" touch "$BATS_TEST_TMPDIR/ran"
	t1=$(now_ms)
	echo "# -w 3s: gave up after $((t1 - t0))ms" >&3
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"cannot connect to redis at 127.0.0.1:$port: Connection refused"* ]]
	(( t1 - t0 >= 2500 && t1 - t0 < 4000 ))
	t0=$(now_ms)
	LEASERUN_URL="redis://127.0.0.1:$port" run -125 --separate-stderr \
		lr -n "$(name)" touch "$BATS_TEST_TMPDIR/ran"
	t1=$(now_ms)
	echo "# -n: gave up after $((t1 - t0))ms" >&3
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"Connection refused"* ]]
	(( t1 - t0 < 1500 ))
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
}

# queued NAME: a waiter is in NAME's queue.
queued() { [ "$(rcli zcard "leaserun:waiters:{$1}")" -ge 1 ]; }

@test "faults: a waiter rides out a crash (kill -9) of the server and its start 2s later, and then runs" {
	n=$(name)
	d=$BATS_TEST_TMPDIR
	start_holder "$n" -t 30s
	"$LEASERUN" -v -w 40 "$n" sh -c 'echo ran >"$0/waiter"' "$d" \
		2>"$d/waiter.err" &
	waiter=$!
	BG_PIDS="$BG_PIDS $waiter"
	wait_until 10 queued "$n"
	kill -9 "$(redis_pid)"
	sleep 2
	redis_server_run
	alive "$waiter"
	# (The holder keeps its lease: appendfsync always.)
	release "$n"
	wait_rc "$BG"
	assert_equal "$RC" 0
	wait_rc "$waiter"
	cat "$d/waiter.err" >&3
	assert_equal "$RC" 0
	[ -e "$d/waiter" ]
	grep -q "Connection refused; trying again until the wait runs out" "$d/waiter.err"
	grep -q "the store answers again" "$d/waiter.err"
}

@test "faults: a run started while the server is down gets the lease once it is up within the wait" {
	n=$(name)
	d=$BATS_TEST_TMPDIR
	redis_server_kill
	"$LEASERUN" -v -w 40 "$n" sh -c 'echo ran >"$0/ran"' "$d" 2>"$d/err" &
	pid=$!
	BG_PIDS=$pid
	sleep 2.5
	alive "$pid"
	redis_server_run
	wait_rc "$pid"
	cat "$d/err" >&3
	assert_equal "$RC" 0
	[ -e "$d/ran" ]
	# Said once, not at every try.
	assert_equal "$(grep -c "trying again" "$d/err")" 1
}

@test "faults: a run started while the server is stopped (SIGSTOP) gets the lease once it wakes within the wait" {
	n=$(name)
	d=$BATS_TEST_TMPDIR
	redis_freeze
	t0=$(now_ms)
	"$LEASERUN" -v -w 20 "$n" sh -c 'echo ran >"$0/ran"' "$d" 2>"$d/err" &
	pid=$!
	BG_PIDS=$pid
	sleep 3
	alive "$pid"
	redis_thaw
	wait_rc "$pid"
	t1=$(now_ms)
	cat "$d/err" >&3
	echo "# ran $((t1 - t0))ms after its start, the server woken at 3000ms" >&3
	assert_equal "$RC" 0
	[ -e "$d/ran" ]
	grep -q "no answer within .*; trying again until the wait runs out" "$d/err"
	(( t1 - t0 < 6000 ))
}

@test "faults: a wrong password, no password or a user without rights on the keys fail at once, even with a long wait" {
	n=$(name)
	t0=$(now_ms)
	LEASERUN_URL="redis://:Wrong-Pw-123@127.0.0.1:$REDIS_PORT" \
		run -125 --separate-stderr lr -w 60 "$n" true
	[[ "$stderr" == *"authentication failed"*WRONGPASS* ]]
	LEASERUN_URL=$REDIS_URL_NOPW run -125 --separate-stderr lr -w 60 "$n" true
	[[ "$stderr" == *NOAUTH* ]]
	rcli acl setuser lr-np on '>np-Pw-1' '~other:*' '+@all' >/dev/null
	LEASERUN_URL="redis://lr-np:np-Pw-1@127.0.0.1:$REDIS_PORT" \
		run -125 --separate-stderr lr -w 60 "$n" true
	rcli acl deluser lr-np >/dev/null
	[[ "$stderr" == *NOPERM* ]]
	[ "${#stderr_lines[@]}" -eq 1 ]
	t1=$(now_ms)
	echo "# three refusals in $((t1 - t0))ms" >&3
	(( t1 - t0 < 3000 ))
}

@test "faults: more runs than the server's maxclients all run in the end" {
	n=$(name)
	d=$BATS_TEST_TMPDIR
	rcli config set maxclients 4 >/dev/null
	all_waiters_run "$n" 12
	rcli config set maxclients 10000 >/dev/null
	grep -v -e acquired -e released -e 'command ' "$d/err" | sort | uniq -c | head -n 20 >&3
	# The limit was met, and ridden out.
	grep -q "max number of clients reached; trying again" "$d/err"
}

@test "faults: a server busy with a script (BUSY) keeps a run waiting, which then runs" {
	n=$(name)
	d=$BATS_TEST_TMPDIR
	rcli config set busy-reply-threshold 100 >/dev/null
	rcli eval "local stop = redis.call('TIME')[1] + 3
		while tonumber(redis.call('TIME')[1]) < stop do end
		return 1" 0 >/dev/null &
	busy=$!
	BG_PIDS=$busy
	wait_until 5 sh -c "REDISCLI_AUTH='$REDIS_PASSWORD' redis-cli -p $REDIS_PORT ping 2>&1 | grep -q BUSY"
	"$LEASERUN" -v -w 20 "$n" sh -c 'echo ran >"$0/ran"' "$d" 2>"$d/err"
	RC=$?
	wait "$busy" || true
	rcli config set busy-reply-threshold 5000 >/dev/null
	cat "$d/err" >&3
	assert_equal "$RC" 0
	[ -e "$d/ran" ]
	grep -q "BUSY.*; trying again until the wait runs out" "$d/err"
}

@test "a password sent in clear text to a host that is not this machine: one warning that says to use rediss://" {
	ip=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -v -e '^127\.' -e : | head -n 1)
	[ -n "$ip" ] || { echo "no address other than loopback" >&2; return 1; }
	port=$("$LR_BUILDDIR/tests/freeport")
	LEASERUN_URL="redis://:Clear-Pw-1@$ip:$port" run -125 --separate-stderr \
		lr -n "$(name)" true
	echo "# $stderr" >&3
	[ "${#stderr_lines[@]}" -eq 2 ]
	[[ "${stderr_lines[0]}" == *"the password goes in clear text"*"use rediss:// (TLS)"* ]]
	[[ "$stderr" != *Clear-Pw-1* ]]
	# Loopback, or no password: no warning.
	LEASERUN_URL="redis://:Clear-Pw-1@127.0.0.1:$port" run -125 --separate-stderr \
		lr -n "$(name)" true
	[[ "$stderr" != *"clear text"* ]]
	LEASERUN_URL="redis://$ip:$port" run -125 --separate-stderr lr -n "$(name)" true
	[[ "$stderr" != *"clear text"* ]]
}

@test "a password in clear text to an IPv6 address: no warning for ::1 or ::ffff:127.0.0.1, one for any other" {
	port=$("$LR_BUILDDIR/tests/freeport")
	for h in '[::1]' '[::ffff:127.0.0.1]'; do
		LEASERUN_URL="redis://:Clear-Pw-1@$h:$port" run -125 --separate-stderr \
			lr -n "$(name)" true
		[ "${#stderr_lines[@]}" -eq 1 ]
		[[ "$stderr" != *"clear text"* ]]
	done
	# ::127.0.0.1 (IPv4-compatible, not mapped) is not this machine.
	LEASERUN_URL="redis://:Clear-Pw-1@[::7f00:1]:$port" run -125 --separate-stderr \
		lr -n "$(name)" true
	[ "${#stderr_lines[@]}" -eq 2 ]
	[[ "${stderr_lines[0]}" == *"redis at [::7f00:1]:$port: the password goes in clear text"* ]]
}

@test "a bad URL option fails with 125 and names it" {
	LEASERUN_URL="$REDIS_URL?colour=blue" run -125 --separate-stderr lr "$(name)" true
	[[ "$stderr" == *"unknown redis URL option 'colour'"* ]]
	LEASERUN_URL="$REDIS_URL?timeout=soon" run -125 --separate-stderr lr "$(name)" true
	[[ "$stderr" == *"bad timeout=soon"* ]]
	# The one duration grammar: what --ttl takes, timeout= takes.
	LEASERUN_URL="$REDIS_URL?timeout=nan" run -125 --separate-stderr lr "$(name)" true
	[[ "$stderr" == *"bad timeout=nan"* ]]
	LEASERUN_URL="$REDIS_URL?timeout=1h" run -0 lr -n "$(name)" true
	LEASERUN_URL="$REDIS_URL?evict=sometimes" run -125 --separate-stderr lr "$(name)" true
	[[ "$stderr" == *"bad evict=sometimes (warn, refuse or ignore)"* ]]
	LEASERUN_URL="redis://127.0.0.1:99999" run -125 --separate-stderr lr "$(name)" true
	[[ "$stderr" == *"bad port in '127.0.0.1:99999'"* ]]
	LEASERUN_URL="redis://a,b" run -125 --separate-stderr lr "$(name)" true
	[[ "$stderr" == *"redis URL: give one host"* ]]
}

@test "redis+unix:// works over the socket, with db= selecting the database" {
	n=$(name)
	LEASERUN_URL="redis+unix://:$REDIS_PASSWORD@$REDIS_SOCK?db=2" \
		run --separate-stderr lr "$n" sh -c "redis-cli -s '$REDIS_SOCK' --no-auth-warning -a '$REDIS_PASSWORD' -n 2 exists '$(keyof "$n")'"
	assert_success
	assert_output 1
	is_free "$n"
}

@test "the database number in the path and prefix= place the key" {
	n=$(name)
	LEASERUN_URL="$REDIS_URL/3?prefix=app:" \
		run lr "$n" sh -c "REDISCLI_AUTH='$REDIS_PASSWORD' redis-cli -p $REDIS_PORT -n 3 exists 'app:{$n}'"
	assert_success
	assert_output 1
}

@test "-n exits 1 (or the -E code) while another holds the lease" {
	n=$(name)
	start_holder "$n"
	run lr -n "$n" true
	assert_failure 1
	run lr -n -E 42 "$n" true
	assert_failure 42
}

@test "--status shows the holder, since, TTL left and fence, and exits 1 when free" {
	n=$(name)
	run lr --status "$n"
	assert_failure 1
	assert_output --partial "free"
	start_holder "$n" -t 20s
	run lr --status "$n"
	assert_success
	assert_output --partial "held"
	assert_output --partial "$(hostname) pid $BG"
	assert_output --partial "since:"
	assert_output --regexp "ttl: +(19|20)[0-9]{3}ms left"
	assert_output --regexp "fence: +$(cat "$BATS_TEST_TMPDIR/$n.fence")\$"
}

@test "--break deletes the key: the holder sees it at once and exits 124" {
	fault_break_seen
}

@test "the key deleted a few ms after the grant: the holder is stopped at once, before its successor starts" {
	fault_deleted_after_grant
}

# del_key NAME: the END of lost_before_start: a real DEL of the lease key.
del_key() { [ "$(rcli del "$(keyof "$1")")" = 1 ]; }

@test "the key deleted between the grant and the command's start: the command never runs on it, and runs once on a new grant within -w" {
	n=$(name)
	lost_before_start "$REDIS_URL" "$n" 'del_key "$n"' -w 10
	assert_lost_before_start_retried
	grep -q "was deleted or taken by another client" "$BATS_TEST_TMPDIR/err"
	is_free "$n"
}

@test "the key deleted between the grant and the command's start, with -n: 124, and the command never ran" {
	n=$(name)
	lost_before_start "$REDIS_URL" "$n" 'del_key "$n"' -n
	assert_lost_before_start_ended
	grep -q "was deleted or taken by another client" "$BATS_TEST_TMPDIR/err"
	is_free "$n"
}

@test "the key deleted between a waiter's grant and its command's start: its watch, armed with the grant, says so, and the command runs once on a new grant" {
	n=$(name)
	start_holder "$n" -t 10s
	# Released once the run below waits: its grant is a waiter's.
	(wait_until 20 grep -q "; waiting" "$BATS_TEST_TMPDIR/err"
	 release "$n") 3>&- &
	BG_PIDS="$BG_PIDS $!"
	lost_before_start "$REDIS_URL" "$n" 'del_key "$n"' -w 10
	assert_lost_before_start_retried
	grep -q "held by .*; waiting" "$BATS_TEST_TMPDIR/err"
	grep -q "was deleted or taken by another client" "$BATS_TEST_TMPDIR/err"
	is_free "$n"
}

@test "a login's write that the socket does not take at once (EAGAIN): written again when it can be, not left half sent to wait out the 2s step for a reply" {
	n=$(name)
	t0=$(now_ms)
	run --separate-stderr lr_failing send:11 -v -t 30s "$n" true
	ms=$(($(now_ms) - t0))
	echo "# status $status in ${ms}ms: $stderr" >&3
	[ -e "$T/failed" ]
	assert_equal "$status" 0
	[[ "$stderr" != *"no answer"* ]]
	[ "$ms" -lt 1500 ]
	is_free "$n"
}

@test "the wait set's timer not made at the first try (timerfd_create fails): made at the next turn, which starts the watch, and a first try's holder sees its key deleted at once" {
	n=$(name)
	# Leaserun's own timer is the first timerfd_create; the store's
	# wait set makes the second as the command starts.
	lr_failing timerfd_create:24:1 -v -t 30s "$n" sleep 20 2>"$T/err" &
	pid=$!
	BG_PIDS="$BG_PIDS $pid"
	wait_until 10 grep -q "command started" "$T/err"
	[ -e "$T/failed" ]
	# Any wake-up is a next turn: a SIGWINCH to leaserun (the command's
	# parent) means nothing else.
	child=$(sed -n 's/.*command started, pid \([0-9]*\).*/\1/p' "$T/err")
	kill -WINCH "$(ps -o ppid= -p "$child")"
	sleep 0.3
	t0=$(now_ms)
	del_key "$n"
	wait_rc "$pid"
	ms=$(($(now_ms) - t0))
	cat "$T/err" >&3
	echo "# rc $RC ${ms}ms after the DEL" >&3
	assert_equal "$RC" 124
	# At once, from the watch: not at the first renewal, 10s on.
	[ "$ms" -lt 3000 ]
}

@test "redis+unix://: a login longer than the socket takes (a 125 KB user and password), to a stopped server: each write is given up at the step's end (500ms), and the run when -w runs out, 125" {
	n=$(name)
	u=$(head -c 125000 /dev/zero | tr '\0' u)
	p=$(head -c 125000 /dev/zero | tr '\0' p)
	redis_freeze
	t0=$(now_ms)
	run --separate-stderr env REDISCLI_AUTH="$p" \
		LEASERUN_URL="redis+unix://$u@$REDIS_SOCK?timeout=500ms" \
		timeout -s KILL 10 "$LEASERUN" -w 1 "$n" true
	ms=$(($(now_ms) - t0))
	redis_thaw
	echo "# status $status in ${ms}ms: ${stderr:0:300}" >&3
	assert_equal "$status" 125
	[ "$ms" -lt 5000 ]
	assert_regex "$stderr" "login: no answer within 500ms"
}

# kill_main: the END of lost_before_start: the server closes the run's
# command connection, and the time is noted (T0).
kill_main() {
	[ "$(rcli client kill type normal)" = 1 ]
	T0=$(now_ms)
}

@test "redis+unix://: the command connection closed by the server between the grant and the command's start: the write that fails there is a failure at once, and the key is read on a new connection" {
	n=$(name)
	# On a Unix socket whose server end is closed, a write fails
	# (EPIPE) rather than going out: the key's read before the start
	# meets that failure, and must not wait out its step (2s).
	lost_before_start "redis+unix://:$REDIS_PASSWORD@$REDIS_SOCK" "$n" \
		kill_main -t 30s
	ms=$(($(now_ms) - T0))
	echo "# started and ended ${ms}ms after the cut" >&3
	cat "$BATS_TEST_TMPDIR/err" >&3
	assert_equal "$RC" 0
	assert_equal "$(grep -c . "$BATS_TEST_TMPDIR/runs")" 1
	# Not the store's 2s step, nor a suspicion's renewal at once.
	[ "$ms" -lt 1000 ]
	assert_equal "$(grep -c renewed "$BATS_TEST_TMPDIR/err")" 0
	is_free "$n"
}

@test "fences strictly increase from holder to holder" {
	n=$(name)
	a=$(lr "$n" sh -c 'echo $LEASERUN_FENCE')
	b=$(lr "$n" sh -c 'echo $LEASERUN_FENCE')
	c=$(lr "$n" sh -c 'echo $LEASERUN_FENCE')
	(( a < b && b < c ))
}

@test "fences keep growing across a restart that lost the counter (no persistence)" {
	n=$(name)
	redis_persist off
	a=$(lr "$n" sh -c 'echo $LEASERUN_FENCE' 2>/dev/null)
	b=$(lr "$n" sh -c 'echo $LEASERUN_FENCE' 2>/dev/null)
	redis_server_restart
	[ "$(rcli exists "leaserun:fence:{$n}")" = 0 ]
	c=$(lr "$n" sh -c 'echo $LEASERUN_FENCE' 2>/dev/null)
	echo "# fences $a $b, restart, $c" >&3
	(( a < b && b < c ))
}

@test "fences keep growing when the counter goes back (a lost second of appendfsync everysec, a failover)" {
	n=$(name)
	a=$(lr "$n" sh -c 'echo $LEASERUN_FENCE')
	b=$(lr "$n" sh -c 'echo $LEASERUN_FENCE')
	rcli set "leaserun:fence:{$n}" "$a" >/dev/null
	c=$(lr "$n" sh -c 'echo $LEASERUN_FENCE')
	rcli del "leaserun:fence:{$n}" >/dev/null
	d=$(lr "$n" sh -c 'echo $LEASERUN_FENCE')
	echo "# fences $a $b, set back to $a: $c, deleted: $d" >&3
	(( a < b && b < c && c < d ))
}

@test "a waiter does not hammer the server and starts at once when the holder releases" {
	fault_waiter_wakes
}

@test "a holder sends one renew per interval and one read back per renew, no more" {
	n=$(name)
	rcli config resetstat >/dev/null
	run lr -t 3s "$n" sleep 2.2
	assert_success
	calls=$(script_calls)
	reads=$(read_backs 1)
	echo "# $calls script calls, $reads read backs" >&3
	# acquire + 2 renews + release; the key is read once before the
	# command starts (a first try's grant has no watch yet to ask),
	# once in the round trip that turns the watch on, and each renew's
	# own write comes back as a tracking notice and is checked with one
	# GET.
	(( calls >= 4 && calls <= 6 ))
	(( reads <= 4 ))
}

@test "waiters retrying do not disturb the holder's watch" {
	n=$(name)
	lr -t 3s "$n" sleep 2.5 &
	h=$!
	BG_PIDS=$h
	wait_until 5 is_held "$n"
	rcli config resetstat >/dev/null
	pids=
	for i in 1 2 3; do
		lr -w 10 "$n" true &
		pids="$pids $!"
	done
	BG_PIDS="$h $pids"
	wait_rc "$h"
	[ "$RC" = 0 ]
	for p in $pids; do
		wait_rc "$p"
		[ "$RC" = 0 ]
	done
	calls=$(script_calls)
	reads=$(read_backs 4)
	echo "# $calls script calls, $reads read backs" >&3
	# The holder's 2 renews; per waiter, the read in its first try's
	# round trip, one GET to name the holder when it starts waiting and
	# one read back of its own grant (its watch was on before): no read
	# back for the waiters' queue traffic or the holder's renewals.
	(( reads <= 2 + 3 * 3 ))
}

# ks_tries N CMDS: runs the transaction CMDS (one command a line) N times,
# 0.2s apart, and prints the script calls (a waiter's tries) meanwhile.
ks_tries() {
	local i
	rcli config resetstat >/dev/null
	for i in $(seq "$1"); do
		printf 'MULTI\n%sEXEC\n' "$2" | rcli >/dev/null
		sleep 0.2
	done
	script_calls
}

@test "notify-keyspace-events on: a waiter tries at once when the key is deleted or expires, not when another holder renews it" {
	n=$(name)
	k=$(keyof "$n")
	other="other-token 1 1 1 elsewhere"
	rcli config set notify-keyspace-events KEA >/dev/null
	rcli set "$k" "$other" px 60000 >/dev/null
	"$LEASERUN" -w 20 "$n" true &
	w=$!
	BG_PIDS=$w
	wait_until 10 eval '[ "$(rcli pubsub numsub "__keyspace@0__:$k" | tail -n 1)" = 1 ]'
	# Past the first tries' backoff: from here on, tries of its own
	# are 1.2s apart at least.
	sleep 2.5
	# The other holder's renewals (set, expire): no try for them.
	renews=$(ks_tries 10 "SET $k \"$other\" PX 60000
PEXPIRE $k 60000
")
	# Deleted and set again: each deletion is a try.
	dels=$(ks_tries 10 "DEL $k
SET $k \"$other\" PX 60000
")
	# Expired (read past its time) and set again: each expiry is a try.
	expired=$(ks_tries 10 "SET $k \"$other\" PXAT 1
EXISTS $k
SET $k \"$other\" PX 60000
")
	echo "# tries: $renews on renewals, $dels on deletions, $expired on expiries" >&3
	(( renews <= 4 ))
	(( dels >= 7 ))
	(( expired >= 7 ))
	rcli del "$k" >/dev/null
	wait_rc "$w"
	assert_equal "$RC" 0
}

@test "--break of a free lease succeeds and changes nothing" {
	n=$(name)
	run lr --break "$n"
	assert_success
	is_free "$n"
}

@test "waiters queue in the documented sorted set and leave it when they get the lease" {
	n=$(name)
	start_holder "$n" -t 5s
	pids=
	for i in 1 2 3; do
		lr -w 20 "$n" true &
		pids="$pids $!"
	done
	BG_PIDS="$BG_PIDS $pids"
	wait_until 5 sh -c "[ \"\$(REDISCLI_AUTH='$REDIS_PASSWORD' redis-cli -p $REDIS_PORT zcard 'leaserun:waiters:{$n}')\" = 3 ]"
	kill "$BG"
	for p in $pids; do
		wait_rc "$p"
		[ "$RC" = 0 ]
	done
	[ "$(rcli zcard "leaserun:waiters:{$n}")" = 0 ]
}

# The names leaserun-redis(7) gives to the Redis keys and channels, one a
# line, as it prints them: P{NAME}, Pfence:{NAME}, ...
man_redis_names() {
	mandoc -T ascii "$LR_SRCDIR/man/leaserun-redis.7" | sed 's/.\x08//g' |
		sed -n '/Keys, for lease NAME and prefix P:/,/The braces keep/p' |
		sed -n 's/^ *\(P[^ ]*{NAME}[^ ]*\)$/\1/p'
}

@test "the keys and channels that the man page and README name are the ones a holder and a waiter use" {
	: "${LR_SRCDIR:?LR_SRCDIR must name the source directory (make check sets it)}"
	n=$(name)
	d=$BATS_TEST_TMPDIR
	mapfile -t names < <(man_redis_names)
	printf '# %s\n' "${names[@]}" >&3
	# The lease, the fence counter, the queue, the release's done mark,
	# the wake and release channels, the record of --once-per.
	[ "${#names[@]}" = 7 ]
	# The README names none that leaserun-redis(7) does not.
	while read -r k; do
		printf '%s\n' "${names[@]}" | grep -qxF "P${k#leaserun:}" ||
			fail "the README names $k, leaserun-redis(7) does not"
	done < <(grep -o 'leaserun:[a-z:]*{NAME}[:A-Za-z]*' "$LR_SRCDIR/README" |
		sort -u)
	# As patterns for this lease and the default prefix, TOKEN any.
	pats=()
	for k in "${names[@]}"; do
		k=leaserun:${k#P}
		k=${k//\{NAME\}/\{$n\}}
		pats+=("${k//TOKEN/*}")
	done
	# Listen on them all as channels; hold the lease, and let one wait.
	REDISCLI_AUTH=$REDIS_PASSWORD redis-cli -p "$REDIS_PORT" \
		psubscribe "${pats[@]}" >"$d/msgs" &
	BG_PIDS=$!
	wait_until 5 sh -c "[ \$(grep -c '^psubscribe\$' '$d/msgs') = ${#pats[@]} ]"
	start_holder "$n" -t 10s --once-per 1m
	lr -w 20 "$n" true &
	w=$!
	BG_PIDS="$BG_PIDS $w"
	wait_until 5 sh -c "[ \"\$(REDISCLI_AUTH='$REDIS_PASSWORD' redis-cli -p $REDIS_PORT zcard 'leaserun:waiters:{$n}')\" = 1 ]"
	keys=" "
	for p in "${pats[@]}"; do
		[ -z "$(rcli --scan --pattern "$p")" ] || keys="$keys$p "
	done
	kill "$BG"
	wait_rc "$w"
	[ "$RC" = 0 ]
	# (The releases leave their done marks.)
	for p in "${pats[@]}"; do
		[ -z "$(rcli --scan --pattern "$p")" ] || keys="$keys$p "
	done
	# Each is a key that existed, or a channel that heard the release.
	for p in "${pats[@]}"; do
		[[ $keys == *" $p "* ]] && continue
		wait_until 5 sh -c "grep -A1 -x pmessage '$d/msgs' | grep -qxF '$p'" ||
			fail "$p: no such key, and no message on it"
	done
}

@test "-w gives up after the duration with 1" {
	n=$(name)
	start_holder "$n"
	t0=$(now_ms)
	run lr -w 1s "$n" true
	t1=$(now_ms)
	assert_failure 1
	(( t1 - t0 >= 900 && t1 - t0 < 3000 ))
	# Its place in the queue is dropped at the next release, which wakes
	# the next live waiter instead.
	[ "$(rcli zcard "leaserun:waiters:{$n}")" = 1 ]
	lr -w 10 "$n" true &
	w=$!
	BG_PIDS="$BG_PIDS $w"
	wait_until 5 sh -c "[ \"\$(REDISCLI_AUTH='$REDIS_PASSWORD' redis-cli -p $REDIS_PORT zcard 'leaserun:waiters:{$n}')\" = 2 ]"
	kill "$BG"
	wait_rc "$w"
	[ "$RC" = 0 ]
	[ "$(rcli zcard "leaserun:waiters:{$n}")" = 0 ]
}

@test "a waiter takes over when the holder's key expires (holder killed with -9)" {
	n=$(name)
	start_holder "$n" -t 1s
	kill -9 "$BG"
	run lr -w 5s "$n" sh -c 'echo $LEASERUN_FENCE'
	assert_success
	(( output > $(cat "$BATS_TEST_TMPDIR/$n.fence") ))
}

@test "the key deleted while held: the command is killed at once, 124" {
	fault_key_deleted
}

@test "the key taken over by another owner while held: 124 at once" {
	fault_key_taken
}

@test "CLIENT KILL of leaserun's connection is noticed at once: it reconnects and keeps the lease" {
	fault_client_kill_main
}

@test "CLIENT KILL of the watch connection: the holder opens it again and watches the key from then on" {
	fault_client_kill_watch
}

# evals: how many times a script went out whole (EVAL), not by its digest.
evals() { rcli info commandstats | calls_of eval; }

# every_script NAME: each script once: acquire, renew and release of a
# plain lease and of a semaphore's slot, --once-per's start and end,
# --status, --break.
every_script() {
	lr -t 600ms "$1" sleep 0.3
	lr -t 600ms --limit 2 "$1-sem" sleep 0.3
	lr --once-per 1h "$1-once" true
	lr --status "$1-once" >/dev/null || [ $? = 1 ] # 1: free
	lr --break "$1" >/dev/null
}

@test "every script goes by its digest: once loaded, no run sends a script's text" {
	n=$(name)
	every_script "$n-1"
	e=$(evals)
	every_script "$n-2"
	# A digest worked out wrong would be NOSCRIPT, then EVAL, every time.
	[ "$(evals)" = "$e" ]
	[ "$e" -gt 0 ]
}

@test "SCRIPT FLUSH while held: renew and release load the scripts again (NOSCRIPT fallback)" {
	fault_script_flush
}

@test "a server restart without persistence: the loss is seen at the first retry, 124" {
	fault_restart_nopersist
}

@test "a server restart with appendonly yes, appendfsync always: the lease is kept, fences go on growing" {
	fault_restart_aof
}

@test "a stopped server: renewals time out and the command is stopped before the TTL runs out, 124" {
	fault_stopped_server
}

@test "leaserun and its command stopped past the TTL: killed at once on resume, and the successor's fence is higher" {
	n=$(name)
	start_holder "$n" -t 1s
	first=$(rcli get "$(keyof "$n")" | cut -d' ' -f2)
	kill -STOP "$BG"
	kill -STOP "$CHILD"
	wait_until 5 is_free "$n"
	second=$(lr -n "$n" sh -c 'echo $LEASERUN_FENCE')
	(( second > first ))
	t0=$(now_ms)
	kill -CONT "$CHILD"
	kill -CONT "$BG"
	wait_rc "$BG"
	[ "$RC" = 124 ]
	(( $(now_ms) - t0 < 1000 ))
	wait_until 1 dead "$CHILD"
}

@test "kill -9 of leaserun: the command is gone at once and the lease is free after the TTL" {
	n=$(name)
	start_holder "$n" -t 2s
	kill -9 "$BG"
	# (Orphaned, the command may linger as a zombie until init reaps it.)
	wait_until 1 gone "$CHILD"
	run lr -n "$n" true
	assert_failure 1
	wait_until 3 is_free "$n"
	run lr -n "$n" true
	assert_success
}

# guard_check OPT WORDS: with a server the guard OPT (evict, persist)
# finds unfit, a run warns once with WORDS, not at each renew; OPT=refuse
# exits 125 with one line and gives back what it took; OPT=ignore says
# nothing.
guard_check() {
	local opt=$1 words=$2 n
	n=$(name)
	run --separate-stderr lr -t 600ms "$n" sh -c 'sleep 0.5; echo ran'
	assert_success
	assert_output ran
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"$words"* ]]
	LEASERUN_URL="$REDIS_URL?$opt=refuse" run -125 --separate-stderr lr "$n" true
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"$words"*"($opt=refuse)"* ]]
	# Checked along with the first try: what it took is given back.
	is_free "$n"
	LEASERUN_URL="$REDIS_URL?$opt=ignore" run --separate-stderr lr "$n" true
	assert_success
	[ -z "$stderr" ]
}

@test "an evicting maxmemory-policy gives a warning, and evict=refuse refuses" {
	rcli config set maxmemory-policy volatile-lru >/dev/null
	guard_check evict "maxmemory-policy volatile-lru"
	rcli config set maxmemory-policy noeviction >/dev/null
	LEASERUN_URL="$REDIS_URL?evict=refuse" run --separate-stderr lr "$(name)" true
	assert_success
	[ -z "$stderr" ]
}

@test "a server without an append-only file gives one warning a run, and persist=refuse refuses" {
	redis_persist off
	guard_check persist "keeps no append-only file"
	run --separate-stderr lr "$(name)" sleep 0.1
	[[ "$stderr" == *"use appendonly yes, appendfsync always" ]]
	LEASERUN_URL="$REDIS_URL?persist=bogus" run -125 --separate-stderr lr "$(name)" true
	[[ "$stderr" == *"bad persist=bogus (warn, refuse or ignore)" ]]
	redis_persist on
	LEASERUN_URL="$REDIS_URL?persist=refuse" run --separate-stderr lr "$(name)" true
	assert_success
	[ -z "$stderr" ]
}

# info_calls: how many INFO commands the server has run before this one
# (which itself is one).
info_calls() {
	rcli info commandstats | calls_of info
}

@test "guards set to ignore do not ask the server (no INFO)" {
	local before
	before=$(info_calls)
	run lr "$(name)" true
	assert_success
	(( $(info_calls) > before + 1 ))
	before=$(info_calls)
	LEASERUN_URL="$REDIS_URL?evict=ignore&persist=ignore&replicas=0" run lr "$(name)" true
	assert_success
	[ "$(info_calls)" = "$((before + 1))" ]
}

@test "a warning guard asks with the watch: a command that ends within 20ms costs no INFO" {
	local before quiet=
	redis_persist off
	# One of five runs of true must end within 20ms of its grant: a
	# loaded machine can stretch one.
	for _ in 1 2 3 4 5; do
		before=$(info_calls)
		run --separate-stderr lr "$(name)" true
		assert_success
		# The first info_calls, and INFO replication (replicas=auto)
		# with the grant: no INFO memory, no INFO persistence.
		if [ "$(info_calls)" = "$((before + 2))" ] && [ -z "$stderr" ]; then
			quiet=1
			break
		fi
	done
	[ -n "$quiet" ]
	before=$(info_calls)
	run --separate-stderr lr "$(name)" sleep 0.2
	assert_success
	# Both with the watch, and the warning.
	[ "$(info_calls)" = "$((before + 4))" ]
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"keeps no append-only file"* ]]
	redis_persist on
}

@test "50 contenders: no overlap, fences strictly increase" {
	n=$(name)
	log=$BATS_TEST_TMPDIR/log
	pids=
	for i in $(seq 50); do
		"$LEASERUN" -w 120 "$n" sh -c "s=\$(date +%s%N); sleep 0.01; echo \"\$s \$(date +%s%N) \$LEASERUN_FENCE\" >> '$log'" &
		pids="$pids $!"
	done
	# shellcheck disable=SC2086 # pids
	all_exclusive "$log" 50 $pids
	is_free "$n"
}

@test "operations: --status --json, a waiter's events, --check and metrics on Redis" {
	ops_check "$(name)" ttl fence
}

@test "operations: the key deleted: a lost event with its reason, counted in the metrics" {
	n=$(name)
	start_holder "$n" -v -t 30s --log-format json --metrics-file "$BATS_TEST_TMPDIR/m.prom"
	rcli del "$(keyof "$n")" >/dev/null
	wait_rc "$BG"
	[ "$RC" = 124 ]
	ops_loss_seen "$n" "$BATS_TEST_TMPDIR/$n.err" "$BATS_TEST_TMPDIR/m.prom"
}

@test "operations: a stopped server: --warn-signal at the first failed renewal, renewed again when it wakes" {
	fault_warn_recover
}

@test "operations: systemd hears whom a waiter waits for on Redis, then READY=1 with the fence" {
	command -v socat >/dev/null || { echo "socat is not installed" >&2; return 1; }
	n=$(name)
	d=$BATS_TEST_TMPDIR
	socat -u "UNIX-RECV:$d/notify" "OPEN:$d/notes,creat,append" &
	BG_PIDS="$BG_PIDS $!"
	wait_until 5 test -S "$d/notify"
	start_holder "$n" -t 30s
	NOTIFY_SOCKET=$d/notify "$LEASERUN" -w 20s "$n" sh -c 'echo "$LEASERUN_FENCE" > "$0/fence"' "$d" &
	w=$!
	BG_PIDS="$BG_PIDS $w"
	wait_until 10 grep -q '^STATUS=waiting' "$d/notes"
	kill "$BG"
	wait_rc "$w"
	[ "$RC" = 0 ]
	wait_until 5 grep -q '^STOPPING=1' "$d/notes"
	grep -qx "STATUS=waiting for $n, held by $(hostname) pid $BG" "$d/notes"
	grep -qx "READY=1" "$d/notes"
	grep -qx "STATUS=holding $n, fence $(cat "$d/fence")" "$d/notes"
	grep -qx "STATUS=released $n" "$d/notes"
}

@test "a command that deletes its own key and exits 0 at once: the release finds the lease not ours, 124" {
	n=$(name)
	d=$BATS_TEST_TMPDIR
	# Too fast for any watch: the loss is first seen by the release.
	run --separate-stderr lr -v --log-format json --metrics-file "$d/m.prom" "$n" \
		sh -c "REDISCLI_AUTH='$REDIS_PASSWORD' redis-cli -p $REDIS_PORT del '$(keyof "$n")' >/dev/null; exit 0"
	echo "$stderr" > "$d/err"
	assert_failure 124
	ops_loss_seen "$n" "$d/err" "$d/m.prom"
	is_free "$n"
}

@test "a release whose reply is lost is sent again, and learns that its first sending released the lease: the command's status, not 124" {
	n=$(name)
	d=$BATS_TEST_TMPDIR
	# (A run first, so that the server knows the release script: its
	# first sending below runs, rather than ending in NOSCRIPT.)
	lr "$n" true
	# The proxy lets the release reach the server, loses its reply and
	# closes the connection: leaserun sends the release again, on a
	# new connection, and finds the key gone.
	"$LR_BUILDDIR/tests/cutproxy" "$REDIS_PORT" "leaserun:released:{$n}" \
		"$d/cut" >"$d/port" &
	BG_PIDS=$!
	wait_until 5 test -s "$d/port"
	LEASERUN_URL="redis://:$REDIS_PASSWORD@127.0.0.1:$(cat "$d/port")" \
		run --separate-stderr lr -v --log-format json "$n" sh -c 'exit 3'
	[ -e "$d/cut" ]
	assert_failure 3
	jq -e -s 'any(.[]; .event == "released") and
		all(.[]; .event != "lost")' <<<"$stderr"
	is_free "$n"
}

# --- one cron job across a fleet (helpers.bash) ---

@test "cron: hosts 3 minutes apart run the job once per period, by the server's TIME" {
	n=$(name)
	cron_once "$n"
	# What the server holds: the last start, in its own milliseconds.
	run rcli hgetall "leaserun:run:{$n}"
	assert_line fence
	assert_line start
	assert_line host
	assert_line period
	assert_line 3000
	assert_line end
	assert_line status
	[ "$(rcli ttl "leaserun:run:{$n}")" = -1 ]
}

@test "cron: the server killed and back within a second between the grant and the run's record: the run is recorded and runs" {
	n=$(name)
	d=$BATS_TEST_TMPDIR
	export LEASERUN_FAULT_DIR=$d
	echo run_start.pause=before >"$d/$n.fault"
	LEASERUN_URL="fault+$REDIS_URL" "$LEASERUN" -v -t 20s --once-per 1h "$n" \
		sh -c 'echo "$LEASERUN_FENCE" >"$0/ran"' "$d" 2>"$d/err" &
	pid=$!
	BG_PIDS=$pid
	wait_until 20 test -e "$d/$n.paused"
	rm -f "$d/$n.fault"
	kill -9 "$(redis_pid)"
	rm -f "$d/$n.paused"
	sleep 1
	redis_server_run
	wait_rc "$pid"
	cat "$d/err" >&3
	assert_equal "$RC" 0
	[ -e "$d/ran" ]
	# The record names the run's fence.
	[ "$(rcli hget "leaserun:run:{$n}" fence)" = "$(cat "$d/ran")" ]
}

@test "cron: a start that cannot be recorded in time, then a give-back no server answers in time: made again before the next try, so the next grant has a higher fence, and the run runs once" {
	local n d=$BATS_TEST_TMPDIR pid first
	n=rd-unreleased-$BATS_TEST_NUMBER
	export LEASERUN_FAULT_DIR=$d
	# (tests/be-fault.c) The give-back never reaches the store: its key
	# stays ours, which the store would grant again with its old fence.
	printf 'run_start=stall\nrelease.pause=before\nrelease=stall\n' >"$d/$n.fault"
	LEASERUN_URL="fault+$REDIS_URL" "$LEASERUN" -v -t 6s -w 30s --once-per 1h "$n" \
		sh -c 'echo "$LEASERUN_FENCE" >>"$0/ran"' "$d" 2>"$d/err" 3>&- &
	pid=$!
	BG_PIDS="${BG_PIDS:-} $pid"
	wait_until 20 test -e "$d/$n.paused"
	# The give-back made again before the next try fails too, once: a
	# fault that heals, said, and the run waits on.
	echo release=stall >"$d/$n.fault"
	rm -f "$d/$n.paused"
	wait_until 20 grep -q "injected release stall; trying again" "$d/err"
	rm -f "$d/$n.fault"
	wait_rc "$pid"
	cat "$d/err"
	assert_equal "$RC" 0
	assert_equal "$(grep -c . "$d/ran")" 1
	first=$(sed -n 's/.*: acquired, fence \([0-9]*\).*/\1/p' "$d/err" | head -1)
	(( $(cat "$d/ran") > first ))
}

@test "cron: a give-back that no server answers in time, and the wait over before another try: given back once more as the run ends, not left to its TTL" {
	local n d=$BATS_TEST_TMPDIR pid
	n=rd-unreleased-$BATS_TEST_NUMBER
	export LEASERUN_FAULT_DIR=$d
	printf 'run_start=stall\nrelease.pause=before\nrelease=stall\n' >"$d/$n.fault"
	LEASERUN_URL="fault+$REDIS_URL" "$LEASERUN" -t 20s -w 1s --once-per 1h "$n" \
		touch "$d/ran" 2>"$d/err" 3>&- &
	pid=$!
	BG_PIDS="${BG_PIDS:-} $pid"
	wait_until 20 test -e "$d/$n.paused"
	rm -f "$d/$n.fault" "$d/$n.paused"
	wait_rc "$pid"
	cat "$d/err"
	assert_equal "$RC" 125
	[ ! -e "$d/ran" ]
	# Free at once, not in 20 s.
	run -0 "$LEASERUN" -n "$n" true
}

@test "cron: a failed run counts, and --status shows the last run" {
	cron_status "$(name)"
}

@test "cron: --status with a run record that is not a hash: the holder still shown, and one warning with the server's reason" {
	n=$(name)
	rcli set "leaserun:run:{$n}" not-a-hash >/dev/null
	start_holder "$n" -t 20s
	run --separate-stderr lr --status "$n"
	rcli del "leaserun:run:{$n}" >/dev/null
	assert_success
	assert_output --partial "$(hostname) pid $BG"
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"cannot read the last run: redis at 127.0.0.1:$REDIS_PORT: WRONGTYPE"* ]]
}

@test "cron: an ACL user with the documented rights keeps the runs" {
	n=$(name)
	run env LEASERUN_URL="$REDIS_ACL_URL" "$LEASERUN" --once-per 1m "$n" true
	assert_success
	run env LEASERUN_URL="$REDIS_ACL_URL" "$LEASERUN" --once-per 1m "$n" true
	assert_failure 1
	assert_output --partial "next run allowed in"
}

@test "cron: --max-time stops a hung job within the kill-after grace and frees the lease" {
	cron_max_time "$(name)"
	is_free "$(name)"
}

@test "cron: --splay spreads the starts" {
	cron_splay "$(name)"
}

@test "cron: bad --once-per, --max-time and --splay values are one line and 125" {
	cron_bad_values "$(name)"
	[ "$(rcli exists "leaserun:run:{$(name)}")" = 0 ]
}
