#!/usr/bin/env bats
# The scenarios of list.bash (--list, and the waiters --status counts) on
# every network store built, against its real server; each server is
# started once for the file.  A store this leaserun was built without is
# skipped, saying so.

load 'helpers'
load 'sem'
load 'list'
load 'redis-server'
load 'pg-server'
load 'etcd-server'
load 'zk-server'
load 'mysql-server'
load 'stores'

setup_file() { STORES='redis pg etcd zk mysql' stores_start; }
teardown_file() { stores_stop; }

# A loopback port that nothing listens on.
closed_port() { "$LR_BUILDDIR/tests/freeport"; }

@test "redis: nothing held: the header only, or [] (exit 0)" { use redis; list_nothing_held; }
@test "redis: an exclusive holder: name, host, pid, since, TTL left, fence, no waiters" { use redis; list_exclusive; }
@test "redis: two shared holders and 2 of 3 slots: a line per holder" { use redis; list_shared_and_slots; }
@test "redis: PATTERN is a glob over names, all by default" { use redis; list_pattern; }
@test "redis: a waiting run counts in WAITERS and in --status" { use redis; list_waiters; }
@test "redis: a run waiting with -v says whom it waits behind, and again when the holder changes" { use redis; list_waiting_says; }
@test "redis: a server that does not answer: 125, one line" { use redis; list_unreachable "redis://127.0.0.1:$(closed_port)"; }

@test "redis: 1000 leases list in pages (SCAN), each once" {
	use redis
	local i
	for i in $(seq 1000); do
		echo "SET leaserun:{$N-$i} \"tok $i 1 1 h\" PX 60000"
		echo "SET leaserun:fence:{$N-$i} $i"
	done | rcli >/dev/null
	run -0 rows "$N-*"
	assert_equal "${#lines[@]}" 1000
	assert_equal "$(rows "$N-*" | awk '{ print $1 }' | sort -u | wc -l)" 1000
	assert_equal "$(rows "$N-77" | awk '{ print $4, $8 }')" "1 77"
}

@test "pg: nothing held: the header only, or [] (exit 0)" { use pg; list_nothing_held; }
@test "pg: an exclusive holder: name, host, pid, since, no TTL, fence, no waiters" { use pg; list_exclusive; }
@test "pg: two shared holders and 2 of 3 slots: a line per holder" { use pg; list_shared_and_slots; }
@test "pg: PATTERN is a glob over names, all by default" { use pg; list_pattern; }
@test "pg: a waiting run counts in WAITERS and in --status, which names it first" { use pg; list_waiters first; }
@test "pg: a run waiting with -v says whom it waits behind, and again when the holder changes" { use pg; list_waiting_says; }
@test "pg: a server that does not answer: 125, one line" { use pg; list_unreachable "postgresql://u@127.0.0.1:$(closed_port)/db?connect_timeout=2"; }

@test "etcd: nothing held: the header only, or [] (exit 0)" { use etcd; list_nothing_held; }
@test "etcd: an exclusive holder: name, host, pid, since, TTL left, fence, no waiters" { use etcd; list_exclusive; }
@test "etcd: two shared holders and 2 of 3 slots: a line per holder" { use etcd; list_shared_and_slots; }
@test "etcd: PATTERN is a glob over names, all by default" { use etcd; list_pattern; }
@test "etcd: a waiting run counts in WAITERS and in --status, which names it first" { use etcd; list_waiters first; }
@test "etcd: a run waiting with -v says whom it waits behind, and again when the holder changes" { use etcd; list_waiting_says; }
@test "etcd: a server that does not answer: 125, one line" { use etcd; list_unreachable "etcd://127.0.0.1:$(closed_port)"; }

@test "zk: nothing held: the header only, or [] (exit 0)" { use zk; list_nothing_held; }
@test "zk: an exclusive holder: name, host, pid, since, no TTL (a session), fence, no waiters" { use zk; list_exclusive; }
@test "zk: two shared holders and 2 of 3 slots: a line per holder" { use zk; list_shared_and_slots; }
@test "zk: PATTERN is a glob over names, all by default" { use zk; list_pattern; }
@test "zk: a waiting run counts in WAITERS and in --status, which names it first" { use zk; list_waiters first; }
@test "zk: a run waiting with -v says whom it waits behind, and again when the holder changes" { use zk; list_waiting_says; }
@test "zk: a server that does not answer: 125, one line" { use zk; list_unreachable "zk://127.0.0.1:$(closed_port)"; }

@test "mysql: nothing held: the header only, or [] (exit 0)" { use mysql; list_nothing_held; }
@test "mysql: an exclusive holder: name, host, pid, since, no TTL, fence, waiters unknown" { use mysql; list_exclusive; }
@test "mysql: PATTERN is a glob over names, all by default" { use mysql; list_pattern; }
@test "mysql: a server that does not answer: 125, one line" { use mysql; list_unreachable "mysql://u@127.0.0.1:$(closed_port)/db"; }
