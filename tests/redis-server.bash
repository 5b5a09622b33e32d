# redis-server.bash - a throwaway redis-server for the redis tests.
#
# redis_server_start [tls]
#                      redis-server in a temporary directory on a free
#                      loopback port and a Unix socket, appendonly yes
#                      with appendfsync always (what leaserun-redis(7) asks
#                      for), requirepass for the default user and an ACL user
#                      "lr" with the least rights leaserun needs.  Sets
#                      REDIS_DIR, REDIS_PORT, REDIS_SOCK,
#                      REDIS_PASSWORD, LR_PASSWORD, REDIS_URL (default
#                      user, with the password), REDIS_URL_NOPW,
#                      REDIS_ACL_URL (user lr).  The PID is kept in
#                      $REDIS_DIR/pid (redis_pid), since a restart in one
#                      test changes it for the tests after it.  With
#                      "tls", it also listens with TLS on REDIS_TLS_PORT
#                      (certificates from make_certs in REDIS_DIR; client
#                      certificates optional), and REDIS_TLS_URL is
#                      REDIS_URL's rediss:// twin with cacert=.
#                      REDIS_LR_PORT is the port leaserun's URL names.
# redis_server_restart stops it and starts it again on the same port:
#                      with persistence off, every key is gone.
# redis_persist on|off appendonly yes with appendfsync always, or no
#                      persistence at all, in the running server and in
#                      its configuration for the next start.
# redis_server_stop    stops it by its PID and removes the directory.
# rcli ARGS...         redis-cli as the default user.
# calls_of CMD         the calls of CMD in INFO commandstats on stdin (0:
#                      none yet).
#
# The server is $LR_REDIS_SERVER if set (tests/valkey.test sets it to
# valkey-server), else redis-server.
#
# Meant to be sourced by bats files from setup_file/teardown_file.

rcli() {
	REDISCLI_AUTH=$REDIS_PASSWORD redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"
}

calls_of() {
	tr -d '\r' | awk -F'[=,:]' -v cmd="cmdstat_$1" \
		'$1 == cmd { n = $3 } END { print n + 0 }'
}

# Waits (bounded) until the server answers PING.
redis_wait_ready() {
	for _ in $(seq 1 200); do
		if [ "$(rcli ping 2>/dev/null)" = PONG ]; then
			return 0
		fi
		if ! redis_running "$(redis_pid)"; then
			break
		fi
		sleep 0.05
	done
	echo "${LR_REDIS_SERVER:-redis-server} did not become ready on port $REDIS_PORT" >&2
	cat "$REDIS_DIR/redis.log" >&2
	return 1
}

# Is pid $1 a live process (not a zombie)?
redis_running() {
	local st
	st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	[[ $st != Z* ]]
}

redis_pid() {
	cat "$REDIS_DIR/pid" 2>/dev/null
}

redis_server_run() {
	# In a subshell, so that the server is nobody's child in a test (it
	# is reaped when it dies); closing fd 3 keeps bats from waiting for
	# it.
	(
		"${LR_REDIS_SERVER:-redis-server}" "$REDIS_DIR/redis.conf" </dev/null >/dev/null 2>&1 3>&- &
		echo $! >"$REDIS_DIR/pid"
	)
	redis_wait_ready
}

redis_server_start() {
	if ! command -v "${LR_REDIS_SERVER:-redis-server}" >/dev/null; then
		echo "no ${LR_REDIS_SERVER:-redis-server} (install its package)" >&2
		return 1
	fi
	REDIS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/leaserun-redis.XXXXXX")
	read -r REDIS_PORT REDIS_TLS_PORT < <("$LR_BUILDDIR/tests/freeport" 2 | paste -sd' ')
	REDIS_LR_PORT=$REDIS_PORT
	REDIS_SOCK=$REDIS_DIR/redis.sock
	REDIS_PASSWORD="rd-Secret-$$-pw"
	LR_PASSWORD="lr-Acl-$$-pw"
	cat >"$REDIS_DIR/redis.conf" <<EOF
bind 127.0.0.1
port $REDIS_PORT
unixsocket $REDIS_SOCK
unixsocketperm 700
dir $REDIS_DIR
logfile $REDIS_DIR/redis.log
daemonize no
save ""
appendonly yes
appendfsync always
databases 16
requirepass $REDIS_PASSWORD
user lr on >$LR_PASSWORD ~leaserun:* &leaserun:* &__redis__:invalidate &__keyspace@*__:leaserun:* +@all -@dangerous +info
EOF
	if [ "${1:-}" = tls ]; then
		make_certs "$REDIS_DIR"
		cat >>"$REDIS_DIR/redis.conf" <<EOF
tls-port $REDIS_TLS_PORT
tls-cert-file $REDIS_DIR/server.crt
tls-key-file $REDIS_DIR/server.key
tls-ca-cert-file $REDIS_DIR/ca.crt
tls-auth-clients optional
EOF
		REDIS_LR_PORT=$REDIS_TLS_PORT
	fi
	REDIS_URL="redis://:$REDIS_PASSWORD@127.0.0.1:$REDIS_PORT"
	REDIS_URL_NOPW="redis://127.0.0.1:$REDIS_PORT"
	REDIS_ACL_URL="redis://lr:$LR_PASSWORD@127.0.0.1:$REDIS_PORT"
	REDIS_TLS_URL="rediss://:$REDIS_PASSWORD@127.0.0.1:$REDIS_TLS_PORT?cacert=$REDIS_DIR/ca.crt"
	export REDIS_DIR REDIS_PORT REDIS_SOCK REDIS_PASSWORD LR_PASSWORD \
		REDIS_URL REDIS_URL_NOPW REDIS_ACL_URL REDIS_TLS_PORT \
		REDIS_TLS_URL REDIS_LR_PORT
	redis_server_run
}

# Stops the server by its PID: TERM (a shutdown without saving), then KILL
# after about 5 s.
redis_server_kill() {
	local pid
	pid=$(redis_pid)
	[ -n "$pid" ] || return 0
	kill -CONT "$pid" 2>/dev/null || true
	kill "$pid" 2>/dev/null || return 0
	for _ in $(seq 1 100); do
		redis_running "$pid" || return 0
		sleep 0.05
	done
	kill -9 "$pid" 2>/dev/null || true
	for _ in $(seq 1 100); do
		redis_running "$pid" || return 0
		sleep 0.05
	done
}

# Waits (bounded) until no AOF rewrite is running or due, so that what was
# written is in the file a restart reads.
redis_aof_ready() {
	for _ in $(seq 1 200); do
		if [ "$(rcli info persistence | tr -d '\r' |
			grep -c -E '^aof_rewrite_(in_progress|scheduled):0$')" = 2 ]; then
			return 0
		fi
		sleep 0.05
	done
	echo "redis-server: the AOF rewrite did not finish" >&2
	return 1
}

redis_persist() {
	if [ "$1" = on ]; then
		rcli config set appendfsync always >/dev/null
		rcli config set appendonly yes >/dev/null
		sed -i 's/^appendonly no$/appendonly yes/' "$REDIS_DIR/redis.conf"
		redis_aof_ready
	else
		rcli config set appendonly no >/dev/null
		sed -i 's/^appendonly yes$/appendonly no/' "$REDIS_DIR/redis.conf"
	fi
}

redis_server_restart() {
	redis_server_kill
	redis_server_run
}

redis_server_stop() {
	[ -n "${REDIS_DIR:-}" ] && [ -d "$REDIS_DIR" ] || return 0
	redis_server_kill
	rm -rf "$REDIS_DIR"
}
