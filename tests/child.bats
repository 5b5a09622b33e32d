#!/usr/bin/env bats
# The child: process group, signals, fds, environment, death of leaserun.

load helpers

setup() {
	lockdir_setup
	T=$BATS_TEST_TMPDIR
	LEFT=
}

# A test that fails half-way leaves nothing running (a stopped leaserun
# would stay for ever).
teardown() {
	[ -z "$LEFT" ] || kill -KILL $LEFT 2>/dev/null || true
}

# A command that traps SIG in itself and in a grandchild, each writing a
# file when it arrives.  Both report ready first.
# A command that traps SIG in itself and in a grandchild: each writes a file
# when it arrives and goes on running, so neither can race the other.  The
# grandchild is perl, which can catch INT and QUIT that sh ignores in its
# background jobs.
trap_script() {
	cat <<SCRIPT
trap 'echo child > $T/child.got' $1
perl -e '\$SIG{$1} = sub { open my \$f, ">", "$T/grand.got"; print \$f "grand"; close \$f };
	open my \$r, ">", "$T/grand.ready"; print \$r "ready"; close \$r; sleep 1 while 1' &
echo \$\$ > $T/child.ready
while :; do sleep 0.05; done
SCRIPT
}

forwards() {
	local sig=$1
	rm -f "$T"/*.got "$T"/*.ready
	(with_default_signals "$LEASERUN" job -c "$(trap_script "$sig")") &
	local pid=$!
	wait_until 5 exists "$T/child.ready"
	wait_until 5 exists "$T/grand.ready"
	kill -s "$sig" "$pid"
	wait_until 5 exists "$T/child.got"
	wait_until 5 exists "$T/grand.got"
	kill -KILL -- "-$(cat "$T/child.ready")"
	wait "$pid" || true
}

@test "TERM reaches the child and its grandchildren" { forwards TERM; }
@test "INT reaches the child and its grandchildren" { forwards INT; }
@test "HUP reaches the child and its grandchildren" { forwards HUP; }
@test "QUIT reaches the child and its grandchildren" { forwards QUIT; }
@test "USR1 reaches the child and its grandchildren" { forwards USR1; }
@test "USR2 reaches the child and its grandchildren" { forwards USR2; }
@test "WINCH reaches the child and its grandchildren" { forwards WINCH; }
@test "ALRM reaches the child and its grandchildren" { forwards ALRM; }
@test "CONT reaches the child and its grandchildren" { forwards CONT; }

@test "a signal inherited as ignored is not forwarded" {
	# perl (Debian's essential perl-base) may catch a signal its parent
	# ignored, which a POSIX shell may not.
	bash -c 'trap "" USR1; exec "$LEASERUN" job perl -e '\''
		$SIG{USR1} = sub { open my $f, ">", "'"$T"'/child.got"; print $f "got"; exit 0 };
		open my $r, ">", "'"$T"'/child.ready"; print $r "ready"; close $r;
		sleep 1 while 1;'\''' &
	pid=$!
	wait_until 5 exists "$T/child.ready" || [ -e "$T/child.ready" ]
	kill -USR1 "$pid"
	sleep 0.5
	[ ! -e "$T/child.got" ]
	kill -TERM "$pid"
	wait "$pid" || true
}

@test "kill -9 of leaserun leaves no child running" {
	# The grandchild's output goes nowhere: one that survives fails the
	# test at once instead of holding bats's pipe for its 60s.
	"$LEASERUN" job sh -c 'sleep 60 >/dev/null 2>&1 3>&- & echo $! > '"$T"'/grand.pid; echo $$ > '"$T"'/child.pid; wait' &
	pid=$!
	wait_until 5 exists "$T/child.pid"
	child=$(cat "$T/child.pid")
	grand=$(cat "$T/grand.pid")
	alive "$child"
	alive "$grand"
	kill -9 "$pid"
	wait_until 3 dead "$child"
	wait_until 3 dead "$grand"
	# And the lease is free again, once the group guard (which kept our
	# fds, the lock among them, until the group was dead) has exited.
	wait_until 3 lr -n -q job true
}

@test "a command whose leaserun died before the child armed its death signal never starts" {
	# The shim holds the new child just before PR_SET_PDEATHSIG until
	# leaserun is dead: the signal, armed after the death, never comes;
	# only the child's check of its parent keeps the command from running
	# with no leaserun over it.  --foreground: no group guard to kill it.
	LD_PRELOAD=$LR_BUILDDIR/.libs/pdeath.so LR_TEST_PDEATH_MARK=$T/mark \
		ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
		"$LEASERUN" --foreground job sh -c "touch $T/ran; sleep 30" &
	pid=$!
	LEFT=$pid
	wait_until 5 exists "$T/mark"
	child=$(cat "$T/mark")
	LEFT="$pid $child"
	kill -9 "$pid"
	wait_until 5 dead "$child"
	[ ! -e "$T/ran" ]
	wait_until 3 lr -n -q job true
}

@test "SIGKILL to leaserun's whole process group (timeout -s KILL) leaves no child running and no state behind" {
	# timeout(1) signals its own process group, where leaserun runs.
	run timeout -s KILL 1 "$LEASERUN" job sh -c 'sleep 60 & echo $! > "$0/grand.pid"; echo "$LEASERUN_STATE" > "$0/state"; wait' "$T"
	assert_equal "$status" 137
	wait_until 3 dead "$(cat "$T/grand.pid")"
	wait_until 3 eval "[ ! -e \"\$(dirname '$(cat "$T/state")')\" ]"
	# The group guard unlinks the state files, then exits and lets the
	# lock go: the lease is free a moment after the state is gone.
	wait_until 3 lr -n -q job true
}

@test "kill -9 of leaserun in the middle of a state update leaves no state behind" {
	# leaserun writes the state file's next version beside it and
	# renames it in; killed in between, it leaves that file, which the
	# group guard removes too, or their directory stays for ever.  The
	# command itself leaves the half-written version here.
	"$LEASERUN" job sh -c ': > "${LEASERUN_STATE%/*}/state.new"; echo "$LEASERUN_STATE" > "$0/state"; exec sleep 60 >/dev/null 2>&1 3>&-' "$T" &
	pid=$!
	LEFT=$pid
	wait_until 5 exists "$T/state"
	[ -e "$(dirname "$(cat "$T/state")")/state.new" ]
	kill -9 "$pid"
	wait_until 3 eval "[ ! -e \"\$(dirname '$(cat "$T/state")')\" ]"
}

@test "the child runs in its own process group" {
	"$LEASERUN" job sh -c 'ps -o pgid= -p $$ > '"$T"'/pgid; echo $$ > '"$T"'/pid' &
	pid=$!
	wait "$pid"
	assert_equal "$(tr -d ' ' < "$T/pgid")" "$(cat "$T/pid")"
}

@test "--foreground keeps the child in leaserun's process group" {
	lr --foreground job sh -c 'ps -o pgid= -p $$ > '"$T"'/pgid; ps -o pgid= -p $PPID > '"$T"'/ppgid'
	assert_equal "$(tr -d ' ' < "$T/pgid")" "$(tr -d ' ' < "$T/ppgid")"
}

@test "the child sees no fd of ours, only those it was given" {
	run bash -c 'exec 7>"$BATS_TEST_TMPDIR/seven"; "$LEASERUN" job sh -c "ls /proc/self/fd"' 
	assert_success
	# sh's own listing fd is 3 at most; ours would be more.
	fds=$(echo "$output" | sort -n | tr '\n' ' ')
	bash -c 'exec 7>/dev/null; ls /proc/self/fd' > "$T/want"
	assert_equal "$fds" "$(sort -n "$T/want" | tr '\n' ' ')"
}

@test "the child gets every fd it was given, however many (here 600)" {
	# The same comparison with 600 fds open: leaserun once kept 256.
	script='for i in $(seq 600); do exec {x}</dev/null; done; exec 7>/dev/null'
	run bash -c "$script"'; "$LEASERUN" job sh -c "ls /proc/self/fd"'
	assert_success
	fds=$(echo "$output" | sort -n | tr '\n' ' ')
	bash -c "$script; ls /proc/self/fd" >"$T/want"
	assert_equal "$(sort -n "$T/want" | wc -l)" "$(echo "$output" | wc -l)"
	assert_equal "$fds" "$(sort -n "$T/want" | tr '\n' ' ')"
}

@test "the child gets its fds both ways they are found: poll() under a limit of 1024, /proc above" {
	# Under a limit of 1024 open files leaserun asks poll() about each
	# number; above, it lists /proc/self/fd.  The highest fd each allows.
	for lim in 1024 4096; do
		top=$((lim - 1))
		run bash -c 'ulimit -n "$1" && exec 7>/dev/null {x}>/dev/null &&
			exec '"$top"'>"$2/top" &&
			"$LEASERUN" job bash -c "ls /proc/self/fd; echo top >&'"$top"'"' \
			bash "$lim" "$T"
		assert_success
		assert_equal "$(cat "$T/top")" top
		fds=$(echo "$output" | sort -n | tr '\n' ' ')
		bash -c 'ulimit -n "$1" && exec 7>/dev/null {x}>/dev/null &&
			exec '"$top"'>/dev/null && ls /proc/self/fd' bash "$lim" >"$T/want"
		assert_equal "$fds" "$(sort -n "$T/want" | tr '\n' ' ')"
		rm "$T/top"
	done
}

@test "without /proc the child still gets every fd it was given, fd 300 too" {
	needs_root "to hide /proc"
	# A sanitizer runtime reads its options and stops threads through
	# /proc: such a build cannot run without it (the plain build's run of
	# this file, which CI also makes, is the one that counts).
	if nm -D "$LEASERUN" 2>/dev/null | grep -q __asan_init; then
		skip "an ASan build cannot run without /proc"
	fi
	# An empty tmpfs over /proc in a mount namespace of its own (made
	# private first, so nothing reaches the machine's /proc).
	run unshare -m --propagation unchanged bash -c '
		mount --make-rprivate /proc &&
			mount -t tmpfs -o size=64k lrproc /proc || exit 99
		[ ! -e /proc/self ] || exit 98
		exec 300>"$1/300" 7>"$1/7"
		"$LEASERUN" job bash -c "echo via300 >&300 && echo via7 >&7"' bash "$T"
	assert_success
	assert_equal "$(cat "$T/300")" via300
	assert_equal "$(cat "$T/7")" via7
}

@test "the child starts with a clean signal mask" {
	run lr job sh -c 'grep SigBlk /proc/self/status'
	assert_success
	assert_output --regexp 'SigBlk:[[:space:]]+0+$'
}

@test "the child gets the lease name, the fence and the URL, never the token" {
	run lr job env
	assert_success
	assert_line "LEASERUN_NAME=job"
	assert_line --regexp '^LEASERUN_FENCE=[1-9][0-9]*$'
	assert_line "LEASERUN_URL=file://$LOCKDIR"
	token=$(echo "$output" | grep -Ei '[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-' || true)
	assert_equal "$token" ""
}

@test "the child never sees the URL file's path or its secrets" {
	echo "file://$LOCKDIR" > "$T/url"
	LEASERUN_URL= LEASERUN_URL_FILE="$T/url" run lr job env
	assert_success
	refute_line --partial "LEASERUN_URL_FILE"
}

@test "closed standard fds do not let log lines into the lock file or the fence counter" {
	run bash -c '"$LEASERUN" -v job true <&- >&- 2>&-; echo "rc=$?"'
	assert_output "rc=0"
	run grep -c '^leaserun' "$LOCKDIR/job.lock" "$LOCKDIR/job.fence"
	assert_output "$LOCKDIR/job.lock:0
$LOCKDIR/job.fence:0"
	a=$(sed -n 's/^fence=//p' "$LOCKDIR/job.lock")
	run lr job sh -c 'echo $LEASERUN_FENCE'
	(( output > a ))
}

@test "SIGCHLD inherited as ignored does not hide the command's exit" {
	run timeout 10 perl -e '$SIG{CHLD} = "IGNORE"; exec @ARGV or die' -- "$LEASERUN" job sh -c 'exit 3'
	assert_equal "$status" 3
}

@test "^Z (TSTP) stops the command, not leaserun, which goes on renewing" {
	"$LEASERUN" -v -t 1s job sh -c 'echo $$ > '"$T"'/pid; while :; do sleep 0.05; done' 2>"$T/log" 3>&- &
	pid=$!
	wait_until 5 exists "$T/pid"
	child=$(cat "$T/pid")
	LEFT="$pid $child"
	kill -TSTP "$pid"
	stopped() { [ "$(sed 's/.*) //' "/proc/$1/stat" | cut -c1)" = T ]; }
	renewals() { grep -c 'renewed' "$T/log" || true; }
	wait_until 3 stopped "$child"
	# (A "! stopped" line would never fail a bats test: errexit ignores
	# a negated command.)
	if stopped "$pid"; then
		echo "leaserun stopped itself" >&2
		return 1
	fi
	# It renews while the job is suspended.
	n=$(renewals)
	wait_until 3 eval '[ "$(renewals)" -gt '"$n"' ]'
	kill -CONT "$pid"
	wait_until 3 eval '! stopped '"$child"
	kill -TERM "$pid"
	wait_rc "$pid"
	assert_equal "$RC" 143
}

@test "the command cannot read leaserun's environment or memory: leaserun is not dumpable" {
	needs_root "to run leaserun as a user (root may read any process)"
	# nobody may not reach the build tree (it may be under /root).
	pub=$(mktemp -d /tmp/leaserun-bin.XXXXXX)
	chmod 755 "$pub"
	cp "$LEASERUN" "$pub/leaserun"
	mkdir "$pub/locks"
	chown nobody "$pub/locks"
	run setpriv --reuid=nobody --regid=nogroup --clear-groups --reset-env \
		env LEASERUN_URL="file://$pub/locks" REDISCLI_AUTH=s3cretPW \
		"$pub/leaserun" job sh -c '
			id -un
			tr "\0" "\n" </proc/$PPID/environ; echo "environ rc=$?"
			head -c 16 /proc/$PPID/mem >/dev/null; echo "mem rc=$?"' 2>&1
	rm -rf "$pub"
	echo "$output" >&3
	assert_success
	assert_line nobody
	assert_line --regexp "^environ rc=[12]$"
	assert_line "mem rc=1"
	refute_output --partial s3cretPW
}

@test "a command that cannot be started for want of processes (RLIMIT_NPROC): 125, one line, the lease given back" {
	needs_root "to run leaserun as a user of its own under a process limit"
	pub=$(mktemp -d /tmp/leaserun-bin.XXXXXX)
	chmod 755 "$pub"
	cp "$LEASERUN" "$pub/leaserun"
	mkdir "$pub/locks"
	# A user id no process has, under a limit of one process: its vfork
	# fails.  LSan's exit check needs a thread of its own, which the
	# limit would refuse.
	chown 54329 "$pub/locks"
	run --separate-stderr timeout -s KILL 20 prlimit --nproc=1 \
		setpriv --reuid=54329 --regid=54329 --clear-groups \
		env LEASERUN_URL="file://$pub/locks" \
		ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
		"$pub/leaserun" job touch "$pub/locks/ran"
	rc=$status err=$stderr
	# Given back: a run without the limit takes it at once.
	run setpriv --reuid=54329 --regid=54329 --clear-groups \
		env LEASERUN_URL="file://$pub/locks" "$pub/leaserun" -n job true
	again=$status ran=
	if [ -e "$pub/locks/ran" ]; then ran=yes; fi
	rm -rf "$pub"
	assert_equal "$rc" 125
	assert_equal "$err" "leaserun: job: cannot run 'touch': Resource temporarily unavailable"
	assert_equal "$ran" ""
	assert_equal "$again" 0
}

@test "a group guard that cannot be started: one warning, and the command runs and gives its status" {
	run --separate-stderr lr_failing clone:11 job sh -c 'echo ran; exit 3'
	assert_equal "$status" 3
	[ -e "$T/failed" ]
	assert_equal "$output" ran
	assert_equal "$stderr" "leaserun: job: cannot start the group guard (Resource temporarily unavailable): kill -9 of leaserun would leave the command's children running"
}

@test "a command that cannot be started for want of descriptors (pipe2): 125, one line, nothing run" {
	run --separate-stderr lr_failing pipe2:24 job touch "$T/ran"
	assert_equal "$status" 125
	[ -e "$T/failed" ]
	[ ! -e "$T/ran" ]
	assert_equal "$stderr" "leaserun: job: cannot run 'touch': Too many open files"
	lr -n -q job true
}

@test "no signalfd: 125 with one line, before anything is held or run" {
	run --separate-stderr lr_failing signalfd:24 job touch "$T/ran"
	assert_equal "$status" 125
	[ -e "$T/failed" ]
	[ ! -e "$T/ran" ]
	assert_equal "$stderr" "leaserun: job: signalfd: Too many open files"
}
