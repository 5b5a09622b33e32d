# tests/etcd-server.bash - start and stop real etcd servers for the tests.
#
# Every member runs on free loopback ports in a directory of its own and is
# stopped by PID.  Readiness is "etcdctl endpoint health", in a bounded loop.
#
#   etcd_tmpdir                a new directory for data (tmpfs if there)
#   etcd_start DIR NAME CLIENT_PORT PEER_PORT CLUSTER [new|existing]
#   etcd_restart DIR NAME      start NAME again with the same data and ports
#   etcd_wait_healthy DIR NAME
#   etcd_stop DIR NAME         TERM, then KILL if it does not go
#   etcd_kill DIR NAME         kill -9
#   etcd_stop_all DIR
#   etcd_single DIR            one member; sets LRE_EP (host:port)
#   etcd_cluster DIR N         N members; sets LRE_EPS (a,b,c) and
#                              LRE_NAMES
#   etcd_leader DIR            prints the name of the current leader
#
# LRE_ARGS, if set, adds options to every member started (word-split);
# LRE_SCHEME=https serves clients over TLS (give the certificates in
# LRE_ARGS, and the client's in ETCDCTL_CACERT/CERT/KEY for the probe).
# (Not ETCD_*: etcd reads those variables as flags.)

unset ETCDCTL_USER ETCDCTL_PASSWORD ETCDCTL_ENDPOINTS
export ETCDCTL_API=3

# A new directory for members' data: on tmpfs where there is one, so that
# another workload's disk flushes cannot stall etcd's fsyncs past the short
# TTLs the tests use.
etcd_tmpdir() {
	if [ -d /dev/shm ] && [ -w /dev/shm ]; then
		mktemp -d /dev/shm/leaserun-etcd.XXXXXX
	else
		mktemp -d
	fi
}

etcd_start() {
	local dir=$1 name=$2 cport=$3 pport=$4 cluster=$5 state=${6:-new}

	printf '%s\n' "$cport" "$pport" "$cluster" >"$dir/$name.conf"
	# In a subshell, so that it is no job of the test's shell (no "Killed"
	# notices, no wait on it).
	(
		# shellcheck disable=SC2086 # LRE_ARGS is a list of options
		etcd --name "$name" --data-dir "$dir/$name.data" \
			--listen-client-urls "${LRE_SCHEME:-http}://127.0.0.1:$cport" \
			--advertise-client-urls "${LRE_SCHEME:-http}://127.0.0.1:$cport" \
			--listen-peer-urls "http://127.0.0.1:$pport" \
			--initial-advertise-peer-urls "http://127.0.0.1:$pport" \
			--initial-cluster "$cluster" \
			--initial-cluster-state "$state" \
			--initial-cluster-token "leaserun-test-$$" \
			${LRE_ARGS:-} \
			</dev/null >>"$dir/$name.log" 2>&1 3>&- &
		echo $! >"$dir/$name.pid"
	)
}

etcd_restart() {
	local dir=$1 name=$2 c p cl

	{ read -r c; read -r p; read -r cl; } <"$dir/$name.conf"
	etcd_start "$dir" "$name" "$c" "$p" "$cl" existing
	etcd_wait_healthy "$dir" "$name"
}

etcd_ep() {
	echo "127.0.0.1:$(head -n1 "$1/$2.conf")"
}

etcd_wait_healthy() {
	local dir=$1 name=$2 ep i pid

	ep=$(etcd_ep "$dir" "$name")
	pid=$(cat "$dir/$name.pid")
	for i in $(seq 200); do
		if etcdctl --endpoints "$ep" --dial-timeout 1s \
			--command-timeout 2s endpoint health >/dev/null 2>&1; then
			return 0
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "etcd $name died; its log:" >&2
			tail -n 20 "$dir/$name.log" >&2
			return 1
		fi
		sleep 0.1
	done
	echo "etcd $name not healthy after 20s; its log:" >&2
	tail -n 20 "$dir/$name.log" >&2
	return 1
}

_etcd_gone() {
	local pid=$1 i

	for i in $(seq 100); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.05
	done
	return 1
}

etcd_stop() {
	local dir=$1 name=$2 pid

	[ -f "$dir/$name.pid" ] || return 0
	pid=$(cat "$dir/$name.pid")
	kill -CONT "$pid" 2>/dev/null || true
	kill "$pid" 2>/dev/null || true
	if ! _etcd_gone "$pid"; then
		kill -9 "$pid" 2>/dev/null || true
		_etcd_gone "$pid" || true
	fi
	rm -f "$dir/$name.pid"
}

etcd_kill() {
	local dir=$1 name=$2 pid

	pid=$(cat "$dir/$name.pid")
	kill -9 "$pid" 2>/dev/null || true
	_etcd_gone "$pid"
	rm -f "$dir/$name.pid"
}

etcd_stop_all() {
	local dir=$1 f

	[ -d "$dir" ] || return 0
	for f in "$dir"/*.pid; do
		[ -e "$f" ] || continue
		etcd_stop "$dir" "$(basename "$f" .pid)"
	done
}

etcd_single() {
	local dir=$1 ports

	read -r -d '' -a ports < <("$LR_BUILDDIR/tests/freeport" 2) || true
	etcd_start "$dir" e0 "${ports[0]}" "${ports[1]}" \
		"e0=http://127.0.0.1:${ports[1]}"
	etcd_wait_healthy "$dir" e0 || return 1
	# shellcheck disable=SC2034 # for the caller
	LRE_EP=127.0.0.1:${ports[0]}
}

etcd_cluster() {
	local dir=$1 n=$2 ports cluster="" i

	read -r -d '' -a ports < <("$LR_BUILDDIR/tests/freeport" $((2 * n))) || true
	for ((i = 0; i < n; i++)); do
		cluster+="${cluster:+,}c$i=http://127.0.0.1:${ports[2 * i + 1]}"
	done
	LRE_EPS=
	LRE_NAMES=
	for ((i = 0; i < n; i++)); do
		etcd_start "$dir" "c$i" "${ports[2 * i]}" "${ports[2 * i + 1]}" \
			"$cluster"
		LRE_EPS+="${LRE_EPS:+,}127.0.0.1:${ports[2 * i]}"
		LRE_NAMES+="${LRE_NAMES:+ }c$i"
	done
	for ((i = 0; i < n; i++)); do
		etcd_wait_healthy "$dir" "c$i" || return 1
	done
}

etcd_leader() {
	local dir=$1 name

	for name in $LRE_NAMES; do
		[ -f "$dir/$name.pid" ] || continue
		if etcdctl --endpoints "$(etcd_ep "$dir" "$name")" \
			endpoint status 2>/dev/null |
			awk -F', ' '$5 == "true" { ok = 1 } END { exit !ok }'; then
			echo "$name"
			return 0
		fi
	done
	return 1
}
