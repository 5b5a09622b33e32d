# sem.bash - shared by sem.bats (the file store, no server) and
# sem-stores.bats (the network stores against their real servers): the
# scenarios of --limit and --shared, the same on every store.  Each
# scenario runs in $D with the lease $N on the store that use() chose.

built() { [ -e "$LEASERUN_MODULE_DIR/$1.so" ]; }

setup() {
	BG_PIDS=
	D=$BATS_TEST_TMPDIR
	N=sem-$BATS_TEST_NUMBER
}

teardown() {
	kill_bg
}

# use STORE: the tests that follow talk to STORE's server; a store this
# leaserun was built without is skipped.
use() {
	case $1 in
	file)
		lockdir_setup
		return
		;;
	redis) LEASERUN_URL=${REDIS_URL:-} ;;
	pg) LEASERUN_URL=${PG_URL:-} ;;
	mysql) LEASERUN_URL=${MY_URL:-} ;;
	etcd) LEASERUN_URL=etcd://${LRE_EP:-} ;;
	zk) LEASERUN_URL=zk://${ZK_EP:-} ;;
	mysql) LEASERUN_URL=${MY_URL:-} ;;
	esac
	built "$1" || skip "this leaserun has no $1 store (configure --with-$1)"
	export LEASERUN_URL
}

# A command for sh -c that sleeps $2 seconds and then appends "start end
# fence slot" (ns since the epoch) to $1.
interval() {
	echo 's=$(date +%s%N); sleep '"$2"'; echo "$s $(date +%s%N) $LEASERUN_FENCE $LEASERUN_SLOT '"${3:-}"'" >> '"$1"
}

# The most intervals of LOG (lines "start end ...") that ran at once; an
# interval that ends when another starts does not overlap it.
max_overlap() {
	awk '{ print $1, 1; print $2, -1 }' "$1" | sort -k1,1n -k2,2n |
		awk '{ n += $2; if (n > m) m = n } END { print m + 0 }'
}

# No two lines of LOG share a fence.
fences_unique() {
	awk '{ print $3 }' "$1" | sort | uniq -d | awk '{ print "fence " $1 " granted twice"; bad = 1 } END { exit bad }'
}

# Every interval of LOG whose fifth field is "x" overlaps no other one.
exclusive_alone() {
	awk '{ s[NR] = $1; e[NR] = $2; m[NR] = $5 }
	END {
		for (i = 1; i <= NR; i++) if (m[i] == "x")
			for (j = 1; j <= NR; j++)
				if (j != i && s[i] < e[j] && s[j] < e[i]) {
					print "exclusive " i " overlaps " j; bad = 1
				}
		exit bad
	}' "$1"
}

# holder ID [options]: leaserun [options] $N with a command that writes
# "slot fence" to $D/ID.slot and runs until killed.  Sets HP[ID] to
# leaserun's pid once the command runs.
declare -gA HP
holder() {
	local id=$1
	shift
	"$LEASERUN" "$@" "$N" sh -c 'echo "$LEASERUN_SLOT $LEASERUN_FENCE" > "$0.tmp"; mv "$0.tmp" "$0"; exec sleep 60' \
		"$D/$id.slot" 2>"$D/$id.err" &
	HP[$id]=$!
	BG_PIDS="$BG_PIDS $!"
}

# waits until holder ID runs its command
running() { wait_until 20 exists "$D/$1.slot"; }

# three_holders [options]: holders a, b and c, running.
three_holders() {
	local id
	for id in a b c; do
		holder "$id" "$@"
		running "$id"
	done
}

# all_succeed PIDS...: waits for the background runs; fails, showing their
# stderr ($D/err), unless every one exited 0.
all_succeed() {
	local p fails=0
	BG_PIDS="$BG_PIDS $*"
	for p in "$@"; do wait "$p" || fails=$((fails + 1)); done
	[ "$fails" = 0 ] || { cat "$D/err"; return 1; }
}

# --- the scenarios -----------------------------------------------------------

# 20 contenders with --limit 3: never more than 3 commands at once, and 3
# at some point; each slot is held by one at a time, its fences rising;
# no fence is given twice.
twenty_contenders() {
	local log=$D/intervals pids=() k
	for _ in $(seq 20); do
		"$LEASERUN" -l 3 -w 120s "$N" sh -c "$(interval "$log" 0.3)" 2>>"$D/err" &
		pids+=($!)
	done
	all_succeed "${pids[@]}"
	assert_equal "$(wc -l < "$log")" 20
	run max_overlap "$log"
	echo "# at most $output at once" >&3
	assert_output 3
	for k in 0 1 2; do
		awk -v k="$k" '$4 == k { print $1, $2, $3 }' "$log" > "$D/slot$k"
		run check_intervals "$D/slot$k"
		assert_success
	done
	assert_equal "$(awk '$4 < 0 || $4 > 2' "$log" | wc -l)" 0
	fences_unique "$log"
}

# kill -9 of a holder of one of 3 slots: a waiter gets that slot within
# the TTL (3s) of the kill.
# stale_release [-l N]: a holder stopped (SIGSTOP) past its TTL loses
# its lease, or its slot, to a waiter.  Resumed, it stops its command
# (124) and gives back nothing that is now its successor's: a run with -n
# still finds every slot taken, and the successor holds on.  (A release
# that did not compare its token would delete the successor's key, and a
# third run would get in beside it.)  Only where a TTL ends a stopped
# holder's lease: not the file store, nor PostgreSQL, whose session keeps
# the lock while the server sees the connection.
stale_release() {
	holder a "$@" -t 2s
	running a
	# With a limit of 2, a second holder keeps the other slot.
	[ $# = 0 ] || { holder c "$@" -t 10s; running c; }
	kill -STOP "${HP[a]}"
	holder b "$@" -t 10s -w 20s
	running b
	kill -CONT "${HP[a]}"
	wait_rc "${HP[a]}"
	assert_equal "$RC" 124
	run lr -n "$@" "$N" true
	assert_failure 1
	alive "${HP[b]}"
	[ $# = 0 ] || alive "${HP[c]}"
}

kill_frees_slot() {
	local v t0 gap
	three_holders -l 3 -t 3s
	holder w -l 3 -t 3s -w 30s
	sleep 0.5
	[ ! -e "$D/w.slot" ]
	v=$(cut -d' ' -f1 "$D/b.slot")
	t0=$(now_ms)
	kill -9 "${HP[b]}"
	wait_until 20 exists "$D/w.slot"
	gap=$(($(stat -c %.3Y "$D/w.slot" | tr -d .) - t0))
	echo "# slot $v went to the waiter ${gap}ms after kill -9 (TTL 3000ms)" >&3
	assert_equal "$(cut -d' ' -f1 "$D/w.slot")" "$v"
	((gap < 3000 + 2500))
	# The others held on.
	alive "${HP[a]}"
	alive "${HP[c]}"
}

# Every run on a name must use the same limit; the record goes with the
# last holder.
limit_mismatch() {
	holder a -l 3 -t 5s
	running a
	run -125 "$LEASERUN" -n -l 2 "$N" true
	assert_output --partial "held with --limit 3 and this run asks for --limit 2"
	run -125 "$LEASERUN" -n "$N" true
	assert_output --partial "held with --limit 3 and this run asks for --limit 1"
	run -125 "$LEASERUN" -n -s "$N" true
	assert_output --partial "(--shared)"
	run -125 "$LEASERUN" -w 2s -l 2 "$N" true
	# The same limit is let in beside it.
	run "$LEASERUN" -n -l 3 "$N" sh -c 'echo "slot $LEASERUN_SLOT"'
	assert_success
	assert_output "slot 1"
	kill -TERM "${HP[a]}"
	wait "${HP[a]}" || true
	# Nobody holds it: another limit may take it, and is recorded.
	holder b -l 2 -t 5s
	running b
	run -125 "$LEASERUN" -n -l 3 "$N" true
	assert_output --partial "held with --limit 2 and this run asks for --limit 3"
	kill -TERM "${HP[b]}"
	wait "${HP[b]}" || true
	# A plain lease against a semaphore's runs, the other way round.
	holder c -t 5s
	running c
	run -125 "$LEASERUN" -n -l 3 "$N" true
	assert_output --partial "held with --limit 1 and this run asks for --limit 3"
}

# Shared holders overlap; an exclusive one never overlaps anything.
shared_exclusive() {
	local log=$D/intervals pids=()
	for _ in 1 2 3; do
		"$LEASERUN" -s -w 60s "$N" sh -c "$(interval "$log" 0.8 s)" 2>>"$D/err" &
		pids+=($!)
	done
	sleep 0.3
	for _ in 1 2; do
		"$LEASERUN" -x -w 60s "$N" sh -c "$(interval "$log" 0.3 x)" 2>>"$D/err" &
		pids+=($!)
	done
	sleep 0.2
	for _ in 1 2 3; do
		"$LEASERUN" -s -w 60s "$N" sh -c "$(interval "$log" 0.5 s)" 2>>"$D/err" &
		pids+=($!)
	done
	all_succeed "${pids[@]}"
	assert_equal "$(wc -l < "$log")" 8
	exclusive_alone "$log"
	grep ' s$' "$log" > "$D/shared"
	run max_overlap "$D/shared"
	echo "# up to $output shared holders at once" >&3
	((output >= 2))
	assert_equal "$(awk '$4 != 0' "$log" | wc -l)" 0
	fences_unique "$log"
}

# A waiting exclusive run is not passed by a shared run that comes after
# it, though the shared holder in front would let that one in.  The
# holder in front stays until the test lets it go, and the later shared
# run comes only once a -n shared run is refused: the exclusive one has
# queued, however long its connect took (a slow one under ASan let a
# fixed sleep pass it).
writer_first() {
	local t
	"$LEASERUN" -s "$N" sh -c 'until [ -e "$0/go" ]; do sleep 0.02; done; date +%s%N > "$0/a.end"' "$D" 2>"$D/a.err" &
	BG_PIDS="$BG_PIDS $!"
	wait_until 10 "$LEASERUN" --status "$N"
	"$LEASERUN" -w 30s "$N" sh -c 'date +%s%N > "$0/w.start"; sleep 0.3; date +%s%N > "$0/w.end"' "$D" 2>"$D/w.err" &
	BG_PIDS="$BG_PIDS $!"
	wait_until 20 shared_refused
	"$LEASERUN" -s -w 30s "$N" sh -c 'date +%s%N > "$0/b.start"' "$D" 2>"$D/b.err" &
	BG_PIDS="$BG_PIDS $!"
	sleep 1
	: > "$D/go"
	wait_until 20 exists "$D/b.start"
	t=$(( ($(cat "$D/b.start") - $(cat "$D/w.end")) / 1000000 ))
	echo "# the shared run started ${t}ms after the exclusive one ended" >&3
	(($(cat "$D/w.start") >= $(cat "$D/a.end")))
	((t >= 0))
}

# Succeeds when a -n shared run of N is refused as busy (1); any other
# end keeps wait_until trying (its error in $D/probe.err).
shared_refused() {
	local rc=0
	"$LEASERUN" -n -s "$N" true 2>>"$D/probe.err" || rc=$?
	((rc == 1))
}

# util-linux's flock tests (tests/ts/misc/flock), on the store: a shared
# holder; an exclusive -n with -E 123 gets 123; another shared run goes
# in; an explicit --exclusive gets 123 too; --timeout waits for the
# shared holder to finish.
flock_scenarios() {
	local start
	"$LEASERUN" --shared "$N" bash -c 'echo "Locking"; sleep 2; date +%s%N > "$0/end"; echo "Unlocking"' "$D" >"$D/gen" 2>&1 &
	BG_PIDS="$BG_PIDS $!"
	wait_until 10 grep -q Locking "$D/gen"
	run -123 "$LEASERUN" --nonblock --conflict-exit-code 123 "$N" echo "You will never see this!"
	refute_output --partial "never see"
	run -0 "$LEASERUN" --shared "$N" echo "Have shared lock"
	assert_output "Have shared lock"
	run --separate-stderr "$LEASERUN" --status --json "$N"
	assert_success
	jq -e '.holders | length == 1 and .[0].shared and .[0].slot == 0' <<<"$output"
	run -123 "$LEASERUN" --nonblock --exclusive --conflict-exit-code 123 "$N" echo "You will never see this!"
	refute_output --partial "never see"
	run -0 "$LEASERUN" --timeout 5 --conflict-exit-code 5 "$N" sh -c 'date +%s%N; echo "After timeout."'
	start=${lines[0]}
	assert_line "After timeout."
	((start >= $(cat "$D/end")))
	wait_until 10 grep -q Unlocking "$D/gen"
}

# --status lists every holder with its slot and fence; --break --slot K
# stops only the holder of slot K (124); --break stops the rest.
status_and_break() {
	local id s f rc victim second
	three_holders -l 3 -t 6s
	run --separate-stderr "$LEASERUN" --status --json "$N"
	assert_success
	echo "$output" >&3
	for id in a b c; do
		read -r s f < "$D/$id.slot"
		jq -e --argjson s "$s" --argjson f "$f" --argjson p "${HP[$id]}" \
			'.limit == 3 and (.holders | length == 3) and
			 any(.holders[]; .slot == $s and .fence == $f and .pid == $p and .shared == false)' <<<"$output"
	done
	jq -e '[.holders[].slot] == [0, 1, 2]' <<<"$output"
	run "$LEASERUN" --status "$N"
	assert_line "state:   held, 3 of 3 slots"
	assert_line --regexp "^slot 1:  $(hostname) pid [0-9]+, since .*, fence [0-9]+$"
	for id in a b c; do
		[ "$(cut -d' ' -f1 "$D/$id.slot")" = 1 ] && victim=$id
	done
	run "$LEASERUN" --break --slot 1 "$N"
	assert_success
	rc=0
	timeout 10 tail --pid="${HP[$victim]}" -f /dev/null
	wait "${HP[$victim]}" || rc=$?
	assert_equal "$rc" 124
	sleep 0.3
	for id in a b c; do
		[ "$id" = "$victim" ] || alive "${HP[$id]}"
	done
	# A second goes: the lone holder of a semaphore still shows as its
	# slot, of the 3.
	for id in a b c; do
		[ "$id" = "$victim" ] || { second=$id; break; }
	done
	run "$LEASERUN" --break --slot "$(cut -d' ' -f1 "$D/$second.slot")" "$N"
	assert_success
	rc=0
	timeout 10 tail --pid="${HP[$second]}" -f /dev/null
	wait "${HP[$second]}" || rc=$?
	assert_equal "$rc" 124
	run "$LEASERUN" --status "$N"
	assert_line "state:   held, 1 of 3 slots"
	assert_line --regexp "^slot [02]:  $(hostname) pid [0-9]+, since .*, fence [0-9]+$"
	run "$LEASERUN" --break "$N"
	assert_success
	for id in a b c; do
		[ "$id" = "$victim" ] || [ "$id" = "$second" ] && continue
		rc=0
		timeout 10 tail --pid="${HP[$id]}" -f /dev/null
		wait "${HP[$id]}" || rc=$?
		assert_equal "$rc" 124
	done
	run -1 "$LEASERUN" --status "$N"
}
