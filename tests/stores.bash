# stores.bash - the real servers of the network stores built, one each,
# for the bats files that run the same scenarios on every store
# (sem-stores.bats, list-stores.bats).  Load after the *-server.bash
# files; call stores_start from setup_file and stores_stop from
# teardown_file.  STORES names the stores to start (default: the ones
# whose servers every such file needs).

stores_start() {
	local s
	for s in ${STORES:-redis pg etcd zk}; do
		built "$s" || continue
		case $s in
		redis) redis_server_start ;;
		pg) pg_server_start ;;
		etcd)
			LRE_DIR=$(etcd_tmpdir)
			export LRE_DIR
			etcd_single "$LRE_DIR"
			export LRE_EP
			;;
		zk)
			ZK_DIR=$(mktemp -d)
			export ZK_DIR
			zk_standalone "$ZK_DIR"
			;;
		mysql) mysql_server_start ;;
		esac
	done
}

stores_stop() {
	if built redis && [ -n "${REDIS_DIR:-}" ]; then
		redis_server_stop
	fi
	if built pg && [ -n "${PG_DIR:-}" ]; then
		pg_server_stop
	fi
	if built etcd && [ -n "${LRE_DIR:-}" ]; then
		etcd_stop_all "$LRE_DIR"
		rm -rf "$LRE_DIR"
	fi
	if built zk && [ -n "${ZK_DIR:-}" ]; then
		zk_stop_all "$ZK_DIR"
		rm -rf "$ZK_DIR"
	fi
	if built mysql && [ -n "${MY_DIR:-}" ]; then
		mysql_server_stop
	fi
}
