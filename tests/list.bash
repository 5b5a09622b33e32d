# list.bash - shared by list.bats (the file store, no server) and
# list-stores.bats (the network stores against their real servers): the
# scenarios of --list, and of the waiters --status counts, the same on
# every store.  Loaded after sem.bash (use, holder, running).  Each
# scenario lists only the names that start with $N, its own.

# What a store keeps of a lease, as --list shows it: TTL_RE, the TTL
# column; W and WJ, the WAITERS column and JSON's waiters of a lease
# nobody waits for ("-" and null: the store cannot tell).
list_store() {
	W=0 WJ=0
	case ${LEASERUN_URL%%:*} in
	mysql | mariadb) TTL_RE='-' W='-' WJ=null ;;
	file | postgres* | zk) TTL_RE='-' ;;
	*) TTL_RE='[0-9][0-9.]*(ms|s)' ;;
	esac
}

# holds ID NAME [options]: holder ID (sem.bash) of the lease NAME, its
# command running.
holds() {
	local id=$1 N=$2
	shift 2
	holder "$id" "$@"
	running "$id"
}

# The lines of "leaserun --list ARGS..." below the header.
rows() { "$LEASERUN" --list "$@" | tail -n +2; }

# The fence holder ID's command was given.
fence_of() { awk '{ print $2 }' "$D/$1.slot"; }

list_nothing_held() {
	holds a "$N-other"
	run -0 "$LEASERUN" --list "$N-none*"
	assert_equal "${#lines[@]}" 1
	assert_line -n 0 --regexp '^NAME +MODE +HOLDER +PID +SINCE +AGE +TTL +FENCE +WAITERS$'
	run -0 "$LEASERUN" --list --json "$N-none*"
	assert_output '[]'
}

# One exclusive holder: one line, every column filled as the store keeps
# it; the same as JSON.
list_exclusive() {
	list_store
	holds a "$N-x" -t 30s
	run -0 "$LEASERUN" --list "$N*"
	assert_equal "${#lines[@]}" 2
	assert_line -n 1 --regexp "^$N-x +exclusive +$(hostname) +${HP[a]} +20[0-9-]+T[0-9:]+Z +[0-9][0-9.a-z]* +$TTL_RE +$(fence_of a) +$W$"
	run -0 "$LEASERUN" --list --json "$N*"
	run -0 jq -c '.[] | [.name, .mode, .slot, .limit, .host, .pid, .fence, .waiters, (.since_ms > 0), (.age_ms >= 0)]' <<<"$output"
	assert_output "[\"$N-x\",\"exclusive\",0,1,\"$(hostname)\",${HP[a]},$(fence_of a),$WJ,true,true]"
}

# Two shared holders: a line each; a semaphore with 2 of its 3 slots
# held: a line each, "slot K/3".
list_shared_and_slots() {
	holds a "$N-s" --shared
	holds b "$N-s" --shared
	holds c "$N-m" -l 3
	holds d "$N-m" -l 3
	run -0 rows "$N*"
	assert_equal "${#lines[@]}" 4
	assert_equal "$(rows "$N-s" | awk '$2 == "shared" { print $4 }' | sort | xargs)" \
		"$(printf '%s\n' "${HP[a]}" "${HP[b]}" | sort | xargs)"
	run -0 rows "$N-m"
	assert_line -n 0 --regexp "^$N-m +slot 0/3 +$(hostname) +${HP[c]} .* $(fence_of c) +0$"
	assert_line -n 1 --regexp "^$N-m +slot 1/3 +$(hostname) +${HP[d]} .* $(fence_of d) +0$"
	run -0 "$LEASERUN" --list --json "$N-m"
	run -0 jq -c '[.[] | [.mode, .slot, .limit]]' <<<"$output"
	assert_output '[["slot",0,3],["slot",1,3]]'
}

# PATTERN is a glob over names: only the names it matches.
list_pattern() {
	holds a "$N-a1"
	holds b "$N-b1"
	holds c "$N-a2"
	assert_equal "$(rows "$N-a*" | awk '{ print $1 }' | sort | xargs)" "$N-a1 $N-a2"
	assert_equal "$(rows "$N-b?" | awk '{ print $1 }' | xargs)" "$N-b1"
	assert_equal "$(rows "$N-[b]1" | awk '{ print $1 }' | xargs)" "$N-b1"
	# fnmatch's negation, which Redis's MATCH reads otherwise.
	assert_equal "$(rows "$N-[!a]1" | awk '{ print $1 }' | xargs)" "$N-b1"
	assert_equal "$(rows "$N" | wc -l)" 0
	# All by default.
	assert_equal "$(rows | awk -v n="$N-" 'index($1, n) == 1' | wc -l)" 3
}

# A run waiting behind the holder counts in WAITERS, and in --status.
list_waiters() {
	local w next=
	holds a "$N-w"
	"$LEASERUN" -w 60s "$N-w" true 2>/dev/null &
	w=$!
	BG_PIDS="$BG_PIDS $w"
	wait_until 15 waiting "$N-w" 1
	# A store that can tell which run waits first (list_waiters first)
	# names it, however many wait.
	[ "${1:-}" = first ] && next="$(hostname) pid $w"
	run -0 "$LEASERUN" --status "$N-w"
	assert_line "waiters: 1${next:+ (first: $next)}"
	run -0 "$LEASERUN" --status --json "$N-w"
	assert_equal "$(jq .waiters <<<"$output")" 1
	assert_equal "$(jq -r '.next // ""' <<<"$output")" "$next"
}

# waiting NAME N: --list shows N waiters on NAME.
waiting() { [ "$(rows "$1" | awk '{ print $NF }' | head -1)" = "$2" ]; }

# A store that does not answer: 125, one line; no header.
list_unreachable() {
	run -125 --separate-stderr "$LEASERUN" -U "$1" --list
	assert_equal "${#stderr_lines[@]}" 1
	assert_equal "$(grep -c . <<<"$output")" 0
}

# A run waiting with -v says whom it waits behind when it starts to wait,
# and again when the holder changes: B, queued before it, takes the lease
# when A lets it go.  The -v run is stopped meanwhile, so that it cannot
# take the lease itself between A and B (Redis's queue only orders the
# wake-ups: a retry that fires at that moment may win).
list_waiting_says() {
	local b w
	holds a "$N-v"
	"$LEASERUN" -w 60s "$N-v" sleep 30 2>/dev/null &
	b=$!
	BG_PIDS="$BG_PIDS $b"
	wait_until 15 waiting "$N-v" 1
	"$LEASERUN" -v -w 60s "$N-v" true 2>"$D/w.err" &
	w=$!
	BG_PIDS="$BG_PIDS $w"
	wait_until 15 grep -q "held by $(hostname) pid ${HP[a]}; waiting" "$D/w.err"
	kill -STOP "$w"
	kill "${HP[a]}"
	wait_until 15 held_by "$N-v" "$b"
	kill -CONT "$w"
	wait_until 15 grep -q "held by $(hostname) pid $b now; still waiting" "$D/w.err"
	assert_equal "$(grep -c waiting "$D/w.err")" 2
}

# held_by NAME PID: --list shows the lease NAME held by the run PID.
held_by() { [ "$(rows "$1" | awk '{ print $4 }' | head -1)" = "$2" ]; }
