#!/usr/bin/env bats
# The scenarios of sem.bash (--limit and --shared) on every network store,
# against its real server; each server is started once for the file.  A
# store this leaserun was built without is skipped, saying so.

load 'helpers'
load 'sem'
load 'redis-server'
load 'pg-server'
load 'mysql-server'
load 'etcd-server'
load 'zk-server'
load 'stores'

setup_file() { STORES='redis pg mysql etcd zk' stores_start; }
teardown_file() { stores_stop; }

@test "redis: 20 contenders with --limit 3 run at most 3 at once, and 3" { use redis; twenty_contenders; }
@test "redis: kill -9 of a holder frees its slot within the TTL" { use redis; kill_frees_slot; }
@test "redis: a holder stopped past its TTL, resumed, leaves its successor's lease alone" { use redis; stale_release; }
@test "redis: the same with --limit 2: it leaves its successor's slot alone" { use redis; stale_release -l 2; }
@test "redis: a run with another limit than the holders' is refused (125)" { use redis; limit_mismatch; }
@test "redis: shared holders overlap, an exclusive one overlaps nothing" { use redis; shared_exclusive; }
@test "redis: a waiting exclusive run is not passed by later shared ones" { use redis; writer_first; }
@test "redis: util-linux's flock scenarios" { use redis; flock_scenarios; }
@test "redis: --status lists the slots, --break --slot stops one" { use redis; status_and_break; }

# The keys leaserun-redis(7) names for shared holders and slots, as it
# prints them: Pholder:{NAME}:TOKEN, ...
man_multi_keys() {
	mandoc -T ascii "$LR_SRCDIR/man/leaserun-redis.7" | sed 's/.\x08//g' |
		sed -n '/Shared holders and semaphores have keys of their own/,/Their waiters queue/p' |
		sed -n 's/^ *\(P[^ ]*{NAME}[^ ]*\)$/\1/p'
}

@test "redis: the keys the man page names for slots and shared holders are the ones they use" {
	use redis
	local k p keys=()
	mapfile -t keys < <(man_multi_keys)
	printf '# %s\n' "${keys[@]}" >&3
	assert_equal "${#keys[@]}" 4
	holder a -l 2 -t 5s
	running a
	for k in "${keys[@]}"; do
		p=leaserun:${k#P}
		p=${p//\{NAME\}/\{$N\}}
		p=${p//TOKEN/*}
		p=${p//K/*}
		[ -n "$(rcli --scan --pattern "$p")" ] || fail "no key $p"
	done
	kill -TERM "${HP[a]}"
	wait "${HP[a]}" || true
	# The last holder gone, nothing of them is left but the fence
	# counter and the release's done mark (which expires).
	left=$(rcli --scan --pattern "leaserun:*{$N}*" |
		grep -Ev '^leaserun:(fence|done):' || true)
	[ -z "$left" ] || fail "left behind: $left"
}

@test "pg: 20 contenders with --limit 3 run at most 3 at once, and 3" { use pg; twenty_contenders; }
@test "pg: kill -9 of a holder frees its slot within the TTL" { use pg; kill_frees_slot; }
@test "pg: a run with another limit than the holders' is refused (125)" { use pg; limit_mismatch; }
@test "pg: shared holders overlap, an exclusive one overlaps nothing" { use pg; shared_exclusive; }
@test "pg: a waiting exclusive run is not passed by later shared ones" { use pg; writer_first; }
@test "pg: util-linux's flock scenarios" { use pg; flock_scenarios; }
@test "pg: --status lists the slots, --break --slot stops one" { use pg; status_and_break; }

@test "mysql: 20 contenders with --limit 3 run at most 3 at once, and 3" { use mysql; twenty_contenders; }
@test "mysql: kill -9 of a holder frees its slot within the TTL" { use mysql; kill_frees_slot; }
@test "mysql: a holder stopped past its TTL, resumed, leaves its successor's lease alone" { use mysql; stale_release; }
@test "mysql: the same with --limit 2: it leaves its successor's slot alone" { use mysql; stale_release -l 2; }
@test "mysql: a run with another limit than the holders' is refused (125)" { use mysql; limit_mismatch; }
@test "mysql: shared holders overlap, an exclusive one overlaps nothing" { use mysql; shared_exclusive; }
@test "mysql: a waiting exclusive run is not passed by later shared ones" { use mysql; writer_first; }
@test "mysql: util-linux's flock scenarios" { use mysql; flock_scenarios; }
@test "mysql: --status lists the slots, --break --slot stops one" { use mysql; status_and_break; }

@test "etcd: 20 contenders with --limit 3 run at most 3 at once, and 3" { use etcd; twenty_contenders; }
@test "etcd: kill -9 of a holder frees its slot within the TTL" { use etcd; kill_frees_slot; }
@test "etcd: a holder stopped past its TTL, resumed, leaves its successor's lease alone" { use etcd; stale_release; }
@test "etcd: the same with --limit 2: it leaves its successor's slot alone" { use etcd; stale_release -l 2; }
@test "etcd: a run with another limit than the holders' is refused (125)" { use etcd; limit_mismatch; }
@test "etcd: shared holders overlap, an exclusive one overlaps nothing" { use etcd; shared_exclusive; }
@test "etcd: a waiting exclusive run is not passed by later shared ones" { use etcd; writer_first; }
@test "etcd: util-linux's flock scenarios" { use etcd; flock_scenarios; }
@test "etcd: --status lists the slots, --break --slot stops one" { use etcd; status_and_break; }

@test "zk: 20 contenders with --limit 3 run at most 3 at once, and 3" { use zk; twenty_contenders; }
@test "zk: kill -9 of a holder frees its slot within the TTL" { use zk; kill_frees_slot; }
@test "zk: a holder stopped past its TTL, resumed, leaves its successor's lease alone" { use zk; stale_release; }
@test "zk: the same with --limit 2: it leaves its successor's slot alone" { use zk; stale_release -l 2; }
@test "zk: a run with another limit than the holders' is refused (125)" { use zk; limit_mismatch; }
@test "zk: shared holders overlap, an exclusive one overlaps nothing" { use zk; shared_exclusive; }
@test "zk: a waiting exclusive run is not passed by later shared ones" { use zk; writer_first; }
@test "zk: util-linux's flock scenarios" { use zk; flock_scenarios; }
@test "zk: --status lists the slots, --break --slot stops one" { use zk; status_and_break; }
