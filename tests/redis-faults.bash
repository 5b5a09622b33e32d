# redis-faults.bash - the Redis store's fault tests, one function each,
# run by redis.bats over plain TCP and by redis-tls.bats over TLS, and
# the helpers they share.  The server is redis-server.bash's; leaserun
# reaches it through LEASERUN_URL, on port REDIS_LR_PORT (the plain or
# the TLS port), while the tests' own redis-cli uses the plain port.
#
# Meant to be sourced by bats files, after helpers.bash and
# redis-server.bash; the bats file's setup() and teardown() call
# redis_test_setup and redis_test_teardown.

redis_test_setup() {
	BG_PIDS=
	unset REDISCLI_AUTH
}

redis_test_teardown() {
	kill_bg
	# The server must be running and sane for the next test, whatever
	# this one did.
	kill -CONT "$(redis_pid)" 2>/dev/null || true
	rcli config set maxmemory-policy noeviction >/dev/null || true
	rcli config set notify-keyspace-events "" >/dev/null || true
	rcli config set maxclients 10000 busy-reply-threshold 5000 >/dev/null || true
	if grep -q '^appendonly no' "$REDIS_DIR/redis.conf"; then
		redis_persist on || true
	fi
}

# "At once" below means well under the renew interval (10s for -t 30s):
# the limits leave room for a loaded machine and a sanitizer build, whose
# exit alone can take a few hundred ms.

# A lease name unique to this test, and its documented key.
name() { echo "rd-$BATS_TEST_NUMBER"; }
keyof() { echo "leaserun:{$1}"; }

# No live process $1 (an orphaned zombie counts as gone).
gone() { ! redis_running "$1"; }

is_held() { [ "$(rcli exists "$(keyof "$1")")" = 1 ]; }
is_free() { [ "$(rcli exists "$(keyof "$1")")" = 0 ]; }

# The number of script runs (EVALSHA and EVAL, not counting NOSCRIPT
# answers) since the last reset.
script_calls() {
	rcli info commandstats | tr -d '\r' | awk -F'[=,:]' '
		/^cmdstat_(evalsha|eval):/ { n += $3 - $9 - $11 }
		END { print n + 0 }'
}

# deleted_seen NAME: deletes the lease key of the holder $BG, which must
# see it at once (well under its renew interval) and exit 124.
deleted_seen() {
	local t0
	t0=$(now_ms)
	rcli del "$(keyof "$1")" >/dev/null
	wait_rc "$BG"
	[ "$RC" = 124 ]
	(( $(now_ms) - t0 < 2000 ))
}

# The id of the one holder's watch connection (its three channels tell
# it from other subscribers), or nothing.
watcher_id() {
	rcli client list | grep 'flags=P' | grep ' sub=3 psub=0 ' |
		sed -n 's/^id=\([0-9]*\) .*/\1/p'
}

# Waits until the holder's watch is on: it starts 20ms after the grant,
# on a connection of its own (later than its command may have started).
has_watcher() { [ -n "$(watcher_id)" ]; }
watch_on() { wait_until 5 has_watcher; }

# The ids of the connections that are neither pub/sub nor this
# redis-cli: the command connection of the one leaserun running.
command_conn_ids() {
	rcli client list | grep -v 'cmd=client|list' | grep -v 'flags=P' |
		sed -n 's/^id=\([0-9]*\) .*/\1/p'
}

redis_freeze() { kill -STOP "$(redis_pid)"; }
redis_thaw() { kill -CONT "$(redis_pid)"; }

# --break deletes the key: the holder sees it at once and exits 124
fault_break_seen() {
	n=$(name)
	start_holder "$n" -t 30s
	t0=$(now_ms)
	run lr --break "$n"
	assert_success
	wait_rc "$BG"
	[ "$RC" = 124 ]
	t1=$(now_ms)
	dead "$CHILD"
	(( t1 - t0 < 2000 ))
}

# the key deleted a few ms after the grant: the holder is stopped at once, before its successor starts
fault_deleted_after_grant() {
	n=$(name)
	d=$BATS_TEST_TMPDIR
	# The deleter opens its connection beforehand and polls, with shell
	# builtins, for the first thing A's command does, so that it deletes
	# the key a few ms after the command started: after leaserun's last
	# look before the start (a delete before it would keep the command
	# from starting at all), and before or just after the watch starts,
	# 20ms after the grant.  1.5s later it runs B, which takes the free
	# lease and records "start end fence".
	cat >"$d/deleter.bash" <<'EOF'
exec 5<>"/dev/tcp/127.0.0.1/$REDIS_PORT"
printf 'AUTH %s\r\n' "$REDIS_PASSWORD" >&5
read -r _ <&5
: >"$1/ready"
for ((i = 0; i < 10000000; i++)); do
	[ -e "$1/a.start" ] && break
done
printf 'DEL leaserun:{%s}\r\n' "$2" >&5
read -r _ <&5
date +%s%N >"$1/del"
exec 5>&-
sleep 1.5
exec "$LEASERUN" -t 30s -n "$2" sh -c '
	s=$(date +%s%N); sleep 0.5
	echo "$s $(date +%s%N) $LEASERUN_FENCE" > "$0/b"' "$1"
EOF
	bash "$d/deleter.bash" "$d" "$n" 2>"$d/b.err" &
	BG_PIDS=$!
	wait_until 5 test -e "$d/ready"
	# A: TTL 30s, so its first renew is 10s away; its command writes
	# "start fence", then a heartbeat every few ms until it is stopped
	# (each file written whole and renamed).
	"$LEASERUN" -t 30s -n "$n" sh -c '
		echo "$(date +%s%N) $LEASERUN_FENCE" > "$0/a.new"
		mv -f "$0/a.new" "$0/a.start"
		while :; do
			date +%s%N > "$0/a.new"
			mv -f "$0/a.new" "$0/a.beat"
			sleep 0.005
		done' "$d" 2>"$d/a.err" &
	a=$!
	BG_PIDS="$BG_PIDS $a"
	wait_rc "$a"
	gone=$(date +%s%N)
	[ "$RC" = 124 ]
	grep -q "deleted or taken by another client" "$d/a.err"
	wait_until 10 exists "$d/b"
	del=$(cat "$d/del")
	echo "# the holder exited $(( (gone - del) / 1000000 ))ms after the delete" >&3
	# At once: not when B's SET comes 1.5s later, nor at the renew.
	(( gone - del < 1000000000 ))
	: >"$d/log"
	if [ -e "$d/a.start" ]; then
		read -r start fence <"$d/a.start"
		last=$(cat "$d/a.beat" 2>/dev/null || echo "$start")
		echo "$start $last $fence" >>"$d/log"
	fi
	cat "$d/b" >>"$d/log"
	run check_intervals "$d/log"
	echo "# $output" >&3
	assert_success
}

# a waiter does not hammer the server and starts at once when the holder releases
fault_waiter_wakes() {
	n=$(name)
	"$LEASERUN" -t 10s "$n" sh -c "echo > '$BATS_TEST_TMPDIR/h.started'; sleep 3; date +%s%N > '$BATS_TEST_TMPDIR/h.end'" &
	h=$!
	wait_until 5 exists "$BATS_TEST_TMPDIR/h.started"
	rcli config resetstat >/dev/null
	"$LEASERUN" -w 10 "$n" sh -c "date +%s%N > '$BATS_TEST_TMPDIR/w.start'" &
	w=$!
	BG_PIDS="$h $w"
	wait_rc "$h"
	[ "$RC" = 0 ]
	wait_rc "$w"
	[ "$RC" = 0 ]
	calls=$(script_calls)
	gap=$(( ($(cat "$BATS_TEST_TMPDIR/w.start") - $(cat "$BATS_TEST_TMPDIR/h.end")) / 1000000 ))
	echo "# hand-over took ${gap}ms; $calls script calls in ~3s" >&3
	(( gap < 300 ))
	# Polling every 50ms would be ~60 calls; backoff and the release
	# channel need a handful.
	(( calls < 20 ))
}

# the key deleted while held: the command is killed at once, 124
fault_key_deleted() {
	n=$(name)
	start_holder "$n" -t 30s
	# The watch is on from the grant: a renew every 10s cannot help.
	deleted_seen "$n"
	dead "$CHILD"
	grep -q "deleted or taken by another client" "$BATS_TEST_TMPDIR/$n.err"
}

# the key taken over by another owner while held: 124 at once
fault_key_taken() {
	n=$(name)
	start_holder "$n" -t 30s
	t0=$(now_ms)
	rcli set "$(keyof "$n")" "intruder 999 1 0 elsewhere" px 30000 >/dev/null
	wait_rc "$BG"
	[ "$RC" = 124 ]
	t1=$(now_ms)
	(( t1 - t0 < 2000 ))
	# The release did not delete the intruder's key.
	[ "$(rcli get "$(keyof "$n")")" = "intruder 999 1 0 elsewhere" ]
}

# CLIENT KILL of leaserun's connection is noticed at once: it reconnects and keeps the lease
fault_client_kill_main() {
	n=$(name)
	start_holder "$n" -t 30s
	watch_on
	before=$(command_conn_ids)
	[ -n "$before" ]
	for id in $before; do rcli client kill id "$id" >/dev/null; done
	# A renew is due only in 10s: a new connection within 3s shows the
	# close was seen at once.
	wait_until 3 sh -c "[ -n \"\$(REDISCLI_AUTH='$REDIS_PASSWORD' redis-cli -p $REDIS_PORT client list | grep -v 'cmd=client|list' | grep -v 'flags=P')\" ]"
	alive "$CHILD"
	is_held "$n"
	# The lease still works: the key is deleted and seen at once.
	deleted_seen "$n"
}

# CLIENT KILL of the watch connection: the holder opens it again and watches the key from then on
fault_client_kill_watch() {
	n=$(name)
	start_holder "$n" -t 30s
	watch_on
	watcher=$(watcher_id)
	[ "$(echo "$watcher" | wc -w)" = 1 ]
	rcli client kill id "$watcher" >/dev/null
	# Seen at once: a renew reconnects it and arms the watch again.
	wait_until 3 sh -c "REDISCLI_AUTH='$REDIS_PASSWORD' redis-cli -p $REDIS_PORT client list | grep 'flags=P' | grep -qv 'id=$watcher '"
	alive "$CHILD"
	deleted_seen "$n"
}

# SCRIPT FLUSH while held: renew and release load the scripts again (NOSCRIPT fallback)
fault_script_flush() {
	n=$(name)
	lr -t 600ms "$n" sh -c 'sleep 1; echo done' >"$BATS_TEST_TMPDIR/out" &
	h=$!
	BG_PIDS=$h
	wait_until 5 is_held "$n"
	rcli script flush >/dev/null
	wait_rc "$h"
	[ "$RC" = 0 ]
	[ "$(cat "$BATS_TEST_TMPDIR/out")" = done ]
	is_free "$n"
}

# a server restart without persistence: the loss is seen at the first retry, 124
fault_restart_nopersist() {
	n=$(name)
	redis_persist off
	start_holder "$n" -t 6s
	redis_server_restart
	t0=$(now_ms)
	wait_rc "$BG"
	[ "$RC" = 124 ]
	t1=$(now_ms)
	dead "$CHILD"
	# The close is seen at once; the reconnect is retried every ~R/3
	# (667ms) until the server is back, where the key is gone.
	echo "# loss seen $((t1 - t0))ms after the server was back" >&3
	(( t1 - t0 < 1500 ))
	grep -q "gone or held by another owner" "$BATS_TEST_TMPDIR/$n.err"
	# And the store works again.
	run lr -n "$n" true
	assert_success
}

# a server restart with appendonly yes, appendfsync always: the lease is kept, fences go on growing
fault_restart_aof() {
	n=$(name)
	# (The suite's server has both from the start.)
	start_holder "$n" -t 10s -v
	fence=$(cat "$BATS_TEST_TMPDIR/$n.fence")
	kill -9 "$(redis_pid)"
	redis_server_run
	# The disconnect is seen at once; the renewals retried every ~R/3
	# find the key, still ours, in what the server read back.
	wait_until 8 grep -q "renewed again" "$BATS_TEST_TMPDIR/$n.err"
	alive "$CHILD"
	is_held "$n"
	run lr -n "$n" true
	assert_failure 1
	kill "$BG"
	wait_rc "$BG"
	is_free "$n"
	run lr "$n" sh -c 'echo $LEASERUN_FENCE'
	assert_success
	[ "$output" -gt "$fence" ]
}

# a stopped server: renewals time out and the command is stopped before the TTL runs out, 124
fault_stopped_server() {
	n=$(name)
	"$LEASERUN" -t 2s "$n" sh -c "echo \$\$ > '$BATS_TEST_TMPDIR/pid'; while :; do date +%s%N > '$BATS_TEST_TMPDIR/beat.new'; mv -f '$BATS_TEST_TMPDIR/beat.new' '$BATS_TEST_TMPDIR/beat'; sleep 0.01; done" \
		2>"$BATS_TEST_TMPDIR/err" &
	BG=$!
	BG_PIDS=$BG
	wait_until 5 exists "$BATS_TEST_TMPDIR/pid"
	CHILD=$(cat "$BATS_TEST_TMPDIR/pid")
	t_stop=$(date +%s%N)
	kill -STOP "$(redis_pid)"
	wait_rc "$BG"
	[ "$RC" = 124 ]
	kill -CONT "$(redis_pid)"
	dead "$CHILD"
	# (Written whole and renamed: a kill between the truncate and the
	# write of a plain > would leave it empty, and the check below void.)
	last=$(cat "$BATS_TEST_TMPDIR/beat")
	[ -n "$last" ]
	# The last renew was before t_stop, so the key lives at most until
	# t_stop + TTL: the command's last sign of life is before that.
	echo "# command stopped $(( (last - t_stop) / 1000000 ))ms after the server" >&3
	(( last < t_stop + 2000000000 ))
	grep -q "redis at 127.0.0.1:$REDIS_LR_PORT" "$BATS_TEST_TMPDIR/err"
}

# operations: a stopped server: --warn-signal at the first failed renewal, renewed again when it wakes
fault_warn_recover() {
	ops_warn_recover "$(name)" redis_freeze redis_thaw
}
