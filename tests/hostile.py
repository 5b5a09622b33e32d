#!/usr/bin/python3
"""hostile.py PROTO MODE PORTFILE - a store server that misbehaves.

Listens on a free loopback port, writes the port to PORTFILE, and serves
every connection as MODE says, until it is killed.  The tests use it to
show that no reply can crash leaserun, hold it past a deadline or make it
eat memory (tests/hostile.bats).

Modes for every PROTO:
  silent    accept, read what comes, never answer
  garbage   answer each read with bytes that are no protocol's
  reset     close at once with a reset (SO_LINGER 0)
  slow      answer one byte a second, of a reply that never ends
Modes by protocol (PROTO pg: PostgreSQL's v3 protocol):
  pg notices   decline TLS, accept the startup, then send NoticeResponse
               messages without end
  pg huge      decline TLS, then a message header claiming 2 GB, and
               its body a byte a second
  zk huge      answer the session request, then a reply whose length
               prefix claims 2 GB, and its body as fast as the client
               takes it
  zk endless   answer the session request, then ping replies without end
"""

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


def zk_serve(mode, conn):
    if not zk_session(conn):
        return
    drain(conn)
    # ConnectResponse: protocol 0, timeout 10s, a session, its password,
    # not read-only.
    conn.sendall(zk_frame(struct.pack("!iiqi16sB", 0, 10000, 0x1234,
                                      16, b"p" * 16, 0)))
    if mode == "huge":
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


def serve(proto, mode, conn):
    if mode == "silent":
        while conn.recv(65536):
            pass
    elif mode == "garbage":
        while conn.recv(65536):
            conn.sendall(b"\x00\xff\x01garbage\r\n\x7f" * 64)
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
    elif proto == "zk" and mode in ("huge", "endless"):
        zk_serve(mode, conn)
    elif proto == "pg" and mode == "huge":
        if not pg_startup(conn):
            return
        drain(conn)
        conn.sendall(b"R" + struct.pack("!I", 0x7fffffff))
        while True:
            conn.sendall(b"\0")
            time.sleep(1)
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
    proto, mode, portfile = argv[1:]
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    tmp = portfile + ".new"
    with open(tmp, "w") as f:
        f.write("%d\n" % ls.getsockname()[1])
    os.rename(tmp, portfile)
    while True:
        conn, _ = ls.accept()
        threading.Thread(target=handle, args=(proto, mode, conn),
                         daemon=True).start()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
