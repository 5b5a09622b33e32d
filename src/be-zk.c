/*
 * be-zk.c - the ZooKeeper store (single-threaded C client), module zk.so.
 *
 * URL:
 *   zk://[user:password@]host[:port][,host[:port]...][/chroot][?root=PATH]
 * The port defaults to 2181.  The chroot and root (default /leaserun) are
 * joined into the directory of every lease: CHROOT/ROOT/NAME.  We keep the
 * chroot ourselves (the client's own chroot would need the node to exist);
 * missing directories are created on first use.  user:password is sent as
 * a "digest" identity.
 *
 * The recipe (the classic ZooKeeper lock):
 *  - acquire creates an ephemeral sequential node DIR/lock-TOKEN-NNNNNNNNNN
 *    holding "host pid since".  The token in the name lets a create whose
 *    reply was lost (connection loss) be recognised as ours afterwards.
 *  - the lowest sequence holds.  A waiter watches only its predecessor
 *    (no herd) and its own node; when the predecessor goes, process() says
 *    "try now" and acquire lists the children again.
 *  - the fence is our node's creation zxid (czxid): zxids only grow.
 *  - -n gives up at once: close() ends the session, which deletes our
 *    node in the same step; nothing is left behind.
 *
 * Session = lease.  The session timeout we ask for is the TTL; the grant
 * reports the timeout the server negotiated (zoo_recv_timeout()), so the
 * core's deadline follows what the server will really do.  Any request
 * from us restarts the server's session timer, so renew() is one
 * exists on our node that must come back with our czxid and our session as
 * its owner: that proves the session and the lock are both alive.  A
 * disconnect is suspicion (LR_ERROR, the deadline does not move; the
 * client reconnects, to another server of the ensemble if it must); an
 * expired session or our node deleted is certain loss (LR_LOST).
 *
 * ACLs.  With credentials, every node we create gets "creator: all,
 * world: read" (directories above the lease also world: create, so other
 * users can have leases of their own there).  In ZooKeeper the right to
 * delete a node is the DELETE permission on its parent, so nobody but our
 * identity can delete our lock nodes or queue up in front of us.  Without
 * credentials nodes are open (world: all).  If a lease directory we use
 * with credentials lets the world delete (made earlier without them), we
 * warn.
 *
 * The loop.  Every call drives the client itself with poll() on its socket
 * up to the call's absolute deadline (zookeeper_interest/_process and the
 * asynchronous zoo_a* calls; the single-threaded client has no threads).
 * Between calls the core's loop drives it: wait_fd() returns a wait-set
 * (waitset.h) holding the client's socket (with the events it wants) and
 * a timer armed at the time the client next needs to run (ping, connect retry,
 * receive timeout), so the session is kept alive and events are seen at
 * once however long the core waits.  process() runs the client and
 * reports what changed.
 *
 * Costs: open is the session handshake; acquire of a free lease is one
 * round trip (create + list, pipelined; the watch on our node goes out
 * without waiting); release is one delete; close sends the session's end
 * and waits for it only if a node of ours may be left (after -n, -w).
 *
 * The client's own logging is switched off: a store never prints.  Host
 * names are resolved when a session starts and on reconnects only (the
 * client's default is on every turn, a blocking getaddrinfo).  We never
 * ask for read-only mode, so a peer that puts us in it is dropped (the
 * client's read-only probing blocks without a deadline).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <fcntl.h>
#include <unistd.h>

#include <zookeeper/zookeeper.h>

#include "backend.h"
#include "waitset.h"

#define DEFAULT_ROOT "/leaserun"
#define DEFAULT_PORT 2181
#define NODE_PREFIX  "lock-"
#define SEQ_DIGITS   10
#define MAX_ROUNDS   16 /* acquire/inspect retries against moving children */

/* One asynchronous request in flight.  The completion fills it; a call
 * that gives up before the reply marks it abandoned and the completion
 * frees it later (the client calls every completion exactly once, with
 * ZCLOSING at the latest). */
struct zop {
	int done;
	int abandoned;
	int rc;
	struct Stat stat;
	char *value;  /* created path, or node data */
	char **names; /* children */
	int nnames;
	int world_delete; /* get_acl: world may delete children */
};

struct lr_store {
	const struct lr_store_req *req;
	char *hosts;	 /* "h:p,h:p" for zookeeper_init */
	char *auth;	 /* "user:password" or NULL; wiped on close */
	char *dir;	 /* CHROOT/ROOT/NAME */
	char *prefix;	 /* "lock-TOKEN-" or NULL */
	char where[200]; /* hosts, for messages (never a password) */
	zhandle_t *zh;
	int64_t sid;	/* the session our node belongs to */
	int conn_errno; /* why the last connect failed, or 0 */
	int nhosts;
	int refused; /* connects refused in a row (open fails fast) */
	int ever_connected;
	int stalled; /* a call timed out: do not wait for the server */
	int bogus;   /* the peer answered like no ZooKeeper we asked for */
	int sock;    /* the client's socket as last seen, or -1 */
	uint64_t hs_ino;  /* the socket whose handshake we time, or 0 */
	int64_t hs_start; /* when we first saw it */
	int64_t hs_limit; /* how long it may take; 0: not set yet */
	int hs_cut;	  /* we cut it: the next connect error is ours */

	/* the core's loop */
	struct lr_waitset ws; /* wait_fd(): the client's socket and timer */
	int regfd;           /* the socket in ws, or -1 */

	/* the lock */
	char *mine; /* our node's full path, or NULL */
	int64_t czxid;
	int may_exist; /* a create's reply was lost: look for our token */
	char *pred;    /* the predecessor we watch, or NULL */
	int pred_gone; /* it changed or went: try again */
	int node_gone; /* our node was deleted */
	int held;
	int own_watched; /* our node has our watch on it */
	unsigned gen;	 /* bumped whenever we let go of a node */
	int64_t last_ok; /* when the last request that proved it was sent */
	int expired;	 /* the session expired */
	int authfail;
	int disc_reported;
	int guarded; /* the ACL guard ran */
};

/* ---- small helpers ------------------------------------------------------ */

static char *join3(const char *a, const char *b, const char *c)
{
	size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
	char *s = malloc(n);

	if (s)
		snprintf(s, n, "%s%s%s", a, b, c);
	return s;
}

static const char *basename_of(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

/* "rest" of a lock node name: its sequence number, or -1. */
static int64_t node_seq(const char *name)
{
	size_t n = strlen(name), i;
	int64_t v = 0;

	if (strncmp(name, NODE_PREFIX, strlen(NODE_PREFIX)) != 0 ||
	    n < strlen(NODE_PREFIX) + SEQ_DIGITS)
		return -1;
	for (i = n - SEQ_DIGITS; i < n; i++) {
		if (!isdigit((unsigned char)name[i]))
			return -1;
		v = v * 10 + (name[i] - '0');
	}
	return v;
}

static int connected(const struct lr_store *st)
{
	return st->zh && zoo_state(st->zh) == ZOO_CONNECTED_STATE;
}

static int64_t session_id(const struct lr_store *st)
{
	const clientid_t *c = st->zh ? zoo_client_id(st->zh) : NULL;

	return c ? c->client_id : 0;
}

/* A ZooKeeper path component list is sane: "/a/b", no empty, ".", "..". */
static int path_ok(const char *p)
{
	const char *s = p;

	if (*s != '/')
		return 0;
	while (*s == '/') {
		const char *e = strchr(s + 1, '/');
		size_t n = e ? (size_t)(e - s - 1) : strlen(s + 1);

		if (n == 0 || (n == 1 && s[1] == '.') ||
		    (n == 2 && s[1] == '.' && s[2] == '.'))
			return 0;
		if (memchr(s + 1, '\0', n))
			return 0;
		if (!e)
			break;
		s = e;
	}
	return 1;
}

/* ---- requests ----------------------------------------------------------- */

static struct zop *zop_new(void)
{
	return calloc(1, sizeof(struct zop));
}

static void zop_clear(struct zop *op)
{
	int i;

	free(op->value);
	for (i = 0; i < op->nnames; i++)
		free(op->names[i]);
	free(op->names);
}

/* Frees op now, or leaves it to its completion if still in flight. */
static void zop_free(struct zop *op)
{
	if (!op)
		return;
	if (!op->done) {
		op->abandoned = 1;
		return;
	}
	zop_clear(op);
	free(op);
}

/* Returns 1 if the completion must stop (op was abandoned and freed). */
static int zop_finish(struct zop *op, int rc)
{
	if (op->abandoned) {
		zop_clear(op);
		free(op);
		return 1;
	}
	op->rc = rc;
	op->done = 1;
	return 0;
}

static void void_done(int rc, const void *data)
{
	zop_finish((struct zop *)data, rc);
}

static void stat_done(int rc, const struct Stat *stat, const void *data)
{
	struct zop *op = (struct zop *)data;

	if (zop_finish(op, rc))
		return;
	if (rc == ZOK && stat)
		op->stat = *stat;
}

static void create_done(int rc, const char *value, const struct Stat *stat,
			const void *data)
{
	struct zop *op = (struct zop *)data;

	if (zop_finish(op, rc))
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
	struct zop *op = (struct zop *)data;

	if (zop_finish(op, rc))
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
	struct zop *op = (struct zop *)data;
	int i;

	if (zop_finish(op, rc))
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
	struct zop *op = (struct zop *)data;
	int i;

	if (zop_finish(op, rc))
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

/* ---- the session -------------------------------------------------------- */

static void on_watch(zhandle_t *zh, int type, int state, const char *path,
		     void *ctx)
{
	struct lr_store *st = ctx;

	if (!st || zh != st->zh)
		return;
	if (type == ZOO_SESSION_EVENT) {
		if (state == ZOO_EXPIRED_SESSION_STATE)
			st->expired = 1;
		else if (state == ZOO_AUTH_FAILED_STATE)
			st->authfail = 1;
		else if (state == ZOO_CONNECTED_STATE)
			st->disc_reported = 0;
		return;
	}
	if (!path)
		return;
	if (st->mine && strcmp(path, st->mine) == 0 &&
	    type == ZOO_DELETED_EVENT)
		st->node_gone = 1;
	if (st->pred && strcmp(path, st->pred) == 0)
		st->pred_gone = 1;
}

/* The exists that puts our watch on the node we just got. */
struct own_check {
	struct lr_store *st;
	unsigned gen;
};

static void own_done(int rc, const struct Stat *stat, const void *data)
{
	struct own_check *c = (struct own_check *)data;
	struct lr_store *st = c->st;

	if (c->gen == st->gen && st->held &&
	    (rc == ZNONODE || (rc == ZOK && stat && stat->czxid != st->czxid)))
		st->node_gone = 1;
	free(c);
}

static void auth_done(int rc, const void *data)
{
	struct lr_store *st = (struct lr_store *)data;

	if (rc != ZOK && rc != ZCLOSING && rc != ZCONNECTIONLOSS)
		st->authfail = 1;
}

/* Notes the state of an unrecoverable handle in our flags. */
static int dead(struct lr_store *st)
{
	int s;

	if (!st->zh)
		return 1;
	s = zoo_state(st->zh);
	if (s == ZOO_EXPIRED_SESSION_STATE)
		st->expired = 1;
	else if (s == ZOO_AUTH_FAILED_STATE)
		st->authfail = 1;
	return st->expired || st->authfail;
}

/* A handshake that gets no answer is cut short.  ZooKeeper 3.8 leaves a
 * connection that arrives while it starts up open and unanswered (closing
 * it throws before the socket is closed), and the client waits 2/3 of the
 * session timeout for an answer: a server restart would cost the lease.
 * A healthy server answers in milliseconds; we give it a tenth of the
 * session timeout (at least 250ms), twice that after each cut, until a
 * handshake succeeds.  The socket is told apart by its inode: a new one
 * may get the old one's number. */
static void watch_handshake(struct lr_store *st, int fd, struct timeval *tv)
{
	struct stat sb;
	int64_t now, left;

	if (connected(st))
		st->hs_limit = 0;
	if (fd < 0 || connected(st) || fstat(fd, &sb) < 0) {
		st->hs_ino = 0;
		return;
	}
	now = lr_now_ms();
	if (!st->hs_limit) {
		st->hs_limit = zoo_recv_timeout(st->zh) / 10;
		if (st->hs_limit < 250)
			st->hs_limit = 250;
	}
	if ((uint64_t)sb.st_ino != st->hs_ino) {
		st->hs_ino = (uint64_t)sb.st_ino;
		st->hs_start = now;
		st->hs_cut = 0;
	}
	left = st->hs_start + st->hs_limit - now;
	if (left <= 0) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		/* An answer waiting to be read (we were late) is no silence. */
		if (poll(&p, 1, 0) > 0)
			return;
		shutdown(fd, SHUT_RDWR); /* the client sees it and moves on */
		st->hs_cut = 1;
		st->hs_ino = 0;
		st->hs_limit *= 2;
		left = 0;
	}
	if ((int64_t)tv->tv_sec * 1000 + tv->tv_usec / 1000 > left) {
		tv->tv_sec = (time_t)(left / 1000);
		tv->tv_usec = (suseconds_t)(left % 1000) * 1000;
	}
}

/* After every zookeeper_interest(): keep the client's socket out of the
 * command, and watch its handshake (tv may get shorter). */
static void note_fd(struct lr_store *st, int fd, struct timeval *tv)
{
	if (fd >= 0 && fd != st->sock) {
		int fl = fcntl(fd, F_GETFD);

		if (fl >= 0 && !(fl & FD_CLOEXEC))
			fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
	}
	st->sock = fd;
	watch_handshake(st, fd, tv);
}

/* We never ask for read-only mode, so a server cannot put us in it; a
 * peer that does is not ZooKeeper (and the client's read-only probing
 * blocks without a deadline).  Drop the connection. */
static void no_readonly(struct lr_store *st)
{
	if (st->zh && zoo_state(st->zh) == ZOO_READONLY_STATE) {
		st->bogus = 1;
		if (st->sock >= 0)
			shutdown(st->sock, SHUT_RDWR);
	}
}

static void note_refused(struct lr_store *st, int e)
{
	if (st->hs_cut) {
		/* The client read our cut as the server hanging up. */
		st->hs_cut = 0;
		e = ETIMEDOUT;
	}
	if (!st->ever_connected)
		st->conn_errno = e;
	if (e == ECONNREFUSED)
		st->refused++;
	else
		st->refused = 0;
}

/* One turn of the client: ask what it wants, wait for it (at most until
 * deadline), let it work.  Returns 0, or -1 if the deadline passed. */
static int turn(struct lr_store *st, int64_t deadline)
{
	struct timeval tv = {0, 0};
	struct pollfd pfd;
	int fd = -1, interest = 0, rc;
	int64_t now, wait;

	errno = 0;
	rc = zookeeper_interest(st->zh, &fd, &interest, &tv);
	if (rc == ZINVALIDSTATE) {
		dead(st);
		return 0;
	}
	if (rc == ZCONNECTIONLOSS && errno)
		note_refused(st, errno);
	note_fd(st, fd, &tv);
	now = lr_now_ms();
	if (now >= deadline)
		return -1;
	wait = (int64_t)tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000;
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
	if (poll(&pfd, 1, (int)wait) > 0) {
		int ev = 0;

		if (pfd.revents & (POLLIN | POLLERR | POLLHUP))
			ev |= ZOOKEEPER_READ;
		if (pfd.revents & (POLLOUT | POLLERR | POLLHUP))
			ev |= ZOOKEEPER_WRITE;
		errno = 0;
		rc = zookeeper_process(st->zh, ev);
		if (rc == ZCONNECTIONLOSS && errno)
			note_refused(st, errno);
		no_readonly(st);
		if (connected(st)) {
			st->ever_connected = 1;
			st->refused = 0;
		}
	}
	return 0;
}

static void say_unreachable(struct lr_store *st, const char *what,
			    struct lr_err *err)
{
	if (st->authfail)
		lr_err_set(err, "ZooKeeper at %s: %s: authentication failed",
			   st->where, what);
	else if (st->expired)
		lr_err_set(err, "ZooKeeper at %s: %s: the session expired",
			   st->where, what);
	else if (!st->ever_connected && st->conn_errno)
		lr_err_set(err, "cannot connect to ZooKeeper at %s: %s",
			   st->where,
			   /* what the client makes of an end of file */
			   st->conn_errno == EHOSTDOWN
				   ? "the server closed the connection"
				   : strerror(st->conn_errno));
	else if (!st->ever_connected)
		lr_err_set(err,
			   "cannot connect to ZooKeeper at %s: no answer "
			   "in time",
			   st->where);
	else if (!connected(st))
		lr_err_set(err,
			   "ZooKeeper at %s: %s: not connected (lost "
			   "the connection; no server answered in time)",
			   st->where, what);
	else
		lr_err_set(err, "ZooKeeper at %s: %s: no answer in time",
			   st->where, what);
}

/* Drives the client until every op is done.  LR_OK when they all are
 * (each op's own rc tells how it went); LR_TIMEOUT at the deadline. */
static enum lr_status pump(struct lr_store *st, int64_t deadline,
			   struct zop **ops, int n, const char *what,
			   struct lr_err *err)
{
	for (;;) {
		int i, all = 1;

		for (i = 0; i < n; i++)
			if (ops[i] && !ops[i]->done)
				all = 0;
		if (all) {
			st->stalled = 0;
			return LR_OK;
		}
		if (turn(st, deadline) < 0) {
			st->stalled = 1;
			say_unreachable(st, what, err);
			return LR_TIMEOUT;
		}
	}
}

/* Starts a session (the handshake is driven by later turns). */
static enum lr_status session_start(struct lr_store *st, struct lr_err *err)
{
	int64_t ttl = st->req->ttl_ms;

	if (ttl < 1)
		ttl = 10000;
	if (ttl > INT32_MAX)
		ttl = INT32_MAX;
	st->expired = st->authfail = st->disc_reported = 0;
	st->ever_connected = 0;
	st->conn_errno = 0;
	st->refused = 0;
	st->stalled = 0;
	st->sock = -1;
	st->hs_ino = 0;
	st->hs_limit = 0;
	st->hs_cut = 0;
	errno = 0;
	st->zh = zookeeper_init(st->hosts, on_watch, (int)ttl, NULL, st, 0);
	if (!st->zh) {
		lr_err_set(err, "cannot use ZooKeeper hosts %s: %s", st->where,
			   errno ? strerror(errno) : "bad host list");
		return LR_ERROR;
	}
	/* The client would resolve the host names again (blocking, no
	 * deadline) every time it is asked what it waits for; only on a
	 * reconnect, please. */
	zoo_set_servers_resolution_delay(st->zh, -1);
	if (st->auth &&
	    zoo_add_auth(st->zh, "digest", st->auth, (int)strlen(st->auth),
			 auth_done, st) != ZOK) {
		lr_err_set(err, "ZooKeeper at %s: cannot add credentials",
			   st->where);
		return LR_ERROR;
	}
	return LR_OK;
}

static enum lr_status wait_connected(struct lr_store *st, int64_t deadline,
				     struct lr_err *err)
{
	while (!connected(st)) {
		/* Every address refused, twice (a name may resolve to
		 * both an IPv6 and an IPv4 address): nobody is there. */
		if (st->refused >= 2 * st->nhosts && !st->ever_connected) {
			say_unreachable(st, "connect", err);
			return LR_ERROR;
		}
		if (st->bogus) {
			lr_err_set(err,
				   "ZooKeeper at %s: the server answered "
				   "as read-only (or it is not ZooKeeper)",
				   st->where);
			return LR_ERROR;
		}
		if (dead(st) || turn(st, deadline) < 0) {
			say_unreachable(st, "connect", err);
			return st->expired ? LR_LOST
			       : dead(st)  ? LR_ERROR
					   : LR_TIMEOUT;
		}
	}
	st->ever_connected = 1;
	return LR_OK;
}

/* Ends the session.  If the server stopped answering, do not let the
 * client wait for its reply to the close (it would, up to 1.5s). */
static void session_end(struct lr_store *st)
{
	if (!st->zh)
		return;
	if (st->stalled && connected(st) && st->sock >= 0)
		shutdown(st->sock, SHUT_RDWR);
	else if (!st->mine && !st->may_exist && connected(st) && st->sock >= 0)
		/* No node of ours is left for the close to delete: send
		 * the close, but do not wait for its answer. */
		shutdown(st->sock, SHUT_RD);
	zookeeper_close(st->zh);
	st->zh = NULL;
	st->sock = -1;
	if (st->regfd >= 0)
		lr_waitset_watch(&st->ws, st->regfd, 0);
	st->regfd = -1;
}

static void forget_node(struct lr_store *st)
{
	st->gen++;
	st->own_watched = 0;
	free(st->mine);
	st->mine = NULL;
	free(st->pred);
	st->pred = NULL;
	st->pred_gone = st->node_gone = st->held = st->may_exist = 0;
	st->czxid = 0;
}

/* ---- the ACLs ------------------------------------------------------------ */

/* Lock nodes and the lease directory: creator all, world read.  Upper
 * directories: also world create.  Without credentials: open. */
static struct ACL_vector *acl_for(struct lr_store *st, int upper,
				  struct ACL *buf)
{
	static struct ACL_vector v;

	if (!st->auth)
		return &ZOO_OPEN_ACL_UNSAFE;
	buf[0].perms = ZOO_PERM_ALL;
	buf[0].id = ZOO_AUTH_IDS;
	buf[1].perms = ZOO_PERM_READ | (upper ? ZOO_PERM_CREATE : 0);
	buf[1].id = ZOO_ANYONE_ID_UNSAFE;
	v.count = 2;
	v.data = buf;
	return &v;
}

/* Creates every missing directory of st->dir, all in one flight (the
 * server runs one session's requests in order).  Errors are left to the
 * create that follows, which names the real problem. */
static enum lr_status make_dirs(struct lr_store *st, int64_t deadline,
				struct lr_err *err)
{
	struct zop *ops[32];
	int n = 0, i;
	char *p = strdup(st->dir), *s;
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
		ops[n] = zop_new();
		if (!ops[n] ||
		    zoo_acreate2(st->zh, p, "", 0, acl_for(st, s != NULL, buf),
				 ZOO_PERSISTENT, create_done, ops[n]) != ZOK) {
			free(ops[n]);
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
		rc = pump(st, deadline, ops, n, "create directories", err);
	for (i = 0; i < n; i++)
		zop_free(ops[i]);
	return rc;
}

/* ---- URL ----------------------------------------------------------------- */

static const struct lr_url_opt url_opts[] = {
	{ "root", LR_OPT_PATH, 0, 0, NULL },
};

/* Joins the hosts as the client takes them ("h:p,h:p", an IPv6 address
 * without brackets: it splits at the last colon) into st->hosts, and as
 * the user wrote them, with ports, into st->where. */
static enum lr_status join_hosts(struct lr_store *st,
				 const struct lr_url_host *h, size_t n)
{
	size_t i, len = 1;
	char *p;

	for (i = 0; i < n; i++)
		len += strlen(h[i].host) + 8;
	st->hosts = p = malloc(len);
	if (!p)
		return LR_ERROR;
	*p = '\0';
	st->where[0] = '\0';
	for (i = 0; i < n; i++) {
		char one[300];
		size_t at = strlen(st->where);

		p += sprintf(p, "%s%s:%d", i ? "," : "", h[i].host, h[i].port);
		lr_url_host_format(&h[i], one, sizeof(one));
		snprintf(st->where + at, sizeof(st->where) - at, "%s%s",
			 i ? "," : "", one);
	}
	st->nhosts = (int)n;
	return LR_OK;
}

static enum lr_status parse_url(struct lr_store *st, struct lr_err *err)
{
	const struct lr_url *u = st->req->u;
	union lr_url_val val[1] = { { .s = DEFAULT_ROOT } };
	const char *root, *chroot = "";
	struct lr_url_host *hosts;
	char *r = NULL, *c = NULL;
	unsigned given;
	size_t n;
	int rc;

	if (lr_url_opts(u, "zk", url_opts, 1, val, &given, err->msg,
			sizeof(err->msg)) < 0)
		return LR_ERROR;
	root = val[0].s;
	if (lr_url_hosts(u, "zk", NULL, DEFAULT_PORT, 64, &hosts, &n,
			 err->msg, sizeof(err->msg)) < 0) {
		lr_url_hosts_free(hosts, n);
		return LR_ERROR;
	}
	rc = join_hosts(st, hosts, n);
	lr_url_hosts_free(hosts, n);
	if (rc != LR_OK)
		goto oom;

	if (*u->path && strcmp(u->path, "/") != 0) {
		if (!path_ok(u->path)) {
			lr_err_set(err, "zk URL: bad chroot path '%s'",
				   u->path);
			return LR_ERROR;
		}
		chroot = u->path;
	}
	r = strdup(root);
	if (!r)
		goto oom;
	while (strlen(r) > 1 && r[strlen(r) - 1] == '/')
		r[strlen(r) - 1] = '\0';
	if (strcmp(r, "/") == 0) {
		r[0] = '\0';
	} else if (!path_ok(r)) {
		lr_err_set(err,
			   "zk URL: bad root=%s (a path such as "
			   "/leaserun)",
			   root);
		free(r);
		return LR_ERROR;
	}
	c = join3(chroot, r, "/");
	free(r);
	if (!c)
		goto oom;
	st->dir = join3(c, st->req->name, "");
	free(c);
	if (!st->dir)
		goto oom;
	if (strcmp(st->dir, "/zookeeper") == 0 ||
	    strncmp(st->dir, "/zookeeper/", 11) == 0) {
		lr_err_set(err,
			   "zk URL: %s is ZooKeeper's own tree; choose "
			   "another root",
			   st->dir);
		return LR_ERROR;
	}

	if (u->user || u->password) {
		if (!u->user || !*u->user || !u->password) {
			lr_err_set(err, "zk URL: digest credentials need both "
					"user and password (zk://user:"
					"password@host)");
			return LR_ERROR;
		}
		st->auth = join3(u->user, ":", u->password);
		if (!st->auth)
			goto oom;
	}
	return LR_OK;
oom:
	lr_err_set(err, "out of memory");
	return LR_ERROR;
}

/* ---- the store --------------------------------------------------------- */

static void z_close(struct lr_store *st)
{
	if (!st)
		return;
	session_end(st);
	forget_node(st);
	lr_waitset_close(&st->ws);
	lr_wipe_free(st->auth);
	free(st->hosts);
	free(st->dir);
	free(st->prefix);
	free(st);
}

static void warn(struct lr_store *st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void warn(struct lr_store *st, const char *fmt, ...)
{
	char msg[LR_ERRLEN];
	va_list ap;

	if (!st->req->warn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	st->req->warn(st->req->warn_ctx, msg);
}

static enum lr_status z_open(const struct lr_store_req *req, int64_t deadline,
			     struct lr_store **out, struct lr_err *err)
{
	static int quiet;
	struct lr_store *st;
	enum lr_status s;

	if (!quiet) {
		zoo_set_debug_level((ZooLogLevel)0);
		quiet = 1;
	}
	*out = st = calloc(1, sizeof(*st));
	if (!st) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	st->req = req;
	lr_waitset_init(&st->ws);
	st->regfd = st->sock = -1;
	s = parse_url(st, err);
	if (s != LR_OK)
		return s;
	if (req->token) {
		const char *t;

		for (t = req->token; *t; t++)
			if (!isalnum((unsigned char)*t) && *t != '-' &&
			    *t != '_' && *t != '.')
				break;
		if (*t || !*req->token || strlen(req->token) > 128) {
			lr_err_set(err, "zk store: bad owner token");
			return LR_ERROR;
		}
		st->prefix = join3(NODE_PREFIX, req->token, "-");
		if (!st->prefix) {
			lr_err_set(err, "out of memory");
			return LR_ERROR;
		}
	}
	if (lr_waitset_open(&st->ws) < 0) {
		lr_err_set(err, "zk store: cannot create its wait fds: %s",
			   strerror(errno));
		return LR_ERROR;
	}
	s = session_start(st, err);
	if (s != LR_OK)
		return s;
	s = wait_connected(st, deadline, err);
	if (s != LR_OK)
		return s == LR_LOST ? LR_ERROR : s;
	if (req->token) {
		int64_t got = zoo_recv_timeout(st->zh);

		if (got > 0 && got != req->ttl_ms)
			warn(
			    st,
			    "ZooKeeper at %s granted a session timeout of "
			    "%lldms instead of the TTL %lldms (the server's "
			    "min/maxSessionTimeout); the lease lasts that long",
			    st->where, (long long)got, (long long)req->ttl_ms);
	}
	return LR_OK;
}

/* A fresh session after the old one expired (only while not holding). */
static enum lr_status renew_session(struct lr_store *st, int64_t deadline,
				    struct lr_err *err)
{
	enum lr_status s;

	session_end(st);
	forget_node(st);
	s = session_start(st, err);
	if (s != LR_OK)
		return s;
	return wait_connected(st, deadline, err);
}

static const char *zerr(int rc)
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

static int retryable(int rc)
{
	return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT;
}

/* The children of st->dir that are lock nodes, sorted by sequence. */
struct kid {
	const char *name;
	int64_t seq;
};

static int kid_cmp(const void *a, const void *b)
{
	const struct kid *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static struct kid *sort_kids(const struct zop *op, int *n)
{
	struct kid *k = calloc((size_t)op->nnames + 1, sizeof(*k));
	int i;

	*n = 0;
	if (!k)
		return NULL;
	for (i = 0; i < op->nnames; i++) {
		int64_t seq = node_seq(op->names[i]);

		if (seq < 0)
			continue;
		k[*n].name = op->names[i];
		k[*n].seq = seq;
		(*n)++;
	}
	qsort(k, (size_t)*n, sizeof(*k), kid_cmp);
	return k;
}

/* Lists st->dir.  *opp is the finished op (its rc may be ZNONODE). */
static enum lr_status list_kids(struct lr_store *st, int64_t deadline,
				struct zop **opp, struct lr_err *err)
{
	for (;;) {
		struct zop *op = zop_new();
		enum lr_status s;
		int rc;

		*opp = NULL;
		if (!op) {
			lr_err_set(err, "out of memory");
			return LR_ERROR;
		}
		rc = zoo_aget_children(st->zh, st->dir, 0, children_done, op);
		if (rc != ZOK) {
			free(op);
			dead(st);
			say_unreachable(st, "list", err);
			return st->expired ? LR_LOST : LR_ERROR;
		}
		s = pump(st, deadline, &op, 1, "list", err);
		if (s != LR_OK) {
			zop_free(op);
			return s;
		}
		if (retryable(op->rc) && !dead(st)) {
			zop_free(op);
			continue;
		}
		if (op->rc != ZOK && op->rc != ZNONODE) {
			dead(st);
			if (st->expired || st->authfail || retryable(op->rc))
				say_unreachable(st, "list", err);
			else
				lr_err_set(err, "ZooKeeper at %s: list %s: %s",
					   st->where, st->dir, zerr(op->rc));
			s = st->expired ? LR_LOST : LR_ERROR;
			zop_free(op);
			return s;
		}
		*opp = op;
		return LR_OK;
	}
}

/* Sends the create of our node, pipelined with a listing of the directory
 * (and, the first time with credentials, a look at its ACL). */
static enum lr_status create_node(struct lr_store *st, int64_t deadline,
				  struct zop **kids, struct lr_err *err)
{
	int tries = 0;

	for (;;) {
		struct zop *ops[3] = {NULL, NULL, NULL};
		struct ACL buf[2];
		char *path = join3(st->dir, "/", st->prefix);
		char data[400];
		enum lr_status s;
		int n = 2, i;

		*kids = NULL;
		if (!path)
			goto oom;
		snprintf(data, sizeof(data), "%s %ld %lld",
			 st->req->host && *st->req->host ? st->req->host : "-",
			 st->req->pid, (long long)st->req->since_ms);
		for (i = 0; i < 3; i++)
			if (!(ops[i] = zop_new()))
				goto oom_ops;
		if (!st->auth || st->guarded)
			n = 2;
		else
			n = 3;
		if (zoo_acreate2(st->zh, path, data, (int)strlen(data),
				 acl_for(st, 0, buf), ZOO_EPHEMERAL_SEQUENTIAL,
				 create_done, ops[0]) != ZOK) {
			free(path);
			for (i = 0; i < 3; i++)
				free(ops[i]);
			dead(st);
			say_unreachable(st, "create", err);
			return st->expired ? LR_LOST : LR_ERROR;
		}
		free(path);
		/* From here a lost reply may still have made our node. */
		st->may_exist = 1;
		st->sid = session_id(st);
		if (zoo_aget_children(st->zh, st->dir, 0, children_done,
				      ops[1]) != ZOK) {
			free(ops[1]);
			ops[1] = NULL;
		}
		if (n == 3 &&
		    zoo_aget_acl(st->zh, st->dir, acl_done, ops[2]) != ZOK) {
			free(ops[2]);
			ops[2] = NULL;
		}
		if (n == 2) {
			free(ops[2]);
			ops[2] = NULL;
		}
		s = pump(st, deadline, ops, 3, "create", err);
		if (s != LR_OK) {
			for (i = 0; i < 3; i++)
				zop_free(ops[i]);
			return s;
		}
		if (ops[2] && ops[2]->rc == ZOK) {
			st->guarded = 1;
			if (ops[2]->world_delete)
				warn(
				    st,
				    "ZooKeeper node %s lets anyone delete the "
				    "lock nodes in it (its ACL gives world "
				    "DELETE; it was made without credentials): "
				    "remove it or use another ?root=",
				    st->dir);
		}
		if (ops[0]->rc == ZOK) {
			st->mine = ops[0]->value;
			ops[0]->value = NULL;
			st->czxid = ops[0]->stat.czxid;
			st->may_exist = 0;
			st->node_gone = 0;
			if (ops[1] && ops[1]->rc == ZOK) {
				*kids = ops[1];
				ops[1] = NULL;
			}
			for (i = 0; i < 3; i++)
				zop_free(ops[i]);
			return LR_OK;
		}
		i = ops[0]->rc;
		for (n = 0; n < 3; n++)
			zop_free(ops[n]);
		if (retryable(i) && !dead(st))
			return LR_OK; /* may_exist: the listing will tell */
		st->may_exist = 0;
		if (i == ZNONODE && tries++ == 0) {
			s = make_dirs(st, deadline, err);
			if (s != LR_OK)
				return s;
			continue;
		}
		dead(st);
		if (st->expired || st->authfail || retryable(i))
			say_unreachable(st, "create", err);
		else
			lr_err_set(err,
				   "ZooKeeper at %s: cannot create a node "
				   "in %s: %s",
				   st->where, st->dir, zerr(i));
		return st->expired ? LR_LOST : LR_ERROR;
	oom_ops:
		free(path);
		for (i = 0; i < 3; i++)
			free(ops[i]);
		goto oom;
	}
oom:
	lr_err_set(err, "out of memory");
	return LR_ERROR;
}

/* An exists (with our watch) on path; the op is returned finished. */
static enum lr_status exists_watch(struct lr_store *st, const char *path,
				   int64_t deadline, struct zop **opp,
				   const char *what, struct lr_err *err)
{
	for (;;) {
		struct zop *op = zop_new();
		enum lr_status s;

		*opp = NULL;
		if (!op) {
			lr_err_set(err, "out of memory");
			return LR_ERROR;
		}
		if (zoo_awexists(st->zh, path, on_watch, st, stat_done, op) !=
		    ZOK) {
			free(op);
			dead(st);
			say_unreachable(st, what, err);
			return st->expired ? LR_LOST : LR_ERROR;
		}
		s = pump(st, deadline, &op, 1, what, err);
		if (s != LR_OK) {
			zop_free(op);
			return s;
		}
		if (retryable(op->rc) && !dead(st)) {
			zop_free(op);
			continue;
		}
		*opp = op;
		return LR_OK;
	}
}

static enum lr_status acquire_round(struct lr_store *st, int64_t deadline,
				    struct lr_grant *g, struct lr_err *err)
{
	int64_t t_send;
	int round;

	if (!st->prefix) {
		lr_err_set(err, "zk store: acquire without a token");
		return LR_ERROR;
	}
	if (st->held) {
		g->fence = (uint64_t)st->czxid;
		g->ttl_ms = zoo_recv_timeout(st->zh);
		return LR_OK;
	}
	/* Waiting, with both watches in place and nothing changed: the
	 * watches would have told us (after a reconnect too: the client
	 * sets them again and the server reports what it missed). */
	if (st->mine && st->pred && !st->pred_gone && !st->node_gone &&
	    !dead(st))
		return LR_BUSY;

	for (round = 0; round < MAX_ROUNDS; round++) {
		struct zop *kids = NULL, *op;
		struct kid *k;
		enum lr_status s;
		int n, i, me = -1;
		int64_t t_round = lr_now_ms();

		if (dead(st)) {
			if (st->authfail) {
				say_unreachable(st, "acquire", err);
				return LR_ERROR;
			}
			s = renew_session(st, deadline, err);
			if (s != LR_OK)
				return s == LR_LOST ? LR_ERROR : s;
		}
		if (st->node_gone) {
			/* Deleted (--break?) while we waited: queue again. */
			forget_node(st);
		}
		if (!st->mine && !st->may_exist) {
			s = create_node(st, deadline, &kids, err);
			if (s != LR_OK)
				return s == LR_LOST ? LR_ERROR : s;
		}
		if (!kids) {
			s = list_kids(st, deadline, &kids, err);
			if (s == LR_LOST)
				continue; /* the session expired: again */
			if (s != LR_OK)
				return s;
		}
		k = sort_kids(kids, &n);
		if (!k) {
			zop_free(kids);
			lr_err_set(err, "out of memory");
			return LR_ERROR;
		}
		if (st->may_exist) {
			/* Did the create whose reply we lost happen? */
			for (i = 0; i < n; i++)
				if (strncmp(k[i].name, st->prefix,
					    strlen(st->prefix)) == 0)
					break;
			st->may_exist = 0;
			if (i < n && session_id(st) == st->sid) {
				st->mine = join3(st->dir, "/", k[i].name);
				st->czxid = 0; /* from the exists below */
				if (!st->mine) {
					free(k);
					zop_free(kids);
					lr_err_set(err, "out of memory");
					return LR_ERROR;
				}
			}
		}
		if (st->mine) {
			for (i = 0; i < n; i++)
				if (strcmp(k[i].name, basename_of(st->mine)) ==
				    0)
					me = i;
		}
		if (me < 0) {
			/* Ours is not there (never made, or deleted). */
			free(k);
			zop_free(kids);
			forget_node(st);
			continue;
		}
		free(st->pred);
		st->pred = me > 0 ? join3(st->dir, "/", k[me - 1].name) : NULL;
		free(k);
		zop_free(kids);
		if (me > 0 && !st->pred) {
			lr_err_set(err, "out of memory");
			return LR_ERROR;
		}
		st->pred_gone = 0;
		if (me > 0) {
			/* Watch the predecessor, and our own node too. */
			struct zop *own = zop_new();

			if (own && zoo_awexists(st->zh, st->mine, on_watch, st,
						stat_done, own) != ZOK) {
				free(own);
				own = NULL;
			}
			s = exists_watch(st, st->pred, deadline, &op,
					 "watch the predecessor", err);
			if (own && s == LR_OK)
				s = pump(st, deadline, &own, 1, "watch", err);
			if (own && s == LR_OK && own->rc == ZOK && !st->czxid)
				st->czxid = own->stat.czxid;
			if (own && s == LR_OK && own->rc == ZNONODE)
				st->node_gone = 1;
			if (own && s == LR_OK && own->rc == ZOK)
				st->own_watched = 1;
			zop_free(own);
			if (s != LR_OK)
				return s == LR_LOST ? LR_ERROR : s;
			i = op->rc;
			zop_free(op);
			if (i == ZNONODE)
				continue; /* gone meanwhile: look again */
			if (i != ZOK) {
				dead(st);
				if (st->expired)
					continue;
				lr_err_set(err,
					   "ZooKeeper at %s: exists %s: "
					   "%s",
					   st->where, st->pred, zerr(i));
				return LR_ERROR;
			}
			if (st->node_gone)
				continue;
			return LR_BUSY;
		}
		/* Lowest: ours.  The create told us its czxid (and the
		 * listing, sent after it, that the session lives); put our
		 * watch on it without waiting: a reply saying it is gone
		 * makes process() or renew() report the loss. */
		if (st->czxid && !st->own_watched) {
			struct own_check *c = malloc(sizeof(*c));

			if (c) {
				c->st = st;
				c->gen = st->gen;
				if (zoo_awexists(st->zh, st->mine, on_watch, st,
						 own_done, c) == ZOK)
					st->own_watched = 1;
				else
					free(c);
			}
		}
		if (st->czxid && st->own_watched) {
			st->held = 1;
			st->node_gone = 0;
			st->last_ok = t_round;
			g->fence = (uint64_t)st->czxid;
			g->ttl_ms = zoo_recv_timeout(st->zh);
			return LR_OK;
		}
		/* A node found by its token after a lost reply: learn its
		 * czxid first. */
		t_send = lr_now_ms();
		s = exists_watch(st, st->mine, deadline, &op, "watch our node",
				 err);
		if (s != LR_OK)
			return s == LR_LOST ? LR_ERROR : s;
		i = op->rc;
		if (i == ZNONODE) {
			zop_free(op);
			forget_node(st);
			continue;
		}
		if (i != ZOK) {
			zop_free(op);
			dead(st);
			if (st->expired)
				continue;
			lr_err_set(err, "ZooKeeper at %s: exists %s: %s",
				   st->where, st->mine, zerr(i));
			return LR_ERROR;
		}
		if (op->stat.ephemeralOwner != session_id(st)) {
			/* Not our session's node: cannot be, but be sure. */
			zop_free(op);
			forget_node(st);
			continue;
		}
		st->czxid = op->stat.czxid;
		st->own_watched = 1;
		zop_free(op);
		st->held = 1;
		st->node_gone = 0;
		st->last_ok = t_send;
		g->fence = (uint64_t)st->czxid;
		g->ttl_ms = zoo_recv_timeout(st->zh);
		return LR_OK;
	}
	lr_err_set(err,
		   "ZooKeeper at %s: the lock nodes in %s keep "
		   "changing; giving up",
		   st->where, st->dir);
	return LR_ERROR;
}

static enum lr_status z_acquire(struct lr_store *st, int64_t deadline,
				struct lr_grant *g, struct lr_err *err)
{
	enum lr_status s = acquire_round(st, deadline, g, err);

	/* Queued, and no server answered in time: our place in the queue
	 * lasts as long as the session, which the client keeps trying to
	 * reach meanwhile, so go on waiting (-w still bounds the wait)
	 * rather than fail on a leader election. */
	if (s == LR_TIMEOUT && st->mine && !st->held && !dead(st))
		return LR_BUSY;
	return s;
}

/* wait_fd: the wait-set with the client's socket and its timer in it. */
static int z_wait_fd(struct lr_store *st, short *events)
{
	struct timeval tv = {0, 0};
	int fd = -1, interest = 0, rc;
	int64_t ms;

	if (!st->zh || st->ws.ep < 0)
		return -1;
	*events = POLLIN;
	rc = zookeeper_interest(st->zh, &fd, &interest, &tv);
	if (rc == ZINVALIDSTATE) {
		/* Expired or refused: let process() say so at once. */
		dead(st);
		lr_waitset_arm(&st->ws, 0);
		return st->ws.ep;
	}
	note_fd(st, fd, &tv);
	if (fd != st->regfd && st->regfd >= 0)
		lr_waitset_watch(&st->ws, st->regfd, 0);
	st->regfd = -1;
	if (fd >= 0 &&
	    lr_waitset_watch(&st->ws, fd,
			     ((interest & ZOOKEEPER_READ) ? EPOLLIN : 0) |
				     ((interest & ZOOKEEPER_WRITE) ? EPOLLOUT
								   : 0)) == 0)
		st->regfd = fd;
	ms = (int64_t)tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000;
	lr_waitset_arm(&st->ws, lr_now_ms() + (ms < 1 ? 1 : ms));
	return st->ws.ep;
}

static enum lr_status z_process(struct lr_store *st, short revents,
				int64_t deadline, struct lr_err *err)
{
	struct epoll_event evs[4];
	int n, i, zev = 0;

	if (!st->zh)
		return st->held ? LR_OK : LR_BUSY;
	n = lr_waitset_ready(&st->ws, evs, 4);
	for (i = 0; i < n; i++) {
		if (evs[i].data.fd == st->ws.tfd)
			continue;
		if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
			zev |= ZOOKEEPER_READ;
		if (evs[i].events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
			zev |= ZOOKEEPER_WRITE;
	}
	if (!dead(st)) {
		if (zev) {
			zookeeper_process(st->zh, zev);
			st->hs_cut = 0; /* a cut was read here, not in turn() */
			no_readonly(st);
		} else {
			struct timeval tv;
			int fd, interest;

			/* The timer: pings, connect retries, timeouts. */
			fd = -1;
			if (zookeeper_interest(st->zh, &fd, &interest, &tv) !=
			    ZINVALIDSTATE)
				note_fd(st, fd, &tv);
		}
		dead(st);
	}
	if (st->held) {
		if (st->expired) {
			lr_err_set(err,
				   "ZooKeeper at %s: the session expired "
				   "(the server deleted our node)",
				   st->where);
			return LR_LOST;
		}
		if (st->node_gone) {
			lr_err_set(err,
				   "ZooKeeper at %s: our node %s was "
				   "deleted",
				   st->where, st->mine);
			return LR_LOST;
		}
		if (st->authfail) {
			/* The client will not talk to the server again, so
			 * nothing can keep our node; do not wait for D. */
			lr_err_set(err,
				   "ZooKeeper at %s: authentication "
				   "failed; the session cannot be used",
				   st->where);
			return LR_LOST;
		}
		if (!connected(st) && !st->disc_reported) {
			st->disc_reported = 1;
			lr_err_set(err, "ZooKeeper at %s: lost the connection",
				   st->where);
			return LR_ERROR;
		}
		return LR_OK;
	}
	if (st->pred_gone || st->node_gone || st->expired || st->authfail)
		return LR_OK;
	return LR_BUSY;
}

static enum lr_status z_renew(struct lr_store *st, int64_t deadline,
			      struct lr_err *err)
{
	int64_t t_send;
	struct zop *op;
	enum lr_status s;
	int rc;

	if (!st->held || !st->mine) {
		lr_err_set(err, "zk store: renew without a lease");
		return LR_LOST;
	}
	if (dead(st) && st->expired) {
		lr_err_set(err,
			   "ZooKeeper at %s: the session expired (the "
			   "server deleted our node)",
			   st->where);
		return LR_LOST;
	}
	if (st->node_gone) {
		lr_err_set(err, "ZooKeeper at %s: our node %s was deleted",
			   st->where, st->mine);
		return LR_LOST;
	}
	if (st->authfail) {
		say_unreachable(st, "renew", err);
		return LR_ERROR;
	}
	t_send = lr_now_ms();
	s = exists_watch(st, st->mine, deadline, &op, "renew", err);
	if (s != LR_OK)
		return s == LR_LOST ? LR_LOST : s;
	rc = op->rc;
	if (rc == ZOK &&
	    (op->stat.czxid != st->czxid ||
	     op->stat.ephemeralOwner != st->sid || session_id(st) != st->sid)) {
		zop_free(op);
		lr_err_set(err, "ZooKeeper at %s: our node %s was replaced",
			   st->where, st->mine);
		return LR_LOST;
	}
	zop_free(op);
	if (rc == ZOK) {
		st->last_ok = t_send;
		return LR_OK;
	}
	dead(st);
	if (rc == ZNONODE) {
		lr_err_set(err, "ZooKeeper at %s: our node %s is gone%s",
			   st->where, st->mine,
			   st->expired ? " (the session expired)" : "");
		return LR_LOST;
	}
	if (st->expired || rc == ZSESSIONEXPIRED) {
		st->expired = 1;
		lr_err_set(err,
			   "ZooKeeper at %s: the session expired (the "
			   "server deleted our node)",
			   st->where);
		return LR_LOST;
	}
	if (retryable(rc) || st->authfail) {
		say_unreachable(st, "renew", err);
		return LR_ERROR;
	}
	lr_err_set(err, "ZooKeeper at %s: renew: exists %s: %s", st->where,
		   st->mine, zerr(rc));
	return LR_ERROR;
}

static enum lr_status z_release(struct lr_store *st, int64_t deadline,
				struct lr_err *err)
{
	int tries = 0, rc;

	if (!st->mine) {
		if (!st->held)
			return LR_OK;
		lr_err_set(err, "zk store: nothing to release");
		return LR_LOST;
	}
	if (dead(st) && st->expired) {
		lr_err_set(err,
			   "ZooKeeper at %s: the session expired (the "
			   "server had deleted our node)",
			   st->where);
		forget_node(st);
		return LR_LOST;
	}
	for (;; tries++) {
		struct zop *op;
		enum lr_status s;
		int64_t d = deadline;

		if (st->last_ok && !connected(st)) {
			/* Once no server has heard from us for a whole
			 * session timeout, the session and our node with it
			 * are gone (or go as soon as a server can tell):
			 * waiting longer for a hung server gains nothing. */
			int64_t cap = st->last_ok + zoo_recv_timeout(st->zh);

			if (lr_now_ms() >= cap) {
				lr_err_set(err,
					   "ZooKeeper at %s: no server "
					   "answered for a whole session "
					   "timeout; our node goes with "
					   "the session",
					   st->where);
				forget_node(st);
				return LR_LOST;
			}
			if (cap < d)
				d = cap;
		}
		op = zop_new();
		if (!op) {
			lr_err_set(err, "out of memory");
			return LR_ERROR;
		}
		if (zoo_adelete(st->zh, st->mine, -1, void_done, op) != ZOK) {
			free(op);
			dead(st);
			say_unreachable(st, "release", err);
			return LR_ERROR;
		}
		s = pump(st, d, &op, 1, "release", err);
		if (s != LR_OK) {
			zop_free(op);
			return s;
		}
		rc = op->rc;
		zop_free(op);
		if (retryable(rc) && !dead(st))
			continue;
		break;
	}
	if (rc == ZOK || (rc == ZNONODE && tries > 0)) {
		forget_node(st);
		return LR_OK;
	}
	dead(st);
	if (rc == ZNONODE || st->expired) {
		lr_err_set(err, "ZooKeeper at %s: our node %s was already gone",
			   st->where, st->mine);
		forget_node(st);
		return LR_LOST;
	}
	if (retryable(rc) || st->authfail)
		say_unreachable(st, "release", err);
	else
		lr_err_set(err, "ZooKeeper at %s: delete %s: %s", st->where,
			   st->mine, zerr(rc));
	return LR_ERROR;
}

/* The holder's node (the lowest), or NULL with *none set when free. */
static enum lr_status lowest(struct lr_store *st, int64_t deadline, char **path,
			     struct lr_err *err)
{
	struct zop *kids;
	struct kid *k;
	enum lr_status s;
	int n;

	*path = NULL;
	s = list_kids(st, deadline, &kids, err);
	if (s != LR_OK)
		return s == LR_LOST ? LR_ERROR : s;
	if (kids->rc == ZNONODE) {
		zop_free(kids);
		return LR_OK;
	}
	k = sort_kids(kids, &n);
	if (k && n > 0) {
		*path = join3(st->dir, "/", k[0].name);
		if (!*path)
			s = LR_ERROR;
	} else if (!k) {
		s = LR_ERROR;
	}
	free(k);
	zop_free(kids);
	if (s != LR_OK)
		lr_err_set(err, "out of memory");
	return s;
}

static enum lr_status z_inspect(struct lr_store *st, int64_t deadline,
				struct lr_info *info, struct lr_err *err)
{
	int round;

	info->held = 0;
	for (round = 0; round < MAX_ROUNDS; round++) {
		struct zop *op;
		char *path;
		enum lr_status s;
		int rc;

		s = lowest(st, deadline, &path, err);
		if (s != LR_OK || !path)
			return s;
		op = zop_new();
		if (!op || zoo_aget(st->zh, path, 0, data_done, op) != ZOK) {
			free(op);
			free(path);
			say_unreachable(st, "status", err);
			return LR_ERROR;
		}
		s = pump(st, deadline, &op, 1, "status", err);
		if (s != LR_OK) {
			zop_free(op);
			free(path);
			return s;
		}
		rc = op->rc;
		if (rc == ZNONODE || retryable(rc)) {
			zop_free(op);
			free(path);
			continue; /* released meanwhile */
		}
		if (rc != ZOK) {
			lr_err_set(err, "ZooKeeper at %s: get %s: %s",
				   st->where, path, zerr(rc));
			zop_free(op);
			free(path);
			return LR_ERROR;
		}
		info->held = 1;
		info->fence = (uint64_t)op->stat.czxid;
		if (op->value) {
			char host[256];
			long pid;
			long long since;

			if (sscanf(op->value, "%255s %ld %lld", host, &pid,
				   &since) == 3) {
				if (strcmp(host, "-") != 0)
					snprintf(info->host, sizeof(info->host),
						 "%s", host);
				info->pid = pid;
				info->since_ms = since;
			}
		}
		zop_free(op);
		free(path);
		return LR_OK;
	}
	lr_err_set(err, "ZooKeeper at %s: the lock nodes in %s keep changing",
		   st->where, st->dir);
	return LR_ERROR;
}

static enum lr_status z_brk(struct lr_store *st, int64_t deadline,
			    struct lr_err *err)
{
	struct zop *op;
	char *path;
	enum lr_status s;
	int rc;

	s = lowest(st, deadline, &path, err);
	if (s != LR_OK || !path)
		return s;
	op = zop_new();
	if (!op || zoo_adelete(st->zh, path, -1, void_done, op) != ZOK) {
		free(op);
		free(path);
		say_unreachable(st, "break", err);
		return LR_ERROR;
	}
	s = pump(st, deadline, &op, 1, "break", err);
	if (s != LR_OK) {
		zop_free(op);
		free(path);
		return s;
	}
	rc = op->rc;
	zop_free(op);
	if (rc == ZOK || rc == ZNONODE) {
		/* NONODE: released meanwhile; the grant we meant is gone. */
		free(path);
		return LR_OK;
	}
	if (retryable(rc))
		say_unreachable(st, "break", err);
	else
		lr_err_set(err, "ZooKeeper at %s: cannot delete %s: %s",
			   st->where, path, zerr(rc));
	free(path);
	return LR_ERROR;
}

static const char *const schemes[] = {"zk", NULL};

const struct lr_store_ops lr_store_ops = {
    .abi = LR_STORE_ABI,
    .name = "zk",
    .schemes = schemes,
    .caps = LR_CAP_TTL | LR_CAP_BREAK,
    .secret_env = NULL,
    .open = z_open,
    .acquire = z_acquire,
    .wait_fd = z_wait_fd,
    .process = z_process,
    .renew = z_renew,
    .release = z_release,
    .inspect = z_inspect,
    .brk = z_brk,
    .close = z_close,
};
