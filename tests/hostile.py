#!/usr/bin/python3
"""hostile.py PROTO MODE PORTFILE - a store server that misbehaves.

Listens on a free loopback port, writes the port to PORTFILE, and serves
every connection as MODE says, until it is killed; each connection adds
a line to PORTFILE.conns.  The tests use it to
show that no reply can crash leaserun, hold it past a deadline or make it
eat memory (tests/hostile.bats).

Modes for every PROTO:
  silent    accept, read what comes, never answer
  garbage   answer each read with bytes that are no protocol's
  reset     close at once with a reset (SO_LINGER 0)
  slow      answer one byte a second, of a reply that never ends
  eof       read what the client sends first, then close (over TLS: in
            the handshake, as a server that shuts down does)
Modes by protocol (PROTO pg: PostgreSQL's v3 protocol):
  pg notices   decline TLS, accept the startup, then send NoticeResponse
               messages without end
  pg huge      decline TLS, then a message header claiming 2 GB, and
               its body a byte a second
  pg endless   decline TLS, accept the login, then answer the first
               query with rows without end
  pg hugerow   the same, with one row whose header claims 1 GB, and its
               body at about 60 MB/s (64 kB a ms)
  pg old       decline TLS, accept the login, and answer the session's
               setup as PostgreSQL 9.5 would: server_version_num 90500
  pg setupfail the same, the setup answered with an error of SQLSTATE
               08006 (connection_failure), as a pooler in front says
               that it lost its server, the connection kept
  pg poolcheck the setup answered with backend pid 8 where the login
               said 7 (as behind a pooler), and the second connection's
               SELECT pg_backend_pid() with an error (permission denied)
  zk huge      answer the session request, then a reply whose length
               prefix claims 2 GB, and its body as fast as the client
               takes it
  zk endless   answer the session request, then ping replies without end
  zk readonly  answer the session request as a read-only server (one the
               client did not ask for), then read what comes
  zk authfail  answer the session request, read the credentials, and
               refuse them (AUTHFAILED) once the next request comes
etcd modes (PROTO etcd): a server that speaks enough HTTP/2 (cleartext,
prior knowledge) to answer each gRPC request stream with HEADERS
(:status 200, content-type application/grpc), then misbehaves:
  etcd huge     DATA whose gRPC message prefix claims 2^31-1 bytes, then
                zeros as fast as the client's flow control lets them go
  etcd endless  DATA frames without end (empty, after 4 bytes of a
                message prefix): never a whole message
etcd fake modes (PROTO etcd): enough of etcd (class EtcdFake) for one
leaserun to grant, queue its key, watch it, read it back, renew and
release, misbehaving at one step; each keepalive adds a line to
PORTFILE.ka:
  etcd grantfail   the lease grant refused (FAILED_PRECONDITION, "bad
                   lease TTL")
  etcd shortttl    the lease granted with a TTL of 2s, whatever was asked
  etcd txnempty    the lock transaction's reply has no answers
  etcd txnnorange  ... only the put's answer, no listing
  etcd txnnokey    ... a listing without our key
  etcd watchsilent the watch on our key never confirmed
  etcd watchcut    the connection closed 0.3s after each watch request
  etcd watchcancel the watch confirmed and canceled at once (revision 5
                   compacted)
  etcd kaok        each keepalive stream ended, unanswered, with
                   grpc-status 0
  etcd kastatus    ... with grpc-status 14 ("etcdserver: leader changed")
Redis modes (PROTO redis): a server that speaks enough RESP to log in,
grant the lease (fence 1000) and watch it, and misbehaves where MODE says:
  redis endless    the renewal's reply is a line that never ends, sent
                   as fast as the client reads
  redis hugearray  the acquire's reply claims 100M elements, and they
                   follow without end
  redis deeparray  the acquire's reply is an array of arrays of 60000
                   elements each, without end
  redis hugebulk   the acquire's reply claims a 1 GB bulk string, and it
                   follows without end
  redis maxheader  the acquire's reply claims 2^31-1 elements, then
                   nothing
  redis onceper    the --once-per run start's reply is {5, "x"}
  redis onceper2   the run start's reply is {2, now}: neither 0 nor 1
  redis oncepernil the run start's reply is another's start a minute ago on
                   host h, with neither fence nor pid (nil)
  redis onceper0   the run start's reply is a record {0, now, ...} whose
                   pid is an integer, not a string or nil
  redis nilfence   the grant's fence is nil: {1, nil}
  redis negfence   the grant's fence is -5: {1, -5}
  redis longfence  the grant's fence is a string of 21 digits, beyond
                   2^64 - 1: {1, "100000000000000000000"}
  redis shortgrant the acquire's reply is {1}, without its fence
  redis fencedown  the first grant (fence 1000) is found gone by the read
                   back before the command; the next has fence 500
  redis deadmaster a sentinel that names a master nobody listens for
                   (127.0.0.1:1): one cut off from the others; or, with
                   HOSTILE_MASTER_PORT, 127.0.0.1 on that port (a replica:
                   one whose view is behind a failover)
  redis badmaster  a sentinel that names a master at port 99999
  redis busy       a sentinel that names itself as the master, and, as
                   that master, answers INFO with BUSY (a script runs)
  redis waitcut    a sentinel that names itself as the master, and, as
                   that master, says it has two online replicas, grants,
                   and closes the connection at the WAIT that follows
  redis longrole   a sentinel that names itself as the master, and, as
                   that master, says its role is 40 x's
  redis badmoved   each script is answered MOVED 1234 127.0.0.1:99999
  redis nocolon    each script is answered MOVED 1234 nowhere
  redis selfmoved  each script is answered MOVED to this server itself
  redis askloop    each script is answered ASK to this server itself,
                   behind ASKING too: a slot that keeps moving (both
                   add a line to PORTFILE.evals for each script)
  redis waitlate   as waitcut, but the WAIT is answered (0) 0.6s late
  redis idloading  the lease is another's (5s left), and a new connection's
                   CLIENT ID is answered LOADING (restarted since)
  redis subloading the same, with SUBSCRIBE answered LOADING
  redis idnoauth   the same, with CLIENT ID answered NOAUTH (a password
                   turned on since)
  redis watchgarbage the lease is another's (5s left), and 0.3s after the
                   first SUBSCRIBE, a byte that is no reply type on that
                   connection
  redis watchbadmsg the same, with a pub/sub message whose channel is an
                   integer, not a name
  redis stray      0.5s after the first grant, a reply nobody asked for
                   ("+stray") on that connection, idle by then
  redis grantcut   the first try finds the lease another's (0.3s left);
                   the second, a waiter's, is granted, and once the
                   round trip that armed its watch is answered, the lease
                   is another's and that connection is closed, with no
                   notice on the watch connection (nothing says a script's
                   own write); later tries are granted, each with a
                   higher fence; a renewal of a lease that is not the
                   caller's says lost (0)
  redis grantwatchcut as grantcut, but what the second try's grant
                   closes, just before it is answered, is the watch
                   connection, and the lease stays the caller's
  redis readonly   a sentinel that names itself as the master, and, as
                   that master, says role:master but answers each script
                   READONLY (demoted since: a failover under way)
  redis echoauth   AUTH is refused with an error that quotes the password
                   it was sent
MySQL modes (PROTO mysql): a server that greets as MySQL 8.0 does
(mysql_native_password, no TLS), takes any login, and answers the
session's setup as a server would:
  mysql grouprepl  SHOW VARIABLES says group_replication_group_name is
                   set: a member of a Group Replication group
  mysql galera     SHOW VARIABLES says wsrep_on is ON: a Galera node of a
                   MySQL build (Percona XtraDB Cluster), which has no
                   @@wsrep_on to ask for
  mysql endless    the setup's SELECT is answered by rows without end
  mysql tlsdrop    the greeting offers TLS, and the connection is closed
                   as the client starts it (a server that restarts)
  mysql huge       the greeting's header claims a packet of 2^24-1 bytes,
                   the first of a chain that never ends, sent as fast as
                   the client reads
  mysql hugerow    the setup's SELECT is answered by such a chain
Logins (PROTO mysql), each checked against the password Hunter2-pw; a
wrong one is refused as a server would (1045, Access denied), and what
the client sent is written to PORTFILE.got ("login USER", "cleartext"):
  mysql sha2       caching_sha2_password, its scramble in the cache: the
                   fast login
  mysql sha2full   caching_sha2_password, not in the cache: the server
                   asks for the password itself
  mysql switch     greets with caching_sha2_password, then switches the
                   client to mysql_native_password with a new nonce
  mysql ed25519    switches the client to MariaDB's client_ed25519
  mysql notls      greets without TLS (for a client that requires it)
  mysql tlsinject  offers TLS, and sends a login OK with its greeting, as
                   one who answers in the server's place would, so that
                   the client reads it after TLS as if it came over TLS
  mysql moreflood  answers the first statement with OKs without end,
                   each saying that another result follows
Wire faults (PROTO mysql, MODE w-NAME): one packet as no server sends
it, where NAME says (MY_FAULTS below lists them); each statement's
first 60 characters go to PORTFILE.got ("sql ..."):
  w-greet...  the greeting: an error, protocol 9, cut short, without
              PROTOCOL_41 or the nonce's second part, or of 1 MB
  w-login...  the packet after our login: empty, a switch to a method of
              a long name or without a nonce, a step out of place, fast
              logins without end
  w-ans...    the answer to the first statement: empty, an OK cut short
              or with a length of 0xff, an error of one byte, 0 columns,
              too many column definitions, a row cut short or too long,
              an error among the rows, ER_CONNECTION_KILLED (w-anskilled)
  w-nogalera  a MariaDB without Galera: @@wsrep_on is an unknown variable
  w-breakstuck, w-breakfail  the lock held by connection 42, which KILL
              never ends; breakfail: asked again, an error
  w-changed, w-notours  the renewal finds connection 8 holding the lock,
              or ours not holding it
  w-givebackfail  the fence's INSERT refused (read-only), and the
              RELEASE_LOCK that gives the lock back too
  w-givebackok  the fence's INSERT refused (read-only), the RELEASE_LOCK
              answered
  w-clear     a switch to mysql_clear_password (with PROTO mysql-unix,
              on the Unix socket PORTFILE.sock): lr must send Hunter2-pw
              and its NUL, anon a NUL alone
  w-multi-nolook, w-multi-rowerr  a server that takes statements
              together (CLIENT_MULTI_STATEMENTS): the look for the others
              sent with the setup answered without a row, or an error
              after the first row of SHOW VARIABLES
  w-unknownmethod  greets with auth_gssapi_client, then switches the
              client to mysql_native_password
  (each w- mode writes "login scramble N", the length of the scramble
  in the client's login)
  w-slotslow  a semaphore's first try answered 1.5 s late, later ones
              at once
  w-fence3    the lock's INSERT answered with the insert id (the fence,
              5) as a 3-byte length-encoded integer
  w-tail...   the answer before the command followed by bytes unasked
  w-later...  the same bytes, sent a moment after that answer
"""

import hashlib
import os
import socket
import struct
import sys
import threading
import time


def pg_message(kind, body):
    return kind + struct.pack("!I", len(body) + 4) + body


def pg_startup(conn):
    """Reads the client's SSLRequest/GSSENCRequest (declined) and its
    startup packet.  False if the client went away."""
    while True:
        head = read_exact(conn, 4)
        if not head:
            return False
        (n,) = struct.unpack("!I", head)
        body = read_exact(conn, n - 4)
        if body is None:
            return False
        if len(body) >= 4 and struct.unpack("!I", body[:4])[0] in (
                80877103, 80877104):  # SSLRequest, GSSENCRequest
            conn.sendall(b"N")
            continue
        return True


def pg_read(conn):
    """One message from the client: (type, body), or None."""
    head = read_exact(conn, 5)
    if head is None:
        return None
    (n,) = struct.unpack("!I", head[1:])
    body = read_exact(conn, n - 4)
    return None if body is None else (head[:1], body)


def pg_serve_setup(mode, conn):
    """Logs in (backend pid 7), then answers each query as mode says."""
    if not pg_startup(conn):
        return
    conn.sendall(pg_message(b"R", struct.pack("!I", 0)) +
                 pg_message(b"K", struct.pack("!II", 7, 7)) +
                 pg_message(b"Z", b"I"))
    while True:
        m = pg_read(conn)
        if m is None or m[0] == b"X":
            return
        if m[0] != b"Q":
            continue
        if mode == "poolcheck" and m[1] == b"SELECT pg_backend_pid()\0":
            conn.sendall(pg_message(b"E", b"SERROR\0VERROR\0C42501\0"
                                    b"Mpermission denied for function "
                                    b"pg_backend_pid\0\0") +
                         pg_message(b"Z", b"I"))
            continue
        if mode == "setupfail":
            conn.sendall(pg_message(b"E", b"SERROR\0VERROR\0C08006\0"
                                    b"Mserver connection lost\0\0") +
                         pg_message(b"Z", b"I"))
            continue
        # The setup's row: pid, key, server_version_num, in recovery,
        # settings set.
        vals = [b"8", b"12345", b"170000", b"f", b"0"] \
            if mode == "poolcheck" else [b"7", b"12345", b"90500", b"f", b"0"]
        desc = struct.pack("!H", len(vals))
        row = struct.pack("!H", len(vals))
        for i, v in enumerate(vals):
            desc += (b"c%d\0" % i) + struct.pack("!IHIhih", 0, 0, 25, -1,
                                                 -1, 0)
            row += struct.pack("!I", len(v)) + v
        conn.sendall(pg_message(b"T", desc) + pg_message(b"D", row) +
                     pg_message(b"C", b"SELECT 1\0") +
                     pg_message(b"Z", b"I"))


def read_exact(conn, n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def drain(conn):
    """Reads whatever the client sends, in the background."""
    def run():
        try:
            while conn.recv(65536):
                pass
        except OSError:
            pass
    threading.Thread(target=run, daemon=True).start()


# ---- ZooKeeper (jute over length-prefixed frames) ----

def zk_frame(body):
    return struct.pack("!i", len(body)) + body


def zk_session(conn):
    """Reads the client's ConnectRequest frame.  False if it went
    away."""
    head = read_exact(conn, 4)
    if not head:
        return False
    (n,) = struct.unpack("!i", head)
    return 0 <= n < 1 << 16 and read_exact(conn, n) is not None


def zk_request(conn):
    """Reads one request frame: its xid, or None if the client went."""
    head = read_exact(conn, 4)
    if not head:
        return None
    (n,) = struct.unpack("!i", head)
    body = read_exact(conn, n) if 8 <= n < 1 << 20 else None
    return struct.unpack("!i", body[:4])[0] if body else None


def zk_serve(mode, conn):
    if not zk_session(conn):
        return
    if mode != "authfail":
        drain(conn)
    # ConnectResponse: protocol 0, timeout 10s, a session, its password,
    # read-only only in mode readonly.
    conn.sendall(zk_frame(struct.pack("!iiqi16sB", 0, 10000, 0x1234,
                                      16, b"p" * 16,
                                      mode == "readonly")))
    if mode == "readonly":
        threading.Event().wait()
    elif mode == "authfail":
        # The credentials (xid -4), then whatever comes next: the reply
        # to the credentials, ZAUTHFAILED (-115).
        while zk_request(conn) not in (-4, None):
            pass
        if zk_request(conn) is None:
            return
        conn.sendall(zk_frame(struct.pack("!iqi", -4, 0, -115)))
        drain(conn)
        threading.Event().wait()
    elif mode == "huge":
        conn.sendall(struct.pack("!I", 0x7fffffff))
        zeros = b"\0" * 65536
        while True:
            conn.sendall(zeros)
    elif mode == "endless":
        ping = zk_frame(struct.pack("!iqi", -2, 1, 0))  # xid PING
        while True:
            conn.sendall(ping * 4096)
    else:
        raise SystemExit("hostile.py: no mode %s for zk" % mode)


# ---- etcd (gRPC over cleartext HTTP/2) ---------------------------------

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
H2_DATA, H2_HEADERS, H2_RST_STREAM, H2_SETTINGS = 0, 1, 3, 4
H2_PING, H2_GOAWAY, H2_WINDOW_UPDATE = 6, 7, 8
H2_ACK, H2_END_HEADERS = 0x1, 0x4
H2_INITIAL_WINDOW_SIZE, H2_MAX_FRAME_SIZE = 4, 5


def h2_frame(kind, flags, stream, payload=b""):
    return (struct.pack("!I", len(payload))[1:] +
            struct.pack("!BBI", kind, flags, stream) + payload)


def hpack_literal(name, value):
    """A header field as a literal without indexing, new name, no
    Huffman (RFC 7541 6.2.2); names and values under 127 bytes."""
    return (b"\0" + bytes([len(name)]) + name +
            bytes([len(value)]) + value)


GRPC_HEADERS = (hpack_literal(b":status", b"200") +
                hpack_literal(b"content-type", b"application/grpc"))


class H2Client:
    """The client's side of one connection, as its server sees it.  A
    thread reads the client's frames: it ACKs SETTINGS and PING, keeps
    the flow-control windows (the connection's and each stream's) and
    hands each new request stream (its HEADERS) to serve(stream)."""

    def __init__(self, conn, serve):
        self.conn = conn
        self.serve = serve
        self.send_lock = threading.Lock()
        self.cv = threading.Condition()
        self.initial = 65535         # SETTINGS_INITIAL_WINDOW_SIZE
        self.max_frame = 16384       # SETTINGS_MAX_FRAME_SIZE
        self.window = 65535          # the connection's send window
        self.windows = {}            # each stream's send window
        self.gone = False

    def send(self, kind, flags, stream, payload=b""):
        with self.send_lock:
            self.conn.sendall(h2_frame(kind, flags, stream, payload))

    def take(self, stream, want):
        """Waits until stream may carry data, and takes up to want bytes
        of both windows.  0 once the client went away."""
        with self.cv:
            while not self.gone and (self.window <= 0 or
                                     self.windows[stream] <= 0):
                self.cv.wait()
            if self.gone:
                return 0
            n = min(want, self.max_frame, self.window,
                    self.windows[stream])
            self.window -= n
            self.windows[stream] -= n
            return n

    def settings(self, payload):
        with self.cv:
            for i in range(0, len(payload) - 5, 6):
                ident, value = struct.unpack("!HI", payload[i:i + 6])
                if ident == H2_INITIAL_WINDOW_SIZE:
                    for s in self.windows:
                        self.windows[s] += value - self.initial
                    self.initial = value
                elif ident == H2_MAX_FRAME_SIZE:
                    self.max_frame = value
            self.cv.notify_all()
        self.send(H2_SETTINGS, H2_ACK, 0)

    def window_update(self, stream, payload):
        (inc,) = struct.unpack("!I", payload[:4])
        with self.cv:
            if stream == 0:
                self.window += inc & 0x7fffffff
            elif stream in self.windows:
                self.windows[stream] += inc & 0x7fffffff
            self.cv.notify_all()

    def run(self):
        """Reads the client's preface and frames until it goes away."""
        try:
            if read_exact(self.conn, len(H2_PREFACE)) != H2_PREFACE:
                return
            self.send(H2_SETTINGS, 0, 0)
            while True:
                head = read_exact(self.conn, 9)
                if head is None:
                    return
                n = struct.unpack("!I", b"\0" + head[:3])[0]
                kind, flags = head[3], head[4]
                stream = struct.unpack("!I", head[5:])[0] & 0x7fffffff
                payload = read_exact(self.conn, n) if n else b""
                if payload is None:
                    return
                if kind == H2_SETTINGS and not flags & H2_ACK:
                    self.settings(payload)
                elif kind == H2_PING and not flags & H2_ACK:
                    self.send(H2_PING, H2_ACK, 0, payload)
                elif kind == H2_WINDOW_UPDATE:
                    self.window_update(stream, payload)
                elif kind == H2_HEADERS and stream not in self.windows:
                    with self.cv:
                        self.windows[stream] = self.initial
                    threading.Thread(target=self.answer, args=(stream,),
                                     daemon=True).start()
        except OSError:
            pass
        finally:
            with self.cv:
                self.gone = True
                self.cv.notify_all()

    def answer(self, stream):
        try:
            self.send(H2_HEADERS, H2_END_HEADERS, stream, GRPC_HEADERS)
            self.serve(self, stream)
        except OSError:
            pass


def etcd_huge(h2, stream):
    """A message prefix that claims 2^31-1 bytes, then zeros as fast as
    the client takes them."""
    body = b"\0" + struct.pack("!I", 0x7fffffff)
    zeros = b"\0" * (1 << 20)
    while True:
        n = h2.take(stream, h2.max_frame)
        if n == 0:
            return
        h2.send(H2_DATA, 0, stream, (body + zeros)[:n])
        body = body[n:]


def etcd_endless(h2, stream):
    """Four bytes of a message prefix, then empty DATA frames without end,
    as fast as the client reads: the client always waits for the fifth
    byte, and its reads never find the socket empty.  (No PINGs: a
    client owes an ACK for each, and nghttp2 ends a session that owes
    1000 as a flood, which would end the run before its wait.)"""
    if h2.take(stream, 4) < 4:
        return
    h2.send(H2_DATA, 0, stream, b"\0\0\0\0")
    flood = h2_frame(H2_DATA, 0, stream) * 8192
    while not h2.gone:
        with h2.send_lock:
            h2.conn.sendall(flood)


# A fake etcd: enough of etcd's gRPC API over HTTP/2 for one leaserun to
# acquire, hold, renew and release, misbehaving where the mode says.

def pb_varint(n):
    n &= (1 << 64) - 1
    out = b""
    while True:
        b = n & 0x7f
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def pb_int(num, v):
    return pb_varint(num << 3) + pb_varint(v) if v else b""


def pb_bytes(num, b):
    return pb_varint(num << 3 | 2) + pb_varint(len(b)) + b


def pb_parse(b):
    """A message's fields: {number: [values]}, ints and bytes."""
    fields, i = {}, 0
    while i < len(b):
        tag, i = pb_read_varint(b, i)
        num, wt = tag >> 3, tag & 7
        if wt == 0:
            v, i = pb_read_varint(b, i)
        elif wt == 2:
            n, i = pb_read_varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wt)
        fields.setdefault(num, []).append(v)
    return fields


def pb_read_varint(b, i):
    n = shift = 0
    while True:
        c = b[i]
        i += 1
        n |= (c & 0x7f) << shift
        shift += 7
        if not c & 0x80:
            return n, i


def pb_first(fields, num, default=None):
    return fields.get(num, [default])[0]


H2_END_STREAM, H2_PADDED = 0x1, 0x8


def grpc_trailers(status, message=b""):
    return (hpack_literal(b"grpc-status", str(status).encode()) +
            (hpack_literal(b"grpc-message", message) if message else b""))


class EtcdFake(H2Client):
    """etcd as one client's connection sees it.  Requests are told apart
    by what they carry (the paths come Huffman-coded): a stream whose
    first message ends it is a unary call, else a Watch (its message a
    create or cancel request) or a LeaseKeepAlive (a lease ID); among the
    unary calls a LeaseGrant carries a TTL and an ID, a LeaseRevoke or
    LeaseTimeToLive an ID alone, a Range a key (leaserun/...), a Txn
    compares.  One key (the client's) at a time; revisions count up from
    10."""

    def __init__(self, conn, mode):
        H2Client.__init__(self, conn, None)
        self.mode = mode
        self.rev = 10
        self.key = None
        self.crev = 0
        self.lease = 0
        self.ttl = 0
        self.bufs = {}
        self.answered = set()
        self.ended = set()

    def reply(self, stream, msg, end=None):
        """A reply message on stream; with end (a status), the trailers
        too."""
        if stream not in self.answered:
            self.answered.add(stream)
            self.send(H2_HEADERS, H2_END_HEADERS, stream, GRPC_HEADERS)
        if msg is not None:
            self.send(H2_DATA, 0, stream,
                      b"\0" + struct.pack("!I", len(msg)) + msg)
        if end is not None:
            self.send(H2_HEADERS, H2_END_HEADERS | H2_END_STREAM, stream,
                      grpc_trailers(*end))
            if stream not in self.ended:
                # The client still sends: the stream is reset, as a
                # gRPC server does after the trailers (NO_ERROR).
                self.send(H2_RST_STREAM, 0, stream, struct.pack("!I", 0))

    def header(self):
        return pb_bytes(1, pb_int(3, self.rev))

    def kv(self):
        return pb_bytes(2, pb_bytes(1, self.key) + pb_int(2, self.crev) +
                        pb_int(3, self.crev) + pb_int(4, 1) +
                        pb_int(6, self.lease))

    def run(self):
        try:
            if read_exact(self.conn, len(H2_PREFACE)) != H2_PREFACE:
                return
            self.send(H2_SETTINGS, 0, 0)
            while True:
                head = read_exact(self.conn, 9)
                if head is None:
                    return
                n = struct.unpack("!I", b"\0" + head[:3])[0]
                kind, flags = head[3], head[4]
                stream = struct.unpack("!I", head[5:])[0] & 0x7fffffff
                payload = read_exact(self.conn, n) if n else b""
                if payload is None:
                    return
                if kind == H2_SETTINGS and not flags & H2_ACK:
                    self.settings(payload)
                elif kind == H2_PING and not flags & H2_ACK:
                    self.send(H2_PING, H2_ACK, 0, payload)
                elif kind == H2_WINDOW_UPDATE:
                    self.window_update(stream, payload)
                elif kind == H2_HEADERS:
                    self.bufs.setdefault(stream, b"")
                elif kind == H2_DATA and stream in self.bufs:
                    if flags & H2_PADDED:
                        payload = payload[1:len(payload) - payload[0]]
                    if flags & H2_END_STREAM:
                        self.ended.add(stream)
                    if n:
                        inc = struct.pack("!I", n)
                        self.send(H2_WINDOW_UPDATE, 0, 0, inc)
                        self.send(H2_WINDOW_UPDATE, 0, stream, inc)
                    buf = self.bufs[stream] + payload
                    while len(buf) >= 5:
                        (m,) = struct.unpack("!I", buf[1:5])
                        if len(buf) < 5 + m:
                            break
                        self.request(stream, pb_parse(buf[5:5 + m]),
                                     bool(flags & H2_END_STREAM))
                        buf = buf[5 + m:]
                    self.bufs[stream] = buf
        except OSError:
            pass
        finally:
            with self.cv:
                self.gone = True
                self.cv.notify_all()

    def request(self, stream, f, unary):
        mode = self.mode
        if not unary:
            sub = pb_first(f, 1)
            if isinstance(sub, bytes):
                self.watch(stream, f)
            elif 1 in f:
                self.keepalive(stream, f)
            return
        if 2 in f and isinstance(pb_first(f, 1), int):  # LeaseGrant
            if mode == "grantfail":
                self.reply(stream, None, (9, b"etcdserver: bad lease TTL"))
                return
            self.lease, self.ttl = pb_first(f, 2), pb_first(f, 1)
            if mode == "shortttl":
                self.ttl = 2
            self.reply(stream, self.header() + pb_int(2, self.lease) +
                       pb_int(3, self.ttl), (0,))
        elif list(f) == [1] and isinstance(pb_first(f, 1), int):
            # LeaseRevoke, LeaseTimeToLive
            self.reply(stream, self.header(), (0,))
        elif isinstance(pb_first(f, 1), bytes) and \
                pb_first(f, 1).startswith(b"leaserun/"):  # Range
            key = pb_first(f, 1)
            mine = self.key is not None and key == self.key
            self.reply(stream, self.header() + (self.kv() if mine else b"") +
                       pb_int(4, 1 if mine else 0), (0,))
        else:
            self.txn(stream, f)

    def txn(self, stream, f):
        mode = self.mode
        for op in f.get(2, []):
            op = pb_parse(op)
            if 2 in op:  # a put: the key that queues us
                put = pb_parse(pb_first(op, 2))
                self.rev += 1
                self.key, self.crev = pb_first(put, 1), self.rev
                self.lease = pb_first(put, 3, 0)
                put_r = pb_bytes(3, pb_bytes(2, self.header()))
                range_r = pb_bytes(3, pb_bytes(1, self.header() + (
                    b"" if mode == "txnnokey" else self.kv()) + pb_int(
                        4, 0 if mode == "txnnokey" else 1)))
                body = self.header() + pb_int(2, 1)
                if mode == "txnnorange":
                    body += put_r
                elif mode != "txnempty":
                    body += put_r + range_r
                self.reply(stream, body, (0,))
                return
            if 3 in op:  # a delete: the release
                self.rev += 1
                self.key = None
                self.reply(stream, self.header() + pb_int(2, 1) + pb_bytes(
                    3, pb_bytes(3, self.header() + pb_int(2, 1))), (0,))
                return
        self.reply(stream, self.header(), (0,))

    def watch(self, stream, f):
        mode = self.mode
        if 1 not in f:
            return  # a cancel
        wid = pb_first(pb_parse(pb_first(f, 1)), 7, 0)
        if mode == "watchsilent":
            return
        if mode == "watchcut":
            def cut():
                time.sleep(0.3)
                try:
                    self.conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            threading.Thread(target=cut, daemon=True).start()
            return
        body = self.header() + pb_int(2, wid) + pb_int(3, 1)
        if mode == "watchcancel":
            body += pb_int(4, 1) + pb_int(5, 5)
        self.reply(stream, body)

    def keepalive(self, stream, f):
        with open(PORTFILE + ".ka", "a") as out:
            out.write("keepalive\n")
        if self.mode == "kaok":
            self.reply(stream, None, (0,))
        elif self.mode == "kastatus":
            self.reply(stream, None, (14, b"etcdserver: leader changed"))
        else:
            self.reply(stream, self.header() + pb_int(2, pb_first(f, 1)) +
                       pb_int(3, self.ttl))


ETCD_FAKE_MODES = ("grantfail", "shortttl", "txnempty", "txnnorange",
                   "txnnokey", "watchsilent", "watchcut", "watchcancel",
                   "kaok", "kastatus")


def etcd_serve(mode, conn):
    if mode in ETCD_FAKE_MODES:
        EtcdFake(conn, mode).run()
        return
    serve = {"huge": etcd_huge, "endless": etcd_endless}.get(mode)
    if serve is None:
        raise SystemExit("hostile.py: no mode %s for etcd" % mode)
    H2Client(conn, serve).run()


# ---- Redis (RESP2) ------------------------------------------------------

class RespReader:
    """The commands a Redis client sends, one list of bytes each."""

    def __init__(self, conn):
        self.conn = conn
        self.buf = b""

    def _more(self):
        chunk = self.conn.recv(65536)
        if not chunk:
            raise EOFError
        self.buf += chunk

    def _line(self):
        while b"\r\n" not in self.buf:
            self._more()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n:
            self._more()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def command(self):
        n = int(self._line()[1:])
        return [self._exact(int(self._line()[1:]) + 2)[:-2]
                for _ in range(n)]


def resp(v):
    """RESP2 for None (nil), int, bytes/str (bulk) or a list."""
    if v is None:
        return b"$-1\r\n"
    if isinstance(v, int):
        return b":%d\r\n" % v
    if isinstance(v, str):
        v = v.encode()
    if isinstance(v, bytes):
        return b"$%d\r\n%s\r\n" % (len(v), v)
    return b"*%d\r\n" % len(v) + b"".join(resp(x) for x in v)


REDIS_INFO = {
    b"replication": "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n",
    b"memory": "# Memory\r\nmaxmemory_policy:noeviction\r\n",
    b"persistence": "# Persistence\r\naof_enabled:1\r\n",
}

redis_lock = threading.Lock()
redis_state = {"value": None, "grants": 0}


def redis_flood(conn, head, unit):
    """Sends head, then unit without end, as fast as the client reads."""
    conn.sendall(head)
    unit = unit * max(1, 65536 // len(unit))
    while True:
        conn.sendall(unit)


def redis_acquire(conn, mode, argv):
    """The acquire script's reply, as MODE says."""
    token = argv[0].decode()
    with redis_lock:
        redis_state["grants"] += 1
        first = redis_state["grants"] == 1
    if mode in ("grantcut", "grantwatchcut") and first:
        conn.sendall(resp([0, 300]))  # held by another, 0.3s left
        return None
    cut = mode == "grantcut" and redis_state["grants"] == 2
    if mode == "grantwatchcut" and redis_state["grants"] == 2:
        # The watch connection goes before the grant is answered.
        redis_state["sub_conn"].shutdown(socket.SHUT_RDWR)
    fence = 1000
    if mode == "fencedown":
        fence = 1000 if first else 500
    if mode in ("grantcut", "grantwatchcut"):  # above the last
        fence = 1000 + redis_state["grants"]
    if mode == "hugearray":
        redis_flood(conn, b"*100000000\r\n", b":1\r\n")
    elif mode == "deeparray":
        redis_flood(conn, b"*60000\r\n",
                    b"*60000\r\n" + b":1\r\n" * 60000)
    elif mode == "hugebulk":
        redis_flood(conn, b"$1073741824\r\n", b"x")
    elif mode == "maxheader":
        conn.sendall(b"*2147483647\r\n")
        drain(conn)
        while True:
            time.sleep(1)
    elif mode == "nilfence":
        conn.sendall(resp([1, None]))
    elif mode == "negfence":
        conn.sendall(resp([1, -5]))
    elif mode == "longfence":
        conn.sendall(resp([1, "1" + "0" * 20]))
    elif mode == "shortgrant":
        conn.sendall(resp([1]))
    else:
        owner = "someone-else" if mode == "fencedown" and first else token
        redis_state["value"] = "%s %d 1 0 hostile" % (owner, fence)
        conn.sendall(resp([1, str(fence)]))
        if mode == "stray" and first:
            threading.Timer(0.5, conn.sendall, [b"+stray\r\n"]).start()
    return "cut" if cut else None


def redis_script(conn, mode, body, argv):
    """Answers an EVAL by what its script does."""
    if (mode in ("idloading", "subloading", "idnoauth", "watchgarbage",
                 "watchbadmsg") and
            b"queue()" in body):
        conn.sendall(resp([0, 5000]))  # held by another, 5s left
    elif mode == "readonly":
        conn.sendall(b"-READONLY You can't write against a read only "
                     b"replica.\r\n")
    elif mode == "badmoved":
        conn.sendall(b"-MOVED 1234 127.0.0.1:99999\r\n")
    elif mode == "nocolon":
        conn.sendall(b"-MOVED 1234 nowhere\r\n")
    elif mode in ("selfmoved", "askloop"):
        with redis_lock, open(PORTFILE + ".evals", "a") as f:
            f.write("eval\n")
        conn.sendall(b"-%s 1234 127.0.0.1:%d\r\n"
                     % (b"MOVED" if mode == "selfmoved" else b"ASK",
                        redis_state["port"]))
    elif b"queue()" in body:
        return redis_acquire(conn, mode, argv)
    elif b"HMGET" in body:  # --once-per: the run start
        if mode == "onceper":
            conn.sendall(resp([5, "x"]))
        elif mode == "onceper2":
            conn.sendall(resp([2, int(time.time() * 1000)]))
        elif mode == "oncepernil":
            now = int(time.time() * 1000)
            conn.sendall(resp([0, now, None, str(now - 60000), "h", None,
                               "3600000", None, None]))
        elif mode == "onceper0":
            now = int(time.time() * 1000)
            conn.sendall(resp([0, now, "1", str(now), "h", 5, "3600000",
                               str(now), "0"]))
        else:
            conn.sendall(resp([1, int(time.time() * 1000)]))
    elif b"return redis.call('PEXPIRE'" in body:  # renew
        if mode == "endless":
            redis_flood(conn, b"+", b"x")
        if mode == "grantcut" and not (redis_state["value"] or "").startswith(
                argv[0].decode() + " "):
            conn.sendall(resp(0))
            return None
        conn.sendall(resp(1))
    else:  # release, run end
        conn.sendall(resp(1))
    return None


def redis_serve(mode, conn):
    reader = RespReader(conn)
    cut = False
    while True:
        try:
            cmd = reader.command()
        except EOFError:
            return
        name = cmd[0].upper()
        if name == b"EVALSHA":
            conn.sendall(b"-NOSCRIPT No matching script. Please use EVAL.\r\n")
        elif name == b"EVAL":
            nkeys = int(cmd[2])
            if redis_script(conn, mode, cmd[1], cmd[3 + nkeys:]) == "cut":
                cut = True
        elif (name == b"INFO" and mode == "longrole" and
              cmd[1].lower() == b"replication"):
            conn.sendall(resp("# Replication\r\nrole:" + "x" * 40 + "\r\n"))
        elif name == b"INFO" and mode == "busy":
            conn.sendall(b"-BUSY Redis is busy running a script.\r\n")
        elif (name == b"INFO" and mode in ("waitcut", "waitlate") and
              cmd[1].lower() == b"replication"):
            conn.sendall(resp("# Replication\r\nrole:master\r\n"
                              "connected_slaves:2\r\n"
                              "slave0:ip=127.0.0.1,port=1,state=online,"
                              "offset=0,lag=0\r\n"
                              "slave1:ip=127.0.0.1,port=2,state=online,"
                              "offset=0,lag=0\r\n"))
        elif name == b"WAIT" and mode == "waitcut":
            return
        elif name == b"WAIT" and mode == "waitlate":
            time.sleep(0.6)
            conn.sendall(resp(0))
        elif name == b"INFO":
            conn.sendall(resp(REDIS_INFO.get(cmd[1].lower(), "")))
        elif name == b"GET":
            conn.sendall(resp(redis_state["value"]))
            if cut:  # grantcut: the GET behind the watch's TRACKING
                redis_state["value"] = "someone-else 1001 1 0 hostile"
                conn.close()
                return
        elif (name == b"CLIENT" and cmd[1].upper() == b"ID" and
              mode == "idnoauth"):
            conn.sendall(b"-NOAUTH Authentication required.\r\n")
        elif ((name == b"CLIENT" and cmd[1].upper() == b"ID" and
               mode == "idloading") or
              (name == b"SUBSCRIBE" and mode == "subloading")):
            conn.sendall(b"-LOADING Redis is loading the dataset in "
                         b"memory\r\n")
        elif name == b"CLIENT" and cmd[1].upper() == b"ID":
            conn.sendall(resp(7))
        elif name == b"SUBSCRIBE":
            redis_state["sub_conn"] = conn
            conn.sendall(b"".join(resp([b"subscribe", ch, i + 1])
                                  for i, ch in enumerate(cmd[1:])))
            if mode in ("watchgarbage", "watchbadmsg"):
                with redis_lock:
                    redis_state["subs"] = redis_state.get("subs", 0) + 1
                    first_sub = redis_state["subs"] == 1
                if first_sub:
                    odd = (b"\x00bad\r\n" if mode == "watchgarbage" else
                           b"*3\r\n$7\r\nmessage\r\n:5\r\n$1\r\nx\r\n")
                    threading.Timer(0.3, conn.sendall, [odd]).start()
        elif name == b"WAIT":
            conn.sendall(resp(0))
        elif name == b"SENTINEL" and mode == "deadmaster":
            port = os.environ.get("HOSTILE_MASTER_PORT", "1").encode()
            conn.sendall(resp([b"127.0.0.1", port]))
        elif name == b"SENTINEL" and mode in ("readonly", "busy", "waitcut",
                                              "waitlate", "longrole"):
            port = str(redis_state["port"]).encode()
            conn.sendall(resp([b"127.0.0.1", port]))
        elif name == b"SENTINEL" and mode == "badmaster":
            conn.sendall(resp([b"127.0.0.1", b"99999"]))
        elif name == b"PING":
            conn.sendall(b"+PONG\r\n")
        elif name == b"AUTH" and mode == "echoauth":
            # A server (or a proxy) that quotes what it was sent.
            conn.sendall(b"-WRONGPASS '" + cmd[-1] + b"' is not the "
                         b"password\r\n")
        else:  # AUTH, SELECT, CLIENT TRACKING
            conn.sendall(b"+OK\r\n")


# ---- MySQL (the client/server protocol, 4.1 and later) ----

def my_packet(seq, body):
    return struct.pack("<I", len(body))[:3] + bytes([seq & 0xff]) + body


def my_lenenc(v):
    """A length-encoded string (None: SQL NULL)."""
    if v is None:
        return b"\xfb"
    if isinstance(v, str):
        v = v.encode()
    assert len(v) < 251
    return bytes([len(v)]) + v


def my_read(conn):
    """One packet's (seq, body), or None if the client went away."""
    head = read_exact(conn, 4)
    if not head:
        return None
    n = head[0] | head[1] << 8 | head[2] << 16
    body = read_exact(conn, n)
    return None if body is None else (head[3], body)


MY_OK = b"\x00\x00\x00\x02\x00\x00\x00"  # no rows, autocommit, no warnings
MY_EOF = b"\xfe\x00\x00\x02\x00"


MY_PASSWORD = b"Hunter2-pw"
MY_NONCE = b"abcdefghijklmnopqrst"
PORTFILE = None


def my_greeting(tls=False, plugin=b"mysql_native_password",
                version=b"8.0.36-hostile"):
    caps = (0x1 | 0x4 | 0x8 | 0x200 | 0x2000 | 0x8000 | 0x20000 |
            0x80000)  # PROTOCOL_41, SECURE_CONNECTION, PLUGIN_AUTH...
    if tls:
        caps |= 0x800  # CLIENT_SSL
    return (b"\x0a" + version + b"\x00" + struct.pack("<I", 7) +
            MY_NONCE[:8] + b"\x00" + struct.pack("<H", caps & 0xffff) +
            b"\x2d" + struct.pack("<H", 2) + struct.pack("<H", caps >> 16) +
            b"\x15" + b"\x00" * 10 + MY_NONCE[8:] + b"\x00" + plugin +
            b"\x00")


def xor(a, b):
    return bytes(x ^ y for x, y in zip(a, b))


def my_native(pw, nonce):
    """mysql_native_password's scramble, as the server checks it."""
    h1 = hashlib.sha1(pw).digest()
    return xor(h1, hashlib.sha1(nonce + hashlib.sha1(h1).digest()).digest())


def my_sha2(pw, nonce):
    """caching_sha2_password's scramble, as the server checks it."""
    h1 = hashlib.sha256(pw).digest()
    h2 = hashlib.sha256(hashlib.sha256(h1).digest() + nonce).digest()
    return xor(h1, h2)


def my_got(what):
    with open(PORTFILE + ".got", "a") as f:
        f.write(what + "\n")


def my_denied(conn, seq):
    conn.sendall(my_packet(seq, b"\xff" + struct.pack("<H", 1045) +
                           b"#28000Access denied for user 'lr' (hostile)"))


def my_login(mode, conn):
    """The login of the modes that check it.  True if it succeeded (the
    OK sent); False if refused or gone."""
    got = my_read(conn)
    if got is None:
        return False
    body = got[1]
    end = body.index(b"\0", 32)
    user = body[32:end]
    auth = body[end + 2:end + 2 + body[end + 1]]
    my_got("login " + user.decode(errors="replace"))
    if mode == "sha2":
        if auth != my_sha2(MY_PASSWORD, MY_NONCE):
            my_denied(conn, 2)
            return False
        conn.sendall(my_packet(2, b"\x01\x03") + my_packet(3, MY_OK))
        return True
    if mode == "sha2full":
        conn.sendall(my_packet(2, b"\x01\x04"))
        got = my_read(conn)
        if got is not None and MY_PASSWORD in got[1]:
            my_got("cleartext")
        if got is not None:
            my_denied(conn, 4)
        return False
    new = b"ABCDEFGHIJKLMNOPQRST"
    name = b"client_ed25519" if mode == "ed25519" else b"mysql_native_password"
    conn.sendall(my_packet(2, b"\xfe" + name + b"\x00" + new + b"\x00"))
    got = my_read(conn)
    if got is None:
        return False
    if got[1] != my_native(MY_PASSWORD, new):
        my_denied(conn, 4)
        return False
    conn.sendall(my_packet(4, MY_OK))
    return True


def my_rows(conn, names, rows):
    """A result set of text columns."""
    seq = 1
    out = [my_packet(seq, bytes([len(names)]))]
    for n in names:
        seq += 1
        out.append(my_packet(seq, my_lenenc("def") + b"\x00\x00\x00" +
                             my_lenenc(n) + my_lenenc(n) + b"\x0c" +
                             struct.pack("<HIBHB", 45, 255, 0xfd, 0, 0) +
                             b"\x00\x00"))
    seq += 1
    out.append(my_packet(seq, MY_EOF))
    for r in rows:
        seq += 1
        out.append(my_packet(seq, b"".join(my_lenenc(v) for v in r)))
    seq += 1
    out.append(my_packet(seq, MY_EOF))
    conn.sendall(b"".join(out))


def my_flood_rows(conn):
    """The header of a one-column result set, then rows without end."""
    conn.sendall(my_packet(1, b"\x01") +
                 my_packet(2, my_lenenc("def") + b"\x00\x00\x00\x01x\x01x" +
                           b"\x0c" + struct.pack("<HIBHB", 45, 255, 0xfd, 0,
                                                  0) + b"\x00\x00") +
                 my_packet(3, MY_EOF))
    seq = 4
    while True:
        conn.sendall(b"".join(my_packet(seq + i, b"\x08hostile!")
                              for i in range(4096)))
        seq += 4096


def my_chain(conn, seq):
    """Packets of 2^24-1 bytes, each saying that another follows, without
    end, as fast as the client reads."""
    chunk = b"\0" * (1 << 16)
    while True:
        conn.sendall(b"\xff\xff\xff" + bytes([seq & 0xff]))
        for _ in range(((1 << 24) - 1) // len(chunk)):
            conn.sendall(chunk)
        conn.sendall(chunk[:((1 << 24) - 1) % len(chunk)])
        seq += 1


# The bytes a w-tail.../w-later... mode sends unasked: an error packet
# (MariaDB's ER_CONNECTION_KILLED), the same followed by more, a header
# and the error's first byte alone, an OK.
MY_KILLED = my_packet(9, b"\xff\x87\x07#70100Connection was killed")
MY_UNASKED = {
    "err": MY_KILLED,
    "errmore": MY_KILLED + b"\x00" * 8,
    "five": b"\x01\x00\x00\x09\xff",
    "ok": my_packet(9, MY_OK),
}


def my_greeting_fault(name):
    g = my_greeting()
    ver = g.index(b"\0") + 1
    caps_hi = ver + 4 + 8 + 1 + 2 + 1 + 2 + 2  # through the caps' high half
    if name == "greeterr":
        return (b"\xff" + struct.pack("<H", 1040) +
                b"#08004Too many connections (hostile)")
    if name == "greet9":
        return b"\x09" + g[1:]
    if name == "greetshort":  # the 10 reserved bytes cut short
        return g[:caps_hi + 5]
    if name == "greet40":  # PROTOCOL_41 not among the capabilities
        i = ver + 4 + 8 + 1
        return g[:i] + struct.pack("<H", struct.unpack(
            "<H", g[i:i + 2])[0] & ~0x200) + g[i + 2:]
    if name == "greetnononce":  # 5 of the nonce's last 12 bytes
        return g[:caps_hi + 11 + 5]
    if name == "greetbig":  # 1 MB, the bound: past the first buffers
        return g + b"x" * ((1 << 20) - len(g))
    return g


def my_result(names, rows, more):
    """The packets' bodies of a result set of text columns; more: another
    result follows (MORE_RESULTS in its last EOF)."""
    out = [bytes([len(names)])]
    for n in names:
        out.append(my_lenenc("def") + b"\x00\x00\x00" + my_lenenc(n) +
                   my_lenenc(n) + b"\x0c" +
                   struct.pack("<HIBHB", 45, 255, 0xfd, 0, 0) + b"\x00\x00")
    out.append(MY_EOF)
    out += [b"".join(my_lenenc(v) for v in r) for r in rows]
    out.append(b"\xfe\x00\x00" + struct.pack("<H", 0x0a if more else 2))
    return out


def my_multi(name, conn, sql):
    """The answers to statements sent together (w-multi... modes), each
    saying that the next follows: as a server that has the lock free,
    but the look for the others without a row (multi-nolook), or an
    error after the first row of SHOW VARIABLES (multi-rowerr)."""
    stmts = sql.split("; ")
    out = []
    for i, st in enumerate(stmts):
        more = i < len(stmts) - 1
        if st.startswith("SELECT CONNECTION_ID()"):
            b = my_result(["id", "lock", "ro", "flush", "rlock", "engine"],
                          [["7", "lr:hostile", "0", "1", "lr:hostile#r7",
                            None]], more)
        elif st.startswith("SHOW VARIABLES"):
            b = my_result(["Variable_name", "Value"],
                          [["wsrep_on", "OFF"]], more)
            if name == "multi-rowerr":
                b = b[:-1] + [b"\xff" + struct.pack("<H", 1317) +
                              b"#70100Query execution was interrupted"]
        elif st.startswith("SHOW CREATE TABLE"):
            b = my_result(["Table", "Create Table"],
                          [["leaserun_fences", "CREATE TABLE x (\n"
                            "  name int\n) ENGINE=InnoDB"]], more)
        elif st.startswith("SELECT IF(IS_USED_LOCK(") or \
                st.startswith("SELECT RELEASE_LOCK("):
            b = my_result(["x"], [["1"]], more)
        elif st.startswith("SELECT COALESCE(IS_USED_LOCK("):
            b = my_result(["x", "y", "z"], [] if name == "multi-nolook"
                          else [["0", None, None]], more)
        elif st.startswith("INSERT"):
            b = [b"\x00\x01\x05" + struct.pack("<H", 0x0a if more else 2) +
                 b"\x00\x00"]
        else:
            b = [b"\x00\x00\x00" + struct.pack("<H", 0x0a if more else 2) +
                 b"\x00\x00"]
        out += b
        if b[-1][:1] == b"\xff":
            break
    conn.sendall(b"".join(my_packet(1 + i, b) for i, b in enumerate(out)))


MY_LAST = "INSERT"  # the last statement before the command
MY_GRANTS = []  # the w-tail... modes' INSERTs


def my_wire_fault(name, conn):
    """The w-NAME modes (see the docstring)."""
    plugin = b"mysql_native_password"
    if name in ("loginstep3", "loginloop"):
        plugin = b"caching_sha2_password"
    if name == "unknownmethod":
        plugin = b"auth_gssapi_client"
    if name.startswith("greet"):
        conn.sendall(my_packet(0, my_greeting_fault(name)))
    elif name == "nogalera":
        conn.sendall(my_packet(0, my_greeting(
            version=b"5.5.5-10.11.6-MariaDB-hostile")))
    elif name.startswith("multi"):  # takes statements together
        g = my_greeting(False, plugin)
        i = g.index(b"\0") + 1 + 4 + 8 + 1 + 2 + 1 + 2
        conn.sendall(my_packet(0, g[:i] + struct.pack(
            "<H", struct.unpack("<H", g[i:i + 2])[0] | 1) + g[i + 2:]))
    else:
        conn.sendall(my_packet(0, my_greeting(False, plugin)))
    got = my_read(conn)
    if got is None:
        return
    end = got[1].find(b"\0", 32)
    if end > 0 and end + 1 < len(got[1]):  # the scramble's length
        my_got("login scramble %d" % got[1][end + 1])
    if name == "unknownmethod":
        # Greeted with a method the client does not speak: it answers
        # without a scramble, and the server switches it to
        # mysql_native_password.
        new = b"ABCDEFGHIJKLMNOPQRST"
        conn.sendall(my_packet(2, b"\xfemysql_native_password\0" + new +
                               b"\0"))
        got = my_read(conn)
        if got is None or got[1] != my_native(MY_PASSWORD, new):
            my_denied(conn, 4)
            return
        conn.sendall(my_packet(4, MY_OK))
    if name == "clear":
        # A switch to mysql_clear_password: the password and its NUL,
        # for lr; for anon, the empty one (a NUL alone).
        user = got[1][32:got[1].index(b"\0", 32)]
        conn.sendall(my_packet(2, b"\xfemysql_clear_password\0"))
        got = my_read(conn)
        want = b"\0" if user == b"anon" else MY_PASSWORD + b"\0"
        if got is None or got[1] != want:
            my_got("cleartext refused")
            my_denied(conn, 4)
            return
        my_got("cleartext " + user.decode())
        conn.sendall(my_packet(4, MY_OK))
    login = {
        "loginempty": [b""],
        "loginlong": [b"\xfe" + b"x" * 70 + b"\0" + MY_NONCE + b"\0"],
        "loginnononce": [b"\xfe" + b"mysql_native_password\0" + b"short"],
        "loginstep": [b"\x01\x03"],  # caching_sha2's, to another method
        "loginstep3": [b"\x01\x07"],
        "login2": [b"\x02"],
        "loginloop": [b"\x01\x03"] * 6,
    }.get(name)
    if name == "clear":
        login = None
    elif login:
        # Then an OK, which a client that read on would take for the end
        # of the login.
        if name != "loginloop":
            login.append(MY_OK)
        conn.sendall(b"".join(my_packet(2 + i, b) for i, b in
                              enumerate(login)))
        drain(conn)
        time.sleep(30)
        return
    if name not in ("clear", "unknownmethod"):
        conn.sendall(my_packet(2, MY_OK))
    first = True
    while True:
        got = my_read(conn)
        if got is None or got[1][:1] == b"\x01":  # COM_QUIT
            if got is not None:
                my_got("quit")
            return
        sql = got[1][1:].decode(errors="replace")
        for st in sql.split("; "):
            my_got("sql " + st[:60])
        if name.startswith("multi"):
            my_multi(name, conn, sql)
            continue
        ans = {
            "ansempty": [b""],
            "ansokshort": [b"\x00"],
            "ansokff": [b"\x00\xff\x00\x02\x00\x00\x00"],
            "anserr1": [b"\xff"],
            "ans0cols": [b"\xfc\x00\x00"],
            "anskilled": [MY_KILLED[4:]],
        }.get(name) if first else None
        first = False
        one_col = (b"\x03def\x00\x00\x00\x01x\x01x\x0c" +
                   struct.pack("<HIBHB", 45, 255, 0xfd, 0, 0) + b"\x00\x00")
        if ans is None and name in ("anscoldefs", "ansrowshort",
                                    "ansrowlong", "ansrowerr") and \
                sql.startswith("SELECT CONNECTION_ID()"):
            ans = {
                "anscoldefs": [b"\x01", one_col, one_col, MY_EOF],
                "ansrowshort": [b"\x01", one_col, MY_EOF, b"\x05"],
                "ansrowlong": [b"\x01", one_col, MY_EOF, b"\x01x\x01y"],
                "ansrowerr": [b"\x01", one_col, MY_EOF, b"\x017",
                              b"\xff" + struct.pack("<H", 1317) +
                              b"#70100Query execution was interrupted"],
            }[name]
        if ans is not None:
            conn.sendall(b"".join(my_packet(1 + i, b) for i, b in
                                  enumerate(ans)))
            continue
        err = None
        if name == "nogalera" and "@@wsrep_on" in sql:
            err = (1193, b"HY000Unknown system variable 'wsrep_on'")
        if name in ("breakstuck", "breakfail") and \
                sql.startswith("SELECT IS_USED_LOCK(") and "<=>" not in sql:
            # The holder's connection, which KILL never ends; asked
            # again, an error for breakfail.
            MY_GRANTS.append(sql)
            if name == "breakfail" and len(MY_GRANTS) > 1:
                err = (1317, b"70100Query execution was interrupted")
            else:
                my_rows(conn, ["x"], [["42"]])
                continue
        if name in ("givebackfail", "givebackok") and \
                sql.startswith("INSERT INTO leaserun_fences"):
            err = (1290, b"HY000The MariaDB server is running with the "
                   b"--read-only option so it cannot execute this statement")
        if name == "givebackfail" and sql.startswith("SELECT RELEASE_LOCK("):
            err = (1317, b"70100Query execution was interrupted")
        if err:
            conn.sendall(my_packet(1, b"\xff" + struct.pack("<H", err[0]) +
                                   b"#" + err[1]))
            continue
        if name in ("changed", "notours") and \
                sql.startswith("SELECT IS_USED_LOCK(") and \
                sql.endswith("CONNECTION_ID(), CONNECTION_ID()"):
            # The renewal: another connection's session, or ours
            # without the lock.
            my_rows(conn, ["x", "y"], [["1", "8"] if name == "changed"
                                       else ["0", "7"]])
            continue
        if name == "slotslow" and sql.startswith("SELECT CASE WHEN GET_LOCK("):
            # A semaphore's try: slot 0, the first time 1.5 s late.
            MY_GRANTS.append(sql)
            if len(MY_GRANTS) == 1:
                time.sleep(1.5)
            my_rows(conn, ["x"], [["0"]])
            continue
        if name == "fence3" and sql.startswith("INSERT"):
            conn.sendall(my_packet(1, b"\x00\x01\xfd\x05\x00\x00\x02\x00"
                                      b"\x00\x00"))
            continue
        if name.startswith("tail") and sql.startswith(MY_LAST):
            # In the same write as the answer: they come together.  The
            # first session only; a later one has fence 6.
            MY_GRANTS.append(sql)
            tail = MY_UNASKED[name[4:]] if len(MY_GRANTS) == 1 else b""
            conn.sendall(my_packet(1, b"\x00\x01" +
                                   bytes([4 + len(MY_GRANTS)]) +
                                   b"\x02\x00\x00\x00") + tail)
            continue
        my_answer(name, conn, sql)
        if name.startswith("later") and sql.startswith(MY_LAST):
            time.sleep(0.5)
            conn.sendall(MY_UNASKED[name[5:]])


def my_serve(mode, conn):
    if mode == "huge":
        drain(conn)
        my_chain(conn, 0)
    plugin = b"mysql_native_password"
    if mode in ("sha2", "sha2full", "switch", "ed25519"):
        plugin = b"caching_sha2_password"
    if mode == "tlsinject":
        conn.sendall(my_packet(0, my_greeting(True, plugin)) +
                     my_packet(3, MY_OK))
        drain(conn)
        time.sleep(30)
        return
    conn.sendall(my_packet(0, my_greeting(mode == "tlsdrop", plugin)))
    if mode in ("sha2", "sha2full", "switch", "ed25519"):
        if not my_login(mode, conn):
            return
    else:
        got = my_read(conn)  # the login, or TLS
        if got is None or mode == "tlsdrop":
            return
        my_got("login")
        conn.sendall(my_packet(2, MY_OK))
    while True:
        got = my_read(conn)
        if got is None or got[1][:1] == b"\x01":  # COM_QUIT
            return
        sql = got[1][1:].decode(errors="replace")
        if mode == "moreflood":
            more = b"\x00\x00\x00\x0a\x00\x00\x00"  # MORE_RESULTS
            seq = 1
            while True:
                conn.sendall(b"".join(my_packet(seq + i, more)
                                      for i in range(256)))
        if sql.startswith("SELECT CONNECTION_ID()"):
            if mode == "endless":
                my_flood_rows(conn)
            if mode == "hugerow":
                my_chain(conn, 1)
        my_answer(mode, conn, sql)


def my_answer(mode, conn, sql):
    """The answer of a server that has the lock free to the statement
    sql."""
    if sql.startswith("SELECT CONNECTION_ID()"):
        my_rows(conn, ["id", "lock", "ro", "flush", "rlock", "engine"],
                [["7", "lr:hostile", "0", "1", "lr:hostile#r7",
                  "InnoDB"]])
    elif sql.startswith("SHOW VARIABLES"):
        my_rows(conn, ["Variable_name", "Value"],
                [["group_replication_group_name",
                  "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"]]
                if mode == "grouprepl" else
                [["wsrep_on", "ON"]] if mode == "galera" else [])
    # The rest of a grant, as a server that has the lock free: the
    # lock taken, no other holder, fence 5, the lock ours, released.
    elif sql.startswith("SELECT IF(IS_USED_LOCK(") or \
            sql.startswith("SELECT RELEASE_LOCK("):
        my_rows(conn, ["x"], [["1"]])
    elif sql.startswith("SELECT COALESCE(IS_USED_LOCK("):
        my_rows(conn, ["x", "y", "z"], [["0", None, None]])
    elif sql.startswith("SELECT IS_USED_LOCK(") and \
            sql.endswith("CONNECTION_ID(), CONNECTION_ID()"):
        my_rows(conn, ["x", "y"], [["1", "7"]])
    elif sql.startswith("SELECT"):
        my_rows(conn, ["x"], [])
    elif sql.startswith("INSERT"):
        conn.sendall(my_packet(1, b"\x00\x01\x05\x02\x00\x00\x00"))
    else:
        conn.sendall(my_packet(1, MY_OK))


def serve(proto, mode, conn):
    if mode == "silent":
        while conn.recv(65536):
            pass
    elif mode == "garbage":
        if proto == "mysql":  # the server speaks first
            conn.sendall(b"\x00\xff\x01garbage\r\n\x7f" * 64)
        while conn.recv(65536):
            conn.sendall(b"\x00\xff\x01garbage\r\n\x7f" * 64)
    elif mode == "eof":
        conn.recv(65536)
    elif mode == "reset":
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                        struct.pack("ii", 1, 0))
    elif mode == "slow":
        drain(conn)
        while True:
            conn.sendall(b"+" if proto == "redis" else b"N")
            time.sleep(1)
    elif proto == "pg" and mode == "notices":
        if not pg_startup(conn):
            return
        drain(conn)
        conn.sendall(pg_message(b"R", struct.pack("!I", 0)))
        notice = pg_message(b"N", b"SNOTICE\0VNOTICE\0C00000\0"
                            b"Mhostile notice\0\0")
        while True:
            conn.sendall(notice * 256)
    elif proto == "zk" and mode in ("huge", "endless", "readonly",
                                    "authfail"):
        zk_serve(mode, conn)
    elif proto == "etcd":
        etcd_serve(mode, conn)
    elif proto == "pg" and mode in ("endless", "hugerow"):
        if not pg_startup(conn):
            return
        conn.sendall(pg_message(b"R", struct.pack("!I", 0)) +
                     pg_message(b"K", struct.pack("!II", 7, 7)) +
                     pg_message(b"Z", b"I"))
        if read_exact(conn, 1) is None:  # the first query
            return
        drain(conn)
        conn.sendall(pg_message(b"T", struct.pack("!H", 1) + b"x\0" +
                                struct.pack("!IHIhih", 0, 0, 25, -1, -1, 0)))
        if mode == "hugerow":
            conn.sendall(b"D" + struct.pack("!IHI", 0x3fffffff, 1,
                                            0x3fffffff - 10))
            zeros = b"\0" * 65536
            while True:
                conn.sendall(zeros)
                time.sleep(0.001)
        row = pg_message(b"D", struct.pack("!HI", 1, 8) + b"hostile!")
        while True:
            conn.sendall(row * 4096)
    elif proto == "pg" and mode in ("old", "setupfail", "poolcheck"):
        pg_serve_setup(mode, conn)
    elif proto == "pg" and mode == "huge":
        if not pg_startup(conn):
            return
        drain(conn)
        conn.sendall(b"R" + struct.pack("!I", 0x7fffffff))
        while True:
            conn.sendall(b"\0")
            time.sleep(1)
    elif proto == "redis":
        redis_serve(mode, conn)
    elif proto == "mysql" and mode in ("grouprepl", "galera", "endless",
                                        "huge", "hugerow", "tlsdrop", "sha2",
                                        "sha2full", "switch", "ed25519",
                                        "notls", "tlsinject", "moreflood"):
        my_serve(mode, conn)
    elif proto == "mysql" and mode.startswith("w-"):
        my_wire_fault(mode[2:], conn)
    else:
        raise SystemExit("hostile.py: no mode %s for %s" % (mode, proto))


def handle(proto, mode, conn):
    try:
        serve(proto, mode, conn)
    except OSError:
        pass
    finally:
        conn.close()


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    global PORTFILE
    proto, mode, portfile = argv[1:]
    PORTFILE = portfile
    if proto == "mysql-unix":  # on the Unix socket PORTFILE.sock; port 0
        proto = "mysql"
        ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ls.bind(portfile + ".sock")
        port = 0
    else:
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind(("127.0.0.1", 0))
        port = ls.getsockname()[1]
    ls.listen(16)
    redis_state["port"] = ls.getsockname()[1]
    tmp = portfile + ".new"
    with open(tmp, "w") as f:
        f.write("%d\n" % port)
    os.rename(tmp, portfile)
    while True:
        conn, _ = ls.accept()
        with open(PORTFILE + ".conns", "a") as f:
            f.write("accepted\n")
        threading.Thread(target=handle, args=(proto, mode, conn),
                         daemon=True).start()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
