#!/usr/bin/env bats
# Operations on the file store and the fault store (the file store with
# renewals that fail on demand): the metrics file as node_exporter serves
# it, the JSON event stream, --status --json, the command's state file and
# --check, --warn-signal, systemd's notify socket and syslog.  Each store's
# own file runs ops_check against its real server.

load helpers

setup_file() {
	command -v jq >/dev/null || { echo "jq is not installed" >&2; return 1; }
}

setup() {
	lockdir_setup
	T=$BATS_TEST_TMPDIR
	BG_PIDS=
}

teardown() {
	kill_bg
}

# bg CMD...: runs CMD in the background, killed at teardown; sets BG.
bg() {
	"$@" &
	BG=$!
	BG_PIDS="$BG_PIDS $BG"
}

@test "ops_check on the file store: --status --json, a waiter's events, --check, metrics" {
	ops_check job none fence
}

@test "metrics: counters add up across runs and names in one file" {
	m=$T/textfile/leaserun.prom
	mkdir "$T/textfile"
	lr --metrics-file "$m" job true
	lr --metrics-file "$m" job sh -c 'exit 3' || true
	lr --metrics-file "$m" other true
	bg "$LEASERUN" job sleep 5
	wait_until 5 lr --status job
	run lr -n --metrics-file "$m" job true
	assert_failure 1
	assert_equal "$(metric "$m" 'leaserun_lease_acquired_total{name="job",store="file"}')" 2
	assert_equal "$(metric "$m" 'leaserun_lease_acquired_total{name="other",store="file"}')" 1
	assert_equal "$(metric "$m" 'leaserun_lease_conflicts_total{name="job",store="file"}')" 1
	assert_equal "$(metric "$m" 'leaserun_lease_wait_seconds_count{name="job",store="file"}')" 3
	assert_equal "$(metric "$m" 'leaserun_lease_hold_seconds_count{name="job",store="file"}')" 2
	assert_equal "$(metric "$m" 'leaserun_run_last_exit_status{name="job",store="file"}')" 1
	assert_equal "$(metric "$m" 'leaserun_run_last_exit_status{name="other",store="file"}')" 0
	# The last success of "job" was its first run, before the failure.
	[ -n "$(metric "$m" 'leaserun_run_last_success_timestamp_seconds{name="job"')" ]
	# No temporary file is left for the collector to trip over.
	assert_equal "$(ls "$T/textfile")" leaserun.prom
}

@test "metrics: 20 runs at once on one host lose no count" {
	m=$T/m.prom
	for i in $(seq 20); do
		lr -w 60 --metrics-file "$m" job true &
	done
	wait
	assert_equal "$(metric "$m" 'leaserun_lease_acquired_total{name="job",store="file"}')" 20
	assert_equal "$(metric "$m" 'leaserun_lease_wait_seconds_count{name="job",store="file"}')" 20
}

@test "metrics: a lost lease, failed renewals and leaserun's own failure are counted" {
	export LEASERUN_URL="fault://$LOCKDIR"
	m=$T/m.prom
	echo "renew=fail" > "$LOCKDIR/job.fault"
	run lr -t 1s --metrics-file "$m" job sleep 10
	assert_equal "$status" 124
	echo "acquire=fail" > "$LOCKDIR/job.fault"
	run lr --metrics-file "$m" job true
	assert_equal "$status" 125
	assert_equal "$(metric "$m" 'leaserun_lease_lost_total{name="job",store="fault"}')" 1
	(( $(metric "$m" 'leaserun_heartbeat_failures_total{name="job",store="fault"}') >= 2 ))
	assert_equal "$(metric "$m" 'leaserun_run_failures_total{name="job",store="fault"}')" 1
	assert_equal "$(metric "$m" 'leaserun_run_last_exit_status{name="job",store="fault"}')" 125
	assert_equal "$(metric "$m" 'leaserun_lease_acquired_total{name="job",store="fault"}')" 1
}

@test "metrics: heartbeat latency is a histogram of real renewals" {
	m=$T/m.prom
	lr -t 1s --renew 100ms -k 300ms --metrics-file "$m" job sleep 1.2
	n=$(metric "$m" 'leaserun_heartbeat_latency_seconds_count{name="job",store="file"}')
	(( n >= 5 ))
	# Local renewals take well under 10s; buckets are cumulative.
	assert_equal "$(metric "$m" 'leaserun_heartbeat_latency_seconds_bucket{name="job",store="file",le="10"}')" "$n"
	grep '^leaserun_heartbeat_latency_seconds_bucket{name="job"' "$m" |
		awk '$NF < prev { print "bucket decreases: " $0; bad = 1 } { prev = $NF } END { exit bad }'
	(( $(metric "$m" 'leaserun_heartbeat_latency_seconds_bucket{name="job",store="file",le="0.001"}') <= n ))
}

@test "metrics: a file of another program is not replaced; the job still runs" {
	printf '127.0.0.1 localhost\n::1 localhost\n' > "$T/hosts"
	cp "$T/hosts" "$T/hosts.orig"
	run --separate-stderr lr --metrics-file "$T/hosts" job sh -c 'exit 4'
	assert_equal "$status" 4
	assert_regex "$stderr" "holds no leaserun metrics; not replacing it"
	cmp "$T/hosts" "$T/hosts.orig"
	mkfifo "$T/fifo"
	run --separate-stderr timeout 10 "$LEASERUN" --metrics-file "$T/fifo" job true
	assert_equal "$status" 0
	assert_regex "$stderr" "not a regular file"
}

@test "metrics: a directory locked by someone else never stalls the loop that keeps the lease" {
	mkdir "$T/textfile"
	bg flock -x "$T/textfile" sleep 30
	wait_until 5 eval "grep -q ' FLOCK ' /proc/locks"
	# TTL 1s: a loop stuck on the lock for a second would lose the
	# lease (124).  The file is written only when leaserun ends.
	run --separate-stderr lr -t 1s --metrics-file "$T/textfile/m.prom" job sleep 1.5
	assert_equal "$status" 0
	assert_regex "$stderr" "cannot lock the directory"
}

@test "metrics: a command's own 125 is not counted as leaserun's failure" {
	m=$T/m.prom
	run lr --metrics-file "$m" job sh -c 'exit 125'
	assert_equal "$status" 125
	assert_equal "$(metric "$m" 'leaserun_run_failures_total{name="job",store="file"}')" 0
	assert_equal "$(metric "$m" 'leaserun_run_last_exit_status{name="job",store="file"}')" 125
}

@test "metrics: node_exporter's textfile collector serves the file without errors" {
	command -v prometheus-node-exporter >/dev/null ||
		{ echo "prometheus-node-exporter is not installed" >&2; return 1; }
	mkdir "$T/textfile"
	m=$T/textfile/leaserun.prom
	lr --metrics-file "$m" job true
	lr --metrics-file "$m" other sh -c 'exit 2' || true
	port=$("$LR_BUILDDIR/tests/freeport")
	bg prometheus-node-exporter --web.listen-address="127.0.0.1:$port" \
		--collector.disable-defaults --collector.textfile \
		--collector.textfile.directory="$T/textfile"
	wait_until 10 curl -sf -o "$T/scrape" "http://127.0.0.1:$port/metrics"
	grep -E '^leaserun_(lease_acquired|run_last_exit)|^node_textfile_scrape_error' "$T/scrape" >&3
	grep -qx 'node_textfile_scrape_error 0' "$T/scrape"
	grep -qx 'leaserun_lease_acquired_total{name="job",store="file"} 1' "$T/scrape"
	grep -qx 'leaserun_run_last_exit_status{name="other",store="file"} 2' "$T/scrape"
	grep -q '^leaserun_heartbeat_latency_seconds_bucket{name="job",store="file",le="0.001"} 0$' "$T/scrape"
}

@test "metrics: a file that cannot be written is a warning, not a failed job" {
	run --separate-stderr lr --metrics-file /nonexistent/dir/m.prom job sh -c 'exit 7'
	assert_equal "$status" 7
	assert_regex "$stderr" "cannot lock the directory of /nonexistent/dir/m.prom"
}

@test "events: a JSON stream a log pipeline can read, with the fields of each step" {
	export LEASERUN_URL="fault://$LOCKDIR"
	# Renewals fail until the command, warned, clears the fault.
	echo "renew=fail" > "$LOCKDIR/job.fault"
	run --separate-stderr lr -v -t 2s --renew 200ms -k 400ms --warn-signal USR1 --log-format json job sh -c '
		exec 2>/dev/null # sh reports the sleep that USR1 ended
		trap ": > \"\$0\"" USR1
		i=0; while [ $i -lt 24 ]; do sleep 0.05; i=$((i + 1)); done
		exit 3' "$LOCKDIR/job.fault"
	assert_equal "$status" 3
	# Every line is one JSON object with the common fields.
	jq -e -s 'all(.time and .level and .event and .name == "job" and .msg)' <<<"$stderr"
	jq -e -s 'map(.event) | index("acquired") < index("started") and
		index("started") < index("renew-failed") and
		index("renew-failed") < index("at-risk") and
		index("at-risk") < index("exited") and
		index("exited") < index("released")' <<<"$stderr"
	jq -e -s '.[] | select(.event == "acquired") | .fence >= 1 and .wait_ms >= 0 and .ttl_ms == 2000' <<<"$stderr"
	jq -e -s '.[] | select(.event == "started") | .pid > 0' <<<"$stderr"
	jq -e -s '[.[] | select(.event == "renew-failed")][0] | .latency_ms >= 0 and .left_ms > 0 and (.error | test("injected"))' <<<"$stderr"
	jq -e -s '.[] | select(.event == "at-risk") | .left_ms > 0 and .level == "warning" and (.msg | test("signal 10"))' <<<"$stderr"
	jq -e -s '[.[] | select(.event == "renewed" and (.msg | test("again")))] | length == 1' <<<"$stderr"
	jq -e -s '.[] | select(.event == "exited") | .how == "exit" and .status == 3' <<<"$stderr"
	jq -e -s '.[] | select(.event == "released") | .held_ms >= 1000' <<<"$stderr"
}

@test "events: loss carries its reason; -q leaves only what failed" {
	export LEASERUN_URL="fault://$LOCKDIR"
	echo "renew=lost" > "$LOCKDIR/job.fault"
	run --separate-stderr lr -t 1s --log-format json job sleep 10
	assert_equal "$status" 124
	jq -e -s '.[] | select(.event == "lost") | .level == "warning" and (.reason | length > 0)' <<<"$stderr"
	run --separate-stderr lr -q -t 1s --log-format json job sleep 10
	assert_equal "$status" 124
	assert_equal "$stderr" ""
}

@test "--check: held with the fence and the time left; exit 1 once leaserun has released" {
	run lr -t 5s job sh -c 'echo "$LEASERUN_STATE" > "$0/path"; "$LEASERUN" --check; echo "rc=$?"; "$LEASERUN" --check -q; echo "rc=$?"' "$T"
	assert_success
	assert_line --index 0 --regexp '^job: held, fence [1-9][0-9]*, [0-9]+ms left \(until [0-9-]+T[0-9:.]+Z\)$'
	assert_line --index 1 "rc=0"
	assert_line --index 2 "rc=0"
	# Gone with leaserun, directory and all.
	state=$(cat "$T/path")
	[ ! -e "$state" ] && [ ! -e "$(dirname "$state")" ]
	LEASERUN_STATE=$state run lr --check
	assert_failure 1
	assert_output --partial "released"
}

@test "--check of a state file with an over-long name: the name cut at 255 bytes" {
	# The name's buffer holds 255 bytes and the end; a longer value is
	# cut there, not copied whole (the state file is anyone's to write
	# where LEASERUN_STATE points).
	long=$(printf 'n%.0s' $(seq 300))
	printf 'name=%s\nstate=lost\nfence=7\npid=1\ndeadline=0\ndeadline_boottime=0\n' "$long" > "$T/state"
	LEASERUN_STATE=$T/state run lr --check
	assert_failure 1
	assert_output "${long:0:255}: lost, fence 7, 0ms left (until 1970-01-01T00:00:00.000Z)"
}

@test "--check outside leaserun fails with 125 and says why" {
	run --separate-stderr lr --check
	assert_equal "$status" 125
	assert_regex "$stderr" "LEASERUN_STATE is not set"
	echo junk > "$T/junk"
	LEASERUN_STATE=$T/junk run --separate-stderr lr --check
	assert_equal "$status" 125
	# A state file that cannot be read is not one that is gone (which
	# would mean leaserun has ended: 1).
	LEASERUN_STATE=$T/junk/state run --separate-stderr lr --check
	assert_equal "$status" 125
	assert_equal "$stderr" "leaserun: --check: cannot read $T/junk/state: Not a directory"
	run --separate-stderr lr --check job
	assert_equal "$status" 125
}

@test "--check: a leaserun stopped past its deadline means expired (1), though the file still says held" {
	bg "$LEASERUN" -t 1s -k 300ms job sh -c 'echo $$ > "$0/pid"; while :; do sleep 0.1; done' "$T"
	holder=$BG
	wait_until 5 exists "$T/pid"
	state=$(tr '\0' '\n' < "/proc/$(cat "$T/pid")/environ" | sed -n 's/^LEASERUN_STATE=//p')
	LEASERUN_STATE=$state run lr --check
	assert_success
	kill -STOP "$holder"
	sleep 1.2
	LEASERUN_STATE=$state run lr --check --json
	# The stopped leaserun could not say otherwise.
	grep -qx 'state=held' "$state"
	kill -CONT "$holder"
	assert_failure 1
	jq -e '.held == false and .state == "expired" and .left_ms == 0' <<<"$output"
}

@test "--warn-signal reaches the command at the first failed renewal, before the stop signal; --check says at-risk, then stopping" {
	export LEASERUN_URL="fault://$LOCKDIR"
	echo "renew=fail" > "$LOCKDIR/job.fault"
	run --separate-stderr lr -t 2s --renew 300ms -k 600ms --warn-signal USR1 job sh -c '
		trap "\"\$LEASERUN\" --check --json > \"\$0/warn\"; echo usr1" USR1
		trap "\"\$LEASERUN\" --check --json > \"\$0/term\"; echo term; exit 0" TERM
		while :; do sleep 0.05; done' "$T"
	assert_equal "$status" 124
	assert_line --index 0 usr1
	assert_line --index 1 term
	jq -e '.held and .state == "at-risk"' "$T/warn"
	jq -e '.held == false and .state == "stopping"' "$T/term"
}

@test "--warn-signal: a bad signal, or one that would stop or kill the command, is a usage error" {
	run --separate-stderr lr --warn-signal BOGUS job true
	assert_equal "$status" 125
	assert_regex "$stderr" "invalid --warn-signal 'BOGUS'"
	for sig in TSTP TTIN TTOU KILL STOP; do
		run --separate-stderr lr --warn-signal "$sig" job true
		assert_equal "$status" 125
	done
	LEASERUN_WARN_SIGNAL=TSTP run --separate-stderr lr job true
	assert_equal "$status" 125
	assert_regex "$stderr" "must not stop or kill the command"
}

@test "no place to write the state file (/tmp and /dev/shm read-only, no TMPDIR): one warning, and the command runs without LEASERUN_STATE" {
	needs_root "for a mount namespace"
	# A mount namespace, where /tmp and /dev/shm are read-only tmpfs; what
	# the run needs is copied to /run first (the tree may be under /tmp).
	d=$(mktemp -d /run/leaserun-test.XXXXXX)
	cp "$LEASERUN" "$d/leaserun"
	mkdir "$d/locks"
	run --separate-stderr unshare -m sh -c '
		mount -t tmpfs -o ro none /dev/shm && mount -t tmpfs -o ro none /tmp &&
		exec env -u XDG_RUNTIME_DIR -u TMPDIR LEASERUN_URL="file://$0/locks" \
			"$0/leaserun" job sh -c "echo ran; echo \"state=\$LEASERUN_STATE\""' "$d"
	rm -rf "$d"
	assert_success
	assert_output $'ran\nstate='
	assert_equal "$stderr" "leaserun: job: cannot write the lease state file (Permission denied); the command runs without LEASERUN_STATE"
}

@test "a runtime directory that is not there and a TMPDIR under a file are passed over: the state file goes in the next place, no warning" {
	touch "$T/file"
	XDG_RUNTIME_DIR=$T/none TMPDIR=$T/file/tmp run --separate-stderr lr job sh -c 'echo "state=$LEASERUN_STATE"'
	assert_success
	assert_regex "$output" '^state=(/dev/shm|/tmp)/leaserun\.[A-Za-z0-9]{6}/state$'
	assert_equal "$stderr" ""
}

@test "a runtime directory that cannot be used for another reason (a symbolic link loop): one warning, and the command runs without LEASERUN_STATE" {
	ln -s loop "$T/loop"
	XDG_RUNTIME_DIR=$T/loop run --separate-stderr lr job sh -c 'echo "state=$LEASERUN_STATE"'
	assert_success
	assert_output "state="
	assert_equal "$stderr" "leaserun: job: cannot write the lease state file (Too many levels of symbolic links); the command runs without LEASERUN_STATE"
}

# on_full_tmpdir PREFILL ARGS...: "leaserun ARGS" (through run, stderr
# apart) in a mount namespace whose TMPDIR is a tmpfs of 64 KB, filled
# first if PREFILL is 1; what the run needs is copied to /run first (the
# tree may be under /tmp).  The output ends with the tmpfs's files.
on_full_tmpdir() {
	local d pre=$1
	shift
	d=$(mktemp -d /run/leaserun-test.XXXXXX)
	cp "$LEASERUN" "$d/leaserun"
	mkdir "$d/locks" "$d/full"
	run --separate-stderr unshare -m sh -c '
		d=$1 pre=$2
		shift 2
		mount -t tmpfs -o size=64k none "$d/full" || exit 99
		[ "$pre" = 0 ] || dd if=/dev/zero of="$d/full/fill" bs=4k 2>/dev/null
		env -u XDG_RUNTIME_DIR TMPDIR="$d/full" \
			LEASERUN_URL="file://$d/locks" "$d/leaserun" "$@"
		rc=$?; ls -A "$d/full"; exit $rc' sh "$d" "$pre" "$@"
	rm -rf "$d"
}

@test "a full file system for the state file: one warning, the command runs without LEASERUN_STATE, and nothing is left there" {
	needs_root "for a mount namespace"
	# The state directory can be made, its file cannot be written.
	on_full_tmpdir 1 job sh -c 'echo ran; echo "state=$LEASERUN_STATE"'
	assert_success
	assert_output $'ran\nstate=\nfill'
	assert_equal "$stderr" "leaserun: job: cannot write the lease state file (No space left on device); the command runs without LEASERUN_STATE"
}

@test "the state file system fills up while the command runs: one warning, the file stays as it was, and nothing is left there at the end" {
	needs_root "for a mount namespace"
	# The command fills the tmpfs, then outlives a few renewals (-t 1s:
	# one every 333 ms), each of which rewrites the file.  A renewal
	# that replaced the file while dd filled the rest frees the old
	# one's page: a second fill after one renewal takes it.
	on_full_tmpdir 0 -t 1s job sh -c '
		dd if=/dev/zero of="$TMPDIR/fill" bs=4k 2>/dev/null; sleep 0.4
		dd if=/dev/zero of="$TMPDIR/fill2" bs=4k 2>/dev/null; sleep 0.8
		grep -c ^state=held "$LEASERUN_STATE"'
	assert_success
	assert_output $'1\nfill\nfill2'
	assert_regex "$stderr" "^leaserun: job: cannot update the lease state file \(No space left on device\); leaserun --check will report the lease expired from [0-9]+ms on$"
}

@test "a state directory that cannot be made private (chmod fails): one warning, no LEASERUN_STATE, nothing left" {
	mkdir "$T/tmp"
	TMPDIR=$T/tmp XDG_RUNTIME_DIR= run --separate-stderr lr_failing chmod:1 job sh -c 'echo "state=$LEASERUN_STATE"'
	assert_success
	[ -e "$T/failed" ]
	assert_output "state="
	assert_equal "$stderr" "leaserun: job: cannot write the lease state file (Operation not permitted); the command runs without LEASERUN_STATE"
	assert_equal "$(ls -A "$T/tmp")" ""
}

@test "a state update that cannot be renamed in: one warning, the file stays as it was, nothing left at the end" {
	# The first rename after the command starts is a renewal's update
	# (-t 1s: one every 333 ms); the file store renames nothing.
	mkdir "$T/tmp"
	TMPDIR=$T/tmp XDG_RUNTIME_DIR= run --separate-stderr lr_failing "rename:13:0:$T/started" -t 1s job sh -c '
		touch "$0/started"; cp "$LEASERUN_STATE" "$0/before"; sleep 1.2
		cmp "$LEASERUN_STATE" "$0/before" && ls -A "${LEASERUN_STATE%/*}"' "$T"
	assert_success
	[ -e "$T/failed" ]
	assert_output "state"
	assert_regex "$stderr" "^leaserun: job: cannot update the lease state file \(Permission denied\); leaserun --check will report the lease expired from [0-9]+ms on$"
	assert_equal "$(ls -A "$T/tmp")" ""
}

@test "kill -9 of leaserun: the guard removes the state directory with the command's group" {
	bg "$LEASERUN" job sh -c 'echo "$LEASERUN_STATE" > "$0/path"; exec sleep 60' "$T"
	wait_until 5 exists "$T/path"
	dir=$(dirname "$(cat "$T/path")")
	[ -d "$dir" ]
	kill -9 "$BG"
	wait_until 5 eval "[ ! -e '$dir' ]"
}

@test "kill -9 of leaserun while it releases: the guard removes the state directory" {
	export LEASERUN_URL="fault://$LOCKDIR"
	echo 'release.delay=3000' > "$LOCKDIR/job.fault"
	bg "$LEASERUN" job sh -c 'echo "$LEASERUN_STATE" > "$0/path"' "$T"
	wait_until 5 exists "$T/path"
	state=$(cat "$T/path")
	wait_until 5 grep -qx 'state=releasing' "$state"
	kill -9 "$BG"
	wait_until 5 eval "[ ! -e '$(dirname "$state")' ]"
}

# guard_of PID: leaserun PID's group guard, the one child of it that leads
# a process group of its own and is not its command (CMD, if given).
guard_of() {
	ps -o pid=,pgid= --ppid "$1" | awk -v c="${2:-}" '$1 == $2 && $1 != c { print $1 }'
}

@test "the guard never outlives leaserun: it goes when a run ends, and after kill -9 of a waiter" {
	# A run: the command finds the guard beside it, a child of leaserun.
	lr job sh -c 'ps -o pid=,pgid= --ppid $PPID |
		awk -v c=$$ '\''$1 == $2 && $1 != c { print $1 }'\'' > "$0/guard"' "$T"
	[ "$(wc -l < "$T/guard")" = 1 ]
	wait_until 5 dead "$(cat "$T/guard")"
	# A waiter, killed while it waits: nothing to kill, and it goes too.
	bg "$LEASERUN" job sleep 60
	holder=$BG
	wait_until 5 lr --status job
	bg "$LEASERUN" -w 60s job true
	wait_until 5 eval '[ -n "$(guard_of "$BG")" ]'
	guard=$(guard_of "$BG")
	kill -9 "$BG"
	wait_until 5 dead "$guard"
	alive "$holder"
	# The holder's own command is untouched by the waiter's guard.
	lr --status job
}

@test "systemd: READY=1 and STATUS= lines on NOTIFY_SOCKET, which the command does not inherit" {
	command -v socat >/dev/null || { echo "socat is not installed" >&2; return 1; }
	bg socat -u "UNIX-RECV:$T/notify" "OPEN:$T/notes,creat,append"
	wait_until 5 test -S "$T/notify"
	bg "$LEASERUN" job sleep 60
	holder=$BG
	wait_until 5 lr --status job
	NOTIFY_SOCKET=$T/notify run lr -w 300ms job sh -c 'echo "child:${NOTIFY_SOCKET-unset}"'
	assert_failure 1
	kill "$holder"
	NOTIFY_SOCKET=$T/notify run lr job sh -c 'echo "child:${NOTIFY_SOCKET-unset}"'
	assert_success
	assert_output "child:unset"
	wait_until 5 grep -q STOPPING=1 "$T/notes"
	cat "$T/notes" >&3
	grep -qx "STATUS=waiting for job, held by $(hostname) pid $holder" "$T/notes"
	grep -qx "READY=1" "$T/notes"
	grep -qx "STATUS=holding job, fence [1-9][0-9]*" "$T/notes"
	grep -qx "STATUS=released job" "$T/notes"
}

@test "systemd: an abstract NOTIFY_SOCKET (@name) works too" {
	command -v socat >/dev/null || { echo "socat is not installed" >&2; return 1; }
	abs=leaserun-test-$$-$BATS_TEST_NUMBER
	bg socat -u "ABSTRACT-RECV:$abs" "OPEN:$T/notes,creat,append"
	wait_until 5 eval "grep -q '@$abs' /proc/net/unix"
	NOTIFY_SOCKET=@$abs run lr job true
	assert_success
	wait_until 5 grep -qx READY=1 "$T/notes"
}

# dgram_listen SOCKET OUT: receives datagrams on a new Unix socket and
# appends each to OUT as one line (syslog datagrams carry no newline).
dgram_listen() {
	bg perl -MSocket -MIO::Socket::UNIX -e '
		unlink $ARGV[0];
		my $s = IO::Socket::UNIX->new(Type => SOCK_DGRAM, Local => $ARGV[0])
			or die "listen: $!";
		chmod 0666, $ARGV[0];
		open my $o, ">>", $ARGV[1] or die "$ARGV[1]: $!";
		$o->autoflush(1);
		while (defined $s->recv(my $m, 65536)) { print $o "$m\n" }' "$1" "$2"
	wait_until 5 test -S "$1"
}

# private_devlog SOCKET CMD...: runs CMD in a mount namespace of its own
# whose /dev is a fresh tmpfs with null, urandom and log -> SOCKET.  The
# namespace keeps the propagation it inherits (a chroot's / is no mount
# point to make private), and /dev is made private before the mount, so
# nothing reaches the machine's /dev.
private_devlog() {
	unshare -m --propagation unchanged sh -c '
		sock=$1; shift
		mount --make-rprivate /dev &&
		mount -t tmpfs -o mode=755 lrdev /dev &&
		mknod -m 666 /dev/null c 1 3 && mknod -m 666 /dev/urandom c 1 9 &&
		ln -s "$sock" /dev/log &&
		exec "$@"' sh "$@"
}

@test "--syslog: the lines go to /dev/log (with the level as priority), not to stderr" {
	needs_root "for a private /dev/log"
	dgram_listen "$T/log.sock" "$T/syslog"
	# A private /dev with our socket as /dev/log, in a mount namespace.
	run --separate-stderr private_devlog "$T/log.sock" sh -c '
		"$LEASERUN" -v --syslog job true &&
		"$LEASERUN" --syslog --log-format json bad/name true'
	assert_equal "$status" 125
	wait_until 5 grep -q released "$T/syslog"
	cat "$T/syslog" >&3
	grep -Eqx '<14>[A-Z][a-z]{2} [ 0-9]{2} [0-9:]{8} leaserun\[[0-9]+\]: job: acquired, fence [1-9][0-9]*' "$T/syslog"
	# One datagram a line, none with a newline of its own.
	assert_equal "$(grep -c . "$T/syslog")" "$(wc -l < "$T/syslog")"
	# Nothing of the run on stderr; the usage error (before the log is
	# set up) still says what is wrong.
	refute_regex "$stderr" "acquired"
	assert_regex "$stderr" "invalid lease name"
}

@test "--syslog: leaserun's own failure goes to syslog and to stderr, so cron still mails it" {
	needs_root "for a private /dev/log"
	dgram_listen "$T/log.sock" "$T/syslog"
	export LEASERUN_URL="fault://$LOCKDIR"
	echo "acquire=fail" > "$LOCKDIR/job.fault"
	run --separate-stderr private_devlog "$T/log.sock" "$LEASERUN" --syslog job true
	assert_equal "$status" 125
	assert_regex "$stderr" "injected acquire failure"
	wait_until 5 grep -q "injected acquire failure" "$T/syslog"
	grep -q '^<11>' "$T/syslog"
}
