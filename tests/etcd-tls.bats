#!/usr/bin/env bats
# The etcd store over TLS (etcds://) against a real etcd that requires
# client certificates.

load '/usr/lib/bats/bats-support/load'
load '/usr/lib/bats/bats-assert/load'
load coverage
load 'etcd-server'
load 'certs'

setup_file() {
	command -v etcd >/dev/null && command -v openssl >/dev/null ||
		{ echo "etcd and openssl are needed" >&2; return 1; }
	[ -e "$LEASERUN_MODULE_DIR/etcd.so" ] ||
		{ echo "no etcd.so in $LEASERUN_MODULE_DIR" >&2; return 1; }
	LRE_DIR=$(etcd_tmpdir)
	export LRE_DIR
	make_certs "$LRE_DIR"
	export ETCDCTL_CACERT=$LRE_DIR/ca.crt ETCDCTL_CERT=$LRE_DIR/client.crt \
		ETCDCTL_KEY=$LRE_DIR/client.key
	LRE_SCHEME=https LRE_ARGS="--cert-file $LRE_DIR/server.crt --key-file $LRE_DIR/server.key --client-cert-auth --trusted-ca-file $LRE_DIR/ca.crt" \
		etcd_single "$LRE_DIR"
	unset ETCDCTL_CACERT ETCDCTL_CERT ETCDCTL_KEY
	export LRE_EP
}

teardown_file() {
	etcd_stop_all "$LRE_DIR"
	rm -rf "$LRE_DIR"
}

@test "etcds:// with cacert, cert and key in the URL runs the command under the lease" {
	d=$LRE_DIR
	run "$LEASERUN" -U "etcds://$LRE_EP?cacert=$d/ca.crt&cert=$d/client.crt&key=$d/client.key" \
		tls1 sh -c 'echo "fence $LEASERUN_FENCE"'
	assert_success
	assert_output --regexp '^fence [0-9]+$'
}

@test "etcdctl's ETCDCTL_CACERT, ETCDCTL_CERT and ETCDCTL_KEY work too" {
	ETCDCTL_CACERT=$LRE_DIR/ca.crt ETCDCTL_CERT=$LRE_DIR/client.crt \
		ETCDCTL_KEY=$LRE_DIR/client.key \
		run "$LEASERUN" -t 2s -U "etcds://$LRE_EP" tls2 sh -c 'sleep 1.5; echo done'
	assert_success
	assert_output "done"
}

@test "a server certificate from another CA fails with 125 in one line" {
	d=$LRE_DIR
	run "$LEASERUN" -U "etcds://$LRE_EP?cacert=$d/other.crt&cert=$d/client.crt&key=$d/client.key" tls3 true
	assert_failure 125
	assert_equal "${#lines[@]}" 1
	assert_output --partial "cannot reach etcd at $LRE_EP"
}

@test "without a client certificate the TLS etcd refuses, 125, in one line that says to give one" {
	run "$LEASERUN" -U "etcds://$LRE_EP?cacert=$LRE_DIR/ca.crt" tls4 true
	echo "# $output" >&3
	assert_failure 125
	assert_equal "${#lines[@]}" 1
	# (etcd built with Go before 1.21 says "bad certificate".)
	assert_output --regexp "alert (certificate required|bad certificate) \(give cert= and key=\)\$"
}

@test "plain etcd:// against a TLS etcd fails with 125" {
	run "$LEASERUN" -U "etcd://$LRE_EP" tls5 true
	assert_failure 125
	assert_equal "${#lines[@]}" 1
}

@test "etcds:// loads OpenSSL, through the TLS module" {
	d=$LRE_DIR
	maps=$BATS_TEST_TMPDIR/maps
	run "$LEASERUN" -U "etcds://$LRE_EP?cacert=$d/ca.crt&cert=$d/client.crt&key=$d/client.key" \
		tls6 sh -c 'cat /proc/$PPID/maps >"$0"' "$maps"
	assert_success
	grep -q '/etcd-tls\.so$' "$maps"
	grep -q '/libssl\.so' "$maps"
}

@test "faults: a certificate that does not verify, a missing client certificate, cleartext against TLS, a CA file that holds no certificate: 125 at once, even with a long wait" {
	d=$LRE_DIR
	echo "not a certificate" >"$BATS_TEST_TMPDIR/junk.crt"
	for u in "etcds://$LRE_EP?cacert=$d/other.crt&cert=$d/client.crt&key=$d/client.key" \
		"etcds://$LRE_EP?cacert=$d/ca.crt" "etcd://$LRE_EP" \
		"etcds://$LRE_EP?cacert=$BATS_TEST_TMPDIR/junk.crt&cert=$d/client.crt&key=$d/client.key"; do
		t0=$(($(date +%s%N) / 1000000))
		run "$LEASERUN" -w 60 -U "$u" tls7 true
		t1=$(($(date +%s%N) / 1000000))
		echo "# $((t1 - t0))ms: $output" >&3
		assert_equal "$status" 125
		assert_equal "${#lines[@]}" 1
		(( t1 - t0 < 3000 ))
	done
}

@test "etcds:// where the TLS module is missing: 125 at once, even with a long wait, and one line that names it" {
	d=$LRE_DIR
	mkdir "$BATS_TEST_TMPDIR/mods"
	cp "$LEASERUN_MODULE_DIR/etcd.so" "$BATS_TEST_TMPDIR/mods/"
	t0=$(($(date +%s%N) / 1000000))
	LEASERUN_MODULE_DIR=$BATS_TEST_TMPDIR/mods run "$LEASERUN" -w 60 \
		-U "etcds://$LRE_EP?cacert=$d/ca.crt&cert=$d/client.crt&key=$d/client.key" tls9 true
	t1=$(($(date +%s%N) / 1000000))
	echo "# $((t1 - t0))ms: $output" >&3
	assert_equal "$status" 125
	assert_equal "${#lines[@]}" 1
	assert_output --partial "has no TLS support ($BATS_TEST_TMPDIR/mods/etcd-tls.so is missing"
	(( t1 - t0 < 3000 ))
}

@test "TLS options that do not fit fail with 125 and one line before any connection" {
	d=$LRE_DIR
	run "$LEASERUN" -U "etcd://$LRE_EP?cacert=$d/ca.crt" tls8 true
	assert_failure 125
	assert_equal "${#lines[@]}" 1
	assert_output --partial "etcd URL: cacert=, cert= and key= need TLS (etcds://)"
	run "$LEASERUN" -U "etcds://$LRE_EP?cacert=$d/ca.crt&cert=$d/client.crt" tls8 true
	assert_failure 125
	assert_equal "${#lines[@]}" 1
	assert_output --partial "etcd URL: cert= and key= go together"
}
