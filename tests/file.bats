#!/usr/bin/env bats
# The built-in file store.

load helpers

setup() {
	lockdir_setup
	T=$BATS_TEST_TMPDIR
}

teardown() {
	kill_bg
	# The btrfs test's holder and mount, whatever became of the test
	# (mount -o loop frees the loop device with it).
	if [ -n "${BTRFS_PID:-}" ]; then
		pkill -KILL -P "$BTRFS_PID" 2>/dev/null || true
		kill -KILL "$BTRFS_PID" 2>/dev/null || true
		wait "$BTRFS_PID" 2>/dev/null || true
	fi
	# The group guard keeps leaserun's fds, the lock file on the image
	# among them, until the command's group is gone: the mount is busy
	# until the guard has exited.
	if mountpoint -q "$T/btrfs" 2>/dev/null; then
		wait_until 5 eval "umount '$T/btrfs' 2>/dev/null"
	fi
	if [ -n "${COUNTER_PID:-}" ]; then
		timeout 2 sh -c 'echo go > "$1"' sh "$T/gate" || true
		wait "$COUNTER_PID" 2>/dev/null || true
	fi
}

# Holds the fence counter of "job" (flock on DIR/job.fence) until
# free_counter.
hold_counter() {
	mkfifo "$T/gate"
	flock "$LOCKDIR/job.fence" cat "$T/gate" &
	COUNTER_PID=$!
	wait_until 5 counter_held
}
counter_held() { ! flock -n "$LOCKDIR/job.fence" true; }
free_counter() {
	echo go > "$T/gate"
	wait "$COUNTER_PID"
	COUNTER_PID=
}

@test "the lock file is NAME.lock in the directory of the URL" {
	run lr job true
	assert_success
	[ -f "$LOCKDIR/job.lock" ]
}

@test "a file URL with a host other than localhost, or with options, is refused: one line, 125, the command never runs" {
	run --separate-stderr "$LEASERUN" -U "file://$LOCKDIR?ttl=5" job touch "$T/ran"
	assert_equal "$status" 125
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" "the file store takes no URL options \('ttl'\)"
	run --separate-stderr "$LEASERUN" -U "file://h$LOCKDIR" job touch "$T/ran"
	assert_equal "$status" 125
	assert_equal "${#stderr_lines[@]}" 1
	[ ! -e "$T/ran" ]
	assert_equal "$(ls -A "$LOCKDIR")" ""
	# localhost is this host.
	run -0 "$LEASERUN" -U "file://localhost$LOCKDIR" job true
	[ -e "$LOCKDIR/job.lock" ]
}

@test "fences strictly increase across runs" {
	a=$(lr job sh -c 'echo $LEASERUN_FENCE')
	b=$(lr job sh -c 'echo $LEASERUN_FENCE')
	c=$(lr job sh -c 'echo $LEASERUN_FENCE')
	(( a < b && b < c ))
}

@test "fences keep growing when both the lock file and the counter are removed (as a tmpfs forgets them at a reboot)" {
	a=$(lr job sh -c 'echo $LEASERUN_FENCE')
	rm "$LOCKDIR/job.lock" "$LOCKDIR/job.fence"
	b=$(lr job sh -c 'echo $LEASERUN_FENCE')
	(( b > a ))
	# At least the clock in microseconds, below 2^53.
	(( b >= $(date +%s) * 1000000 - 60000000 && b < 9007199254740992 ))
}

@test "fences are per name" {
	# One's counter far ahead of the clock; two's is its own.
	echo 5000000000000000 >"$LOCKDIR/one.fence"
	a=$(lr one sh -c 'echo $LEASERUN_FENCE')
	b=$(lr two sh -c 'echo $LEASERUN_FENCE')
	assert_equal "$a" 5000000000000001
	(( b < a ))
}

@test "--status shows the holder's host, pid, start and fence, and exits 0" {
	"$LEASERUN" job sh -c 'echo $LEASERUN_FENCE > '"$T"'/fence; exec sleep 10' &
	pid=$!
	wait_until 5 exists "$T/fence"
	run lr --status job
	assert_success
	assert_line "state:   held"
	assert_line "holder:  $(hostname) pid $pid"
	assert_line --regexp '^since: +[0-9]{4}-'
	assert_line "fence:   $(cat "$T/fence")"
	kill "$pid"; wait "$pid" || true
}

@test "--status of a free lease exits 1 and shows the last fence" {
	f=$(lr job sh -c 'echo $LEASERUN_FENCE')
	run lr --status job
	assert_equal "$status" 1
	assert_line "state:   free"
	assert_line "fence:   $f (last granted)"
	run lr --status never-used
	assert_equal "$status" 1
	assert_line "state:   free"
}

@test "--status sees a lease held on btrfs, in a subvolume too" {
	# stat() gives each btrfs subvolume a device of its own; /proc/locks
	# names the file system's.  --status once said "free" there.
	needs_root "to mount a btrfs image"
	truncate -s 256M "$T/img"
	mkfs.btrfs -q "$T/img" >/dev/null
	mkdir "$T/btrfs"
	mount -o loop "$T/img" "$T/btrfs"
	btrfs subvolume create "$T/btrfs/sv" >/dev/null
	for d in "$T/btrfs/locks" "$T/btrfs/sv/locks"; do
		mkdir "$d"
		# stat()'s device here is not the file system's, which
		# /proc/locks names: what this test is about.
		[ "$(stat -c %d "$d")" != "$(mountpoint -d "$T/btrfs" | awk -F: '{ print $1 * 256 + $2 }')" ]
		"$LEASERUN" -U "file://$d" job sh -c 'echo x > "$0"; exec sleep 10' "$T/started" &
		pid=$!
		BTRFS_PID=$pid
		wait_until 5 exists "$T/started"
		run "$LEASERUN" -U "file://$d" --status job
		assert_success
		assert_line "state:   held"
		assert_line "holder:  $(hostname) pid $pid"
		kill "$pid"
		wait "$pid" || true
		BTRFS_PID=
		rm -f "$T/started"
		run "$LEASERUN" -U "file://$d" --status job
		assert_equal "$status" 1
		assert_line "state:   free"
	done
}

@test "--status does not get in the way of a taker" {
	"$LEASERUN" job sleep 2 &
	pid=$!
	wait_until 5 lr --status job
	for i in 1 2 3 4 5; do lr --status job >/dev/null & done
	wait "$pid"
	run lr -n job true
	assert_success
}

@test "-w takes the lease as soon as the holder lets go" {
	# Three hand-overs in a row, each waiter started while the lease is
	# held.  A waiter woken by the release (its helper blocked in
	# flock()) starts within milliseconds; one that polls on a backoff
	# timer, which grows to a second, would miss 150ms almost every time.
	"$LEASERUN" job sh -c 'echo > '"$T"'/held.0; sleep 1.2; date +%s%N > '"$T"'/end.0' &
	pids=$!
	for i in 1 2 3; do
		wait_until 5 exists "$T/held.$((i - 1))"
		"$LEASERUN" -w 20s job sh -c 'date +%s%N > "$0/start.$1"; echo > "$0/held.$1"; echo "$LEASERUN_FENCE" > "$0/fence.$1"; sleep 1.2; date +%s%N > "$0/end.$1"' "$T" "$i" &
		pids="$pids $!"
	done
	for p in $pids; do
		wait_rc "$p"
		assert_equal "$RC" 0
	done
	for i in 1 2 3; do
		(( $(cat "$T/fence.$i") > $(cat "$T/fence.$((i - 1))" 2>/dev/null || echo 0) ))
		gap=$((($(cat "$T/start.$i") - $(cat "$T/end.$((i - 1))")) / 1000000))
		echo "waiter $i started ${gap}ms after its predecessor's command ended"
		(( gap < 150 ))
	done
}

@test "a waiter killed by SIGKILL leaves no flock helper behind: its helpers die with it, not when they next get the lock" {
	local w kids k
	"$LEASERUN" job sh -c 'echo $$ > "$0"; exec sleep 30' "$T/pid" &
	BG_PIDS="$BG_PIDS $!"
	wait_until 5 exists "$T/pid"
	BG_PIDS="$BG_PIDS $(cat "$T/pid")"
	"$LEASERUN" -l 1 -w 60s job true &
	w=$!
	BG_PIDS="$BG_PIDS $w"
	# Its helper, blocked in flock(); nothing else of it runs yet.
	wait_until 5 pgrep -P "$w"
	kids=$(pgrep -P "$w")
	BG_PIDS="$BG_PIDS $kids"
	kill -KILL "$w"
	for k in $kids; do
		wait_until 3 dead "$k"
	done
	alive "$(cat "$T/pid")"
}

@test "a flock helper whose leaserun died before it armed its death signal exits at once, not in the lock's queue" {
	local w child
	"$LEASERUN" job sh -c 'echo $$ > "$0"; exec sleep 30' "$T/pid" &
	BG_PIDS="$BG_PIDS $!"
	wait_until 5 exists "$T/pid"
	BG_PIDS="$BG_PIDS $(cat "$T/pid")"
	# The shim (as in child.bats) holds the helper just before its
	# PR_SET_PDEATHSIG until the waiter is dead: only the helper's check
	# of its parent ends it.
	LD_PRELOAD=$LR_BUILDDIR/.libs/pdeath.so LR_TEST_PDEATH_MARK=$T/mark \
		ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
		"$LEASERUN" -w 60s job true &
	w=$!
	BG_PIDS="$BG_PIDS $w"
	wait_until 5 exists "$T/mark"
	child=$(cat "$T/mark")
	BG_PIDS="$BG_PIDS $child"
	kill -KILL "$w"
	wait_until 5 dead "$child"
	alive "$(cat "$T/pid")"
}

@test "the lock file deleted under a running job is loss: 124 at once" {
	"$LEASERUN" job sh -c 'echo $$ > '"$T"'/pid; exec sleep 30' &
	pid=$!
	wait_until 5 exists "$T/pid"
	rm "$LOCKDIR/job.lock"
	wait_until 3 dead "$(cat "$T/pid")"
	wait_rc "$pid"
	assert_equal "$RC" 124
}

@test "the lock file replaced under a running job is loss: 124 at once" {
	"$LEASERUN" job sh -c 'echo $LEASERUN_FENCE > '"$T"'/fence; echo $$ > '"$T"'/pid; exec sleep 30' &
	pid=$!
	wait_until 5 exists "$T/pid"
	echo "fence=0" > "$T/other"
	mv "$T/other" "$LOCKDIR/job.lock"
	wait_until 3 dead "$(cat "$T/pid")"
	wait_rc "$pid"
	assert_equal "$RC" 124
	# The counter is not in the lock file: a replaced file cannot lower it.
	next=$(lr job sh -c 'echo $LEASERUN_FENCE')
	(( next > $(cat "$T/fence") ))
}

@test "the lock file removed between the grant and the command's start: the command never runs on it, and runs once on a new grant within -w" {
	lost_before_start "file://$LOCKDIR" job 'rm -f "$LOCKDIR/job.lock"' -w 10
	assert_lost_before_start_retried
	grep -q "was deleted or replaced" "$T/err"
}

@test "the lock file removed between the grant and the command's start, with -n: 124, and the command never ran" {
	lost_before_start "file://$LOCKDIR" job 'rm -f "$LOCKDIR/job.lock"' -n
	assert_lost_before_start_ended
}

@test "removing the lock file between grants does not restart the fence" {
	# The counter ahead of the clock, so that its part shows.
	lr job true
	echo 5000000000000000 >"$LOCKDIR/job.fence"
	a=$(lr job sh -c 'echo $LEASERUN_FENCE')
	rm "$LOCKDIR/job.lock"
	run lr --status job
	assert_equal "$status" 1
	assert_line "fence:   $a (last granted)"
	b=$(lr job sh -c 'echo $LEASERUN_FENCE')
	(( a == 5000000000000001 && b == 5000000000000002 ))
}

@test "the lock file removed under a holder: the next holder's fence is above the holder's" {
	lr job true
	"$LEASERUN" job sh -c 'echo $LEASERUN_FENCE > '"$T"'/fence; echo $$ > '"$T"'/pid; exec sleep 30' &
	pid=$!
	wait_until 5 exists "$T/pid"
	rm "$LOCKDIR/job.lock"
	# At once: the holder may not have seen the removal yet.
	next=$(lr -n job sh -c 'echo $LEASERUN_FENCE')
	wait_rc "$pid"
	assert_equal "$RC" 124
	(( next > $(cat "$T/fence") ))
}

@test "two grants racing after the lock file was removed, one on the old file and one on the new, get fences in order" {
	lr job true
	last=$(lr job sh -c 'echo $LEASERUN_FENCE')
	# Hold the counter, so that both grants reach it at the same time.
	hold_counter
	"$LEASERUN" -w 10s job sh -c 'echo $LEASERUN_FENCE >> '"$T"'/fences' &
	a=$!
	wait_until 5 lr --status job
	rm "$LOCKDIR/job.lock"
	"$LEASERUN" -w 10s job sh -c 'echo $LEASERUN_FENCE >> '"$T"'/fences' &
	b=$!
	wait_until 5 lr --status job
	free_counter
	wait_rc "$a"
	assert_equal "$RC" 0
	wait_rc "$b"
	assert_equal "$RC" 0
	# The one on the removed file finds it replaced and takes the new one
	# after the other: two grants, two fences above the last, in order.
	run cat "$T/fences"
	assert_equal "${#lines[@]}" 2
	(( last < lines[0] && lines[0] < lines[1] ))
}

@test "a fence counter locked by another process for longer than the TTL: 125, naming the file" {
	hold_counter
	t0=$(now_ms)
	run -125 lr -t 1s job true
	t1=$(now_ms)
	free_counter
	assert_output --partial "$LOCKDIR/job.fence"
	(( t1 - t0 < 3000 ))
	run lr -n job true
	assert_success
}

@test "--break stops the holder (124) and keeps the fence counter" {
	"$LEASERUN" job sh -c 'echo $LEASERUN_FENCE > '"$T"'/fence; echo $$ > '"$T"'/pid; exec sleep 30' &
	pid=$!
	wait_until 5 exists "$T/pid"
	run lr --break job
	assert_success
	wait_until 3 dead "$(cat "$T/pid")"
	wait_rc "$pid"
	assert_equal "$RC" 124
	next=$(lr job sh -c 'echo $LEASERUN_FENCE')
	(( next > $(cat "$T/fence") ))
}

@test "--break of a free lease does nothing and succeeds" {
	run lr --break never-used
	assert_success
	[ ! -e "$LOCKDIR/never-used.lock" ]
}

@test "--break --slot of a plain lease: slot 0 is the whole lease, any other slot has no holder" {
	"$LEASERUN" job sh -c 'echo $$ > "$0/pid"; exec sleep 30' "$T" 3>&- &
	pid=$!
	BG_PIDS="${BG_PIDS:-} $pid"
	wait_until 5 exists "$T/pid"
	ino=$(stat -c %i "$LOCKDIR/job.lock")
	run lr --break --slot 1 job
	assert_success
	# Not replaced: the holder holds on.
	assert_equal "$(stat -c %i "$LOCKDIR/job.lock")" "$ino"
	run lr --break --slot 0 job
	assert_success
	wait_until 3 dead "$(cat "$T/pid")"
	wait_rc "$pid"
	assert_equal "$RC" 124
}

@test "--break whose new lock file cannot be renamed in: 125 with one line, the holder kept, nothing left behind" {
	"$LEASERUN" job sh -c 'echo $$ > "$0/pid"; exec sleep 30' "$T" 3>&- &
	pid=$!
	BG_PIDS="${BG_PIDS:-} $pid"
	wait_until 5 exists "$T/pid"
	run --separate-stderr lr_failing rename:1 --break job
	assert_equal "$status" 125
	[ -e "$T/failed" ]
	assert_equal "$stderr" "leaserun: job: cannot break job: cannot replace $LOCKDIR/job.lock: Operation not permitted"
	assert_equal "$(cd "$LOCKDIR" && echo *)" "job.fence job.lock"
	kill -0 "$(cat "$T/pid")"
	kill "$pid"
	wait_rc "$pid"
}

@test "a lock file that is a symlink is refused" {
	ln -s /etc/passwd "$LOCKDIR/job.lock"
	run lr job true
	assert_equal "$status" 125
	assert_output --partial "cannot open $LOCKDIR/job.lock"
}

@test "a name of 200 bytes fits the lock directory" {
	name=$(printf 'n%.0s' {1..200})
	run lr "$name" true
	assert_success
	[ -e "$LOCKDIR/$name.lock" ]
}

@test "a file URL naming a host is refused" {
	run lr -U file://elsewhere/tmp job true
	assert_equal "$status" 125
	assert_output --partial "not a host"
}

# as_nobody HOME CMD...: CMD as nobody, with HOME and nothing else of our
# environment (no XDG_RUNTIME_DIR, as under cron).
as_nobody() {
	local home=$1
	shift
	setpriv --reuid=nobody --regid=nogroup --clear-groups --reset-env \
		env HOME="$home" "$@"
}

# A copy of leaserun that nobody can reach (the build tree may be under
# /root), in $PUB.
public_leaserun() {
	PUB=$(mktemp -d /tmp/leaserun-bin.XXXXXX)
	chmod 755 "$PUB"
	cp "$LEASERUN" "$PUB/leaserun"
}

@test "the default directories cannot be squatted by another user" {
	needs_root "to act as two users"
	public_leaserun
	uid=$(id -u nobody)
	home=$PUB/home
	mkdir -m 700 "$home"
	chown nobody "$home"
	# Where older versions looked, made first by someone else: it no
	# longer matters.  nobody, with no runtime directory (cron), uses
	# its home.
	squat=/tmp/leaserun-$uid
	made=
	if [ ! -e "$squat" ]; then mkdir -m 1777 "$squat"; made=1; fi
	if [ -d "/run/user/$uid" ]; then
		want=/run/user/$uid/leaserun
	else
		want=$home/.local/state/leaserun
	fi
	run as_nobody "$home" "$PUB/leaserun" job true
	[ -z "$made" ] || rmdir "$squat"
	assert_success
	[ -e "$want/job.lock" ]
	assert_equal "$(stat -c '%U %a' "$want")" "nobody 700"
	# A directory there that is not nobody's is refused, as ever (only
	# nobody or root could have made it).
	if [ "$want" = "$home/.local/state/leaserun" ]; then
		rm -rf "$want"
		mkdir -m 1777 "$want"
		run as_nobody "$home" "$PUB/leaserun" job true
		assert_equal "$status" 125
		assert_output --partial "refusing lock directory $want"
	fi
	# Without any of them (nobody's HOME is /nonexistent), one line.
	run setpriv --reuid=nobody --regid=nogroup --clear-groups --reset-env \
		"$PUB/leaserun" job true
	rm -rf "$PUB"
	if [ ! -d "/run/user/$uid" ]; then
		assert_equal "$status" 125
		assert_equal "${#lines[@]}" 1
		assert_output --partial "lock directory"
	fi
	# Root's is under /run, which no one else may write to (/run/lock
	# is anyone's: sticky and world-writable).
	[[ "$(stat -c %a /run)" =~ ^[0-7][0-5][0-5]$ ]]
}

@test "a user with no runtime directory, no XDG_STATE_HOME and no HOME gets one line naming what to give, 125" {
	needs_root "to act as another user"
	uid=$(id -u nobody)
	[ ! -d "/run/user/$uid" ] || skip "nobody has a runtime directory here"
	public_leaserun
	run setpriv --reuid=nobody --regid=nogroup --clear-groups --reset-env \
		env -u HOME "$PUB/leaserun" job true
	rm -rf "$PUB"
	assert_equal "$status" 125
	assert_equal "$output" "leaserun: job: cannot open file://: no default lock directory for uid $uid (no XDG_RUNTIME_DIR, /run/user/$uid or HOME): give file:///DIR"
}

@test "--status of a lock file that cannot be opened (a symbolic link): 125 and one line, not a free lease" {
	ln -s elsewhere "$LOCKDIR/job.lock"
	run lr --status job
	assert_equal "$status" 125
	assert_equal "$output" "leaserun: job: cannot inspect job on file://$LOCKDIR: cannot open $LOCKDIR/job.lock: Too many levels of symbolic links"
}

@test "--once-per with a run record that cannot be opened (a symbolic link): 125, no command; --status warns and still shows the lease" {
	ln -s elsewhere "$LOCKDIR/job.run"
	run lr --once-per 1h job touch "$T/ran"
	assert_equal "$status" 125
	assert_equal "$output" "leaserun: job: cannot record the start of the run (--once-per 1h): cannot open $LOCKDIR/job.run: Too many levels of symbolic links"
	[ ! -e "$T/ran" ]
	run --separate-stderr lr --status job
	assert_equal "$status" 1
	assert_equal "$stderr" "leaserun: job: cannot read the last run: cannot open $LOCKDIR/job.run: Too many levels of symbolic links"
	assert_line --index 2 "state:   free"
}

@test "--status of a run that started and never recorded its end (its host died): ended: not recorded, not \"not yet\"" {
	# As a run killed with its machine leaves it: a start, no end, and
	# the lease free (or held by another fence).
	printf 'fence=3\nhost=elsewhere\npid=4242\nperiod=3600000\nstart=%s\n' \
		"$(($(date +%s) * 1000 - 60000))" > "$LOCKDIR/job.run"
	run lr --status job
	assert_equal "$status" 1
	assert_line "state:   free"
	assert_line --regexp '^run: +started .* on elsewhere pid 4242, fence 3$'
	assert_line "ended:   not recorded"
}

@test "--status of a run that started ahead of our clock (another host's clock is fast): started 0ms ago, never a negative time" {
	printf 'fence=3\nhost=elsewhere\npid=4242\nperiod=3600000\nstart=%s\nend=%s\nstatus=0\n' \
		"$(($(date +%s) * 1000 + 600000))" "$(($(date +%s) * 1000 + 601000))" > "$LOCKDIR/job.run"
	run lr --status job
	assert_equal "$status" 1
	assert_line --regexp '^run: +started [0-9TZ:-]+ \(0ms ago\) on elsewhere pid 4242, fence 3$'
}

@test "a lock file whose holder line cannot be written (the file system full after the fence counter): 125 and why, no command, and the lease free once there is room" {
	needs_root "for a mount namespace"
	# A tmpfs of 16 pages with 15 taken: the counter takes the last one,
	# the lock file's body finds none.  What the run needs is copied to
	# /run first (the tree may be under /tmp).
	d=$(mktemp -d /run/leaserun-test.XXXXXX)
	cp "$LEASERUN" "$d/leaserun"
	mkdir "$d/locks"
	run --separate-stderr unshare -m sh -c '
		mount -t tmpfs -o size=64k none "$0/locks" || exit 99
		dd if=/dev/zero of="$0/locks/fill" bs=4k count=15 2>/dev/null
		"$0/leaserun" -U "file://$0/locks" job echo ran; echo "rc=$?"
		rm "$0/locks/fill"
		"$0/leaserun" -U "file://$0/locks" -n job echo "ran after"' "$d"
	rm -rf "$d"
	assert_success
	assert_output $'rc=125\nran after'
	assert_equal "$stderr" "leaserun: job: cannot write $d/locks/job.lock: No space left on device"
}

# replaced_while_waiting ARGS...: "leaserun ARGS job" waits behind
# flock(1) on job.lock; the file is replaced under it, then let go.  The
# run must start over on the new file and be granted there (not loop on
# the old one until -w runs out), and leave the lease free.
replaced_while_waiting() {
	lr job true
	mkfifo "$T/gate"
	flock "$LOCKDIR/job.lock" cat "$T/gate" & BG_PIDS=$!
	wait_until 5 eval '! flock -n "$LOCKDIR/job.lock" true'
	lr -w 20s "$@" job sh -c 'echo "ran $LEASERUN_FENCE"' > "$T/out" 2>&1 & BG_PIDS="$BG_PIDS $!"
	waiter=$!
	# Blocked on the old file (a waiter on its inode in /proc/locks).
	ino=$(stat -c %i "$LOCKDIR/job.lock")
	wait_until 10 eval 'grep -q -- "-> FLOCK .*:$ino " /proc/locks'
	cp "$LOCKDIR/job.lock" "$T/new"
	mv "$T/new" "$LOCKDIR/job.lock"
	echo go > "$T/gate"
	start=$(date +%s)
	rc=0
	wait "$waiter" || rc=$?
	assert_equal "$rc" 0
	(($(date +%s) - start < 10))
	run cat "$T/out"
	assert_output --regexp '^ran [1-9][0-9]*$'
	run lr -n job true
	assert_success
}

@test "a lock file replaced while a run waits on it: the run starts over on the new file and is granted there" {
	replaced_while_waiting
}

@test "--shared: a lock file replaced while the run waits on it: it starts over on the new file" {
	replaced_while_waiting --shared
}

@test "--once-per held back by a record of a one-letter host with no pid: the host is named, not \"another host\"" {
	printf 'fence=5\nhost=a\npid=0\nperiod=3600000\nstart=%s\n' \
		"$(($(date +%s) * 1000 - 60000))" > "$LOCKDIR/job.run"
	run --separate-stderr lr --once-per 1h job touch "$T/ran"
	assert_equal "$status" 1
	[ ! -e "$T/ran" ]
	assert_regex "$stderr" '^leaserun: job: last run started 1m[0-9s]* ago on a, fence 5; next run allowed in [0-9hms]+$'
}

@test "a lock file emptied under its holder: the release leaves fence=0 in it, and the counter still gives the next run a greater fence" {
	run lr job sh -c 'echo "$LEASERUN_FENCE"; : > "$0/job.lock"' "$LOCKDIR"
	assert_success
	first=$output
	assert_equal "$(cat "$LOCKDIR/job.lock")" "fence=0"
	run lr job sh -c 'echo "$LEASERUN_FENCE"'
	assert_success
	((output > first))
}

@test "--shared with a gate file that another user owns: 125 and the refusal, no command" {
	needs_root "to give a file to another user"
	touch "$LOCKDIR/job.gate"
	chown nobody "$LOCKDIR/job.gate"
	run lr --shared job touch "$T/ran"
	assert_equal "$status" 125
	assert_output "leaserun: job: refusing $LOCKDIR/job.gate: it belongs to uid $(id -u nobody), who may rewrite it (remove it, or use a directory others cannot write to)"
	[ ! -e "$T/ran" ]
}

@test "--status and --list cut a URL of a kilobyte to 200 bytes in their one line, so that the reason still ends it" {
	local d=$T/long i u
	for i in 1 2 3 4 5; do d+=/$(printf 'd%.0s' {1..60}); done
	mkdir -p "$d"
	ln -s elsewhere "$d/job.lock"
	u="file://$d"
	run lr -U "$u" --status job
	assert_equal "$status" 125
	assert_output "leaserun: job: cannot inspect job on ${u:0:200}...: cannot open $d/job.lock: Too many levels of symbolic links"
	touch "$d/afile"
	u="file://$d/afile"
	run lr -U "$u" --list
	assert_equal "$status" 125
	assert_output "leaserun: cannot list the leases of ${u:0:200}...: cannot read $d/afile: Not a directory"
}

@test "--status --json of a 200-byte name on a URL of 3.5 KB: one whole JSON object" {
	local d=$T/j i n
	for i in $(seq 14); do d+=/$(printf 'd%.0s' {1..250}); done
	mkdir -p "$d"
	n=$(printf 'n%.0s' {1..200})
	run -1 lr -U "file://$d" --status --json "$n"
	assert_equal "$(jq -r .url <<<"$output")" "file://$d"
	assert_equal "$(jq -r .name <<<"$output")" "$n"
	assert_equal "$(jq -r .held <<<"$output")" false
}

@test "--list of a lock directory that is a file: 125 and why" {
	touch "$T/afile"
	run lr -U "file://$T/afile" --list
	assert_equal "$status" 125
	assert_output "leaserun: cannot list the leases of file://$T/afile: cannot read $T/afile: Not a directory"
}

@test "--status of a free lease whose fence counter holds something else than a number: no fence claimed" {
	printf '123x\n' > "$LOCKDIR/job.fence"
	run lr --status job
	assert_equal "$status" 1
	assert_line "state:   free"
	refute_line --regexp '^fence:'
}

@test "--status where /proc/locks cannot be read (a mount namespace without /proc): 125 and why, not a free lease" {
	needs_root "for a mount namespace"
	# A sanitizer runtime reads its options and stops threads through
	# /proc: such a build cannot run without it.
	if nm -D "$LEASERUN" 2>/dev/null | grep -q __asan_init; then
		skip "an ASan build cannot run without /proc"
	fi
	lr job true
	run unshare -m sh -c 'mount -t tmpfs none /proc && exec "$0" --status job' "$LEASERUN"
	assert_equal "$status" 125
	assert_output "leaserun: job: cannot inspect job on file://$LOCKDIR: cannot read /proc/locks: No such file or directory"
}

@test "a run that finds the fence counter locked by another waits for it without spinning" {
	lr job true
	flock "$LOCKDIR/job.fence" sleep 1.5 & BG_PIDS=$!
	wait_until 5 eval '! flock -n "$LOCKDIR/job.fence" true'
	TIMEFORMAT='%R %U %S'
	{ time lr job true 2>/dev/null; } 2> "$T/time"
	read -r real user sys < "$T/time"
	echo "# waited ${real}s, CPU ${user}s user ${sys}s system" >&3
	# It did wait for the counter; and slept while it did (a loop
	# that spins burns about a second here).
	awk -v r="$real" -v u="$user" -v s="$sys" \
		'BEGIN { exit !(r >= 0.8 && u + s < 0.25) }'
}

@test "--list reads each lease and keeps no descriptor of it: 200 leases with 40 descriptors" {
	for i in $(seq 1 200); do : > "$LOCKDIR/l$i.lock"; done
	lr job sleep 5 & BG_PIDS=$!
	wait_until 5 test -s "$LOCKDIR/job.lock"
	run --separate-stderr bash -c 'ulimit -n 40 && exec "$0" --list' "$LEASERUN"
	kill_bg
	assert_success
	assert_equal "$stderr" ""
	assert_equal "${#lines[@]}" 2
	assert_regex "${lines[1]}" "^job "
}

@test "the default directory is created with the lock on first use" {
	if [ "$(id -u)" != 0 ]; then
		run env -u LEASERUN_URL XDG_RUNTIME_DIR="$T" "$LEASERUN" job true
		assert_success
		[ -e "$T/leaserun/job.lock" ]
	else
		f=/run/leaserun/lr-test-$$
		run env -u LEASERUN_URL "$LEASERUN" "lr-test-$$" true
		made=$(ls "$f.lock" "$f.fence" 2>/dev/null || true)
		rm -f "$f.lock" "$f.fence"
		assert_success
		assert_equal "$made" "$f.fence
$f.lock"
		assert_equal "$(stat -c '%U %a' /run/leaserun)" "root 755"
	fi
}

@test "an explicit directory others may write to without the sticky bit is refused with one line" {
	for mode in 777 775 757; do
		chmod "$mode" "$LOCKDIR"
		run --separate-stderr lr job touch "$T/ran"
		assert_equal "$status" 125
		assert_equal "$stderr" "leaserun: job: cannot open file://$LOCKDIR: refusing lock directory $LOCKDIR: others may write to it (mode 0$mode) and it has no sticky bit, so they could replace the lock files; chmod o-w,g-w or +t it"
	done
	[ ! -e "$T/ran" ]
	# Sticky, as /tmp: allowed (others can make only files of their own).
	chmod 1777 "$LOCKDIR"
	run lr job true
	assert_success
}

@test "lock, counter and run files another user made first in a shared directory are refused; fence 1 cannot be handed back" {
	needs_root "to act as two users"
	public_leaserun
	# A shared directory nobody can reach, sticky as /tmp.
	LOCKDIR=$PUB/shared
	mkdir -m 1777 "$LOCKDIR"
	export LEASERUN_URL=file://$LOCKDIR
	# nobody makes them first, world-writable, so it could rewrite the
	# counter at any time.
	for f in job.lock job.fence; do
		rm -f "$LOCKDIR"/job.*
		as_nobody / sh -c 'umask 0; : >"$1"' sh "$LOCKDIR/$f"
		run --separate-stderr lr job touch "$T/ran"
		assert_equal "$status" 125
		assert_regex "$stderr" "refusing $LOCKDIR/$f: it belongs to uid $(id -u nobody), who may rewrite it"
	done
	[ ! -e "$T/ran" ]
	rm -f "$LOCKDIR"/job.*
	# The --once-per record's clock file, likewise.
	as_nobody / sh -c 'umask 0; : >"$1"' sh "$LOCKDIR/job.clock"
	run --separate-stderr lr --once-per 1m job touch "$T/ran"
	assert_equal "$status" 125
	assert_regex "$stderr" "refusing $LOCKDIR/job.clock: it belongs to uid"
	[ ! -e "$T/ran" ]
	rm -rf "$PUB"
}

@test "--break frees a waiter that was queued on the old lock file" {
	"$LEASERUN" job sh -c 'echo $$ > '"$T"'/a; exec sleep 30' &
	holder=$!
	wait_until 5 exists "$T/a"
	# A hung holder: it cannot notice the break until it runs again.
	kill -STOP "$holder"
	"$LEASERUN" -w 20s job sh -c 'echo $LEASERUN_FENCE > '"$T"'/w' &
	waiter=$!
	sleep 0.3
	run lr --break job
	assert_success
	wait_until 10 exists "$T/w"
	wait_rc "$waiter"
	assert_equal "$RC" 0
	(( $(cat "$T/w") > 1 ))
	kill -CONT "$holder"
	wait_rc "$holder"
	assert_equal "$RC" 124
}

@test "a fence that cannot be made durable (fdatasync fails): 125, one line, no command, and the lease free" {
	run --separate-stderr lr_failing fdatasync:5 job touch "$T/ran"
	assert_equal "$status" 125
	[ -e "$T/failed" ]
	[ ! -e "$T/ran" ]
	assert_equal "$stderr" "leaserun: job: cannot write $LOCKDIR/job.fence: Input/output error"
	lr -n -q job true
}

@test "a new fence counter whose name cannot be made durable (the directory's fsync fails): 125, no command" {
	run --separate-stderr lr_failing fsync:5 job touch "$T/ran"
	assert_equal "$status" 125
	[ -e "$T/failed" ]
	[ ! -e "$T/ran" ]
	assert_equal "$stderr" "leaserun: job: cannot write $LOCKDIR/job.fence: Input/output error"
	lr -n -q job true
}

@test "--once-per: a run record that cannot be made durable: 125, no command, no temporary file left" {
	# The first fdatasync is the fence counter's, the second the record's.
	run --separate-stderr lr_failing fdatasync:5:1 --once-per 1h job touch "$T/ran"
	assert_equal "$status" 125
	[ -e "$T/failed" ]
	[ ! -e "$T/ran" ]
	assert_equal "$stderr" "leaserun: job: cannot record the start of the run (--once-per 1h): cannot write $LOCKDIR/job.run: Input/output error"
	assert_equal "$(cd "$LOCKDIR" && echo *)" "job.clock job.fence job.lock"
	# Nothing recorded: the next run is not held back.
	run lr --once-per 1h job touch "$T/ran"
	assert_success
	[ -e "$T/ran" ]
}

@test "a waiter that cannot start its flock helper (fork fails): 125 with one line, before its wait is over" {
	"$LEASERUN" job sh -c 'touch "$0/held"; sleep 30' "$T" 3>&- &
	holder=$!
	BG_PIDS="${BG_PIDS:-} $holder"
	wait_until 5 [ -e "$T/held" ]
	run --separate-stderr lr_failing fork:11 -w 20s job touch "$T/ran"
	# Ended while the holder holds: not after the wait.
	kill -0 "$holder"
	kill "$holder"
	assert_equal "$status" 125
	[ -e "$T/failed" ]
	[ ! -e "$T/ran" ]
	assert_equal "$stderr" "leaserun: job: cannot wait for $LOCKDIR/job.lock: fork: Resource temporarily unavailable"
}

@test "a waiter whose flock helper's flock() fails (ENOLCK, as on NFS): 125 with the reason, the command not run while another holds" {
	"$LEASERUN" job sh -c 'touch "$0/held"; sleep 30' "$T" 3>&- &
	holder=$!
	BG_PIDS="${BG_PIDS:-} $holder"
	wait_until 5 [ -e "$T/held" ]
	run --separate-stderr lr_failing flock:37 -w 20s job touch "$T/ran"
	kill -0 "$holder"
	kill "$holder"
	assert_equal "$status" 125
	[ -e "$T/failed" ]
	[ ! -e "$T/ran" ]
	assert_equal "$stderr" "leaserun: job: cannot lock $LOCKDIR/job.lock: No locks available"
}

@test "a waiter whose flock helper is killed: 125 with one line, the command not run while another holds" {
	local w
	"$LEASERUN" job sh -c 'touch "$0/held"; sleep 30' "$T" 3>&- &
	holder=$!
	BG_PIDS="${BG_PIDS:-} $holder"
	wait_until 5 [ -e "$T/held" ]
	"$LEASERUN" -w 20s job touch "$T/ran" 2>"$T/w.err" &
	w=$!
	BG_PIDS="$BG_PIDS $w"
	wait_until 5 pgrep -P "$w"
	kill -KILL $(pgrep -P "$w")
	wait_rc "$w"
	kill -0 "$holder"
	kill "$holder"
	assert_equal "$RC" 125
	[ ! -e "$T/ran" ]
	assert_equal "$(cat "$T/w.err")" "leaserun: job: cannot lock $LOCKDIR/job.lock: its waiting helper ended"
}

@test "a fence counter that does not hold a number stops the run: 125, one line, no command, and the counter left as it was" {
	# Counting again from 1 would repeat fences already handed out.
	lr job true
	for bad in 'abc\n' '12abc\n' '12' '-5\n' '0x5\n' '99999999999999999999999\n' '\n'; do
		printf -- "$bad" > "$LOCKDIR/job.fence"
		run --separate-stderr lr job touch "$T/ran"
		assert_equal "$status" 125
		[ ! -e "$T/ran" ]
		assert_equal "$stderr" "leaserun: job: fence counter $LOCKDIR/job.fence does not hold a number: repair it or remove it"
		assert_equal "$(od -c "$LOCKDIR/job.fence")" "$(printf -- "$bad" | od -c)"
	done
	# The smallest numbers are numbers.
	for good in '0\n' '5\n' '9\n'; do
		printf -- "$good" > "$LOCKDIR/job.fence"
		lr job true
	done
}

@test "without XDG_RUNTIME_DIR (cron), /run/user/UID is the default when it is the user's own private directory, not otherwise" {
	needs_root "to act as another user and make its /run/user directory"
	public_leaserun
	# 54329: a user id no process has, whose /run/user directory only
	# this test makes (one left by a test that was killed goes first).
	uid=54329
	run_dir=/run/user/$uid
	rm -rf "$run_dir"
	home=$PUB/home
	mkdir -m 700 "$home"
	chown "$uid" "$home"
	made_run_user=
	[ -d /run/user ] || made_run_user=1
	mkdir -p -m 755 /run/user
	# where NAME: the directory of the run of lease NAME, "none", or
	# "failed".
	where() {
		setpriv --reuid="$uid" --regid="$uid" --clear-groups --reset-env \
			env HOME="$home" "$PUB/leaserun" "$1" true || { echo failed; return; }
		for d in "$run_dir/leaserun" "$home/.local/state/leaserun"; do
			[ -e "$d/$1.lock" ] && { echo "$d"; return; }
		done
		echo none
	}
	mkdir -m 700 "$run_dir"
	chown "$uid" "$run_dir"
	own=$(where own)
	# Writable by its group: not private, so the home directory instead.
	chmod 770 "$run_dir"
	group=$(where group)
	# Someone else's: the same.
	chmod 700 "$run_dir"
	chown root "$run_dir"
	other=$(where other)
	# Not a directory: the same.
	rm -rf "$run_dir"
	: > "$run_dir"
	chmod 600 "$run_dir"
	chown "$uid" "$run_dir"
	file=$(where file)
	rm -rf "$run_dir" "$PUB"
	[ -z "$made_run_user" ] || rmdir /run/user
	assert_equal "$own" "$run_dir/leaserun"
	assert_equal "$group" "$home/.local/state/leaserun"
	assert_equal "$other" "$home/.local/state/leaserun"
	assert_equal "$file" "$home/.local/state/leaserun"
}

@test "--status and --list of a lock directory that does not exist: free, nothing listed, and nothing made" {
	run --separate-stderr lr -U "file://$T/none" --status job
	assert_equal "$status" 1
	assert_line --regexp "^state: +free$"
	assert_equal "$stderr" ""
	run --separate-stderr lr -U "file://$T/none" --list
	assert_success
	assert_equal "${#lines[@]}" 1
	assert_equal "$stderr" ""
	[ ! -e "$T/none" ]
	# A path that cannot be a directory is an error, not "free".
	: > "$T/file"
	run --separate-stderr lr -U "file://$T/file/none" --status job
	assert_equal "$status" 125
	assert_equal "$stderr" "leaserun: job: cannot open file://$T/file/none: cannot use lock directory $T/file/none: Not a directory"
}

@test "--limit: a slot file that cannot be opened while the others are taken: 125 with one line, and nothing run" {
	"$LEASERUN" -l 2 job sh -c 'echo $$ > "$0/pid"; exec sleep 30' "$T" 3>&- &
	pid=$!
	BG_PIDS="${BG_PIDS:-} $pid"
	wait_until 5 exists "$T/pid"
	mkdir "$LOCKDIR/job.lock.1"
	run --separate-stderr lr -l 2 -n job touch "$T/ran"
	kill "$pid"
	wait_rc "$pid"
	assert_equal "$status" 125
	[ ! -e "$T/ran" ]
	assert_regex "$stderr" "^leaserun: job: cannot open $LOCKDIR/job.lock.1: "
}

@test "--status with the default directory not made yet: free, and nothing made; a default path that cannot be a directory is an error" {
	needs_root "to act as a user whose default directory is under its home"
	public_leaserun
	uid=54329
	rm -rf "/run/user/$uid"
	home=$PUB/home
	mkdir -m 700 "$home"
	chown "$uid" "$home"
	as_user() {
		setpriv --reuid="$uid" --regid="$uid" --clear-groups --reset-env \
			env HOME="$home" "$PUB/leaserun" "$@"
	}
	run --separate-stderr as_user --status job
	free=$status free_out=$output free_err=$stderr made=$(find "$home" -mindepth 1)
	# ~/.local a file: the default directory cannot be there.
	: > "$home/.local"
	run --separate-stderr as_user --status job
	rm -rf "$PUB"
	assert_equal "$free" 1
	[[ "$free_out" == *"state:   free"* ]]
	assert_equal "$free_err" ""
	assert_equal "$made" ""
	assert_equal "$status" 125
	assert_equal "$stderr" "leaserun: job: cannot open file://: cannot use lock directory $home/.local/state/leaserun: Not a directory"
}
