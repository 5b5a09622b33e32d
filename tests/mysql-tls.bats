#!/usr/bin/env bats
# The MySQL store over TLS (ssl-mode=...) against a real MariaDB that
# speaks TLS with certificates made by openssl here.
# shellcheck disable=SC2154 # bats sets stderr_lines

load 'helpers'
load 'certs'
load 'mysql-server'

setup_file() {
	[ -e "$LEASERUN_MODULE_DIR/mysql.so" ] ||
		{ echo "no mysql.so in $LEASERUN_MODULE_DIR" >&2; return 1; }
	command -v openssl >/dev/null || { echo "openssl is needed" >&2; return 1; }
	mysql_server_start tls
}

teardown_file() {
	mysql_server_stop
}

setup() {
	BG_PIDS=
	unset LEASERUN_URL MYSQL_PWD
}

teardown() {
	kill_bg
	my_sql "SET GLOBAL require_secure_transport = OFF" || true
}

name() { echo "my-tls-$BATS_TEST_NUMBER"; }

# my_url [OPTIONS]: the server's URL with the password and OPTIONS
# (a=b&c=d) as its query.
my_url() { echo "$MY_URL${1:+?$1}"; }

# stall_proxy: a proxy to the server that relays its greeting and the
# client's first packet (the request for TLS), then nothing more, with
# both ends left open: a TLS handshake that never ends.  Sets STALL_PORT;
# for each connection, how many ms the client kept it open is appended
# to $BATS_TEST_TMPDIR/stall.ms once it closes it.
stall_proxy() {
	python3 -c '
import socket, sys, threading, time
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(16)
print(ls.getsockname()[1], flush=True)
keep = []
def serve(c):
    t0 = time.monotonic()
    u = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
    keep.append((c, u))
    c.sendall(u.recv(65536))
    u.sendall(c.recv(65536))
    while c.recv(65536):
        pass
    with open(sys.argv[2], "a") as f:
        print(int((time.monotonic() - t0) * 1000), file=f)
while True:
    c, _ = ls.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
' "$MY_PORT" "$BATS_TEST_TMPDIR/stall.ms" >"$BATS_TEST_TMPDIR/stall.port" &
	BG_PIDS="$BG_PIDS $!"
	wait_until 5 exists "$BATS_TEST_TMPDIR/stall.port"
	STALL_PORT=$(cat "$BATS_TEST_TMPDIR/stall.port")
}

# refused WORDS OPTIONS: a run with OPTIONS fails with 125 and one line
# that holds WORDS and no password; the command does not run.
refused() {
	LEASERUN_URL=$(my_url "$2") run -125 --separate-stderr lr -w 5s "$(name)" echo ran
	echo "# $stderr" >&3
	assert_output ""
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"$1"* ]]
	[[ "$stderr" != *"$MY_PASSWORD"* ]]
}

@test "ssl-mode=REQUIRED to a TLS server that requires it works" {
	my_sql "SET GLOBAL require_secure_transport = ON"
	LEASERUN_URL=$(my_url ssl-mode=REQUIRED) start_holder "$(name)"
	LEASERUN_URL=$(my_url ssl-mode=REQUIRED) run lr -n "$(name)" true
	assert_failure 1
	release "$(name)"
	assert_holder_rc 0
}

@test "over TLS, renewals keep a lease past its TTL, and KILL CONNECTION stops the command at once: 124" {
	local n conn
	n=$(name)
	LEASERUN_URL=$(my_url ssl-mode=REQUIRED) start_holder "$n" -t 1s
	sleep 2.5
	alive "$HOLDER"
	conn=$(my_sql "SELECT IS_USED_LOCK('leaserun:$n')")
	[ "$(my_sql "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = $conn AND USER = 'lr'")" = 1 ]
	my_sql "KILL CONNECTION $conn"
	wait_until 2 dead "$CHILD"
	assert_holder_rc 124
}

@test "a TLS handshake that never ends is cut at the deadline: -w 1s fails with 125 after a second" {
	local ms
	stall_proxy
	LEASERUN_URL="mysql://lr:$MY_PASSWORD@127.0.0.1:$STALL_PORT/lr?ssl-mode=REQUIRED" \
		run -125 --separate-stderr timeout 20 "$LEASERUN" -w 1s "$(name)" echo ran
	assert_output ""
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"timed out"* ]]
	wait_until 5 exists "$BATS_TEST_TMPDIR/stall.ms"
	ms=$(head -n 1 "$BATS_TEST_TMPDIR/stall.ms")
	echo "# $stderr (the connection lasted ${ms}ms)" >&3
	# Within the second; the library alone waits its connect timeout,
	# 2s at least.
	((ms <= 1000 + 300))
}

@test "ssl-mode=VERIFY_IDENTITY with the right CA works; VERIFY_CA with another CA fails with 125 and one line" {
	LEASERUN_URL=$(my_url "ssl-mode=VERIFY_IDENTITY&ssl-ca=$MY_DIR/certs/ca.crt") \
		run lr "$(name)" echo ran
	assert_success
	assert_output ran
	refused "certificate" "ssl-mode=VERIFY_CA&ssl-ca=$MY_DIR/certs/other.crt"
}

@test "ssl-mode=DISABLED to a server with require_secure_transport fails with 125 and one line" {
	my_sql "SET GLOBAL require_secure_transport = ON"
	# MariaDB says "Access denied"; the line says why it may be.
	refused "require_secure_transport" "ssl-mode=DISABLED"
}

@test "ssl-mode=PREFERRED with a password: one warning that a server declining TLS gets the login in clear" {
	LEASERUN_URL=$(my_url ssl-mode=PREFERRED) run --separate-stderr lr "$(name)" echo ran
	assert_success
	assert_output ran
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"ssl-mode=PREFERRED"*"VERIFY_IDENTITY"* ]]
	[[ "$stderr" != *"as this one did"* ]]
	LEASERUN_URL=$(my_url "ssl-mode=VERIFY_IDENTITY&ssl-ca=$MY_DIR/certs/ca.crt") \
		run --separate-stderr lr "$(name)" echo ran
	assert_success
	[ -z "$stderr" ]
}

@test "bad TLS options fail with 125 and one line" {
	refused "bad ssl-mode=required" "ssl-mode=required"
	refused "ssl-cert and ssl-key go together" "ssl-mode=REQUIRED&ssl-cert=$MY_DIR/certs/client.crt"
	refused "ssl-mode=DISABLED with" "ssl-mode=DISABLED&ssl-ca=$MY_DIR/certs/ca.crt"
}
