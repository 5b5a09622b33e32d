/*
 * zk-session.c - one ZooKeeper client session, driven by our poll loop
 * and by synchronous calls with absolute deadlines.  See zk-session.h.
 *
 * Every synchronous call drives the client itself with poll() on its
 * socket up to the call's deadline (zookeeper_interest/_process and the
 * asynchronous zoo_a* calls; the single-threaded client has no threads).
 * Between calls the core's loop drives it: lr_zk_wait_fd() returns a
 * wait-set (waitset.h) holding the client's socket (with the events it
 * wants) and a timer armed at the time the client next needs to run
 * (ping, connect retry, receive timeout), so the session is kept alive
 * and events are seen at once however long the core waits.
 *
 * The client's own logging is switched off: a store never prints.  Host
 * names are resolved when a session starts and on reconnects only (the
 * client's default is on every turn, a blocking getaddrinfo).  We never
 * ask for read-only mode, so a peer that puts us in it is dropped (the
 * client's read-only probing blocks without a deadline).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_received */
#include <netinet/in.h>

#include "zk/zk-session.h"

/* The longest reply we let the client read: ZooKeeper's own limit on a
 * packet (jute.maxbuffer, 1 MB less one byte, by default), far above what
 * a lease's requests bring back. */
#define MAX_FRAME 0xfffff
/* The kernel's TCP states (tcpi_state) in which replies may be queued. */
#define TCP_STATE_ESTABLISHED 1
#define TCP_STATE_CLOSE_WAIT  8

/* ---- requests ----------------------------------------------------------- */

struct lr_zk_op *lr_zk_op_new(void)
{
	return calloc(1, sizeof(struct lr_zk_op));
}

static void op_clear(struct lr_zk_op *op)
{
	int i;

	free(op->value);
	for (i = 0; i < op->nnames; i++)
		free(op->names[i]);
	free(op->names);
}

void lr_zk_op_free(struct lr_zk_op *op)
{
	if (!op)
		return;
	if (op->in_flight) {
		op->abandoned = 1;
		return;
	}
	op_clear(op);
	free(op);
}

void lr_zk_ops_free(struct lr_zk_op **ops, int n)
{
	int i;

	for (i = 0; i < n; i++)
		lr_zk_op_free(ops[i]);
}

/* Returns 1 if the completion must stop (op was abandoned and freed). */
static int op_finish(struct lr_zk_op *op, int rc)
{
	if (op->abandoned) {
		op_clear(op);
		free(op);
		return 1;
	}
	op->rc = rc;
	op->done = 1;
	op->in_flight = 0;
	return 0;
}

static void void_done(int rc, const void *data)
{
	op_finish((struct lr_zk_op *)data, rc);
}

static void stat_done(int rc, const struct Stat *stat, const void *data)
{
	struct lr_zk_op *op = (struct lr_zk_op *)data;

	if (op_finish(op, rc))
		return;
	if (rc == ZOK && stat)
		op->stat = *stat;
}

static void create_done(int rc, const char *value, const struct Stat *stat,
			const void *data)
{
	struct lr_zk_op *op = (struct lr_zk_op *)data;

	if (op_finish(op, rc))
		return;
	if (rc == ZOK && value)
		op->value = strdup(value);
	if (rc == ZOK && stat)
		op->stat = *stat;
	if (rc == ZOK && !op->value)
		op->rc = ZSYSTEMERROR;
}

static void data_done(int rc, const char *value, int len,
		      const struct Stat *stat, const void *data)
{
	struct lr_zk_op *op = (struct lr_zk_op *)data;

	if (op_finish(op, rc))
		return;
	if (rc == ZOK && stat)
		op->stat = *stat;
	if (rc == ZOK && value && len > 0) {
		op->value = malloc((size_t)len + 1);
		if (op->value) {
			memcpy(op->value, value, (size_t)len);
			op->value[len] = '\0';
		}
	}
}

static void children_done(int rc, const struct String_vector *sv,
			  const void *data)
{
	struct lr_zk_op *op = (struct lr_zk_op *)data;
	int i;

	if (op_finish(op, rc))
		return;
	if (rc != ZOK || !sv || sv->count <= 0)
		return;
	op->names = calloc((size_t)sv->count, sizeof(char *));
	if (!op->names) {
		op->rc = ZSYSTEMERROR;
		return;
	}
	for (i = 0; i < sv->count; i++) {
		op->names[i] = strdup(sv->data[i]);
		if (!op->names[i]) {
			op->rc = ZSYSTEMERROR;
			break;
		}
		op->nnames++;
	}
}

static void acl_done(int rc, struct ACL_vector *acl, struct Stat *stat,
		     const void *data)
{
	struct lr_zk_op *op = (struct lr_zk_op *)data;
	int i;

	if (op_finish(op, rc))
		return;
	if (rc != ZOK || !acl)
		return;
	for (i = 0; i < acl->count; i++) {
		const struct ACL *a = &acl->data[i];

		if (a->id.scheme && strcmp(a->id.scheme, "world") == 0 &&
		    (a->perms & ZOO_PERM_DELETE))
			op->world_delete = 1;
	}
}

/* ---- the session's state ------------------------------------------------ */

int lr_zk_connected(const struct lr_zk_session *zs)
{
	return zs->zh && zoo_state(zs->zh) == ZOO_CONNECTED_STATE;
}

int64_t lr_zk_session_id(const struct lr_zk_session *zs)
{
	const clientid_t *c = zs->zh ? zoo_client_id(zs->zh) : NULL;

	return c ? c->client_id : 0;
}

int64_t lr_zk_timeout(const struct lr_zk_session *zs)
{
	return zoo_recv_timeout(zs->zh);
}

int lr_zk_dead(struct lr_zk_session *zs)
{
	int s;

	if (!zs->zh)
		return 1;
	s = zoo_state(zs->zh);
	if (s == ZOO_EXPIRED_SESSION_STATE)
		zs->expired = 1;
	else if (s == ZOO_AUTH_FAILED_STATE)
		zs->authfail = 1;
	return zs->expired || zs->authfail;
}

int lr_zk_disconnect_news(struct lr_zk_session *zs)
{
	if (lr_zk_connected(zs) || zs->disc_reported)
		return 0;
	zs->disc_reported = 1;
	return 1;
}

static void on_watch(zhandle_t *zh, int type, int state, const char *path,
		     void *ctx)
{
	struct lr_zk_session *zs = ctx;

	if (!zs || zh != zs->zh)
		return;
	if (type == ZOO_SESSION_EVENT) {
		if (state == ZOO_EXPIRED_SESSION_STATE)
			zs->expired = 1;
		else if (state == ZOO_AUTH_FAILED_STATE)
			zs->authfail = 1;
		else if (state == ZOO_CONNECTED_STATE) {
			zs->disc_reported = 0;
			zs->connects++;
		}
		return;
	}
	if (path && zs->on_node)
		zs->on_node(zs->ctx, type, path);
}

static void auth_done(int rc, const void *data)
{
	struct lr_zk_session *zs = (struct lr_zk_session *)data;

	if (rc != ZOK && rc != ZCLOSING && rc != ZCONNECTIONLOSS)
		zs->authfail = 1;
}

/* ---- turning the client ------------------------------------------------- */

/* A handshake that gets no answer is cut short.  ZooKeeper 3.8 leaves a
 * connection that arrives while it starts up open and unanswered (closing
 * it throws before the socket is closed), and the client waits 2/3 of the
 * session timeout for an answer: a server restart would cost the lease.
 * A healthy server answers in milliseconds; we give it a tenth of the
 * session timeout (at least 250ms), twice that after each cut, until a
 * handshake succeeds.  The socket is told apart by its inode: a new one
 * may get the old one's number. */
static void watch_handshake(struct lr_zk_session *zs, int fd,
			    struct timeval *tv)
{
	struct stat sb;
	int64_t now, left;

	if (lr_zk_connected(zs))
		zs->hs_limit = 0;
	if (fd < 0 || lr_zk_connected(zs) || fstat(fd, &sb) < 0) {
		zs->hs_ino = 0;
		return;
	}
	now = lr_now_ms();
	if (!zs->hs_limit) {
		zs->hs_limit = zoo_recv_timeout(zs->zh) / 10;
		if (zs->hs_limit < 250)
			zs->hs_limit = 250;
	}
	if ((uint64_t)sb.st_ino != zs->hs_ino) {
		zs->hs_ino = (uint64_t)sb.st_ino;
		zs->hs_start = now;
		zs->hs_cut = 0;
	}
	left = zs->hs_start + zs->hs_limit - now;
	if (left <= 0) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		/* An answer waiting to be read (we were late) is no silence. */
		if (poll(&p, 1, 0) > 0)
			return;
		shutdown(fd, SHUT_RDWR); /* the client sees it and moves on */
		zs->hs_cut = 1;
		zs->hs_ino = 0;
		zs->hs_limit *= 2;
		left = 0;
	}
	if ((int64_t)tv->tv_sec * 1000 + tv->tv_usec / 1000 > left) {
		tv->tv_sec = (time_t)(left / 1000);
		tv->tv_usec = (suseconds_t)(left % 1000) * 1000;
	}
}

/* After every zookeeper_interest(): keep the client's socket out of the
 * command, and watch its handshake (tv may get shorter). */
static void note_fd(struct lr_zk_session *zs, int fd, struct timeval *tv)
{
	if (fd >= 0 && fd != zs->sock) {
		int fl = fcntl(fd, F_GETFD);

		if (fl >= 0 && !(fl & FD_CLOEXEC))
			fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
	}
	zs->sock = fd;
	watch_handshake(zs, fd, tv);
}

/* Ends the connection under the client without letting it read what is
 * queued: its socket becomes one whose peer is gone, so its next read
 * sees an end of file and it connects again (the real socket closes with
 * a reset). */
static void cut(struct lr_zk_session *zs, int fd)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0) {
		close(sv[1]);
		if (dup3(sv[0], fd, O_CLOEXEC) < 0)
			shutdown(fd, SHUT_RDWR);
		close(sv[0]);
	} else {
		shutdown(fd, SHUT_RDWR);
	}
	zs->fr_ino = 0;
}

/*
 * Whether the client may read its socket: every length prefix it is
 * about to read is within MAX_FRAME.  The C client believes any length:
 * it callocs it (2 GB for a prefix of 0x7fffffff) and fills it as fast as
 * the peer sends, before any deadline of ours can look.  So we follow the
 * framing ahead of it: the bytes it has read are the socket's bytes
 * received less those queued (TCP_INFO and FIONREAD, taken again until no
 * byte arrives between them), and a peek at the queue shows the prefixes
 * it has not read yet (the client reads a prefix in the same call as the
 * body after it, but only once poll() said the bytes are there, and we
 * peek after poll()).  An over-long or negative prefix makes the peer
 * bogus: the connection is cut before the client reads it.  Should we
 * ever lose the framing (a prefix split across packets, its second half
 * arriving between our peek and the client's read) the connection is cut
 * too, and the client connects again: the session survives that.
 */
static int frames_ok(struct lr_zk_session *zs)
{
	unsigned char buf[4096];
	struct tcp_info ti;
	socklen_t tl;
	struct stat sb;
	uint64_t r1 = 0, r2 = 1, c;
	int fd = zs->sock, inq = 0, i;
	ssize_t n;

	if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISSOCK(sb.st_mode))
		return 1;
	if ((uint64_t)sb.st_ino != zs->fr_ino) {
		zs->fr_ino = (uint64_t)sb.st_ino;
		zs->fr_next = 0;
		zs->fr_have = 0;
	}
	for (i = 0; i < 16 && r1 != r2; i++) {
		tl = sizeof(ti);
		if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) < 0 ||
		    tl < offsetof(struct tcp_info, tcpi_bytes_received) +
			     sizeof(ti.tcpi_bytes_received))
			return 1; /* (a kernel before 4.1: no guard) */
		/* Not while it connects: our peek would take the error
		 * (refused) that the client must read from SO_ERROR. */
		if (ti.tcpi_state != TCP_STATE_ESTABLISHED &&
		    ti.tcpi_state != TCP_STATE_CLOSE_WAIT)
			return 1;
		r1 = ti.tcpi_bytes_received;
		if (ioctl(fd, FIONREAD, &inq) < 0)
			return 1;
		tl = sizeof(ti);
		if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) < 0)
			return 1;
		r2 = ti.tcpi_bytes_received;
	}
	if (r1 != r2 || r2 < (uint64_t)inq)
		return 1; /* bytes keep coming: look again at the next read */
	c = r2 - (uint64_t)inq;
	n = recv(fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
	if (n < 0)
		n = 0;
	for (;;) {
		uint64_t at = zs->fr_next;
		uint32_t len;

		for (i = 0; i < 4; i++) {
			uint64_t pos = at + (uint64_t)i;

			if (pos < c) {
				if (i >= zs->fr_have) {
					cut(zs, fd); /* framing lost */
					return 0;
				}
			} else if (pos < c + (uint64_t)n) {
				zs->fr_hd[i] = buf[pos - c];
			} else {
				break;
			}
		}
		zs->fr_have = i;
		if (i < 4)
			return 1;
		len = (uint32_t)zs->fr_hd[0] << 24 | (uint32_t)zs->fr_hd[1] << 16 |
		      (uint32_t)zs->fr_hd[2] << 8 | zs->fr_hd[3];
		if (len > MAX_FRAME) {
			zs->bogus = 1;
			snprintf(zs->bogus_why, sizeof(zs->bogus_why),
				 "unexpected reply: a length of %lu bytes "
				 "(at most %d)",
				 (unsigned long)len, MAX_FRAME);
			cut(zs, fd);
			return 0;
		}
		zs->fr_next = at + 4 + len;
		zs->fr_have = 0;
	}
}

/* We never ask for read-only mode, so a server cannot put us in it; a
 * peer that does is not ZooKeeper (and the client's read-only probing
 * blocks without a deadline).  Drop the connection. */
static void no_readonly(struct lr_zk_session *zs)
{
	if (zs->zh && zoo_state(zs->zh) == ZOO_READONLY_STATE) {
		zs->bogus = 1;
		snprintf(zs->bogus_why, sizeof(zs->bogus_why),
			 "the server answered as read-only");
		if (zs->sock >= 0)
			shutdown(zs->sock, SHUT_RDWR);
	}
}

static void note_refused(struct lr_zk_session *zs, int e)
{
	if (zs->hs_cut) {
		/* The client read our cut as the server hanging up. */
		zs->hs_cut = 0;
		e = ETIMEDOUT;
	}
	if (!zs->ever_connected)
		zs->conn_errno = e;
	if (e == ECONNREFUSED)
		zs->refused++;
	else
		zs->refused = 0;
}

/* The client's wait as milliseconds, rounded up. */
static int64_t tv_ms(const struct timeval *tv)
{
	return (int64_t)tv->tv_sec * 1000 + (tv->tv_usec + 999) / 1000;
}

/* Lets the client work on what poll() said of its socket. */
static void work(struct lr_zk_session *zs, short revents)
{
	int ev = 0, rc;

	if (revents & (POLLIN | POLLERR | POLLHUP))
		ev |= ZOOKEEPER_READ;
	if (revents & (POLLOUT | POLLERR | POLLHUP))
		ev |= ZOOKEEPER_WRITE;
	if ((ev & ZOOKEEPER_READ) && !frames_ok(zs))
		ev = ZOOKEEPER_READ; /* it reads the end of file of the cut */
	errno = 0;
	rc = zookeeper_process(zs->zh, ev);
	if (rc == ZCONNECTIONLOSS && errno)
		note_refused(zs, errno);
	no_readonly(zs);
	if (lr_zk_connected(zs)) {
		zs->ever_connected = 1;
		zs->refused = 0;
	}
}

/* One turn of the client: ask what it wants, wait for it (at most until
 * deadline), let it work.  Returns 0, or -1 if the deadline passed. */
static int turn(struct lr_zk_session *zs, int64_t deadline)
{
	struct timeval tv = {0, 0};
	struct pollfd pfd;
	int fd = -1, interest = 0, rc;
	int64_t now, wait;

	errno = 0;
	rc = zookeeper_interest(zs->zh, &fd, &interest, &tv);
	if (rc == ZINVALIDSTATE) {
		lr_zk_dead(zs);
		return 0;
	}
	if (rc == ZCONNECTIONLOSS && errno)
		note_refused(zs, errno);
	note_fd(zs, fd, &tv);
	now = lr_now_ms();
	if (now >= deadline)
		return -1;
	wait = tv_ms(&tv);
	if (wait > deadline - now)
		wait = deadline - now;
	if (wait < 0)
		wait = 0;
	if (fd < 0) {
		(void)poll(NULL, 0, (int)wait);
		return 0;
	}
	pfd.fd = fd;
	pfd.events = (short)(((interest & ZOOKEEPER_READ) ? POLLIN : 0) |
			     ((interest & ZOOKEEPER_WRITE) ? POLLOUT : 0));
	pfd.revents = 0;
	if (poll(&pfd, 1, (int)wait) > 0)
		work(zs, pfd.revents);
	return 0;
}

void lr_zk_unreachable(struct lr_zk_session *zs, const char *what,
		       struct lr_err *err)
{
	if (zs->authfail)
		lr_err_set(err, "ZooKeeper at %s: %s: authentication failed",
			   zs->where, what);
	else if (zs->expired)
		lr_err_set(err, "ZooKeeper at %s: %s: the session expired",
			   zs->where, what);
	else if (!zs->ever_connected && zs->conn_errno)
		lr_err_set(err, "cannot connect to ZooKeeper at %s: %s",
			   zs->where,
			   /* what the client makes of an end of file */
			   zs->conn_errno == EHOSTDOWN
				   ? "the server closed the connection"
				   : strerror(zs->conn_errno));
	else if (!zs->ever_connected)
		lr_err_set(err,
			   "cannot connect to ZooKeeper at %s: no answer "
			   "in time",
			   zs->where);
	else if (!lr_zk_connected(zs))
		lr_err_set(err,
			   "ZooKeeper at %s: %s: not connected (lost "
			   "the connection; no server answered in time)",
			   zs->where, what);
	else
		lr_err_set(err, "ZooKeeper at %s: %s: no answer in time",
			   zs->where, what);
	/* Refused, reset, silent, disconnected, expired (a new session
	 * will do): a restart or an election heals it; credentials that
	 * were refused, or a peer that is no ZooKeeper, do not. */
	if (!zs->authfail && !zs->bogus)
		lr_err_heals(err);
}

enum lr_status lr_zk_pump(struct lr_zk_session *zs, int64_t deadline,
			  struct lr_zk_op **ops, int n, const char *what,
			  struct lr_err *err)
{
	for (;;) {
		int i, all = 1;

		for (i = 0; i < n; i++)
			if (ops[i] && !ops[i]->done)
				all = 0;
		if (all) {
			zs->stalled = 0;
			return LR_OK;
		}
		if (zs->bogus) {
			lr_err_set(err, "ZooKeeper at %s: %s: %s", zs->where,
				   what, zs->bogus_why);
			return LR_ERROR;
		}
		if (turn(zs, deadline) < 0) {
			zs->stalled = 1;
			lr_zk_unreachable(zs, what, err);
			return LR_TIMEOUT;
		}
	}
}

/* ---- starting and ending ------------------------------------------------ */

/* Joins the hosts as the client takes them ("h:p,h:p", an IPv6 address
 * without brackets: it splits at the last colon) into zs->hosts, and as
 * the user wrote them, with ports, into zs->where. */
static enum lr_status join_hosts(struct lr_zk_session *zs,
				 const struct lr_url_host *h, size_t n)
{
	size_t i, len = 1;
	char *p;

	for (i = 0; i < n; i++)
		len += strlen(h[i].host) + 8;
	zs->hosts = p = malloc(len);
	if (!p)
		return LR_ERROR;
	*p = '\0';
	zs->where[0] = '\0';
	for (i = 0; i < n; i++) {
		char one[300];
		size_t at = strlen(zs->where);

		p += sprintf(p, "%s%s:%d", i ? "," : "", h[i].host, h[i].port);
		lr_url_host_format(&h[i], one, sizeof(one));
		snprintf(zs->where + at, sizeof(zs->where) - at, "%s%s",
			 i ? "," : "", one);
	}
	zs->nhosts = (int)n;
	return LR_OK;
}

enum lr_status lr_zk_new(const struct lr_url_host *h, size_t n,
			 const char *user, const char *password,
			 int64_t timeout_ms,
			 void (*on_node)(void *ctx, int type, const char *path),
			 void *ctx, struct lr_zk_session **out,
			 struct lr_err *err)
{
	static int quiet;
	struct lr_zk_session *zs;

	if (!quiet) {
		zoo_set_debug_level((ZooLogLevel)0);
		quiet = 1;
	}
	*out = NULL;
	zs = calloc(1, sizeof(*zs));
	if (!zs)
		goto oom;
	lr_waitset_init(&zs->ws);
	zs->regfd = zs->sock = -1;
	zs->timeout = timeout_ms;
	zs->on_node = on_node;
	zs->ctx = ctx;
	if (join_hosts(zs, h, n) != LR_OK)
		goto oom;
	if (user && password) {
		size_t len = strlen(user) + strlen(password) + 2;

		zs->auth = malloc(len);
		if (!zs->auth)
			goto oom;
		snprintf(zs->auth, len, "%s:%s", user, password);
	}
	*out = zs;
	return LR_OK;
oom:
	lr_zk_close(zs, 0);
	lr_err_set(err, "out of memory");
	return LR_ERROR;
}

/* Starts a session (the handshake is driven by later turns). */
static enum lr_status session_start(struct lr_zk_session *zs,
				    struct lr_err *err)
{
	int64_t ttl = zs->timeout;

	if (ttl < 1)
		ttl = 10000;
	if (ttl > INT32_MAX)
		ttl = INT32_MAX;
	zs->expired = zs->authfail = zs->disc_reported = 0;
	zs->ever_connected = 0;
	zs->conn_errno = 0;
	zs->refused = 0;
	zs->stalled = 0;
	zs->sock = -1;
	zs->hs_ino = 0;
	zs->hs_limit = 0;
	zs->hs_cut = 0;
	errno = 0;
	zs->zh = zookeeper_init(zs->hosts, on_watch, (int)ttl, NULL, zs, 0);
	if (!zs->zh) {
		lr_err_set(err, "cannot use ZooKeeper hosts %s: %s", zs->where,
			   errno ? strerror(errno) : "bad host list");
		return LR_ERROR;
	}
	/* The client would resolve the host names again (blocking, no
	 * deadline) every time it is asked what it waits for; only on a
	 * reconnect, please. */
	zoo_set_servers_resolution_delay(zs->zh, -1);
	if (zs->auth &&
	    zoo_add_auth(zs->zh, "digest", zs->auth, (int)strlen(zs->auth),
			 auth_done, zs) != ZOK) {
		lr_err_set(err, "ZooKeeper at %s: cannot add credentials",
			   zs->where);
		return LR_ERROR;
	}
	return LR_OK;
}

static enum lr_status wait_connected(struct lr_zk_session *zs,
				     int64_t deadline, struct lr_err *err)
{
	while (!lr_zk_connected(zs)) {
		/* Every address refused, twice (a name may resolve to
		 * both an IPv6 and an IPv4 address): nobody is there. */
		if (zs->refused >= 2 * zs->nhosts && !zs->ever_connected) {
			lr_zk_unreachable(zs, "connect", err);
			return LR_ERROR;
		}
		if (zs->bogus) {
			lr_err_set(err, "ZooKeeper at %s: %s (is it ZooKeeper?)",
				   zs->where, zs->bogus_why);
			return LR_ERROR;
		}
		if (lr_zk_dead(zs) || turn(zs, deadline) < 0) {
			lr_zk_unreachable(zs, "connect", err);
			return zs->expired	   ? LR_LOST
			       : lr_zk_dead(zs) ? LR_ERROR
						 : LR_TIMEOUT;
		}
	}
	zs->ever_connected = 1;
	return LR_OK;
}

enum lr_status lr_zk_start(struct lr_zk_session *zs, int64_t deadline,
			   struct lr_err *err)
{
	enum lr_status s;

	if (zs->ws.ep < 0 && lr_waitset_open(&zs->ws) < 0) {
		lr_err_set(err, "zk store: cannot create its wait fds: %s",
			   strerror(errno));
		return LR_ERROR;
	}
	s = session_start(zs, err);
	if (s != LR_OK)
		return s;
	return wait_connected(zs, deadline, err);
}

/* If the server stopped answering, do not let the client wait for its
 * reply to the close (it would, up to 1.5s). */
void lr_zk_end(struct lr_zk_session *zs, int ours_left)
{
	if (!zs->zh)
		return;
	if (zs->stalled && lr_zk_connected(zs) && zs->sock >= 0)
		shutdown(zs->sock, SHUT_RDWR);
	else if (!ours_left && lr_zk_connected(zs) && zs->sock >= 0)
		/* No node of ours is left for the close to delete: send
		 * the close, but do not wait for its answer. */
		shutdown(zs->sock, SHUT_RD);
	zookeeper_close(zs->zh);
	zs->zh = NULL;
	zs->sock = -1;
	lr_waitset_follow(&zs->ws, &zs->regfd, -1, 0);
}

void lr_zk_close(struct lr_zk_session *zs, int ours_left)
{
	if (!zs)
		return;
	lr_zk_end(zs, ours_left);
	lr_waitset_close(&zs->ws);
	lr_wipe_free(zs->auth);
	free(zs->hosts);
	free(zs);
}

/* ---- sending ------------------------------------------------------------ */

/* A request that was not sent is done, with the client's reason. */
static int sent(struct lr_zk_op *op, int rc)
{
	if (rc == ZOK) {
		op->in_flight = 1;
	} else {
		op->rc = rc;
		op->done = 1;
	}
	return rc;
}

int lr_zk_send_create(struct lr_zk_session *zs, struct lr_zk_op *op,
		      const char *path, const char *data,
		      const struct ACL_vector *acl, int mode)
{
	return sent(op, zoo_acreate2(zs->zh, path, data, (int)strlen(data),
				     acl, mode, create_done, op));
}

int lr_zk_send_children(struct lr_zk_session *zs, struct lr_zk_op *op,
			const char *path)
{
	return sent(op, zoo_aget_children(zs->zh, path, 0, children_done, op));
}

int lr_zk_send_get_acl(struct lr_zk_session *zs, struct lr_zk_op *op,
		       const char *path)
{
	return sent(op, zoo_aget_acl(zs->zh, path, acl_done, op));
}

int lr_zk_send_get(struct lr_zk_session *zs, struct lr_zk_op *op,
		   const char *path)
{
	return sent(op, zoo_aget(zs->zh, path, 0, data_done, op));
}

int lr_zk_send_delete(struct lr_zk_session *zs, struct lr_zk_op *op,
		      const char *path)
{
	return sent(op, zoo_adelete(zs->zh, path, -1, void_done, op));
}

int lr_zk_send_set(struct lr_zk_session *zs, struct lr_zk_op *op,
		   const char *path, const char *data, int version)
{
	return sent(op, zoo_aset(zs->zh, path, data, (int)strlen(data),
				 version, stat_done, op));
}

int lr_zk_send_exists_cb(struct lr_zk_session *zs, const char *path,
			 stat_completion_t done, const void *data)
{
	return zoo_awexists(zs->zh, path, on_watch, zs, done, data);
}

int lr_zk_send_exists(struct lr_zk_session *zs, struct lr_zk_op *op,
		      const char *path)
{
	return sent(op, lr_zk_send_exists_cb(zs, path, stat_done, op));
}

/* ---- synchronous calls -------------------------------------------------- */

const char *lr_zk_strerror(int rc)
{
	switch (rc) {
	case ZNOAUTH:
		return "not allowed (NOAUTH: wrong credentials, or the node "
		       "belongs to another ZooKeeper user)";
	case ZINVALIDACL:
		return "invalid ACL (are the credentials empty?)";
	default:
		return zerror(rc);
	}
}

int lr_zk_retryable(int rc)
{
	return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT;
}

/* The request made by send, until it is answered with something else
 * than a passing loss of the connection.  LR_OK with the answered op in
 * *opp; else *opp is NULL. */
static enum lr_status call(struct lr_zk_session *zs,
			   int (*send)(struct lr_zk_session *zs,
				       struct lr_zk_op *op, const char *path),
			   const char *path, int64_t deadline,
			   struct lr_zk_op **opp, const char *what,
			   struct lr_err *err)
{
	for (;;) {
		struct lr_zk_op *op = lr_zk_op_new();
		enum lr_status s;

		*opp = NULL;
		if (!op) {
			lr_err_set(err, "out of memory");
			return LR_ERROR;
		}
		if (send(zs, op, path) != ZOK) {
			lr_zk_op_free(op);
			lr_zk_dead(zs);
			lr_zk_unreachable(zs, what, err);
			return zs->expired ? LR_LOST : LR_ERROR;
		}
		s = lr_zk_pump(zs, deadline, &op, 1, what, err);
		if (s != LR_OK) {
			lr_zk_op_free(op);
			return s;
		}
		if (lr_zk_retryable(op->rc) && !lr_zk_dead(zs)) {
			lr_zk_op_free(op);
			continue;
		}
		*opp = op;
		return LR_OK;
	}
}

enum lr_status lr_zk_list(struct lr_zk_session *zs, const char *path,
			  int64_t deadline, struct lr_zk_op **opp,
			  struct lr_err *err)
{
	enum lr_status s;
	struct lr_zk_op *op;

	s = call(zs, lr_zk_send_children, path, deadline, opp, "list", err);
	if (s != LR_OK || (*opp)->rc == ZOK || (*opp)->rc == ZNONODE)
		return s;
	op = *opp;
	*opp = NULL;
	lr_zk_dead(zs);
	if (zs->expired || zs->authfail || lr_zk_retryable(op->rc))
		lr_zk_unreachable(zs, "list", err);
	else
		lr_err_set(err, "ZooKeeper at %s: list %s: %s", zs->where,
			   path, lr_zk_strerror(op->rc));
	s = zs->expired ? LR_LOST : LR_ERROR;
	lr_zk_op_free(op);
	return s;
}

enum lr_status lr_zk_exists(struct lr_zk_session *zs, const char *path,
			    int64_t deadline, struct lr_zk_op **opp,
			    const char *what, struct lr_err *err)
{
	return call(zs, lr_zk_send_exists, path, deadline, opp, what, err);
}

/* ---- nodes of ours ------------------------------------------------------ */

const struct ACL_vector *lr_zk_acl(const struct lr_zk_session *zs, int upper,
				   struct ACL *buf)
{
	static struct ACL_vector v;

	if (!zs->auth)
		return &ZOO_OPEN_ACL_UNSAFE;
	buf[0].perms = ZOO_PERM_ALL;
	buf[0].id = ZOO_AUTH_IDS;
	buf[1].perms = ZOO_PERM_READ | (upper ? ZOO_PERM_CREATE : 0);
	buf[1].id = ZOO_ANYONE_ID_UNSAFE;
	v.count = 2;
	v.data = buf;
	return &v;
}

/* The server runs one session's requests in order, so the directories
 * can all be asked for at once, the upper ones first. */
enum lr_status lr_zk_make_dirs(struct lr_zk_session *zs, const char *path,
			       int64_t deadline, struct lr_err *err)
{
	struct lr_zk_op *ops[32];
	int n = 0;
	char *p = strdup(path), *s;
	enum lr_status rc = LR_OK;

	if (!p) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	for (s = strchr(p + 1, '/');; s = strchr(s + 1, '/')) {
		struct ACL buf[2];
		char c = s ? *s : '\0';

		if (n == (int)(sizeof(ops) / sizeof(ops[0])))
			break;
		if (s)
			*s = '\0';
		ops[n] = lr_zk_op_new();
		if (!ops[n] ||
		    lr_zk_send_create(zs, ops[n], p, "",
				      lr_zk_acl(zs, s != NULL, buf),
				      ZOO_PERSISTENT) != ZOK) {
			lr_zk_op_free(ops[n]);
			ops[n] = NULL;
			break;
		}
		n++;
		if (!s)
			break;
		*s = c;
	}
	free(p);
	if (n)
		rc = lr_zk_pump(zs, deadline, ops, n, "create directories",
				err);
	lr_zk_ops_free(ops, n);
	return rc;
}

/* ---- the core's loop ---------------------------------------------------- */

int lr_zk_wait_fd(struct lr_zk_session *zs, short *events)
{
	struct timeval tv = {0, 0};
	int fd = -1, interest = 0, rc;
	int64_t ms;

	if (!zs->zh || zs->ws.ep < 0)
		return -1;
	*events = POLLIN;
	rc = zookeeper_interest(zs->zh, &fd, &interest, &tv);
	if (rc == ZINVALIDSTATE) {
		/* Expired or refused: let process() say so at once. */
		lr_zk_dead(zs);
		lr_waitset_arm(&zs->ws, 0);
		return zs->ws.ep;
	}
	note_fd(zs, fd, &tv);
	lr_waitset_follow(&zs->ws, &zs->regfd, fd,
			  ((interest & ZOOKEEPER_READ) ? EPOLLIN : 0) |
				  ((interest & ZOOKEEPER_WRITE) ? EPOLLOUT
								: 0));
	ms = tv_ms(&tv);
	lr_waitset_arm(&zs->ws, lr_now_ms() + (ms < 1 ? 1 : ms));
	return zs->ws.ep;
}

/* One message at a time: zookeeper_process() reads one per call. */
int lr_zk_drain(struct lr_zk_session *zs)
{
	int i;

	if (!zs->zh)
		return -1;
	for (i = 0; i < 64 && !lr_zk_dead(zs); i++) {
		struct timeval tv = {0, 0};
		struct pollfd p = { .fd = -1 };
		int interest = 0;

		if (zookeeper_interest(zs->zh, &p.fd, &interest, &tv) ==
		    ZINVALIDSTATE)
			break;
		note_fd(zs, p.fd, &tv);
		if (p.fd < 0)
			break;
		p.events = (short)(POLLIN | ((interest & ZOOKEEPER_WRITE)
						     ? POLLOUT : 0));
		if (poll(&p, 1, 0) <= 0 ||
		    !(p.revents & (POLLIN | POLLERR | POLLHUP)))
			break;
		work(zs, p.revents);
	}
	lr_zk_dead(zs);
	return 0;
}

int lr_zk_process(struct lr_zk_session *zs)
{
	struct epoll_event evs[4];
	int n, i, zev = 0;

	if (!zs->zh)
		return -1;
	n = lr_waitset_ready(&zs->ws, evs, 4);
	for (i = 0; i < n; i++) {
		if (evs[i].data.fd == zs->ws.tfd)
			continue;
		if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
			zev |= ZOOKEEPER_READ;
		if (evs[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
			zev |= ZOOKEEPER_WRITE;
	}
	if (lr_zk_dead(zs))
		return 0;
	if ((zev & ZOOKEEPER_READ) && !frames_ok(zs))
		zev = ZOOKEEPER_READ;
	if (zev) {
		zookeeper_process(zs->zh, zev);
		zs->hs_cut = 0; /* a cut was read here, not in turn() */
		no_readonly(zs);
	} else {
		struct timeval tv;
		int fd = -1, interest;

		/* The timer: pings, connect retries, timeouts. */
		if (zookeeper_interest(zs->zh, &fd, &interest, &tv) !=
		    ZINVALIDSTATE)
			note_fd(zs, fd, &tv);
	}
	lr_zk_dead(zs);
	return 0;
}
