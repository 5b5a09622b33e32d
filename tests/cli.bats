#!/usr/bin/env bats
# The command line: every usage error is one line on stderr and exit 125,
# and leaves nothing behind.

load helpers

setup() {
	lockdir_setup
}

# refuses CMD...: exit 125, exactly one line on stderr, nothing in LOCKDIR.
refuses() {
	run --separate-stderr "$LEASERUN" "$@"
	assert_equal "$status" 125
	assert_equal "${#stderr_lines[@]}" 1
	assert_regex "$stderr" '^leaserun: '
	assert_equal "$output" ""
	assert_equal "$(ls -A "$LOCKDIR")" ""
}

@test "--help prints the usage on stdout and exits 0" {
	run lr --help
	assert_success
	assert_line --index 0 "Usage:"
	assert_output --partial "--nonblock"
}

@test "--version names the built-in file store" {
	run lr --version
	assert_success
	assert_line --index 0 --regexp '^leaserun [0-9]'
	assert_line --regexp '^  file +available$'
}

@test "a bad duration is refused" {
	refuses -t 10x job true
	assert_regex "$stderr" "invalid --ttl '10x'"
	refuses -w -1 job true
	refuses --renew '' job true
	refuses -k 1y job true
}

@test "a bad duration in the environment is refused and named" {
	LEASERUN_TTL=soon refuses job true
	assert_regex "$stderr" "LEASERUN_TTL"
}

@test "a bad URL is refused" {
	refuses -U 'not a url' job true
	assert_regex "$stderr" "invalid store URL"
	refuses -U 'redis://h/%zz' job true
}

@test "a URL of a kilobyte is cut to 200 bytes in its one line, so that the reason still ends it" {
	local v u
	v=$(printf 'v%.0s' {1..1000})
	u="file://$LOCKDIR?opt=$v"
	refuses -U "$u" job true
	assert_equal "$stderr" "leaserun: job: cannot open ${u:0:200}...: the file store takes no URL options ('opt')"
	# 200 bytes, not one more, are shown whole.
	u="file://$LOCKDIR?opt="
	u+=${v:0:$((200 - ${#u}))}
	refuses -U "$u" job true
	assert_equal "$stderr" "leaserun: job: cannot open $u: the file store takes no URL options ('opt')"
}

@test "a URL with a fragment, or a query parameter without a name, is refused: no part of it is dropped unread" {
	refuses -U 'redis://h/0#frag' job true
	assert_equal "$stderr" "leaserun: invalid store URL: URL fragments (#) are not allowed (see leaserun --help)"
	refuses -U 'redis://h/0?db=1#frag' job true
	assert_equal "$stderr" "leaserun: invalid store URL: URL fragments (#) are not allowed (see leaserun --help)"
	refuses -U 'redis://h/?=v' job true
	assert_equal "$stderr" "leaserun: invalid store URL: bad URL query parameter (see leaserun --help)"
}

@test "an unknown store scheme is refused with the known ones" {
	refuses -U 'gopher://x' job true
	assert_regex "$stderr" "unknown store 'gopher' \(known: file, redis, .*, zk\)\$"
	refute_regex "$stderr" "fault"
}

@test "a store that is not installed names the package that has it" {
	LEASERUN_MODULE_DIR="$LOCKDIR/none" refuses -U 'redis://127.0.0.1:1' job true
	assert_regex "$stderr" "this leaserun has no redis store: install the leaserun-redis package or build with --with-redis\$"
	LEASERUN_MODULE_DIR="$LOCKDIR/none" refuses -U 'postgresql://127.0.0.1:1/x' job true
	assert_regex "$stderr" "no pg store: install the leaserun-postgresql package or build with --with-pg\$"
}

@test "--version names the package of each store that is not installed" {
	LEASERUN_MODULE_DIR="$LOCKDIR/none" run lr --version
	assert_success
	assert_line --regexp '^  file +available$'
	assert_line --regexp '^  redis +not installed \(package leaserun-redis, or build with --with-redis\)$'
	assert_line --regexp '^  pg +not installed \(package leaserun-postgresql, or build with --with-pg\)$'
	assert_line --regexp '^  etcd +not installed \(package leaserun-etcd, or build with --with-etcd\)$'
	assert_line --regexp '^  zk +not installed \(package leaserun-zookeeper, or build with --with-zk\)$'
	refute_output --partial fault
}

@test "--version tells an installed store that cannot be loaded from a missing one" {
	mkdir "$LOCKDIR.mods"
	cp "$LR_BUILDDIR/.libs/stale.so" "$LOCKDIR.mods/redis.so"
	LEASERUN_MODULE_DIR="$LOCKDIR.mods" run lr --version
	assert_success
	assert_line --regexp '^  redis +installed but unusable: cannot load the redis store: .*built for another leaserun'
	assert_line --regexp '^  pg +not installed \(package leaserun-postgresql'
}

@test "a store module built for another interface version is refused" {
	mkdir "$LOCKDIR.mods"
	cp "$LR_BUILDDIR/.libs/stale.so" "$LOCKDIR.mods/redis.so"
	LEASERUN_MODULE_DIR="$LOCKDIR.mods" refuses -U 'redis://127.0.0.1:1' job true
	abi=$(sed -n 's/^#define LR_STORE_ABI \([0-9]*\)$/\1/p' "$LR_SRCDIR/src/store/store.h")
	[ -n "$abi" ]
	assert_regex "$stderr" "built for another leaserun \(interface 0, need $abi\)"
}

@test "an empty LEASERUN_ variable is ignored: every one the man page lists" {
	local v n=0
	for v in $(sed -n '/^\.Sh ENVIRONMENT/,/^\.Sh /s/^\.It Ev \(LEASERUN_[A-Z_]*\)$/\1/p' \
		"$LR_SRCDIR/man/leaserun.1"); do
		n=$((n + 1))
		run env "$v=" "$LEASERUN" -U "file://$LOCKDIR" -n job echo ran
		[ "$status" -eq 0 ] && [ "$output" = ran ] ||
			fail "$v set but empty: exit $status: $output"
	done
	# the page still lists them
	[ "$n" -ge 15 ]
}

@test "an empty name is refused" {
	refuses '' true
	assert_regex "$stderr" "empty"
}

@test "an over-long name is refused" {
	refuses "$(printf 'a%.0s' {1..201})" true
	assert_regex "$stderr" "longer than 200"
}

@test "a name that could leave the lock directory is refused" {
	refuses ../x true
	refuses a/b true
	refuses / true
	refuses .. true
	refuses '-x' true
	refuses "$(printf 'a\nb')" true
}

@test "a missing command is refused" {
	refuses job
	assert_regex "$stderr" "no command given"
	refuses job --
}

@test "a missing name is refused" {
	refuses
	assert_regex "$stderr" "no lease name"
}

@test "an unknown option is refused" {
	refuses --frobnicate job true
	assert_regex "$stderr" "unknown option '--frobnicate'"
	refuses -Z job true
	assert_regex "$stderr" "unknown option '-Z'"
}

@test "an option without its argument is refused" {
	refuses -w
	refuses --wait
	refuses job -c
}

@test "a command and -c together are refused" {
	refuses -c 'true' job true
	refuses job -c 'true' extra
	refuses -c 'true' job -c 'true'
}

@test "options after the name belong to the command, as with flock" {
	run lr job sh -c 'echo "$0"' -w
	assert_success
	assert_output "-w"
}

@test "--status and --break take only a name" {
	refuses --status job true
	refuses --break job true
	refuses --status --break job
}

@test "the same mode given twice is the mode, as any option given twice" {
	run -1 "$LEASERUN" --status --status job
	assert_line "state:   free"
	run -0 "$LEASERUN" --break --break job
	run -0 "$LEASERUN" --list --list
	refuses --status --list job
}

@test "a timing that cannot stop the command in time is refused" {
	refuses -t 10s -k 7s job true
	assert_regex "$stderr" "no time to stop the command"
	refuses -t 10s --renew 10s job true
	refuses -t 100ms job true
	refuses -t 0 job true
	refuses --renew 0 job true
	refuses -k 0 job true
}

@test "a bad signal or exit code is refused" {
	refuses --signal NOPE job true
	refuses --signal STOP job true
	refuses -E 256 job true
	refuses -E x job true
	refuses --log-format xml job true
}

@test "options after the name belong to the command" {
	run lr job echo -n hello
	assert_success
	assert_output "hello"
}

@test "NAME -- COMMAND works as with flock" {
	run lr job -- echo hi
	assert_success
	assert_output "hi"
}

@test "-c runs the string with /bin/sh" {
	run lr job -c 'echo "$((6 * 7))"'
	assert_success
	assert_output "42"
}

@test "a password given on the command line is warned about and never printed" {
	run --separate-stderr lr -U 'file://u:hunter2@/nonexistent' job true
	assert_equal "$status" 125
	refute_regex "$stderr" "hunter2"
	assert_regex "$stderr" "visible in ps"
}

@test "a password given with -U or --url is overwritten in ps at once; the command's own words are untouched" {
	T=$BATS_TEST_TMPDIR
	u="file://u:Hunter2-pw@$LOCKDIR"
	"$LEASERUN" -U "$u" -U"$u" --url "$u" --url="$u" job \
		sh -c 'echo $$ > "$0/pid"; while :; do sleep 1; done' "$T" -U "$u" 2> "$T/err" &
	pid=$!
	wait_until 5 exists "$T/pid"
	tr '\0' '\n' < "/proc/$pid/cmdline" > "$T/lr.argv"
	tr '\0' '\n' < "/proc/$(cat "$T/pid")/cmdline" > "$T/child.argv"
	kill "$pid"
	wait_rc "$pid"
	assert_equal "$RC" 143
	cat "$T/lr.argv"
	# leaserun's own words, up to NAME: every form overwritten in place,
	# the same words, the same length.
	sed '/^job$/q' "$T/lr.argv" > "$T/lr.opts"
	run grep -c Hunter2-pw "$T/lr.opts"
	assert_output 0
	run grep -c "u:\*\{10\}@$LOCKDIR\$" "$T/lr.opts"
	assert_output 4
	assert_equal "$(wc -l < "$T/lr.opts")" 8
	# The command's words are its own, in leaserun's argv as in its own.
	assert_equal "$(tail -n 2 "$T/lr.argv")" "$(printf -- '-U\n%s' "$u")"
	assert_equal "$(tail -n 2 "$T/child.argv")" "$(printf -- '-U\n%s' "$u")"
	grep -q "visible in ps" "$T/err"
	run grep -c Hunter2-pw "$T/err"
	assert_output 0
	# An option getopt cannot take ("--ur" could be --url or
	# --url-file) is named without what follows its '='.
	run --separate-stderr lr --ur="$u" job true
	assert_equal "$status" 125
	assert_regex "$stderr" "unknown option '--ur'"
	refute_regex "$stderr" "Hunter2-pw"
}

@test "the URL can come from a file" {
	echo "file://$LOCKDIR" > "$LOCKDIR.url"
	LEASERUN_URL= run lr --url-file "$LOCKDIR.url" job true
	assert_success
	[ -e "$LOCKDIR/job.lock" ]
}

@test "a URL file that others may write, or that another user owns, is refused with one line and 125" {
	echo "file://$LOCKDIR" > "$LOCKDIR.url"
	for mode in 666 620 602; do
		chmod "$mode" "$LOCKDIR.url"
		LEASERUN_URL= run --separate-stderr lr --url-file "$LOCKDIR.url" job touch "$BATS_TEST_TMPDIR/ran"
		assert_equal "$status" 125
		assert_equal "$stderr" "leaserun: job: refusing URL file $LOCKDIR.url: others may write it (mode 0$mode); chmod 600 it"
	done
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
	if [ "$(id -u)" = 0 ]; then
		chmod 600 "$LOCKDIR.url"
		chown nobody "$LOCKDIR.url"
		LEASERUN_URL= run --separate-stderr lr --url-file "$LOCKDIR.url" job true
		assert_equal "$status" 125
		assert_regex "$stderr" "refusing URL file .*: it belongs to uid $(id -u nobody)"
	fi
}

@test "a URL file with a password that others may read: a warning, once" {
	echo "fault://lr:Hunter2-pw@/$LOCKDIR" > "$LOCKDIR.url"
	chmod 644 "$LOCKDIR.url"
	LEASERUN_URL= run --separate-stderr lr --url-file "$LOCKDIR.url" job true
	assert_success
	assert_equal "$stderr" "leaserun: job: URL file $LOCKDIR.url holds a password that others may read; chmod 600 it"
	chmod 600 "$LOCKDIR.url"
	LEASERUN_URL= run --separate-stderr lr --url-file "$LOCKDIR.url" job true
	assert_success
	assert_equal "$stderr" ""
}

@test "a URL file that is a FIFO nobody writes: 125 within seconds, not a hang; a pipe that writes works" {
	mkfifo "$LOCKDIR.fifo"
	t0=$(now_ms)
	LEASERUN_URL= run --separate-stderr timeout 20 "$LEASERUN" --url-file "$LOCKDIR.fifo" job true
	t1=$(now_ms)
	assert_equal "$status" 125
	assert_regex "$stderr" "URL file .*fifo: nothing to read within 5s"
	(( t1 - t0 < 10000 ))
	LEASERUN_URL= run bash -c '"$LEASERUN" --url-file <(sleep 0.2; echo "file://$LOCKDIR") job echo ran'
	assert_success
	assert_output ran
}

@test "--url-file /dev/fd/N or /proc/self/fd/N: the command does not inherit that fd, which held the URL" {
	echo "file://$LOCKDIR" > "$LOCKDIR.url"
	LEASERUN_URL= run lr --url-file /dev/fd/7 job sh -c '[ -e /proc/$$/fd/7 ] && echo has-7 || echo no-7' 7< "$LOCKDIR.url"
	assert_success
	assert_output no-7
	# The same fd by its other name.
	LEASERUN_URL= run lr --url-file /proc/self/fd/7 job sh -c '[ -e /proc/$$/fd/7 ] && echo has-7 || echo no-7' 7< "$LOCKDIR.url"
	assert_success
	assert_output no-7
	# A fd given otherwise is the command's, as ever.
	LEASERUN_URL= run lr --url-file "$LOCKDIR.url" job sh -c '[ -e /proc/$$/fd/7 ] && echo has-7 || echo no-7' 7< "$LOCKDIR.url"
	assert_output has-7
}

@test "--log-format json writes one JSON object per lifecycle line" {
	run --separate-stderr lr -v --log-format json job true
	assert_success
	assert_equal "${#stderr_lines[@]}" 4
	for line in "${stderr_lines[@]}"; do
		assert_regex "$line" '^\{"time":"[0-9-]+T[0-9:.]+Z","level":"[a-z]+","event":"[a-z-]+","name":"job",.*"msg":"[^"]*"\}$'
		jq -e . <<<"$line" >/dev/null
	done
	assert_regex "${stderr_lines[0]}" '"event":"acquired","name":"job","fence":[1-9][0-9]*,.*"msg":"acquired, fence [1-9][0-9]*"'
	# The file store names no node.
	assert_equal "$(jq 'has("node")' <<<"${stderr_lines[0]}")" false
	assert_regex "${stderr_lines[3]}" '"event":"released"'
}

@test "--log-format given twice: the last one counts, as any option given twice" {
	refuses --log-format yaml job true
	assert_regex "$stderr" "yaml"
	run --separate-stderr lr -v --log-format json --log-format text job true
	assert_success
	assert_equal "${#stderr_lines[@]}" 4
	assert_regex "${stderr_lines[0]}" '^leaserun: job: acquired, fence [1-9][0-9]*$'
}

@test "--metrics-file with an empty path, --json without --status, --list or --check: one line, 125" {
	refuses --metrics-file '' job true
	assert_regex "$stderr" "--metrics-file needs a path"
	refuses --json job true
	assert_regex "$stderr" "--json goes with --status, --list or --check"
}

@test "a URL file that is missing, a directory or empty: one line naming it, 125, the command never runs" {
	refuses --url-file "$BATS_TEST_TMPDIR/none" job touch "$BATS_TEST_TMPDIR/ran"
	assert_regex "$stderr" "cannot read URL file .*/none: No such file or directory"
	mkdir "$BATS_TEST_TMPDIR/dir"
	refuses --url-file "$BATS_TEST_TMPDIR/dir" job touch "$BATS_TEST_TMPDIR/ran"
	assert_regex "$stderr" "URL file .*/dir is not a regular file or a pipe"
	printf ' \t\n' >"$BATS_TEST_TMPDIR/empty"
	chmod 600 "$BATS_TEST_TMPDIR/empty"
	refuses --url-file "$BATS_TEST_TMPDIR/empty" job touch "$BATS_TEST_TMPDIR/ran"
	assert_regex "$stderr" "URL file .*/empty is empty"
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
}

@test "-q silences a conflict; the exit status still tells" {
	"$LEASERUN" job sleep 3 &
	holder=$!
	wait_until 3 lr --status job
	run --separate-stderr lr -n job true
	assert_equal "$status" 1
	assert_regex "$stderr" "held by $(hostname) pid $holder; not waiting"
	run --separate-stderr lr -q -n job true
	assert_equal "$status" 1
	assert_equal "$stderr" ""
	kill "$holder"; wait "$holder" || true
}

@test "a password holding an unescaped '/' is refused without being shown" {
	run --separate-stderr lr -U 'redis://:ab/secretpart@127.0.0.1:1' job true
	assert_equal "$status" 125
	assert_regex "$stderr" "percent-encode"
	refute_regex "$stderr" "secretpart"
}

@test "-n and -w bound the store's open: a store that does not answer ends the run by the wait, with 125" {
	export LEASERUN_URL="fault://$LOCKDIR"
	echo open=stall >"$LOCKDIR/job.fault"
	for w in -n "-w 1500ms"; do
		t0=$(now_ms)
		# shellcheck disable=SC2086 # $w is an option and its value
		run --separate-stderr lr -t 20s $w job touch "$BATS_TEST_TMPDIR/ran"
		t1=$(now_ms)
		echo "# $w: $((t1 - t0))ms" >&3
		assert_equal "$status" 125
		assert_equal "$stderr" "leaserun: job: cannot open fault://$LOCKDIR: injected open stall"
		# -n: a short connect (2s), not the TTL of 20s; -w: its time.
		(( t1 - t0 < 4000 ))
	done
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
}

@test "a signal while the store opens ends the run at once, by that signal" {
	export LEASERUN_URL="fault://$LOCKDIR"
	echo open=stall >"$LOCKDIR/job.fault"
	for sig in TERM INT HUP; do
		(with_default_signals "$LEASERUN" -t 30s -w 30s job touch "$BATS_TEST_TMPDIR/ran") &
		pid=$!
		BG_PIDS=$pid
		sleep 0.3
		t0=$(now_ms)
		kill -s "$sig" "$pid"
		wait_rc "$pid"
		t1=$(now_ms)
		echo "# $sig: $((t1 - t0))ms, status $RC" >&3
		assert_equal "$RC" $((128 + $(kill -l "$sig")))
		(( t1 - t0 < 2000 ))
	done
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
}
