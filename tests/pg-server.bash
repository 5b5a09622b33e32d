# pg-server.bash - a throwaway PostgreSQL (and pgbouncer) for the pg tests.
#
# pg_server_start   initdb + pg_ctl in a temporary directory, on a free
#                   loopback port, password (scram) auth for the role "lr";
#                   as the unprivileged user "postgres" when run as root.
#                   Sets PG_DIR, PG_PORT, PG_URL (with the password),
#                   PG_URL_NOPW, PG_PASSWORD.  fsync is off (the tests'
#                   crashes are the server's, not the machine's) unless
#                   PG_FSYNC=on.
# pg_server_restart pg_ctl restart -m fast (same port and data).
# pg_server_crash   pg_ctl restart -m immediate: a crash, then recovery.
# pg_server_stop    stops the server by its PID and removes the directory.
# pg_sql SQL        runs SQL as the superuser over the Unix socket.
# pg_server_signal SIG  signals the postmaster and all its backends.
# pgbouncer_start   a pgbouncer in front of it; sets BOUNCER_URL (with
#                   BOUNCER_ROUND_ROBIN=1 it hands out its idle server
#                   connections in turn, oldest first).
#
# Meant to be sourced by bats files from setup_file/teardown_file.

pg_bindir() {
	local d
	if [ -n "${PG_BINDIR:-}" ]; then
		echo "$PG_BINDIR"
		return
	fi
	for d in $(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V -r); do
		if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
			echo "$d"
			return
		fi
	done
	command -v initdb >/dev/null && dirname "$(command -v initdb)"
}

# Runs a command as the unprivileged server user when we are root.
pg_as() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

pg_sql() {
	"$PG_BIN/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$PG_DIR" \
		-p "$PG_PORT" -U postgres -d postgres -c "$1"
}

pg_pid() {
	head -n 1 "$PG_DIR/data/postmaster.pid" 2>/dev/null
}

# Sends a signal to the whole server: the postmaster and every backend
# (SIGSTOP of the postmaster alone leaves running sessions answering).
pg_server_signal() {
	local pid
	pid=$(pg_pid)
	[ -n "$pid" ] || return 1
	# shellcheck disable=SC2046 # one word per pid
	kill "-$1" "$pid" $(ps -o pid= --ppid "$pid") 2>/dev/null
}

# Waits (bounded) until the server accepts connections on TCP.
pg_wait_ready() {
	for _ in $(seq 1 200); do
		if "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT"; then
			return 0
		fi
		sleep 0.05
	done
	echo "PostgreSQL did not become ready on port $PG_PORT" >&2
	cat "$PG_DIR/server.log" >&2
	return 1
}

pg_server_start() {
	PG_BIN=$(pg_bindir)
	if [ -z "$PG_BIN" ]; then
		echo "no PostgreSQL server binaries (initdb, pg_ctl) found" >&2
		return 1
	fi
	PG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/leaserun-pg.XXXXXX")
	chmod 755 "$PG_DIR"
	if [ "$(id -u)" = 0 ]; then
		chown postgres: "$PG_DIR"
	fi
	PG_PORT=$("$LR_BUILDDIR/tests/freeport")
	PG_PASSWORD="lr-Secret-$$-pw"
	pg_as sh -c "echo superpw > '$PG_DIR/pw'"
	pg_as "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres \
		--pwfile="$PG_DIR/pw" --auth-local=trust \
		--auth-host=scram-sha-256 -N -E UTF8 --locale=C \
		>"$PG_DIR/initdb.log" 2>&1 || {
		cat "$PG_DIR/initdb.log" >&2
		return 1
	}
	PG_OPTS="-c port=$PG_PORT -c listen_addresses=127.0.0.1 \
-c unix_socket_directories=$PG_DIR -c fsync=${PG_FSYNC:-off} \
-c max_connections=200 -c shared_buffers=16MB"
	pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" \
		-w -t 30 -o "$PG_OPTS" start >/dev/null || {
		cat "$PG_DIR/server.log" >&2
		return 1
	}
	pg_wait_ready || return 1
	pg_sql "CREATE ROLE lr LOGIN PASSWORD '$PG_PASSWORD'" >/dev/null
	pg_sql "CREATE ROLE other LOGIN PASSWORD '$PG_PASSWORD'" >/dev/null
	# The test server has no TLS: say so, or every run warns that its
	# password goes out in clear (sslmode=prefer).
	PG_URL="postgresql://lr:$PG_PASSWORD@127.0.0.1:$PG_PORT/postgres?sslmode=disable"
	PG_URL_NOPW="postgresql://lr@127.0.0.1:$PG_PORT/postgres?sslmode=disable"
	export PG_BIN PG_DIR PG_PORT PG_PASSWORD PG_URL PG_URL_NOPW PG_OPTS
}

pg_server_restart() {
	pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" \
		-m fast -w -t 30 restart >/dev/null && pg_wait_ready
}

# Immediate mode is PostgreSQL's crash: no shutdown checkpoint, and what
# was still in the WAL buffers is lost; the start replays the WAL.
pg_server_crash() {
	pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" \
		-m immediate -w -t 30 restart >/dev/null && pg_wait_ready
}

# The server down (an immediate stop: a crash), and up again, for the
# tests of runs that ride out a store that is down for a while.
pg_server_down() {
	pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w -t 30 \
		stop >/dev/null
}
pg_server_up() {
	pg_as "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" \
		-w -t 30 -o "$PG_OPTS" start >/dev/null && pg_wait_ready
}

pgbouncer_start() {
	local mode=${1:-transaction}
	BOUNCER_PORT=$("$LR_BUILDDIR/tests/freeport")
	pg_as sh -c "cat > '$PG_DIR/pgbouncer.ini'" <<EOF
[databases]
lrdb = host=127.0.0.1 port=$PG_PORT dbname=postgres user=lr password=$PG_PASSWORD
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $BOUNCER_PORT
unix_socket_dir =
auth_type = trust
auth_file = $PG_DIR/userlist.txt
pool_mode = $mode
server_round_robin = ${BOUNCER_ROUND_ROBIN:-0}
default_pool_size = 4
pidfile = $PG_DIR/pgbouncer.pid
logfile = $PG_DIR/pgbouncer.log
EOF
	pg_as sh -c "echo '\"lr\" \"\"' > '$PG_DIR/userlist.txt'"
	pg_as pgbouncer -d -q "$PG_DIR/pgbouncer.ini" || return 1
	for _ in $(seq 1 200); do
		if "$PG_BIN/psql" -X -q -A -t -c 'select 1' \
			"postgresql://lr@127.0.0.1:$BOUNCER_PORT/lrdb" \
			>/dev/null 2>&1; then
			BOUNCER_URL="postgresql://lr@127.0.0.1:$BOUNCER_PORT/lrdb"
			export BOUNCER_PORT BOUNCER_URL
			return 0
		fi
		sleep 0.05
	done
	echo "pgbouncer did not become ready" >&2
	cat "$PG_DIR/pgbouncer.log" >&2
	return 1
}

# Stops a process by its pid file: TERM, then KILL after about 5 s.
pg_stop_pidfile() {
	local pid
	pid=$(head -n 1 "$1" 2>/dev/null) || return 0
	[ -n "$pid" ] || return 0
	kill "$pid" 2>/dev/null || return 0
	for _ in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.05
	done
	kill -9 "$pid" 2>/dev/null || true
}

pg_server_stop() {
	[ -n "${PG_DIR:-}" ] && [ -d "$PG_DIR" ] || return 0
	pg_stop_pidfile "$PG_DIR/pgbouncer.pid"
	local pid
	pid=$(pg_pid)
	if [ -n "$pid" ]; then
		pg_server_signal CONT || true
		# SIGINT is PostgreSQL's fast shutdown.
		kill -INT "$pid" 2>/dev/null || true
		for _ in $(seq 1 200); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
		pg_server_signal KILL || true
	fi
	rm -rf "$PG_DIR"
}
