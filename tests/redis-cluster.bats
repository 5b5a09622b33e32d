#!/usr/bin/env bats
# The Redis store on a Redis Cluster (redis+cluster://): six real
# redis-servers, three masters and three replicas, on free loopback ports
# (tests/redis-cluster-server.bash), made once for the file.  The tests
# that kill a master or move a slot leave the cluster whole for the next
# one (a failover's new master serves the slot; a moved slot stays).

load 'helpers'
load 'certs'
load 'sem'
load 'list'
load 'redis-cluster-server'

setup_file() {
	[ -e "$LEASERUN_MODULE_DIR/redis.so" ] ||
		{ echo "no redis.so in $LEASERUN_MODULE_DIR" >&2; return 1; }
	cluster_start
}

teardown_file() {
	cluster_stop
}

setup() {
	BG_PIDS=
	D=$BATS_TEST_TMPDIR
	N=cl-$BATS_TEST_NUMBER
	export LEASERUN_URL=$CL_URL
}

teardown() {
	kill_bg
	# The TLS test's own cluster goes, whatever became of the test.
	if [ -n "${CL_CLI_TLS:-}" ]; then
		cluster_stop
		return
	fi
	# A node a test killed comes back (as a replica of the slot's new
	# master), so that the next tests have the whole cluster and its
	# first port, CL_URL's seed, answers.
	for p in $CL_PORTS; do
		cluster_alive "$p" || cluster_node_run "$p" || true
	done
	cluster_wait_ok || true
}

keyof() { echo "leaserun:{$1}"; }

# The node on port $1 has the lease $2's key.
held_on() { [ -n "$(ccli "$1" get "$(keyof "$2")")" ]; }

# A log line "START END FENCE" per run, for check_intervals.
job() { echo "s=\$(date +%s%N); sleep $1; echo \"\$s \$(date +%s%N) \$LEASERUN_FENCE\" >> '$D/log'"; }

# The seed URL for the node on port $1.
seed() { echo "redis+cluster://127.0.0.1:$1"; }

@test "every node, master or replica, serves as the only seed, and the lease lives on its slot's master" {
	own=$(cluster_master_of "$(keyof "$N")")
	for p in $CL_PORTS; do
		run --separate-stderr lr -U "$(seed "$p")" -w 20s "$N" sh -c \
			'echo "$LEASERUN_FENCE"; redis-cli -p "$0" pttl "leaserun:{$1}"' \
			"$own" "$N"
		assert_success
		assert_equal "${#lines[@]}" 2
		[ "${lines[0]}" -gt 0 ]
		# The key is there, on the master of its slot, with its TTL.
		[ "${lines[1]}" -gt 0 ]
		[ -z "$stderr" ]
	done
	[ "$(ccli "$own" exists "$(keyof "$N")")" = 0 ]
}

@test "a seed list whose first node is down: the next one answers" {
	dead=$("$LR_BUILDDIR/tests/freeport" 1)
	run lr -U "redis+cluster://127.0.0.1:$dead,127.0.0.1:${CL_PORTS##* }" -n "$N" true
	assert_success
}

@test "each key of a lease has the one hash tag {NAME}, so each script stays on one slot" {
	hold "$N" -t 20s -l 2
	own=$(cluster_master_of "$(keyof "$N")")
	slot=$(ccli "$own" cluster keyslot "$(keyof "$N")")
	keys=$(ccli "$own" --scan --pattern "leaserun:*")
	[ -n "$keys" ]
	for k in $keys; do
		[ "$(ccli "$own" cluster keyslot "$k")" = "$slot" ]
	done
	release "$N"
	assert_holder_rc 0
}

@test "redis:// at a cluster node that answers MOVED: one line that says to use redis+cluster://, 125" {
	other=$(cluster_other_master "$(keyof "$N")")
	run --separate-stderr lr -U "redis://127.0.0.1:$other" -w 5s "$N" touch "$D/ran"
	assert_equal "$status" 125
	assert_equal "${#stderr_lines[@]}" 1
	[[ $stderr == *"Redis Cluster node"*"use redis+cluster://"* ]]
	[ ! -e "$D/ran" ]
}

@test "a node that redirects to where no node can be (MOVED to port 99999, or to no host:port): 125, and one line that quotes it" {
	for m in badmoved nocolon; do
		rm -f "$D/port"
		python3 "$LR_SRCDIR/tests/hostile.py" redis "$m" "$D/port" &
		BG_PIDS="$BG_PIDS $!"
		wait_until 10 test -s "$D/port"
		LEASERUN_URL="redis+cluster://127.0.0.1:$(cat "$D/port")" \
			run -125 --separate-stderr lr -w 10 "$N" touch "$D/ran"
		echo "# $stderr" >&3
		[ "${#stderr_lines[@]}" -eq 1 ]
		[[ "$stderr" == *": a redirection to where? MOVED 1234 "* ]]
	done
	[ ! -e "$D/ran" ]
}

@test "a node that redirects without end (MOVED to itself, or ASK to itself behind ASKING too): waited out until -w, then 125 and one line" {
	local m t0 t1
	for m in selfmoved:"redirected more than 5 times (a slot is moving?)" \
		askloop:"the slot moved while we asked"; do
		rm -f "$D/port" "$D/port.evals"
		python3 "$LR_SRCDIR/tests/hostile.py" redis "${m%%:*}" "$D/port" &
		BG_PIDS="$BG_PIDS $!"
		wait_until 10 test -s "$D/port"
		t0=$(now_ms)
		LEASERUN_URL="redis+cluster://127.0.0.1:$(cat "$D/port")" \
			run -125 --separate-stderr lr -t 1s -w 5 "$N" touch "$D/ran"
		t1=$(now_ms)
		echo "# after $((t1 - t0))ms: $stderr" >&3
		[[ "${stderr_lines[-1]}" == *"acquire: ${m#*:}" ]]
		# Each attempt gives up within its second: what may heal is
		# tried again until the wait runs out.
		(( t1 - t0 >= 4000 ))
	done
	# A slot that moved while we asked is asked again within the
	# attempt, 100ms later (a resharding ends soon), not only at the
	# backoff of a busy lease: about 60 scripts in the 5s, not 16.
	echo "# $(wc -l <"$D/port.evals") scripts to the ASK loop" >&3
	(( $(wc -l <"$D/port.evals") >= 40 ))
	[ ! -e "$D/ran" ]
}

@test "a database other than 0 is refused with one line, 125" {
	for u in "$CL_URL/2" "$CL_URL?db=3"; do
		run --separate-stderr lr -U "$u" "$N" touch "$D/ran"
		assert_equal "$status" 125
		assert_equal "${#stderr_lines[@]}" 1
		[[ $stderr == *"one database"* ]]
	done
	[ ! -e "$D/ran" ]
	run lr -U "$CL_URL?db=0" -n "$N" true
	assert_success
}

@test "exclusion: -n exits 1 while another holds the lease; a waiter runs after it, with a higher fence" {
	hold "$N" -t 20s
	f1=$(cat "$D/$N.fence")
	run lr -n "$N" true
	assert_failure 1
	lr -w 20s "$N" sh -c 'echo "$LEASERUN_FENCE" > "$0"' "$D/w.fence" &
	w=$!
	BG_PIDS="$BG_PIDS $w"
	sleep 0.5
	[ ! -e "$D/w.fence" ]
	release "$N"
	assert_holder_rc 0
	wait_rc "$w"
	[ "$RC" = 0 ]
	[ "$(cat "$D/w.fence")" -gt "$f1" ]
}

@test "renewals go on past the TTL: a 1s lease held for 3s is still ours, exit 0" {
	hold "$N" -t 1s
	sleep 3
	[ "$(ccli "$(cluster_master_of "$(keyof "$N")")" get "$(keyof "$N")" |
		cut -d' ' -f2)" = "$(cat "$D/$N.fence")" ]
	release "$N"
	assert_holder_rc 0
}

@test "30 contenders through different seeds: no overlap, fences strictly increase" {
	local pids= i=0 p
	for i in $(seq 30); do
		p=$(echo $CL_PORTS | cut -d' ' -f$((i % 6 + 1)))
		"$LEASERUN" -U "$(seed "$p")" -w 120 "$N" sh -c "$(job 0.01)" &
		pids="$pids $!"
	done
	# shellcheck disable=SC2086 # pids
	all_exclusive "$D/log" 30 $pids
}

@test "--status names the holder and fence, --break frees the lease and the holder sees it at once, 124" {
	run lr --status "$N"
	assert_failure 1
	hold "$N" -t 30s
	run lr --status "$N"
	assert_success
	assert_output --partial "$(hostname) pid $HOLDER"
	assert_output --regexp "fence: +$(cat "$D/$N.fence")\$"
	t0=$(now_ms)
	run lr --break "$N"
	assert_success
	assert_holder_rc 124
	(( $(now_ms) - t0 < 3000 ))
}

@test "the acquired event names the master of the slot that granted the lease, reached through another seed" {
	own=$(cluster_master_of "$(keyof "$N")")
	other=$(cluster_other_master "$(keyof "$N")")
	run --separate-stderr lr -U "$(seed "$other")" -v --log-format json -n "$N" true
	assert_success
	assert_equal "$(jq -r 'select(.event == "acquired") | .node' <<<"$stderr")" "127.0.0.1:$own"
	run --separate-stderr lr -U "$(seed "$other")" -v -l 2 -n "$N-l" true
	assert_success
	own=$(cluster_master_of "$(keyof "$N-l")")
	[[ $stderr == *"acquired slot 0 of 2, fence "[0-9]*" on 127.0.0.1:$own"* ]]
}

@test "--list: nothing held: the header only, or [] (exit 0)" { list_nothing_held; }
@test "--list: an exclusive holder: name, host, pid, since, TTL left, fence, no waiters" { list_exclusive; }
@test "--list: two shared holders and 2 of 3 slots: a line per holder" { list_shared_and_slots; }
@test "--list: PATTERN is a glob over names, all by default" { list_pattern; }

# The names $N-1, $N-2, ... up to one whose slot each master serves;
# the ports of those masters in MASTERS.
names_on_every_master() {
	local i=0 p seen=
	NAMES=
	while [ "$(wc -w <<<"$seen")" -lt 3 ] && [ "$i" -lt 100 ]; do
		i=$((i + 1))
		p=$(cluster_master_of "$(keyof "$N-$i")")
		NAMES="$NAMES $N-$i"
		[[ " $seen " == *" $p "* ]] || seen="$seen $p"
	done
	MASTERS=$seen
	[ "$(wc -w <<<"$seen")" = 3 ]
}

@test "--list: holders whose names hash to each master are all listed, each once, through any seed" {
	names_on_every_master
	for n in $NAMES; do
		holds "$n" "$n" -t 30s
	done
	want=$(printf '%s
' $NAMES | sort | xargs)
	for p in $CL_PORTS; do
		assert_equal "$(rows -U "$(seed "$p")" "$N-*" | awk '{ print $1 }' | sort | xargs)" "$want"
	done
	run -0 "$LEASERUN" --list --json "$N-*"
	assert_equal "$(jq -r '.[].name' <<<"$output" | sort | xargs)" "$want"
	assert_equal "$(jq -r '.[] | "\(.name) \(.pid)"' <<<"$output" |
		while read -r n pid; do [ "$pid" = "${HP[$n]}" ] && echo ok; done | wc -l)" \
		"$(wc -w <<<"$NAMES")"
}

# A master with a replica that is connected: its failover can happen.
master_with_replica() {
	local p id
	for p in $CL_PORTS; do
		cluster_alive "$p" && ccli "$p" role | head -1 | grep -qx master || continue
		id=$(ccli "$p" cluster myid)
		ccli "$p" cluster nodes | grep " slave $id " | grep -q connected &&
			{ echo "$p"; return 0; }
	done
	return 1
}

@test "--list: a master killed (kill -9) before its failover: 125, one line that names it" {
	names_on_every_master
	for n in $NAMES; do
		holds "$n" "$n" -t 30s
	done
	dead=$(master_with_replica)
	live=$(for p in $CL_PORTS; do [ "$p" = "$dead" ] || echo "$p"; done | head -1)
	cluster_kill "$dead"
	run -125 --separate-stderr "$LEASERUN" -U "$(seed "$live")" --list "$N-*"
	assert_equal "${#stderr_lines[@]}" 1
	[[ $stderr == *":$dead"* ]]
	# The node comes back, as a replica once its replica took over.
	cluster_node_run "$dead"
}

@test "--limit 3: 20 contenders run at most 3 at once, and 3" { twenty_contenders; }
@test "--shared: shared holders overlap, an exclusive one overlaps nothing" { shared_exclusive; }
@test "--limit: --status lists the slots, --break --slot stops one" { status_and_break; }

@test "--once-per: a second run within the period does not run" {
	run lr --once-per 1m "$N" sh -c 'echo ran >> "$0"; echo "$LEASERUN_FENCE" > "$0.fence"' "$D/runs"
	assert_success
	run lr --once-per 1m -U "$(seed "${CL_PORTS##* }")" "$N" sh -c 'echo ran >> "$0"' "$D/runs"
	[ "$(wc -l <"$D/runs")" = 1 ]
	run lr --status "$N"
	assert_output --regexp "run: +started .* fence $(cat "$D/runs.fence")"
	assert_output --partial "next run allowed"
}

@test "failover: kill -9 of the slot's master with a holder and waiters: never two at once, fences grow, the waiters ride it out" {
	own=$(cluster_master_of "$(keyof "$N")")
	# Seeds that leave out the master: it is the one that dies.
	seeds=$(for p in $CL_PORTS; do [ "$p" = "$own" ] || printf '127.0.0.1:%s,' "$p"; done)
	url="redis+cluster://${seeds%,}"
	"$LEASERUN" -U "$url" -t 3s "$N" sh -c "$(job 2)" 2>"$D/h.err" &
	h=$!
	BG_PIDS="$BG_PIDS $h"
	wait_until 10 held_on "$own" "$N"
	pids=
	for i in 1 2 3; do
		"$LEASERUN" -U "$url" -t 3s -w 60s "$N" sh -c "$(job 0.2)" 2>"$D/w$i.err" &
		pids="$pids $!"
	done
	BG_PIDS="$BG_PIDS $pids"
	sleep 0.5
	cluster_kill "$own"
	wait_rc "$h"
	# Held throughout (renewed on the new master in time), or stopped
	# before its deadline.
	[ "$RC" = 0 ] || [ "$RC" = 124 ] || { cat "$D/h.err" >&3; false; }
	for p in $pids; do
		wait_rc "$p"
		[ "$RC" = 0 ] || { cat "$D"/w*.err >&3; false; }
	done
	run check_intervals "$D/log"
	assert_success
	[ "$(wc -l <"$D/log")" -ge 3 ]
	# The slot has a new master, which serves the next run.
	new=$(cluster_master_of "$(keyof "$N")")
	[ "$new" != "$own" ]
	run lr -U "$url" -n "$N" true
	assert_success
}

# The master of the key's slot moves the slot to port $2 by hand, as
# redis-cli --cluster reshard does: IMPORTING, MIGRATING, the keys one
# MIGRATE (slot_migrate), then the slot's new owner told to every master
# (slot_settle).  $3 seconds pass between the two, so that renewals
# meet ASK.
move_slot() {
	slot_migrate "$1" "$2"
	sleep "$3"
	slot_settle
}

slot_migrate() {
	local key=$1 to=$2 from fid keys
	from=$(cluster_master_of "$key")
	MV_SLOT=$(ccli "$from" cluster keyslot "$key")
	fid=$(ccli "$from" cluster myid)
	MV_TID=$(ccli "$to" cluster myid)
	ccli "$to" cluster setslot "$MV_SLOT" importing "$fid" >/dev/null
	ccli "$from" cluster setslot "$MV_SLOT" migrating "$MV_TID" >/dev/null
	keys=$(ccli "$from" cluster getkeysinslot "$MV_SLOT" 100)
	[ -n "$keys" ]
	# shellcheck disable=SC2086
	[ "$(ccli "$from" migrate 127.0.0.1 "$to" "" 0 5000 keys $keys)" = OK ]
}

slot_settle() {
	local p
	for p in $CL_PORTS; do
		cluster_alive "$p" && ccli "$p" role | head -1 | grep -qx master &&
			ccli "$p" cluster setslot "$MV_SLOT" node "$MV_TID" >/dev/null
	done
	return 0
}

@test "a slot migrated while a lease is held moves with it (ASK, then MOVED): still held, then released" {
	hold "$N" -t 900ms -v
	to=$(cluster_other_master "$(keyof "$N")")
	asking0=$(ccli "$to" info commandstats | tr -d '\r' | awk -F'[=,:]' '$1 == "cmdstat_asking" { print $3 }')
	move_slot "$(keyof "$N")" "$to" 1.5
	sleep 1.5
	[ "$(cluster_master_of "$(keyof "$N")")" = "$to" ]
	# Renewals met ASK while the slot moved, and went behind ASKING.
	asking=$(ccli "$to" info commandstats | tr -d '\r' | awk -F'[=,:]' '$1 == "cmdstat_asking" { print $3 }')
	(( ${asking:-0} > ${asking0:-0} ))
	[ "$(ccli "$to" get "$(keyof "$N")" | cut -d' ' -f2)" = "$(cat "$D/$N.fence")" ]
	# The log says where the renewals went: the new master, once.
	grep -q "renewed in [0-9]*ms, [0-9]*ms left; now on 127.0.0.1:$to$" "$D/$N.err"
	release "$N"
	assert_holder_rc 0
	[ "$(ccli "$to" exists "$(keyof "$N")")" = 0 ]
	[ "$(grep -c "; now on " "$D/$N.err")" = 1 ]
	run lr -n "$N" sh -c 'echo "$LEASERUN_FENCE" > "$0"' "$D/f2"
	assert_success
	[ "$(cat "$D/f2")" -gt "$(cat "$D/$N.fence")" ]
}

# Two names, on two masters: $LOW on the master that serves the lowest
# slots (LOW_MASTER), $HIGH elsewhere, in a higher slot than $LOW's.
low_and_high() {
	local i slot=() low=1
	for i in $(seq 1 200); do
		slot[i]=$(ccli "$(cluster_any)" cluster keyslot "$(keyof "$N-$i")")
		((slot[i] < slot[low])) && low=$i
	done
	LOW=$N-$low HIGH=
	LOW_MASTER=$(cluster_master_of "$(keyof "$LOW")")
	for i in $(seq 1 200); do
		((slot[i] > slot[low])) &&
			[ "$(cluster_master_of "$(keyof "$N-$i")")" != "$LOW_MASTER" ] &&
			{ HIGH=$N-$i; break; }
	done
	[ -n "$HIGH" ]
}

@test "--list during a resharding: a slot's keys moved, its owner not yet told: every holder listed once" {
	low_and_high
	holds "$LOW" "$LOW" -t 30s
	holds "$HIGH" "$HIGH" -t 30s
	# HIGH's keys now live on LOW's master, which SCAN finds them on,
	# in a page with LOW's; the slot is still HIGH's old master's, who
	# answers ASK.  A script of the page must keep to one slot: on
	# LOW's master, without ASKING, HIGH's keys are not its own yet.
	slot_migrate "$(keyof "$HIGH")" "$LOW_MASTER"
	run "$LEASERUN" --list --json "$N-*"
	slot_settle
	assert_success
	assert_equal "$(jq -r '.[] | "\(.name) \(.pid)"' <<<"$output" | sort | xargs)" \
		"$(printf '%s\n' "$LOW ${HP[$LOW]}" "$HIGH ${HP[$HIGH]}" | sort | xargs)"
}

@test "rediss+cluster://: a TLS-only cluster, through a seed that is not the slot's master (MOVED over TLS), with a waiter" {
	[ -e "$LEASERUN_MODULE_DIR/redis-tls.so" ] || skip "no redis-tls.so (configure --with-openssl)"
	# A cluster of its own for this test (this shell's CL_ variables).
	cluster_start tls
	other=$(cluster_other_master "$(keyof "$N")")
	url="rediss+cluster://127.0.0.1:$other?cacert=$CL_DIR/ca.crt"
	hold "$N" -U "$url" -t 2s
	lr -U "$url" -w 20s "$N" sh -c 'echo "$LEASERUN_FENCE" > "$0"' "$D/w.fence" &
	w=$!
	BG_PIDS="$BG_PIDS $w"
	sleep 2.5
	[ ! -e "$D/w.fence" ]
	release "$N"
	assert_holder_rc 0
	wait_rc "$w"
	[ "$RC" = 0 ]
	[ "$(cat "$D/w.fence")" -gt "$(cat "$D/$N.fence")" ]
	# A plain URL to a TLS port is no cluster at all.
	run lr -U "redis+cluster://127.0.0.1:$other" -n "$N" true
	assert_failure 125
}
