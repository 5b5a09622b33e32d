#!/usr/bin/env bats
# The Redis store over TLS (rediss://) against a real redis-server that
# listens with TLS (certificates made by openssl here; client
# certificates optional unless a test asks for them), and the Redis
# fault tests of redis.bats again, over TLS.

load 'helpers'
load 'certs'
load 'redis-server'
load 'redis-faults'

setup_file() {
	[ -e "$LEASERUN_MODULE_DIR/redis.so" ] && [ -e "$LEASERUN_MODULE_DIR/redis-tls.so" ] ||
		{ echo "no redis.so and redis-tls.so in $LEASERUN_MODULE_DIR" >&2; return 1; }
	command -v openssl >/dev/null || { echo "openssl is needed" >&2; return 1; }
	redis_server_start tls
	export LEASERUN_URL="$REDIS_TLS_URL"
}

teardown_file() {
	redis_server_stop
}

setup() { redis_test_setup; }

teardown() {
	# Whatever a test did to the server's TLS, it is as it was.
	rcli config set tls-auth-clients optional >/dev/null || true
	rcli config set tls-cert-file "$REDIS_DIR/server.crt" \
		tls-key-file "$REDIS_DIR/server.key" >/dev/null || true
	redis_test_teardown
}

# tls_url [OPTIONS]: rediss:// to the server with the password, and
# OPTIONS (a=b&c=d) as its query.
tls_url() {
	echo "rediss://:$REDIS_PASSWORD@127.0.0.1:$REDIS_TLS_PORT${1:+?$1}"
}

# refused WORDS URL: leaserun on URL fails with 125 and one line that
# says WORDS and not the password.
refused() {
	LEASERUN_URL=$2 run -125 --separate-stderr lr "$(name)" true
	echo "# $stderr" >&3
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"$1"* ]]
	[[ "$stderr" != *"$REDIS_PASSWORD"* ]]
	is_free "$(name)"
}

# The shared objects that process $1 has mapped, one name a line.
mapped() { sed -n 's|.* /.*/\([^/]*\.so[.0-9]*\)$|\1|p' "/proc/$1/maps" | sort -u; }

@test "rediss:// with cacert= runs the command under the lease; LEASERUN_URL keeps cacert= and drops the password" {
	run --separate-stderr lr "$(name)" sh -c 'echo "$LEASERUN_FENCE $LEASERUN_URL"'
	assert_success
	assert_output --regexp "^[1-9][0-9]* rediss://127.0.0.1:$REDIS_TLS_PORT\?cacert=$REDIS_DIR/ca.crt\$"
	[ -z "$stderr" ]
}

@test "a client certificate (cert= and key=) is sent, and one the server requires is accepted" {
	d=$REDIS_DIR
	rcli config set tls-auth-clients yes >/dev/null
	LEASERUN_URL=$(tls_url "cacert=$d/ca.crt&cert=$d/client.crt&key=$d/client.key") \
		run --separate-stderr lr "$(name)" sh -c 'echo ran'
	assert_success
	assert_output ran
}

@test "the server's host name is checked: localhost is in the certificate, a name that is not fails with 125" {
	LEASERUN_URL="rediss://:$REDIS_PASSWORD@localhost:$REDIS_TLS_PORT?cacert=$REDIS_DIR/ca.crt" \
		run -0 lr "$(name)" true
	# The server shows a certificate for wrong.example only.
	rcli config set tls-cert-file "$REDIS_DIR/wrong.crt" \
		tls-key-file "$REDIS_DIR/wrong.key" >/dev/null
	refused "certificate verify failed (hostname mismatch)" \
		"rediss://:$REDIS_PASSWORD@localhost:$REDIS_TLS_PORT?cacert=$REDIS_DIR/ca.crt"
	refused "certificate verify failed (IP address mismatch)" "$REDIS_TLS_URL"
}

@test "a server certificate from another CA fails with 125 and one line" {
	refused "certificate verify failed" "$(tls_url "cacert=$REDIS_DIR/other.crt")"
	# Without cacert= the system's CAs do not know ours either.
	refused "certificate verify failed" "$(tls_url)"
}

@test "no client certificate for a server that requires one fails with 125 and one line that says so" {
	rcli config set tls-auth-clients yes >/dev/null
	refused "certificate required (give cert= and key=)" "$REDIS_TLS_URL"
}

@test "TLS options that do not fit fail with 125 and one line before any connection" {
	d=$REDIS_DIR
	refused "cacert=, cert= and key= need TLS" \
		"redis://127.0.0.1:$REDIS_PORT?cacert=$d/ca.crt"
	refused "cert= and key= go together" \
		"$(tls_url "cacert=$d/ca.crt&cert=$d/client.crt")"
	refused "$d/nope.crt" "$(tls_url "cacert=$d/nope.crt")"
}

@test "the wrong scheme for the port: one line and 125 that say which to use" {
	# A TLS port resets a plain connection before a word, as a server
	# dying as it took it would: a second reset in a row is no longer
	# ridden out, even with the default wait (for ever).
	t0=$(now_ms)
	refused "does it want rediss:// (TLS)?" \
		"redis://:$REDIS_PASSWORD@127.0.0.1:$REDIS_TLS_PORT?timeout=1s"
	t1=$(now_ms)
	echo "# plain to the TLS port: 125 after $((t1 - t0))ms" >&3
	(( t1 - t0 < 2000 ))
	# A plain port says nothing to a TLS handshake, as a stopped server
	# would not: a timeout, ridden out until the wait runs out.
	LEASERUN_URL=$(tls_url "cacert=$REDIS_DIR/ca.crt&timeout=300ms" |
		sed "s/$REDIS_TLS_PORT/$REDIS_PORT/") \
		run -125 --separate-stderr lr -w 1s "$(name)" true
	echo "# $stderr" >&3
	[ "${#stderr_lines[@]}" -eq 1 ]
	[[ "$stderr" == *"is TLS on at this port?"* ]]
	[[ "$stderr" != *"$REDIS_PASSWORD"* ]]
}

@test "OpenSSL is mapped for rediss:// only: redis:// maps no TLS library" {
	start_holder "$(name)" -t 30s
	mapped "$BG" >"$BATS_TEST_TMPDIR/tls.maps"
	grep -qx 'libssl.so.3' "$BATS_TEST_TMPDIR/tls.maps"
	grep -qx 'redis-tls.so' "$BATS_TEST_TMPDIR/tls.maps"
	kill "$BG"
	LEASERUN_URL=$REDIS_URL start_holder "$(name)-plain" -t 30s
	mapped "$BG" >"$BATS_TEST_TMPDIR/plain.maps"
	grep -qx 'redis.so' "$BATS_TEST_TMPDIR/plain.maps"
	run grep -E '^(libssl|libcrypto|redis-tls)\.so' "$BATS_TEST_TMPDIR/plain.maps"
	assert_failure 1
}

@test "--status and --break over TLS" {
	n=$(name)
	start_holder "$n" -t 30s
	run lr --status "$n"
	assert_success
	assert_output --partial "$(hostname) pid $BG"
	run lr --break "$n"
	assert_success
	wait_rc "$BG"
	[ "$RC" = 124 ]
}

# The fault tests of redis.bats, over TLS.

@test "TLS: --break deletes the key: the holder sees it at once and exits 124" {
	fault_break_seen
}

@test "TLS: the key deleted a few ms after the grant: the holder is stopped at once, before its successor starts" {
	fault_deleted_after_grant
}

@test "TLS: a waiter does not hammer the server and starts at once when the holder releases" {
	fault_waiter_wakes
}

@test "TLS: the key deleted while held: the command is killed at once, 124" {
	fault_key_deleted
}

@test "TLS: the key taken over by another owner while held: 124 at once" {
	fault_key_taken
}

@test "TLS: CLIENT KILL of leaserun's connection is noticed at once: it reconnects and keeps the lease" {
	fault_client_kill_main
}

@test "TLS: CLIENT KILL of the watch connection: the holder opens it again and watches the key from then on" {
	fault_client_kill_watch
}

@test "TLS: SCRIPT FLUSH while held: renew and release load the scripts again (NOSCRIPT fallback)" {
	fault_script_flush
}

@test "TLS: a server restart without persistence: the loss is seen at the first retry, 124" {
	fault_restart_nopersist
}

@test "TLS: a server restart with appendonly yes, appendfsync always: the lease is kept, fences go on growing" {
	fault_restart_aof
}

@test "TLS: a stopped server: renewals time out and the command is stopped before the TTL runs out, 124" {
	fault_stopped_server
}

@test "TLS: operations: a stopped server: --warn-signal at the first failed renewal, renewed again when it wakes" {
	fault_warn_recover
}
