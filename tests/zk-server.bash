# tests/zk-server.bash - start and stop real ZooKeeper servers for the tests.
#
# Each server runs on free loopback ports in a directory of its own (its
# zoo.cfg, data and log there) and is stopped by PID.  Readiness is the
# "srvr" four-letter command answering with a Mode line (standalone, leader
# or follower), polled in a bounded loop.  Short ticks so sessions (TTLs)
# of half a second work and the tests run fast.
#
#   zk_standalone DIR          one server; sets ZK_EP (127.0.0.1:port)
#   zk_ensemble DIR N          N servers in one ensemble; sets ZK_EPS
#                              (a,b,c), waits until one leads
#   zk_start DIR ID            start server ID again (same data, ports)
#   zk_wait_ready DIR ID       bounded wait until it serves
#   zk_stop DIR ID             TERM, then KILL if it does not go
#   zk_kill DIR ID             kill -9
#   zk_stop_all DIR
#   zk_leader DIR              prints the ID of the current leader
#   zk_mode PORT               prints standalone/leader/follower, or nothing
#   zk_cli EP [COMMANDS...]    runs zkCli commands (one per argument) and
#                              prints their output
#   zk_end_session EP DIR      ends, from the server's side, the session
#                              that owns the lock- node in DIR; prints its
#                              id
#
# ZK_CFG, if set, adds lines to every zoo.cfg written.

ZK_CP=/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar
ZK_JAVA_OPTS=(-Xmx96m -XX:+UseSerialGC -XX:TieredStopAtLevel=1
	-Dorg.slf4j.simpleLogger.defaultLogLevel=warn
	-Dzookeeper.admin.enableServer=false)

# zk_write_cfg DIR ID CLIENT_PORT [SERVER_LINES...]
zk_write_cfg() {
	local dir=$1 id=$2 cport=$3 d=$1/zk$2
	shift 3
	mkdir -p "$d/data"
	cat >"$d/zoo.cfg" <<EOF
tickTime=200
initLimit=50
syncLimit=10
minSessionTimeout=500
maxSessionTimeout=30000
dataDir=$d/data
clientPort=$cport
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat,mntr,cons
forceSync=no
autopurge.purgeInterval=0
${ZK_CFG:-}
EOF
	if [ $# -gt 0 ]; then
		printf '%s\n' "$@" >>"$d/zoo.cfg"
		echo "$id" >"$d/data/myid"
	fi
	echo "$cport" >"$d/port"
}

zk_start() {
	local dir=$1 id=$2 d=$1/zk$2 main=org.apache.zookeeper.server.ZooKeeperServerMain

	[ -s "$d/data/myid" ] && main=org.apache.zookeeper.server.quorum.QuorumPeerMain
	# Started from a subshell, so no shell of the test's reports it when
	# a test kills it; we track it by PID only.
	(
		java "${ZK_JAVA_OPTS[@]}" -cp "$ZK_CP" "$main" "$d/zoo.cfg" \
			</dev/null >>"$d/zk.log" 2>&1 3>&- &
		echo $! >"$d/pid"
	)
}

zk_port() { cat "$1/zk$2/port"; }

# zk_4lw PORT WORD: the server's answer to a four-letter word.
zk_4lw() {
	# shellcheck disable=SC2016 # expanded by the inner bash
	timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf %s "$2" >&3; cat <&3' _ "$1" "$2" 2>/dev/null
}

zk_mode() {
	zk_4lw "$1" srvr | sed -n 's/^Mode: //p'
}

zk_wait_ready() {
	local dir=$1 id=$2 port pid i m

	port=$(zk_port "$dir" "$id")
	pid=$(cat "$dir/zk$id/pid")
	for i in $(seq 300); do
		m=$(zk_mode "$port")
		case $m in standalone | leader | follower) return 0 ;; esac
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "zookeeper $id died; its log:" >&2
			tail -n 20 "$dir/zk$id/zk.log" >&2
			return 1
		fi
		sleep 0.1
	done
	echo "zookeeper $id not serving after 30s; its log:" >&2
	tail -n 20 "$dir/zk$id/zk.log" >&2
	return 1
}

_zk_gone() {
	local pid=$1 i

	for i in $(seq 200); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.05
	done
	return 1
}

zk_stop() {
	local pidf=$1/zk$2/pid pid

	[ -s "$pidf" ] || return 0
	pid=$(cat "$pidf")
	kill -CONT "$pid" 2>/dev/null || true
	kill "$pid" 2>/dev/null || true
	_zk_gone "$pid" || { kill -9 "$pid" 2>/dev/null; _zk_gone "$pid"; } || true
	rm -f "$pidf"
}

zk_kill() {
	local pidf=$1/zk$2/pid pid

	[ -s "$pidf" ] || return 0
	pid=$(cat "$pidf")
	kill -9 "$pid" 2>/dev/null || true
	_zk_gone "$pid" || true
	rm -f "$pidf"
}

zk_stop_all() {
	local d

	for d in "$1"/zk*/; do
		[ -d "$d" ] || continue
		d=${d%/}
		zk_stop "$1" "${d##*/zk}"
	done
}

zk_standalone() {
	local dir=$1 port

	port=$("$LR_BUILDDIR/tests/freeport")
	zk_write_cfg "$dir" 1 "$port"
	zk_start "$dir" 1
	zk_wait_ready "$dir" 1 || return 1
	ZK_EP=127.0.0.1:$port
	export ZK_EP
}

zk_ensemble() {
	local dir=$1 n=$2 i ports lines=() eps=""

	mapfile -t ports < <("$LR_BUILDDIR/tests/freeport" $((n * 3)))
	for ((i = 1; i <= n; i++)); do
		lines+=("server.$i=127.0.0.1:${ports[$((n + i - 1))]}:${ports[$((2 * n + i - 1))]}")
	done
	for ((i = 1; i <= n; i++)); do
		zk_write_cfg "$dir" "$i" "${ports[$((i - 1))]}" "${lines[@]}"
		eps+=${eps:+,}127.0.0.1:${ports[$((i - 1))]}
	done
	for ((i = 1; i <= n; i++)); do
		zk_start "$dir" "$i"
	done
	for ((i = 1; i <= n; i++)); do
		zk_wait_ready "$dir" "$i" || return 1
	done
	ZK_EPS=$eps
	export ZK_EPS
}

zk_leader() {
	local d id

	for d in "$1"/zk*/; do
		d=${d%/}
		id=${d##*/zk}
		[ -s "$d/pid" ] || continue
		if [ "$(zk_mode "$(cat "$d/port")")" = leader ]; then
			echo "$id"
			return 0
		fi
	done
	return 1
}

# zk_cli EP COMMAND...: each argument is one zkCli line (addauth, ls...).
zk_cli() {
	local ep=$1
	shift
	printf '%s\n' "$@" quit |
		java -Xmx64m -XX:TieredStopAtLevel=1 -cp "$ZK_CP" \
			-Dorg.slf4j.simpleLogger.defaultLogLevel=error \
			org.apache.zookeeper.ZooKeeperMain -server "$ep" 2>&1 |
		grep -v -e '^$' -e '^WATCHER::' -e '^WatchedEvent' \
			-e '^JLine support' -e '^Connecting to' \
			-e '^Welcome to ZooKeeper' -e '^\[main\]'
}

# zk_end_session EP DIR: the session that owns DIR's lock- node ends as if
# its owner had closed it: a client takes it over (the server derives a
# session's password from its id alone: ZooKeeperServer.generatePasswd,
# the same in 3.4 to 3.9), which makes the server close the owner's
# connection at once, and closes it (its ephemeral nodes go).  The owner
# must not be reconnecting meanwhile (it would take the session back):
# for a leaserun held still (the fault store's pause).
zk_end_session() {
	local src=${BATS_TEST_TMPDIR:-${TMPDIR:-/tmp}}/ZkEndSession.java
	cat >"$src" <<'EOF'
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.zookeeper.Watcher.Event.KeeperState;
import org.apache.zookeeper.ZooKeeper;

public class ZkEndSession {
	static ZooKeeper open(String ep, long sid, byte[] pw) throws Exception {
		CountDownLatch up = new CountDownLatch(1);
		ZooKeeper zk = new ZooKeeper(ep, 30000, e -> {
			if (e.getState() == KeeperState.SyncConnected)
				up.countDown();
		}, sid, pw);
		if (!up.await(20, TimeUnit.SECONDS))
			throw new Exception("cannot connect to " + ep);
		return zk;
	}

	public static void main(String[] a) throws Exception {
		ZooKeeper zk = open(a[0], 0, new byte[16]);
		long sid = 0;
		for (String c : zk.getChildren(a[1], false))
			if (c.startsWith("lock-"))
				sid = zk.exists(a[1] + "/" + c, false)
					.getEphemeralOwner();
		zk.close();
		if (sid == 0)
			throw new Exception("no lock node in " + a[1]);
		byte[] pw = new byte[16];
		new Random(sid ^ 0xB3415C00L).nextBytes(pw);
		open(a[0], sid, pw).close();
		System.out.printf("0x%x%n", sid);
	}
}
EOF
	java -Xmx64m -XX:TieredStopAtLevel=1 -cp "$ZK_CP" \
		-Dorg.slf4j.simpleLogger.defaultLogLevel=error "$src" "$1" "$2"
}
