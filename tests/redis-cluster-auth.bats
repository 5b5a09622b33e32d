#!/usr/bin/env bats
# The Redis store on a Redis Cluster whose nodes require a password
# (requirepass, masterauth; tests/redis-cluster-server.bash "auth"),
# and with an ACL user made on every node: a cluster of its own, made
# once for the file, since every node of it must be told.

load 'helpers'
load 'redis-cluster-server'

setup_file() {
	[ -e "$LEASERUN_MODULE_DIR/redis.so" ] ||
		{ echo "no redis.so in $LEASERUN_MODULE_DIR" >&2; return 1; }
	cluster_start auth
	export LEASERUN_URL=$CL_URL
}

teardown_file() {
	cluster_stop
}

setup() { N=cla-$BATS_TEST_NUMBER D=$BATS_TEST_TMPDIR BG_PIDS=; }

teardown() {
	kill_bg
}

keyof() { echo "leaserun:{$1}"; }

# A URL for the node on port $2 with the credentials $1 ("user:pass").
url() { echo "redis+cluster://$1@127.0.0.1:$2"; }

@test "the password in the URL logs in on every node: a seed that is not the slot's master (MOVED), --status, --list, the release" {
	other=$(cluster_other_master "$(keyof "$N")")
	LEASERUN_URL=$(url ":$CL_PASSWORD" "$other")
	run --separate-stderr lr -n "$N" \
		sh -c 'echo "$LEASERUN_FENCE $LEASERUN_URL"'
	assert_success
	[[ $output == [1-9]*" redis+cluster://127.0.0.1:$other" ]]
	[[ $output != *"$CL_PASSWORD"* ]]
	[ -z "$stderr" ]
	run lr --status "$N"
	assert_failure 1
	hold "$N" -t 30s
	run -0 lr --status "$N"
	run -0 --separate-stderr lr --list "$N"
	assert_equal "${#lines[@]}" 2
	[[ ${lines[1]} == "$N "*exclusive* ]]
	release "$N"
	assert_holder_rc 0
}

@test "a wrong password: 125, one line that does not show the password" {
	for p in ${CL_PORTS%% *} ${CL_PORTS##* }; do
		LEASERUN_URL=$(url ":Wrong-Pw-123" "$p")
		run -125 --separate-stderr lr -w 5s "$N" touch "$D/ran"
		assert_equal "${#stderr_lines[@]}" 1
		[[ $stderr == leaserun:*"authentication failed"* ]]
		[[ $stderr != *Wrong-Pw-123* ]]
		run -125 --separate-stderr lr --list
		assert_equal "${#stderr_lines[@]}" 1
		[[ $stderr != *Wrong-Pw-123* ]]
	done
	[ ! -e "$D/ran" ]
}

@test "no password: 125, one line that says how to give one" {
	LEASERUN_URL="redis+cluster://127.0.0.1:${CL_PORTS%% *}"
	run -125 --separate-stderr lr "$N" touch "$D/ran"
	assert_equal "${#stderr_lines[@]}" 1
	[[ $stderr == *"give a password in the URL or REDISCLI_AUTH"* ]]
	[ ! -e "$D/ran" ]
}

@test "an ACL user made on every node logs in as itself; a wrong one: 125, one line that names it, not its password" {
	for p in $CL_PORTS; do
		ccli "$p" acl setuser lr reset on '>Lr-Pw-456' '~*' '&*' '+@all' >/dev/null
	done
	other=$(cluster_other_master "$(keyof "$N")")
	LEASERUN_URL=$(url "lr:Lr-Pw-456" "$other")
	run --separate-stderr lr -n "$N" true
	assert_success
	[ -z "$stderr" ]
	LEASERUN_URL=$(url "nobody:Lr-Pw-456" "$other")
	run -125 --separate-stderr lr -n "$N" true
	assert_equal "${#stderr_lines[@]}" 1
	[[ $stderr == *"as user 'nobody' failed"* ]]
	[[ $stderr != *Lr-Pw-456* ]]
}

@test "--list as a user who may not ask CLUSTER SLOTS: 125, one line with the server's reason" {
	for p in $CL_PORTS; do
		ccli "$p" acl setuser noslots reset on '>Ns-Pw-789' '~*' '&*' '+@all' '-cluster|slots' >/dev/null
	done
	LEASERUN_URL=$(url "noslots:Ns-Pw-789" "${CL_PORTS%% *}")
	run -125 --separate-stderr lr --list
	echo "# $stderr" >&3
	assert_equal "${#stderr_lines[@]}" 1
	[[ $stderr == *"CLUSTER SLOTS: NOPERM"* ]]
	[[ $stderr != *Ns-Pw-789* ]]
}
