# mysql-server.bash - a throwaway MariaDB server for the mysql tests.
#
# mysql_server_start [tls]  mariadb-install-db + mariadbd in a temporary
#                     directory, on a free loopback port, as the user
#                     "mysql" when run as root; a user "lr" with a
#                     password and every right on the database "lr".
#                     Sets MY_DIR, MY_PORT, MY_PASSWORD, MY_URL (with the
#                     password) and MY_URL_NOPW.  With tls, the server
#                     also speaks TLS with the certificates of certs.bash,
#                     made in $MY_DIR/certs.
# mysql_server_crash  kill -9 of mariadbd, then a start on the same data
#                     (crash recovery), same port.
# mysql_server_restart  a clean shutdown (SIGTERM), then a start on the
#                     same data and port.
# mysql_server_stop   stops the server by its PID and removes the directory.
# my_sql SQL          runs SQL as root over the Unix socket.
# galera_start        a second server, a one-node Galera cluster (wsrep_on),
#                     with the same user lr; sets GA_DIR and GA_URL.
# galera_stop         stops it and removes its directory.
# mysql_server_signal SIG  signals mariadbd.
#
# Meant to be sourced by bats files from setup_file/teardown_file.

my_sql() {
	mariadb --no-defaults -u root -S "$MY_DIR/sock" -N -B -e "$1"
}

my_pid() {
	cat "$MY_DIR/pid" 2>/dev/null
}

mysql_server_signal() {
	local pid
	pid=$(my_pid)
	[ -n "$pid" ] || return 1
	kill "-$1" "$pid" 2>/dev/null
}

# Waits (bounded) until the server answers over TCP.
mysql_wait_ready() {
	for _ in $(seq 1 300); do
		if mariadb --no-defaults -u root -S "$MY_DIR/sock" \
			-e 'SELECT 1' >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.1
	done
	echo "MariaDB did not become ready on port $MY_PORT" >&2
	tail -n 30 "$MY_DIR/server.log" >&2
	return 1
}

# mariadbd in the background, its pid in $MY_DIR/pid.
mysql_server_up() {
	mariadbd --no-defaults --datadir="$MY_DIR/data" --socket="$MY_DIR/sock" \
		--port="$MY_PORT" --bind-address=127.0.0.1 --skip-name-resolve \
		--user=mysql --pid-file="$MY_DIR/mariadbd.pid" \
		--log-error="$MY_DIR/server.log" --innodb-buffer-pool-size=16M \
		--innodb-log-file-size=8M --skip-log-bin --max-connections=200 \
		${MY_TLS:+--ssl-ca="$MY_DIR/certs/ca.crt"} \
		${MY_TLS:+--ssl-cert="$MY_DIR/certs/server.crt"} \
		${MY_TLS:+--ssl-key="$MY_DIR/certs/server.key"} \
		</dev/null >/dev/null 2>&1 &
	echo $! >"$MY_DIR/pid"
	# (Its kill -9 in a test is no job of the shell's to report.)
	disown "$!"
	mysql_wait_ready
}

mysql_server_start() {
	command -v mariadbd >/dev/null || {
		echo "no mariadbd (apt-get install mariadb-server)" >&2
		return 1
	}
	MY_DIR=$(mktemp -d "${TMPDIR:-/tmp}/leaserun-mysql.XXXXXX")
	chmod 755 "$MY_DIR"
	mkdir "$MY_DIR/data"
	MY_TLS=
	if [ "${1:-}" = tls ]; then
		MY_TLS=1
		mkdir -m 755 "$MY_DIR/certs"
		make_certs "$MY_DIR/certs"
		chmod 644 "$MY_DIR/certs/"*.key
	fi
	if [ "$(id -u)" = 0 ]; then
		chown mysql: "$MY_DIR" "$MY_DIR/data"
	fi
	MY_PORT=$("$LR_BUILDDIR/tests/freeport")
	MY_PASSWORD="lr-Secret-$$-pw"
	mariadb-install-db --no-defaults --auth-root-authentication-method=normal \
		--skip-test-db --datadir="$MY_DIR/data" --user=mysql \
		>"$MY_DIR/install.log" 2>&1 || {
		cat "$MY_DIR/install.log" >&2
		return 1
	}
	mysql_server_up || return 1
	my_sql "CREATE DATABASE lr;
		CREATE USER 'lr'@'%' IDENTIFIED BY '$MY_PASSWORD';
		GRANT ALL ON lr.* TO 'lr'@'%';
		CREATE USER 'other'@'%' IDENTIFIED BY '$MY_PASSWORD';
		GRANT SELECT ON lr.* TO 'other'@'%';" || return 1
	MY_URL="mysql://lr:$MY_PASSWORD@127.0.0.1:$MY_PORT/lr"
	MY_URL_NOPW="mysql://lr@127.0.0.1:$MY_PORT/lr"
	export MY_DIR MY_PORT MY_PASSWORD MY_URL MY_URL_NOPW MY_TLS
}

# Waits (bounded) for pid $1 to exit.
mysql_wait_exit() {
	for _ in $(seq 1 200); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.05
	done
	return 1
}

# A crash: no shutdown, nothing flushed that InnoDB had not; the start
# recovers from the redo log.
mysql_server_crash() {
	local pid
	pid=$(my_pid)
	kill -CONT "$pid" 2>/dev/null
	kill -9 "$pid" 2>/dev/null
	mysql_wait_exit "$pid"
	mysql_server_up
}

mysql_server_restart() {
	local pid
	pid=$(my_pid)
	kill -CONT "$pid" 2>/dev/null
	kill -TERM "$pid" 2>/dev/null
	mysql_wait_exit "$pid" || return 1
	mysql_server_up
}

mysql_server_stop() {
	[ -n "${MY_DIR:-}" ] && [ -d "$MY_DIR" ] || return 0
	local pid
	pid=$(my_pid)
	if [ -n "$pid" ]; then
		kill -CONT "$pid" 2>/dev/null
		kill -TERM "$pid" 2>/dev/null
		mysql_wait_exit "$pid" || kill -9 "$pid" 2>/dev/null
	fi
	rm -rf "$MY_DIR"
}

galera_start() {
	local port gport
	GA_DIR=$(mktemp -d "${TMPDIR:-/tmp}/leaserun-galera.XXXXXX")
	chmod 755 "$GA_DIR"
	mkdir "$GA_DIR/data"
	if [ "$(id -u)" = 0 ]; then
		chown mysql: "$GA_DIR" "$GA_DIR/data"
	fi
	port=$("$LR_BUILDDIR/tests/freeport")
	gport=$("$LR_BUILDDIR/tests/freeport")
	mariadb-install-db --no-defaults --auth-root-authentication-method=normal \
		--skip-test-db --datadir="$GA_DIR/data" --user=mysql \
		>"$GA_DIR/install.log" 2>&1 || return 1
	mariadbd --no-defaults --datadir="$GA_DIR/data" --socket="$GA_DIR/sock" \
		--port="$port" --bind-address=127.0.0.1 --skip-name-resolve \
		--user=mysql --log-error="$GA_DIR/server.log" \
		--innodb-buffer-pool-size=16M --wsrep-on=ON \
		--wsrep-provider=/usr/lib/galera/libgalera_smm.so \
		--wsrep-cluster-address=gcomm:// --binlog-format=ROW \
		--innodb-autoinc-lock-mode=2 --wsrep-node-address=127.0.0.1 \
		--wsrep-provider-options="gmcast.listen_addr=tcp://127.0.0.1:$gport" \
		</dev/null >/dev/null 2>&1 &
	echo $! >"$GA_DIR/pid"
	disown "$!"
	for _ in $(seq 1 300); do
		mariadb --no-defaults -u root -S "$GA_DIR/sock" -e "
			CREATE DATABASE lr;
			CREATE USER 'lr'@'%' IDENTIFIED BY '$MY_PASSWORD';
			GRANT ALL ON lr.* TO 'lr'@'%'" 2>/dev/null && {
			export GA_URL="mysql://lr:$MY_PASSWORD@127.0.0.1:$port/lr"
			return 0
		}
		sleep 0.1
	done
	tail -n 30 "$GA_DIR/server.log" >&2
	return 1
}

galera_stop() {
	[ -n "${GA_DIR:-}" ] && [ -d "$GA_DIR" ] || return 0
	local pid
	pid=$(cat "$GA_DIR/pid" 2>/dev/null)
	if [ -n "$pid" ]; then
		kill -TERM "$pid" 2>/dev/null
		mysql_wait_exit "$pid" || kill -9 "$pid" 2>/dev/null
	fi
	rm -rf "$GA_DIR"
}
