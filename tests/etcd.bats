#!/usr/bin/env bats
# The etcd store against a real etcd (one member on free loopback ports).

load 'helpers'
load 'etcd-server'

setup_file() {
	command -v etcd >/dev/null && command -v etcdctl >/dev/null ||
		{ echo "etcd and etcdctl are needed (Debian: etcd-server, etcd-client)" >&2; return 1; }
	[ -e "$LEASERUN_MODULE_DIR/etcd.so" ] ||
		{ echo "no etcd.so in $LEASERUN_MODULE_DIR" >&2; return 1; }
	LRE_DIR=$(etcd_tmpdir)
	export LRE_DIR
	etcd_single "$LRE_DIR"
	export LRE_EP
	export LEASERUN_URL="etcd://$LRE_EP"
}

teardown_file() {
	etcd_stop_all "$LRE_DIR"
	rm -rf "$LRE_DIR"
}

teardown() {
	# A test that failed half-way must not leave etcd stopped, nor
	# anything running in the background.
	kill -CONT "$(cat "$LRE_DIR/e0.pid")" 2>/dev/null || true
	kill_bg
	[ -f "$LRE_DIR/e0.pid" ] || etcd_restart "$LRE_DIR" e0 || true
	if [ -f "$BATS_TEST_TMPDIR/authdir" ]; then
		etcd_stop_all "$(cat "$BATS_TEST_TMPDIR/authdir")"
		rm -rf "$(cat "$BATS_TEST_TMPDIR/authdir")"
	fi
}

E() { etcdctl --endpoints "$LRE_EP" "$@"; }

# Number of keys under the lease's directory.
nkeys() { E get --prefix --keys-only "${2:-leaserun/}$1/" | grep -c . || true; }

nkeys_is() { [ "$(nkeys "$1")" = "$2" ]; }

# The create revision of the only key under the lease's directory.
crev() {
	E get --prefix "leaserun/$1/" -w fields |
		awk '$1 == "\"CreateRevision\"" { print $3; exit }'
}

# The lease (hex) of the only key under the lease's directory.
lease_hex() {
	printf '%x\n' "$(E get --prefix "leaserun/$1/" -w fields |
		awk '$1 == "\"Lease\"" { print $3; exit }')"
}

@test "a command runs under the lease and its fence is the key's create revision" {
	run "$LEASERUN" t1 sh -c 'echo "$LEASERUN_FENCE $LEASERUN_NAME"; etcdctl --endpoints "$0" get --prefix leaserun/t1/ -w fields' "$LRE_EP"
	assert_success
	fence=${lines[0]%% *}
	assert_equal "${lines[0]#* }" t1
	assert_output --partial "\"CreateRevision\" : $fence"
	assert_equal "$(nkeys t1)" 0
}

@test "the command's exit status is passed through" {
	run "$LEASERUN" t2 sh -c 'exit 7'
	assert_failure 7
	assert_equal "$(nkeys t2)" 0
}

@test "the command gets no descriptor of the store" {
	run "$LEASERUN" t3 sh -c 'ls -l /proc/$$/fd/'
	assert_success
	assert_output --partial " 0 -> "
	refute_output --partial "socket:"
	refute_output --partial "anon_inode:"
}

@test "leaserun's own descriptors on etcd are close-on-exec" {
	hold t3c
	n=0
	for f in /proc/"$HOLDER"/fd/*; do
		fd=${f##*/}
		[ "$fd" -gt 2 ] || continue
		case $(readlink "$f") in
		socket:* | anon_inode:*) ;;
		*) continue ;; # inherited from bats: the user's, left as they are
		esac
		n=$((n + 1))
		flags=$(awk '$1 == "flags:" { print $2 }' /proc/"$HOLDER"/fdinfo/"$fd" 2>/dev/null)
		[ -n "$flags" ] || continue # closed meanwhile
		# O_CLOEXEC is 02000000 in fdinfo's octal flags.
		[ $((0$flags & 02000000)) -ne 0 ] ||
			{ echo "fd $fd ($(readlink "$f")) flags $flags" >&2; false; }
	done
	# The connection's socket, the store's epoll set and timerfd, and the
	# core's signalfd and timerfd at least.
	[ "$n" -ge 5 ]
	release t3c
	wait_holder
	assert_equal "$HRC" 0
}

@test "the command gets the user's fds on etcd, unmarked by the store's close-on-exec pass" {
	run bash -c 'exec 7>/dev/null 9</dev/null; "$LEASERUN" t3d sh -c "ls /proc/self/fd"'
	assert_success
	fds=$(echo "$output" | sort -n | tr '\n' ' ')
	want=$(bash -c 'exec 7>/dev/null 9</dev/null; ls /proc/self/fd' | sort -n | tr '\n' ' ')
	assert_equal "$fds" "$want"
}

@test "-n gives up at once when the lease is held, and leaves nothing behind" {
	hold t4
	t0=$(now_ms)
	run "$LEASERUN" -n t4 true
	assert_failure 1
	# It did not wait for the holder, who holds until released; the
	# bound is loose because CI may run this under ASan and load.
	[ $(($(now_ms) - t0)) -lt 10000 ]
	assert_equal "$(nkeys t4)" 1
	run "$LEASERUN" -n -E 3 t4 true
	assert_failure 3
	assert_equal "$(nkeys t4)" 1
	release t4
	wait_holder
	assert_equal "$HRC" 0
	assert_equal "$(nkeys t4)" 0
}

@test "-w gives up when the time runs out, and leaves nothing behind" {
	hold t5
	t0=$(now_ms)
	run "$LEASERUN" -w 700ms t5 true
	assert_failure 1
	el=$(($(now_ms) - t0))
	[ "$el" -ge 700 ]
	[ "$el" -lt 3000 ]
	assert_equal "$(nkeys t5)" 1
	release t5
	wait_holder
	assert_equal "$HRC" 0
	# Both leases are revoked (the waiter's by close(), the holder's by
	# its release); under load the revokes may land a moment later.
	for _ in $(seq 100); do
		[ "$(E lease list | grep -c . || true)" = 1 ] && break
		sleep 0.1
	done
	assert_equal "$(E lease list | grep -c . || true)" 1 # the header only
}

@test "a waiter starts as soon as the holder releases (a watch, not polling)" {
	log=$BATS_TEST_TMPDIR/log
	# Both log in JSON, with milliseconds.
	"$LEASERUN" -v --log-format json t6 sh -c 'touch "$0.started"; sleep 3' \
		"$log" 2>"$log.holder" 3>&- &
	holder=$!
	BG_PIDS="$BG_PIDS $holder"
	wait_file "$log.started"
	"$LEASERUN" -v --log-format json -w 20s t6 true 2>"$log.waiter" 3>&- &
	waiter=$!
	BG_PIDS="$BG_PIDS $waiter"
	# The waiter queues behind the holder and waits for about 2.5s, long
	# enough for its retry interval to grow to about a second.
	wait "$waiter"
	wait "$holder"
	t_exit=$(sed -n 's/^{"time":"\([^"]*\)".*"exited".*/\1/p' "$log.holder")
	t_acq=$(sed -n 's/^{"time":"\([^"]*\)".*"acquired".*/\1/p' "$log.waiter")
	[ -n "$t_exit" ] && [ -n "$t_acq" ]
	lag=$(($(date -d "$t_acq" +%s%3N) - $(date -d "$t_exit" +%s%3N)))
	echo "# acquired ${lag}ms after the holder's command exited" >&3
	[ "$lag" -lt 300 ]
}

@test "--status shows the holder's host, pid, TTL left and fence" {
	run "$LEASERUN" --status t7
	assert_failure 1
	assert_output --partial "free"
	hold t7 -t 6s
	run "$LEASERUN" --status t7
	assert_success
	assert_line --regexp "^state: +held$"
	assert_line --regexp "^holder: +$(hostname) pid $HOLDER$"
	assert_line --regexp "^ttl: +[1-6][0-9]{3}ms left$"
	assert_line --regexp "^fence: +$(crev t7)$"
	release t7
	wait_holder
	assert_equal "$HRC" 0
}

@test "--break deletes the holder's key and lease; the holder stops at once (124)" {
	hold t8
	lease=$(lease_hex t8)
	t0=$(now_ms)
	run "$LEASERUN" --break t8
	assert_success
	wait_holder
	assert_equal "$HRC" 124
	[ $(($(now_ms) - t0)) -lt 2000 ]
	assert_equal "$(nkeys t8)" 0
	run E lease timetolive "$lease"
	assert_output --partial "already expired"
	run "$LEASERUN" --break t8
	assert_success
}

@test "--break revokes the holder's lease itself: a holder that cannot act (stopped) has its lease gone at once, and ends 124 once it goes on" {
	hold t8b
	lease=$(lease_hex t8b)
	kill -STOP "$HOLDER"
	run "$LEASERUN" --break t8b
	assert_success
	run E lease timetolive "$lease"
	assert_output --partial "already expired"
	kill -CONT "$HOLDER"
	wait_holder
	assert_equal "$HRC" 124
}

@test "a revoked lease stops the command at once (124)" {
	hold t9
	child=$(cat "$BATS_TEST_TMPDIR/t9.pid")
	t0=$(now_ms)
	E lease revoke "$(lease_hex t9)"
	wait_holder
	assert_equal "$HRC" 124
	[ $(($(now_ms) - t0)) -lt 1500 ]
	run kill -0 "$child"
	assert_failure
	grep -q "lost" "$BATS_TEST_TMPDIR/t9.err"
}

@test "a deleted key stops the command at once (124)" {
	hold t10
	t0=$(now_ms)
	E del --prefix leaserun/t10/
	wait_holder
	assert_equal "$HRC" 124
	[ $(($(now_ms) - t0)) -lt 1500 ]
	assert_equal "$(E lease list | grep -c . || true)" 1
}

# Nothing of the run stays in etcd: no key, and no lease but the header
# line of the listing (revokes may land a moment after leaserun exits).
@test "--status of a run record and a holder that name no host (\"-\", older versions' \"?\"): no host shown, not the placeholder" {
	now=$(($(date +%s) * 1000))
	E put leaserun/.last/nohost "5 3600000 $((now - 60000)) 0 -1 4242 -" >/dev/null
	E put leaserun/nohost/x "? 4343 $((now - 30000))" >/dev/null
	run lr --status nohost
	E del --prefix leaserun/nohost/ >/dev/null
	E del leaserun/.last/nohost >/dev/null
	assert_equal "$status" 0
	assert_line "holder:  pid 4343"
	assert_line --regexp '^run: +started [0-9T:-]+Z pid 4242, fence 5$'
}

nothing_left() {
	for _ in $(seq 50); do
		[ "$(E lease list | grep -c . || true)" = 1 ] && break
		sleep 0.1
	done
	assert_equal "$(nkeys "$1")" 0
	assert_equal "$(E lease list | grep -c . || true)" 1
}

@test "the key deleted between the grant and the command's start: the command never runs on it, and runs once on a new grant within -w" {
	lost_before_start "$LEASERUN_URL" t10b \
		'E del --prefix leaserun/t10b/ >/dev/null' -w 10
	assert_lost_before_start_retried
	grep -Eq "etcd key leaserun/t10b/[0-9a-f]+ (was deleted|is gone)" \
		"$BATS_TEST_TMPDIR/err"
	nothing_left t10b
}

@test "the lease revoked between the grant and the command's start: the command never runs on it, and runs once on a new grant within -w" {
	lost_before_start "$LEASERUN_URL" t10c \
		'E lease revoke "$(lease_hex t10c)" >/dev/null' -w 10
	assert_lost_before_start_retried
	nothing_left t10c
}

@test "the lease revoked between the grant and the command's start, with -n: 124, and the command never ran" {
	lost_before_start "$LEASERUN_URL" t10d \
		'E lease revoke "$(lease_hex t10d)" >/dev/null' -n
	assert_lost_before_start_ended
	nothing_left t10d
}

@test "a key deleted a few ms after acquire: the holder is stopped before the next holder's command starts" {
	log=$BATS_TEST_TMPDIR/log
	del=$BATS_TEST_TMPDIR/del
	mkfifo "$del"
	# An etcdctl started ahead deletes a key the moment it is asked: it
	# reads its transaction from a fifo opened read-write (no EOF needed).
	(E txn <>"$del" >"$del.out" 2>&1 3>&-) &
	BG_PIDS="$BG_PIDS $!"
	hold t24
	first=$(E get --prefix --keys-only leaserun/t24/ | grep .)
	# A queues behind the holder.  Its command has etcdctl delete A's
	# key first thing, and writes a line before that and at every turn
	# after it until it is stopped.
	"$LEASERUN" -t 3s -w 30s t24 bash -c \
		'key=$(cat "$0.key")
		echo "$EPOCHREALTIME A" >>"$1"
		printf "\ndel %s\n\n\n" "$key" >"$0"
		while :; do echo "$EPOCHREALTIME A" >>"$1"; done' \
		"$del" "$log" 2>"$log.a" 3>&- &
	a=$!
	BG_PIDS="$BG_PIDS $a"
	for _ in $(seq 100); do [ "$(nkeys t24)" = 2 ] && break; sleep 0.05; done
	E get --prefix --keys-only leaserun/t24/ | grep . | grep -vx "$first" >"$del.key"
	[ -s "$del.key" ]
	# B queues behind A.
	"$LEASERUN" -w 30s t24 bash -c 'echo "$EPOCHREALTIME B" >>"$0"' \
		"$log" 2>"$log.b" 3>&- &
	b=$!
	BG_PIDS="$BG_PIDS $b"
	for _ in $(seq 100); do [ "$(nkeys t24)" = 3 ] && break; sleep 0.05; done
	assert_equal "$(nkeys t24)" 3
	# The holder lets go: A acquires, and its key is deleted at once.
	release t24
	wait_holder
	assert_equal "$HRC" 0
	wait "$a" && arc=0 || arc=$?
	wait "$b" && brc=0 || brc=$?
	grep -q SUCCESS "$del.out"
	assert_equal "$arc" 124
	grep -q "lost" "$log.a"
	assert_equal "$brc" 0
	a_first=$(awk '$2 == "A" { print $1; exit }' "$log")
	a_last=$(awk '$2 == "A" { t = $1 } END { print t }' "$log")
	b_start=$(awk '$2 == "B" { print $1; exit }' "$log")
	[ -n "$a_first" ]
	[ -n "$b_start" ]
	awk -v f="$a_first" -v l="$a_last" -v b="$b_start" 'BEGIN {
		printf "# A ran %.1fms; B started %.1fms after A last ran\n",
			(l - f) * 1000, (b - l) * 1000 }' >&3
	# A was stopped by the watch, not at its next renewal (1s) ...
	awk -v f="$a_first" -v l="$a_last" 'BEGIN { exit !(l - f < 0.5) }'
	# ... and B's command started only after A's last sign of life.
	awk -v l="$a_last" -v b="$b_start" 'BEGIN { exit !(b > l) }'
}

@test "etcd:// loads no TLS library" {
	maps=$BATS_TEST_TMPDIR/maps
	run "$LEASERUN" t25 sh -c 'cat /proc/$PPID/maps >"$0"' "$maps"
	assert_success
	# (Else this proved nothing.)
	grep -q '/etcd\.so$' "$maps"
	grep -q '/libnghttp2\.so' "$maps"
	run grep -E 'libssl|libcrypto|libgnutls|-tls\.so' "$maps"
	assert_failure
}

@test "kill -9 of leaserun: the command dies with it, the lease is free after the TTL" {
	hold t11 -t 5s
	child=$(cat "$BATS_TEST_TMPDIR/t11.pid")
	t0=$(now_ms)
	kill -9 "$HOLDER"
	wait_gone "$child" 20
	# The lease outlives leaserun until its TTL runs out ...
	run "$LEASERUN" -n t11 true
	assert_failure 1
	[ $(($(now_ms) - t0)) -lt 3000 ] # (else this proved nothing)
	# ... and not much longer.
	run "$LEASERUN" -w 10s t11 true
	assert_success
	[ $(($(now_ms) - t0)) -lt 7000 ]
}

@test "leaserun stopped past the TTL stops the command as soon as it resumes (124)" {
	hold t12 -t 2s
	kill -STOP "$HOLDER"
	for i in $(seq 60); do [ "$(nkeys t12)" = 0 ] && break; sleep 0.1; done
	assert_equal "$(nkeys t12)" 0
	t0=$(now_ms)
	kill -CONT "$HOLDER"
	wait_holder
	assert_equal "$HRC" 124
	[ $(($(now_ms) - t0)) -lt 1000 ]
}

@test "etcd stopped (SIGSTOP): the holder stops the command before the TTL runs out (124)" {
	hold t13 -t 3s
	child=$(cat "$BATS_TEST_TMPDIR/t13.pid")
	pid=$(cat "$LRE_DIR/e0.pid")
	t0=$(now_ms)
	kill -STOP "$pid"
	wait_gone "$child" 50 || true
	el=$(($(now_ms) - t0))
	wait_holder
	kill -CONT "$pid"
	assert_equal "$HRC" 124
	echo "# command stopped ${el}ms after etcd was" >&3
	[ "$el" -lt 3000 ]
	etcd_wait_healthy "$LRE_DIR" e0
	run "$LEASERUN" -w 5s t13 true
	assert_success
}

@test "etcd restarted while a job holds: the job keeps its lease" {
	log=$BATS_TEST_TMPDIR/log
	# The command runs until etcd is back and the lease renewed.
	("$LEASERUN" -v -t 15s t14 sh -c \
		'touch "$0.started"; until [ -e "$0.back" ]; do sleep 0.1; done' \
		"$log" 2>"$log.err" && rc=0 || rc=$?; echo "$rc" >"$log.rc") 3>&- &
	job=$!
	BG_PIDS="$BG_PIDS $job"
	wait_file "$log.started"
	f1=$(crev t14)
	etcd_stop "$LRE_DIR" e0
	sleep 0.5
	etcd_restart "$LRE_DIR" e0
	# The stop broke the watch, so a renewal failed; wait for the next
	# one that succeeds.
	for _ in $(seq 200); do
		grep -q "renewed again" "$log.err" && break
		sleep 0.1
	done
	touch "$log.back"
	wait "$job"
	sed 's/^/# /' "$log.err" >&3
	assert_equal "$(cat "$log.rc")" 0
	grep -q "renewed again" "$log.err"
	run "$LEASERUN" t14 sh -c 'echo $LEASERUN_FENCE'
	assert_success
	[ "$output" -gt "$f1" ]
}

@test "an unreachable etcd: -n fails with 125 at once and names the endpoint" {
	port=$("$LR_BUILDDIR/tests/freeport")
	run "$LEASERUN" -n -U "etcd://127.0.0.1:$port" t15 true
	assert_failure 125
	assert_equal "${#lines[@]}" 1
	assert_output --regexp "^leaserun: .*127\.0\.0\.1:$port.*Connection refused$"
}

# The key (create revision) of a waiter: the second key of the name.
second_crev() {
	E get --prefix "leaserun/$1/" -w fields |
		awk '$1 == "\"CreateRevision\"" { n++; if (n == 2) { print $3; exit } }'
}

@test "faults: a waiter rides out a crash of etcd and its start 2s later, keeps its place, and then runs" {
	hold f1 -t 30s
	"$LEASERUN" -v -w 40 f1 sh -c 'echo ran >"$0/waiter"' "$BATS_TEST_TMPDIR" \
		2>"$BATS_TEST_TMPDIR/waiter.err" 3>&- &
	waiter=$!
	BG_PIDS="$BG_PIDS $waiter"
	wait_until 10 nkeys_is f1 2
	place=$(second_crev f1)
	etcd_kill "$LRE_DIR" e0
	sleep 2
	etcd_restart "$LRE_DIR" e0
	# The waiter has tried again (and the holder renewed) meanwhile.
	wait_until 20 grep -q "the store answers again" "$BATS_TEST_TMPDIR/waiter.err"
	alive "$waiter"
	# Its lease outlived the restart: the same key, the same place.
	assert_equal "$(second_crev f1)" "$place"
	release f1
	wait_holder
	wait_rc "$waiter"
	sed 's/^/# /' "$BATS_TEST_TMPDIR/waiter.err" >&3
	assert_equal "$HRC" 0
	assert_equal "$RC" 0
	[ -e "$BATS_TEST_TMPDIR/waiter" ]
	grep -q "trying again until the wait runs out" "$BATS_TEST_TMPDIR/waiter.err"
}

@test "faults: a run started while etcd is down gets the lease once it is up within the wait" {
	etcd_kill "$LRE_DIR" e0
	"$LEASERUN" -v -w 40 f2 sh -c 'echo ran >"$0/ran"' "$BATS_TEST_TMPDIR" \
		2>"$BATS_TEST_TMPDIR/err" 3>&- &
	pid=$!
	BG_PIDS="$BG_PIDS $pid"
	sleep 2.5
	alive "$pid"
	etcd_restart "$LRE_DIR" e0
	wait_rc "$pid"
	sed 's/^/# /' "$BATS_TEST_TMPDIR/err" >&3
	assert_equal "$RC" 0
	[ -e "$BATS_TEST_TMPDIR/ran" ]
	# Said once, not at every try.
	assert_equal "$(grep -c "trying again" "$BATS_TEST_TMPDIR/err")" 1
	grep -q "Connection refused" "$BATS_TEST_TMPDIR/err"
}

@test "faults: etcd paused (SIGSTOP) while runs start and wait: they run once it resumes" {
	pid=$(cat "$LRE_DIR/e0.pid")
	hold f3 -t 30s
	"$LEASERUN" -w 40 f3 sh -c 'echo ran >"$0/waiter"' "$BATS_TEST_TMPDIR" 3>&- &
	waiter=$!
	BG_PIDS="$BG_PIDS $waiter"
	wait_until 10 nkeys_is f3 2
	kill -STOP "$pid"
	# Its TTL bounds each try: the pause outlasts two of them.
	"$LEASERUN" -v -t 2s -w 40 f3b sh -c 'echo ran >"$0/new"' \
		"$BATS_TEST_TMPDIR" 2>"$BATS_TEST_TMPDIR/err" 3>&- &
	new=$!
	BG_PIDS="$BG_PIDS $new"
	sleep 4.5
	alive "$new"
	alive "$waiter"
	kill -CONT "$pid"
	wait_rc "$new"
	sed 's/^/# /' "$BATS_TEST_TMPDIR/err" >&3
	assert_equal "$RC" 0
	[ -e "$BATS_TEST_TMPDIR/new" ]
	grep -q "no answer .*in time; trying again" "$BATS_TEST_TMPDIR/err"
	release f3
	wait_holder
	wait_rc "$waiter"
	assert_equal "$HRC" 0
	assert_equal "$RC" 0
	[ -e "$BATS_TEST_TMPDIR/waiter" ]
}

@test "faults: etcd down for good: 125 with the last error once the wait runs out, not later; -n at once" {
	etcd_kill "$LRE_DIR" e0
	down_for_good f4 "cannot reach etcd at $LRE_EP: Connection refused"
}

@test "faults: a name that does not resolve fails at once, even with a long wait" {
	getent hosts nosuch.invalid >/dev/null && skip "nosuch.invalid resolves here"
	t0=$(now_ms)
	run --separate-stderr "$LEASERUN" -w 60 -U "etcd://nosuch.invalid:2379" f5 true
	t1=$(now_ms)
	assert_equal "$status" 125
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "nosuch\.invalid"
	(( t1 - t0 < 3000 ))
}

@test "faults: no random lease ID to be had (getrandom fails): 125 in one line, the command never runs, nothing left in etcd" {
	T=$BATS_TEST_TMPDIR
	# The lease ID is 63 random bits, the key's name: a fixed one would
	# be the same for every run, and one run's "already exists" would
	# take another's lease for its own.  (The first getrandom() is the
	# core's, for a seed it can do without; the second is the lease's.)
	run --separate-stderr lr_failing getrandom:5:1 t16r touch "$T/ran"
	[ -e "$T/failed" ]
	assert_equal "$status" 125
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "getrandom: Input/output error"
	[ ! -e "$T/ran" ]
	assert_equal "$(nkeys t16r)" 0
}

@test "endpoints are tried in turn: a dead first endpoint is skipped" {
	port=$("$LR_BUILDDIR/tests/freeport")
	run "$LEASERUN" -U "etcd://127.0.0.1:$port,$LRE_EP" t16 sh -c 'echo ok'
	assert_success
	assert_output ok
}

@test "unknown URL options and TLS options without etcds:// are refused (125)" {
	run "$LEASERUN" -U "etcd://$LRE_EP?colour=blue" t17 true
	assert_failure 125
	assert_output --partial "colour"
	run "$LEASERUN" -U "etcd://$LRE_EP?cacert=/x" t17 true
	assert_failure 125
	assert_output --partial "etcds://"
	# A path is not the prefix: the one line names the option to use.
	run "$LEASERUN" -U "etcd://$LRE_EP/locks/" t17 true
	assert_failure 125
	assert_output --partial "etcd URLs take no path (use ?prefix=locks/)"
}

@test "?prefix= moves the keys, and an empty prefix excludes etcdctl lock" {
	run "$LEASERUN" -U "etcd://$LRE_EP?prefix=jobs/" t18 sh -c 'etcdctl --endpoints "$0" get --prefix jobs/t18/ --keys-only' "$LRE_EP"
	assert_success
	assert_output --regexp "^jobs/t18/[0-9a-f]+$"
	mkfifo "$BATS_TEST_TMPDIR/gate"
	(E lock t18 -- sh -c 'touch "$0.started"; cat "$0" >/dev/null' \
		"$BATS_TEST_TMPDIR/gate" >/dev/null 3>&-) &
	lk=$!
	BG_PIDS="$BG_PIDS $lk"
	wait_file "$BATS_TEST_TMPDIR/gate.started"
	run "$LEASERUN" -n -U "etcd://$LRE_EP?prefix=" t18 true
	assert_failure 1
	timeout 5 sh -c 'echo go > "$1"' sh "$BATS_TEST_TMPDIR/gate"
	wait "$lk"
	run "$LEASERUN" -n -U "etcd://$LRE_EP?prefix=" t18 true
	assert_success
}

@test "50 contenders: no overlap and strictly increasing fences" {
	log=$BATS_TEST_TMPDIR/log
	pids=
	for i in $(seq 50); do
		("$LEASERUN" -w 60s t19 sh -c \
			's=$(date +%s%N); e=$(date +%s%N); echo "$s $e $LEASERUN_FENCE" >> "$0"' \
			"$log" 3>&-) &
		pids="$pids $!"
	done
	BG_PIDS="$BG_PIDS $pids"
	fails=0
	for p in $pids; do wait "$p" || fails=$((fails + 1)); done
	assert_equal "$fails" 0
	assert_equal "$(wc -l <"$log")" 50
	sort -n "$log" | awk '
		NR > 1 && $1 <= end { print "overlap at line " NR; bad = 1 }
		NR > 1 && $3 <= fence { print "fence not increasing at line " NR; bad = 1 }
		{ end = $2; fence = $3 }
		END { exit bad }'
	assert_equal "$(nkeys t19)" 0
}

@test "contenders are served in the order they arrived" {
	hold t20
	log=$BATS_TEST_TMPDIR/log
	pids=
	for i in $(seq 8); do
		("$LEASERUN" -w 60s t20 sh -c 'echo "$1" >> "$0"' "$log" "$i" 3>&-) &
		pids="$pids $!"
		# The next one comes only after this one has queued.
		for _ in $(seq 100); do
			[ "$(nkeys t20)" = $((i + 1)) ] && break
			sleep 0.05
		done
		assert_equal "$(nkeys t20)" $((i + 1))
	done
	BG_PIDS="$BG_PIDS $pids"
	release t20
	for p in $pids; do wait "$p"; done
	assert_equal "$(tr '\n' ' ' <"$log")" "1 2 3 4 5 6 7 8 "
}

@test "a waiter whose lease ran out while it was stopped queues again and still gets the lease" {
	hold t21 -t 2s
	log=$BATS_TEST_TMPDIR/log
	"$LEASERUN" -t 2s -w 20s t21 sh -c 'echo ran > "$0"' "$log" 3>&- &
	w=$!
	wpid=$w
	BG_PIDS="$BG_PIDS $w"
	for i in $(seq 100); do [ "$(nkeys t21)" = 2 ] && break; sleep 0.05; done
	kill -STOP "$wpid"
	# Bounds with room for a loaded machine: etcd expires the 2 s lease
	# within about 3 s, and the waiter queues again at its next keepalive.
	for i in $(seq 150); do [ "$(nkeys t21)" = 1 ] && break; sleep 0.1; done
	assert_equal "$(nkeys t21)" 1
	kill -CONT "$wpid"
	for i in $(seq 150); do [ "$(nkeys t21)" = 2 ] && break; sleep 0.1; done
	assert_equal "$(nkeys t21)" 2
	release t21
	wait "$w"
	assert_equal "$(cat "$log")" ran
}

# A second etcd, with authentication on (user root, password S3cret-pw,
# tokens that expire after 1s); stopped by teardown.  Sets ep.
etcd_auth_start() {
	local dir
	dir=$(etcd_tmpdir)
	echo "$dir" >"$BATS_TEST_TMPDIR/authdir"
	LRE_ARGS="--auth-token-ttl 1" etcd_single "$dir"
	ep=$LRE_EP
	etcdctl --endpoints "$ep" user add root --new-user-password=S3cret-pw >/dev/null
	etcdctl --endpoints "$ep" user grant-role root root >/dev/null
	etcdctl --endpoints "$ep" auth enable >/dev/null
}

@test "authentication: a wrong password fails with 125 in one line that does not show it" {
	etcd_auth_start
	LEASERUN_URL="etcd://root:Wrong-pw@$ep" run "$LEASERUN" t22 true
	assert_failure 125
	assert_equal "${#lines[@]}" 1
	assert_output --partial "authentication"
	refute_output --partial "Wrong-pw"
	run "$LEASERUN" -U "etcd://$ep" t22 true
	assert_failure 125
	assert_equal "${#lines[@]}" 1
	assert_output --partial "requires authentication"
	# The right one works, the command never sees it, and the token is
	# fetched again when it expires (--auth-token-ttl 1) between renewals.
	LEASERUN_URL="etcd://root:S3cret-pw@$ep" run "$LEASERUN" -t 3s \
		--renew 1500ms t22 sh -c 'sleep 4; env'
	assert_success
	refute_output --partial "S3cret-pw"
	assert_line "LEASERUN_URL=etcd://root@$ep"
	# etcdctl's variables work too, and are not passed on.
	run env ETCDCTL_USER=root:S3cret-pw "$LEASERUN" -U "etcd://$ep" t22 env
	assert_success
	refute_output --partial "S3cret-pw"
	run env ETCDCTL_USER=root ETCDCTL_PASSWORD=S3cret-pw "$LEASERUN" -U "etcd://$ep" t22 env
	assert_success
	refute_output --partial "S3cret-pw"
}

@test "faults: a wrong password fails at once, even with a long wait" {
	etcd_auth_start
	t0=$(now_ms)
	LEASERUN_URL="etcd://root:Wrong-pw@$ep" run --separate-stderr \
		"$LEASERUN" -w 60 f6 true
	t1=$(now_ms)
	assert_equal "$status" 125
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "authentication"
	refute_regex "$stderr" "Wrong-pw"
	(( t1 - t0 < 3000 ))
}

@test "authentication: a user without rights on the lock's prefix fails with 125 and one line with etcd's reason" {
	etcd_auth_start
	E2() { etcdctl --endpoints "$ep" --user root:S3cret-pw "$@" >/dev/null; }
	E2 role add elsewhere
	E2 role grant-permission elsewhere --prefix=true readwrite other/
	E2 user add nokeys --new-user-password=N0keys-pw
	E2 user grant-role nokeys elsewhere
	LEASERUN_URL="etcd://nokeys:N0keys-pw@$ep" run --separate-stderr \
		"$LEASERUN" -w 5 t22c true
	echo "# $stderr" >&3
	assert_equal "$status" 125
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "etcd lock transaction failed at [^ ]+: permission denied$"
}

@test "authentication: --status by a user who may read one of the run records but not the other: one warning with etcd's reason" {
	etcd_auth_start
	E2() { etcdctl --endpoints "$ep" --user root:S3cret-pw "$@" >/dev/null; }
	for r in run last; do
		E2 role add "only-$r"
		E2 role grant-permission "only-$r" --prefix=true readwrite leaserun/t22d/
		E2 role grant-permission "only-$r" read "leaserun/.$r/t22d"
		E2 user add "only-$r" --new-user-password=Only-pw-1
		E2 user grant-role "only-$r" "only-$r"
		LEASERUN_URL="etcd://only-$r:Only-pw-1@$ep" run --separate-stderr \
			"$LEASERUN" --status t22d
		echo "# $stderr" >&3
		assert_equal "$status" 1
		assert_output --partial "free"
		assert_equal "${#stderr_lines[@]}" 1
		assert_regex "$stderr" "cannot read the last run: etcd range failed at [^ ]+: permission denied$"
	done
}

@test "a password in clear to a host that is not loopback is warned of, once" {
	# Nothing answers at TEST-NET-1: -n gives up by its 2s connect.
	LEASERUN_URL="etcd://root:S3cret-pw@192.0.2.1:2379" run --separate-stderr \
		"$LEASERUN" -n f7 true
	assert_equal "$status" 125
	assert_equal "$(grep -c "etcds://" <<<"$stderr")" 1
	assert_regex "$stderr" "in clear"
	refute_regex "$stderr" "S3cret-pw"
	# Loopback, or etcds://, or no password: nothing said.
	LEASERUN_URL="etcd://root:S3cret-pw@127.0.0.1:1" run --separate-stderr \
		"$LEASERUN" -n f7 true
	refute_regex "$stderr" "in clear"
	LEASERUN_URL="etcd://192.0.2.1:2379" run --separate-stderr \
		"$LEASERUN" -n f7 true
	refute_regex "$stderr" "in clear"
}

@test "authentication: a password given with -U is not in ps while leaserun holds the lease" {
	etcd_auth_start
	ps_hides_password t22b S3cret-pw -t 30s -U "etcd://root:S3cret-pw@$ep"
}

@test "a waiter keeps its place while it waits longer than its TTL" {
	hold t23
	first=$(E get --prefix --keys-only leaserun/t23/ | grep .)
	"$LEASERUN" -t 2s -w 20s t23 true 3>&- &
	w=$!
	BG_PIDS="$BG_PIDS $w"
	for _ in $(seq 100); do [ "$(nkeys t23)" = 2 ] && break; sleep 0.05; done
	mine=$(E get --prefix --keys-only leaserun/t23/ | grep . | grep -vx "$first")
	[ -n "$mine" ]
	# Twice the waiter's TTL: its lease is kept alive, its key stays.
	sleep 4
	run E get --prefix --keys-only leaserun/t23/
	assert_line "$mine"
	assert_equal "$(nkeys t23)" 2
	release t23
	wait "$w"
	wait_holder
	assert_equal "$HRC" 0
}

@test "operations: --status --json, a waiter's events, --check and metrics on etcd" {
	ops_check t-ops ttl fence
}

@test "operations: a revoked lease: a lost event with its reason, counted in the metrics" {
	hold t-ops2 -v --log-format json --metrics-file "$BATS_TEST_TMPDIR/m.prom"
	E lease revoke "$(lease_hex t-ops2)" >/dev/null
	wait_holder
	assert_equal "$HRC" 124
	ops_loss_seen t-ops2 "$BATS_TEST_TMPDIR/t-ops2.err" "$BATS_TEST_TMPDIR/m.prom"
}

@test "a command that deletes its own key and exits 0 at once: 124, the loss logged and counted" {
	d=$BATS_TEST_TMPDIR
	run --separate-stderr "$LEASERUN" -v --log-format json --metrics-file "$d/m.prom" t-lost \
		sh -c 'etcdctl --endpoints "$0" del --prefix leaserun/t-lost/ >/dev/null; exit 0' "$LRE_EP"
	echo "$stderr" > "$d/err"
	assert_failure 124
	ops_loss_seen t-lost "$d/err" "$d/m.prom"
	assert_equal "$(nkeys t-lost)" 0
}

# --- one cron job across a fleet (helpers.bash) ---
# etcd frees an expired lease within about a second of its end, and
# counts the period in whole seconds.

@test "cron: hosts 3 minutes apart run the job once per period, by etcd's lease countdown" {
	n=et-cron-once
	CRON_MARGIN_MS=1500 cron_once "$n"
	# What etcd holds: the period's key, bound to a lease of 3s while
	# it lasts, and the last run for --status.
	run E get "leaserun/.last/$n" --print-value-only
	assert_output --regexp "^[0-9]+ 3000 [0-9]+ [0-9]+ 0 [0-9]+ $(hostname)\$"
	run E get "leaserun/.run/$n" -w fields
	assert_output --partial '"Lease" :'
	lease=$(E get "leaserun/.run/$n" -w fields | awk '$1 == "\"Lease\"" { print $3 }')
	run E lease timetolive "$(printf '%x' "$lease")"
	assert_output --regexp "granted with TTL\\(3s\\)"
	# Nothing of it lands in the lock directory.
	[ "$(nkeys "$n")" = 0 ]
}

@test "cron: a period's record bound to no lease (written by hand) holds nothing back: the run runs, and the record is ours" {
	n=et-cron-nolease
	E put "leaserun/.run/$n" "not ours" >/dev/null
	run "$LEASERUN" --once-per 1h "$n" sh -c 'echo ran'
	assert_success
	assert_output ran
	run E get "leaserun/.run/$n" -w fields
	assert_output --partial '"Lease" :'
	refute_output --partial '"Lease" : 0'
}

@test "cron: the start's record made but its reply lost: asked again at the next endpoint, it is found ours, and the run's end is recorded in it" {
	n=et-cron-lost
	d=$BATS_TEST_TMPDIR
	# A proxy in front of etcd lets the run's transaction through and
	# loses its reply; the same etcd is the URL's second endpoint.
	"$LR_BUILDDIR/tests/cutproxy" "${LRE_EP##*:}" "leaserun/.run/$n" "$d/cut" >"$d/cport" &
	BG_PIDS="$BG_PIDS $!"
	wait_until 5 test -s "$d/cport"
	run --separate-stderr "$LEASERUN" -U "etcd://127.0.0.1:$(cat "$d/cport"),$LRE_EP" \
		--once-per 1h "$n" sh -c 'echo ran; exit 3'
	assert_equal "$status" 3
	assert_equal "$output" ran
	[ -e "$d/cut" ]
	# The record is the run's: its end and status are in it.
	run E get "leaserun/.last/$n" --print-value-only
	assert_output --regexp "^[0-9]+ 3600000 [0-9]+ [1-9][0-9]* 3 [0-9]+ $(hostname)\$"
}

@test "cron: a period's record that goes away while the run weighs it is found gone at the next try, and the run takes the period" {
	n=et-cron-gone
	d=$BATS_TEST_TMPDIR
	hex=$(E lease grant 60 | awk '{ print $2 }')
	E put --lease="$hex" "leaserun/.run/$n" 77 >/dev/null
	# Two seconds into its minute: a run of --once-per 1s may replace it.
	sleep 2
	# A proxy loses the run's LeaseTimeToLive of that lease (its request
	# holds the lease's ID) and keeps the connection open, so that the
	# run asks the URL's second endpoint, the same etcd, after its
	# ?timeout=; meanwhile the record is deleted.  The run's next
	# transaction then finds no record at all.
	pat=$(python3 -c 'import sys
n, b = int(sys.argv[1], 16), b"\x08"
while n >= 0x80:
    b += bytes([n & 0x7f | 0x80])
    n >>= 7
sys.stdout.buffer.write(b + bytes([n]))' "$hex")
	CUTPROXY_DROP=1 CUTPROXY_CLOSE_MS=30000 "$LR_BUILDDIR/tests/cutproxy" \
		"${LRE_EP##*:}" "$pat" "$d/cut" >"$d/cport" &
	BG_PIDS="$BG_PIDS $!"
	wait_until 5 test -s "$d/cport"
	(wait_until 20 test -e "$d/cut" &&
		E del "leaserun/.run/$n" -w json >"$d/del") 3>&- &
	BG_PIDS="$BG_PIDS $!"
	run --separate-stderr "$LEASERUN" -t 30s \
		-U "etcd://127.0.0.1:$(cat "$d/cport"),$LRE_EP?timeout=2s" \
		--once-per 1s "$n" sh -c 'echo ran'
	assert_equal "$status" 0
	assert_equal "$output" ran
	[ -e "$d/cut" ]
	# The record was deleted before the run put its own (its lease, of
	# the run's 1s, may have ended since: the last run's record, which
	# has none, went in with it).
	grep -q '"deleted":1' "$d/del"
	del_rev=$(grep -o '"revision":[0-9]*' "$d/del" | head -n 1 | cut -d: -f2)
	put_rev=$(E get "leaserun/.last/$n" -w json |
		grep -o '"mod_revision":[0-9]*' | cut -d: -f2)
	echo "# deleted at revision $del_rev, the run's record put at $put_rev" >&3
	(( del_rev < put_rev ))
}

@test "cron: a failed run counts, and --status shows the last run" {
	cron_status et-cron-status
}

@test "cron: --max-time stops a hung job within the kill-after grace and frees the lease" {
	cron_max_time et-cron-max
	[ "$(nkeys et-cron-max)" = 0 ]
}

@test "cron: --splay spreads the starts" {
	cron_splay et-cron-splay
}

@test "cron: bad --once-per, --max-time and --splay values are one line and 125" {
	cron_bad_values et-cron-bad
	[ -z "$(E get leaserun/.last/et-cron-bad)" ]
}
