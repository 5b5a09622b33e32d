# redis-cluster-server.bash - a throwaway Redis Cluster for the tests:
# six redis-servers (three masters, three replicas) on free loopback
# ports, each with a cluster bus port of its own (also free: the
# default, port + 10000, does not exist above 55535), in one temporary
# directory, appendonly yes with appendfsync always, cluster-node-timeout
# 1s so that a failover takes a few seconds.
#
# cluster_start [tls|auth]  makes the cluster (redis-cli --cluster create) and
#                      waits until every node says cluster_state:ok with
#                      all 16384 slots covered.  Sets CL_DIR, CL_PORTS (the
#                      six client ports), CL_URL (redis+cluster:// with the
#                      first node as the only seed).  With "tls", every
#                      node speaks TLS alone (clients, bus, replication),
#                      CL_URL is rediss+cluster:// with cacert=, and
#                      CL_CLI_TLS holds redis-cli's TLS options
#                      (make_certs, tests/certs.bash, must be loaded).
#                      With "auth", every node requires the password
#                      CL_PASSWORD (requirepass, and masterauth for its
#                      replication), CL_URL carries it, and CL_CLI_AUTH
#                      holds redis-cli's options for it.
# cluster_stop         stops every node by its PID, removes the directory.
# ccli PORT ARGS...    redis-cli to the node on PORT.
# cluster_master_of KEY  the client port of the master of KEY's slot.
# cluster_other_master KEY  a live master's port that does not serve it.
# cluster_kill PORT    kill -9 of the node on PORT.
# cluster_node_run PORT  starts the node on PORT again (after a kill: as
#                      a replica, if a failover took its slots).
# cluster_wait_ok      waits until every live node says cluster_state:ok
#                      with every slot served.
#
# The server is $LR_REDIS_SERVER if set (tests/valkey.test sets it to
# valkey-server), else redis-server.  Meant to be sourced by bats files
# from setup_file/teardown_file, and by tests/chaos/run.

ccli() {
	local p=$1
	shift
	# shellcheck disable=SC2086 # options, in a path without blanks
	redis-cli ${CL_CLI_TLS:-} ${CL_CLI_AUTH:-} -h 127.0.0.1 -p "$p" "$@"
}

cluster_pid() { cat "$CL_DIR/$1/pid" 2>/dev/null; }

cluster_alive() {
	local pid
	pid=$(cluster_pid "$1")
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null &&
		[[ $(ps -o stat= -p "$pid" 2>/dev/null) != Z* ]]
}

# The node on port $1 says the cluster is whole.
cluster_node_ok() {
	local info
	info=$(ccli "$1" cluster info 2>/dev/null | tr -d '\r')
	grep -qx 'cluster_state:ok' <<<"$info" &&
		grep -qx 'cluster_slots_ok:16384' <<<"$info"
}

cluster_wait_ok() {
	local p ok
	for _ in $(seq 1 300); do
		ok=1
		for p in $CL_PORTS; do
			cluster_alive "$p" || continue
			cluster_node_ok "$p" || { ok=0; break; }
		done
		[ "$ok" = 1 ] && return 0
		sleep 0.1
	done
	echo "the cluster did not become ready" >&2
	return 1
}

cluster_node_run() {
	local p=$1
	(
		"${LR_REDIS_SERVER:-redis-server}" "$CL_DIR/$p/redis.conf" </dev/null >/dev/null 2>&1 3>&- &
		echo $! >"$CL_DIR/$p/pid"
	)
	for _ in $(seq 1 200); do
		[ "$(ccli "$p" ping 2>/dev/null)" = PONG ] && return 0
		sleep 0.05
	done
	echo "redis-server did not start on port $p" >&2
	cat "$CL_DIR/$p/redis.log" >&2
	return 1
}

# The lines of a node's configuration that make it listen on port $1:
# plain, or with CL_CLI_TLS set, TLS alone (certificates from make_certs
# in CL_DIR), the cluster bus and the replication too.
cluster_listen() {
	if [ -z "${CL_CLI_TLS:-}" ]; then
		echo "port $1"
		return
	fi
	cat <<EOF
port 0
tls-port $1
tls-cluster yes
tls-replication yes
tls-cert-file $CL_DIR/server.crt
tls-key-file $CL_DIR/server.key
tls-ca-cert-file $CL_DIR/ca.crt
tls-auth-clients no
EOF
}

# The lines that make a node require CL_PASSWORD, if set.
cluster_auth() {
	[ -z "${CL_PASSWORD:-}" ] && return
	printf 'requirepass %s\nmasterauth %s\n' "$CL_PASSWORD" "$CL_PASSWORD"
}

cluster_start() {
	local ports p bus i=0 hosts=()
	CL_DIR=$(mktemp -d "${TMPDIR:-/tmp}/leaserun-cluster.XXXXXX")
	CL_CLI_TLS=
	CL_CLI_AUTH=
	CL_PASSWORD=
	if [ "${1:-}" = tls ]; then
		make_certs "$CL_DIR"
		CL_CLI_TLS="--tls --cacert $CL_DIR/ca.crt"
	fi
	if [ "${1:-}" = auth ]; then
		CL_PASSWORD=Cl-Pw-$RANDOM$RANDOM
		CL_CLI_AUTH="-a $CL_PASSWORD --no-auth-warning"
	fi
	ports=$("$LR_BUILDDIR/tests/freeport" 12 | paste -sd' ')
	read -r -a ports <<<"$ports"
	CL_PORTS="${ports[*]:0:6}"
	for p in $CL_PORTS; do
		bus=${ports[$((6 + i))]}
		i=$((i + 1))
		mkdir "$CL_DIR/$p"
		cat >"$CL_DIR/$p/redis.conf" <<EOF
bind 127.0.0.1
$(cluster_listen "$p")
$(cluster_auth)
cluster-enabled yes
cluster-port $bus
cluster-config-file $CL_DIR/$p/nodes.conf
cluster-node-timeout 1000
dir $CL_DIR/$p
logfile $CL_DIR/$p/redis.log
daemonize no
save ""
appendonly yes
appendfsync always
EOF
		cluster_node_run "$p" || return 1
		hosts+=("127.0.0.1:$p")
	done
	# shellcheck disable=SC2086 # options
	redis-cli $CL_CLI_TLS $CL_CLI_AUTH --cluster create "${hosts[@]}" --cluster-replicas 1 \
		--cluster-yes >"$CL_DIR/create.log" 2>&1 ||
		{ cat "$CL_DIR/create.log" >&2; return 1; }
	cluster_wait_ok || return 1
	# Every node must know every other as well (the replicas' roles).
	for p in $CL_PORTS; do
		for _ in $(seq 1 100); do
			[ "$(ccli "$p" cluster nodes | grep -c connected)" = 6 ] && break
			sleep 0.1
		done
	done
	CL_URL="redis+cluster://127.0.0.1:${CL_PORTS%% *}"
	[ -z "$CL_CLI_TLS" ] ||
		CL_URL="rediss+cluster://127.0.0.1:${CL_PORTS%% *}?cacert=$CL_DIR/ca.crt"
	[ -z "$CL_PASSWORD" ] ||
		CL_URL="redis+cluster://:$CL_PASSWORD@127.0.0.1:${CL_PORTS%% *}"
	export CL_DIR CL_PORTS CL_URL CL_CLI_TLS CL_CLI_AUTH CL_PASSWORD
}

# A node that is up (a test may have killed one, the first among them).
cluster_any() {
	local p
	for p in $CL_PORTS; do
		cluster_alive "$p" && { echo "$p"; return 0; }
	done
	return 1
}

cluster_master_of() {
	local slot
	slot=$(ccli "$(cluster_any)" cluster keyslot "$1")
	for p in $CL_PORTS; do
		cluster_alive "$p" || continue
		ccli "$p" cluster nodes | tr -d '\r' | awk -v s="$slot" '
			$3 ~ /myself/ && $3 ~ /master/ {
				for (i = 9; i <= NF; i++) {
					n = split($i, r, "-")
					if (n == 1 && r[1] == s) f = 1
					if (n == 2 && r[1] <= s && s <= r[2]) f = 1
				}
			}
			END { exit !f }' && { echo "$p"; return 0; }
	done
	return 1
}

# The port of a live master that does not own KEY's slot.
cluster_other_master() {
	local own
	own=$(cluster_master_of "$1")
	for p in $CL_PORTS; do
		[ "$p" != "$own" ] && cluster_alive "$p" &&
			ccli "$p" role | head -1 | grep -qx master &&
			{ echo "$p"; return 0; }
	done
	return 1
}

cluster_kill() {
	local pid
	pid=$(cluster_pid "$1")
	kill -9 "$pid" 2>/dev/null || true
	for _ in $(seq 1 100); do
		cluster_alive "$1" || return 0
		sleep 0.05
	done
}

cluster_stop() {
	[ -n "${CL_DIR:-}" ] && [ -d "$CL_DIR" ] || return 0
	for p in $CL_PORTS; do
		cluster_kill "$p"
	done
	rm -rf "$CL_DIR"
}
