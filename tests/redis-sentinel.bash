# redis-sentinel.bash - a throwaway Sentinel topology for the tests: a
# master, two replicas and three sentinels, all on free loopback ports in
# one temporary directory.  The servers are $LR_REDIS_SERVER if set
# (tests/valkey.test sets it to valkey-server), else redis-server.
#
# sentinel_start [tls]  starts it and waits until the replicas are in sync
#                       and every sentinel knows the master, both replicas
#                       and the other two sentinels.  The data nodes keep
#                       an append-only file (appendfsync always) and want
#                       the password $SN_DATA_PW; the sentinels want
#                       $SN_SENTINEL_PW.  The sentinels call a master down
#                       after 500ms.  With "tls", the data nodes and the
#                       sentinels also listen with TLS (certificates from
#                       make_certs in $SN_DIR) and replicate and monitor
#                       over it; the plain ports stay for the tests' own
#                       redis-cli.  Sets SN_DIR, SN_MASTER (the master's
#                       name), SN_URL (redis+sentinel://, or
#                       rediss+sentinel:// with "tls", with both
#                       passwords), SN_NODES (the data nodes' plain ports)
#                       and, with "tls", SN_TLS_PORTS (plain port -> TLS
#                       port, "P:T ...").
# sn_master_port        the plain port of the node the sentinels call
#                       master now.
# sn_node_pid PORT      the pid of the data node on plain port PORT.
# sn_cli PORT ARGS...   redis-cli on a data node.
# sn_wait_failover OLD  waits (bounded) until the sentinels name another
#                       master than the one on plain port OLD, and it says
#                       role:master.
# sn_rejoin PORT        makes the data node on plain port PORT (an old
#                       master) a replica of the master and waits until
#                       the topology is settled again.
# sn_revive PORT        starts the data node on PORT again (after kill -9)
#                       and rejoins it.
# sentinel_stop         stops every process by its pid and removes SN_DIR.
#
# Meant to be sourced by bats files, after helpers.bash.

SN_MASTER=lrmaster

sn_cli() {
	local p=$1
	shift
	REDISCLI_AUTH=$SN_DATA_PW redis-cli -h 127.0.0.1 -p "$p" "$@"
}

sn_sentinel_cli() {
	local p=$1
	shift
	REDISCLI_AUTH=$SN_SENTINEL_PW redis-cli -h 127.0.0.1 -p "$p" "$@"
}

sn_node_pid() { cat "$SN_DIR/n$1/pid" 2>/dev/null; }

# The port paired with $1 in SN_TLS_PORTS: a node's TLS port for its
# plain one and the other way round; without TLS, $1 itself.
sn_twin() {
	local pt
	for pt in ${SN_TLS_PORTS:-}; do
		case $1 in
		"${pt%%:*}") echo "${pt#*:}"; return ;;
		"${pt#*:}") echo "${pt%%:*}"; return ;;
		esac
	done
	echo "$1"
}

# Starts the process for config file $1 in its directory; keeps its pid.
sn_run() {
	local conf=$1 dir
	dir=$(dirname "$conf")
	(
		if [[ $conf == */sentinel.conf ]]; then
			"${LR_REDIS_SERVER:-redis-server}" "$conf" --sentinel </dev/null >/dev/null 2>&1 3>&- &
		else
			"${LR_REDIS_SERVER:-redis-server}" "$conf" </dev/null >/dev/null 2>&1 3>&- &
		fi
		echo $! >"$dir/pid"
	)
}

# The TLS lines of a configuration: listen on port $1 with TLS too.
sn_tls_conf() {
	[ -n "${SN_TLS:-}" ] || return 0
	cat <<EOF
tls-port $1
tls-cert-file $SN_DIR/server.crt
tls-key-file $SN_DIR/server.key
tls-ca-cert-file $SN_DIR/ca.crt
tls-auth-clients optional
tls-replication yes
EOF
}

sn_node_conf() {
	local p=$1 t=$2 master=${3:-}
	mkdir -p "$SN_DIR/n$p"
	{
		cat <<EOF
bind 127.0.0.1
port $p
dir $SN_DIR/n$p
logfile $SN_DIR/n$p/redis.log
daemonize no
save ""
appendonly yes
appendfsync always
repl-diskless-sync-delay 0
requirepass $SN_DATA_PW
masterauth $SN_DATA_PW
EOF
		sn_tls_conf "$t"
		[ -z "$master" ] || echo "replicaof 127.0.0.1 $master"
	} >"$SN_DIR/n$p/redis.conf"
}

sn_sentinel_conf() {
	local p=$1 t=$2 mp=$3
	mkdir -p "$SN_DIR/s$p"
	{
		cat <<EOF
bind 127.0.0.1
port $p
dir $SN_DIR/s$p
logfile $SN_DIR/s$p/sentinel.log
daemonize no
requirepass $SN_SENTINEL_PW
sentinel sentinel-pass $SN_SENTINEL_PW
sentinel monitor $SN_MASTER 127.0.0.1 $mp 2
sentinel down-after-milliseconds $SN_MASTER 500
sentinel failover-timeout $SN_MASTER 3000
sentinel parallel-syncs $SN_MASTER 2
sentinel auth-pass $SN_MASTER $SN_DATA_PW
EOF
		sn_tls_conf "$t"
	} >"$SN_DIR/s$p/sentinel.conf"
}

# Is the topology settled: the replicas of the master the sentinels name
# in sync, and each sentinel knows the master, two replicas and two other
# sentinels?
sn_settled() {
	local p m
	m=$(sn_master_port) || return 1
	for p in $SN_NODES; do
		[ "$p" = "$m" ] ||
			sn_cli "$p" info replication 2>/dev/null |
			grep -q '^master_link_status:up' || return 1
	done
	for p in $SN_SENTINELS; do
		m=$(sn_sentinel_cli "$p" sentinel master "$SN_MASTER" 2>/dev/null | tr -d '\r' |
			paste -sd' ')
		[[ " $m " == *" num-slaves 2 "* && " $m " == *" num-other-sentinels 2 "* ]] ||
			return 1
	done
}

sentinel_start() {
	local p t i ports url_hosts=
	SN_TLS=${1:-}
	SN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/leaserun-sentinel.XXXXXX")
	SN_DATA_PW="sn-Data-$$-pw"
	SN_SENTINEL_PW="sn-Sentinel-$$-pw"
	[ -z "$SN_TLS" ] || make_certs "$SN_DIR"
	mapfile -t ports < <("$LR_BUILDDIR/tests/freeport" 12)
	# Data nodes: plain ports 0-2 (TLS 6-8); sentinels: 3-5 (TLS 9-11).
	SN_NODES="${ports[*]:0:3}"
	SN_SENTINELS="${ports[*]:3:3}"
	SN_TLS_PORTS=
	if [ -n "$SN_TLS" ]; then
		for i in 0 1 2 3 4 5; do
			SN_TLS_PORTS+="${ports[$i]}:${ports[$((i + 6))]} "
		done
	fi
	for i in 0 1 2; do
		p=${ports[$i]}
		t=${ports[$((i + 6))]}
		if ((i == 0)); then
			sn_node_conf "$p" "$t"
		elif [ -n "$SN_TLS" ]; then
			sn_node_conf "$p" "$t" "${ports[6]}"
		else
			sn_node_conf "$p" "$t" "${ports[0]}"
		fi
		sn_run "$SN_DIR/n$p/redis.conf"
	done
	for i in 3 4 5; do
		p=${ports[$i]}
		t=${ports[$((i + 6))]}
		sn_sentinel_conf "$p" "$t" "$([ -n "$SN_TLS" ] && echo "${ports[6]}" || echo "${ports[0]}")"
		sn_run "$SN_DIR/s$p/sentinel.conf"
		url_hosts+="${url_hosts:+,}127.0.0.1:$([ -n "$SN_TLS" ] && echo "$t" || echo "$p")"
	done
	if [ -n "$SN_TLS" ]; then
		SN_URL="rediss+sentinel://:$SN_DATA_PW@$url_hosts/$SN_MASTER?sentinel_password=$SN_SENTINEL_PW&cacert=$SN_DIR/ca.crt"
	else
		SN_URL="redis+sentinel://:$SN_DATA_PW@$url_hosts/$SN_MASTER?sentinel_password=$SN_SENTINEL_PW"
	fi
	export SN_DIR SN_DATA_PW SN_SENTINEL_PW SN_NODES SN_SENTINELS SN_TLS \
		SN_TLS_PORTS SN_URL
	# Sentinels find each other through hello messages every 2s.
	wait_until 30 sn_settled || {
		tail -n 20 "$SN_DIR"/*/*.log >&2
		return 1
	}
}

sn_master_port() {
	local p a
	for p in $SN_SENTINELS; do
		a=$(sn_sentinel_cli "$p" sentinel get-master-addr-by-name "$SN_MASTER" 2>/dev/null |
			sed -n 2p | tr -d '\r')
		[ -n "$a" ] && { sn_twin "$a"; return 0; }
	done
	return 1
}

# Does every sentinel name a master other than $1 that says it is one?
sn_moved() {
	local p a
	for p in $SN_SENTINELS; do
		a=$(sn_sentinel_cli "$p" sentinel get-master-addr-by-name "$SN_MASTER" 2>/dev/null |
			sed -n 2p | tr -d '\r')
		a=$(sn_twin "$a")
		[ -n "$a" ] && [ "$a" != "$1" ] || return 1
	done
	sn_cli "$a" info replication 2>/dev/null | grep -q '^role:master'
}

sn_wait_failover() {
	wait_until 30 sn_moved "$1"
}

# (Sentinel would make it a replica of the new master too, but only at
# its next look, up to 10s later; an operator does it at once.)
sn_rejoin() {
	local m
	m=$(sn_master_port)
	sn_cli "$1" replicaof 127.0.0.1 "$(sn_twin "$m")" >/dev/null
	wait_until 30 sn_settled
}

sn_revive() {
	sn_run "$SN_DIR/n$1/redis.conf"
	wait_until 10 sh -c "REDISCLI_AUTH='$SN_DATA_PW' redis-cli -p $1 ping 2>/dev/null | grep -q PONG"
	sn_rejoin "$1"
}

sentinel_stop() {
	local f pid
	[ -n "${SN_DIR:-}" ] && [ -d "$SN_DIR" ] || return 0
	for f in "$SN_DIR"/*/pid; do
		pid=$(cat "$f" 2>/dev/null) || continue
		kill -CONT "$pid" 2>/dev/null || true
		kill -9 "$pid" 2>/dev/null || true
	done
	rm -rf "$SN_DIR"
}
