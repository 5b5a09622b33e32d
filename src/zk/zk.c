/*
 * zk.c - the ZooKeeper store (single-threaded C client), module zk.so:
 * the lock recipe.  The client session it runs on is zk-session.c's.
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
 * Shared holders and semaphores use the same directory, with nodes named
 * for what they are: read-TOKEN-SEQ for a shared run, which holds when no
 * lock- node comes before it and watches the last lock- node before it
 * (ZooKeeper's read/write lock recipe); semN-TOKEN-SEQ for a run of a
 * semaphore of N slots, queued among those nodes alone.  The first of
 * them creates slotN-K, an ephemeral node of its own, for the lowest free
 * slot K (creating it fails if it exists), then deletes its queue node,
 * which wakes the next run (it watches that node); the slot node is then
 * its lock, and its czxid the fence.  With every slot taken, the first
 * run alone watches the slot nodes.  Every node carries its limit, so a
 * run finds a node of another limit in its first listing and is refused.
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
 * The loop.  Every call drives the client up to its absolute deadline;
 * between calls, wait_fd() and process() hand the client to the core's
 * loop, so the session is kept alive and events are seen at once however
 * long the core waits (zk-session.h).
 *
 * Runs (--once-per) are judged by the server's clock as it stamps a node
 * (mtime: the leader's clock when it applied the write).  To learn the
 * time, run_start sets DIR/clock, in the flight of a read of DIR/run,
 * the record "FENCE PERIOD START END STATUS PID HOST" of the last start;
 * if that start is the period or more before the clock's stamp, it
 * writes ours, with that stamp as START, conditional on the version it
 * read (so a write in between makes it look again).  Both nodes are
 * persistent, beside the lock nodes, which are all named lock-*.
 *
 * Costs: open is the session handshake; acquire of a free lease is one
 * round trip (create + list, pipelined; the watch on our node goes out
 * without waiting); release is one delete; close sends the session's end
 * and waits for it only if a node of ours may be left (after -n, -w).
 */
#include "config.h"

#include <ctype.h>
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "zk/zk-session.h"

#define DEFAULT_ROOT "/leaserun"
#define DEFAULT_PORT 2181
#define NODE_PREFIX  "lock-"
#define SEQ_DIGITS   10
#define MAX_ROUNDS   16 /* acquire/inspect retries against moving children */

/* What a step of an acquire round returns besides an enum lr_status: the
 * lock nodes moved (or the session was replaced): look again. */
#define AGAIN (-1)

struct lr_store {
	const struct lr_store_req *req;
	struct lr_zk_session *zs; /* NULL until the URL is read */
	char *dir;		  /* CHROOT/ROOT/NAME */
	char *prefix;		  /* "lock-TOKEN-" or NULL */

	/* the lock */
	char *mine; /* our node's full path, or NULL */
	int64_t czxid;
	int64_t sid;   /* the session our node belongs to */
	int may_exist; /* a create's reply was lost: look for our token */
	char *prev_node;    /* the predecessor we watch, or NULL */
	int pred_gone; /* it changed or went: try again */
	int node_gone; /* our node was deleted */
	int held;
	int own_watched; /* our node has our watch on it */
	unsigned armed;	 /* the connection (zs->connects) on which an
			  * exists on our node came back ZOK: the watch is
			  * on it, and news from before that is in; 0: none
			  * since the node was ours */
	unsigned gen;	 /* bumped whenever we let go of a node */
	int64_t last_ok; /* when the last request that proved it was sent */
	int guarded;	 /* the ACL guard ran */

	/* a semaphore */
	char *slotpfx;	  /* DIR/slotN- */
	unsigned slot;	  /* ours, once held */
	int slot_wait;	  /* first in the queue, watching the slot nodes */
	char *queue_left; /* our queue node, still to delete after a claim */
};

/* ---- small helpers ------------------------------------------------------ */

static char *concat_dup(const char *a, const char *b, const char *c)
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

/* What a node in the lease directory is, from its name. */
enum kind {
	K_NONE = -1, /* not ours */
	K_EXCL,	     /* lock-TOKEN-SEQ: an exclusive run's (the plain lease) */
	K_SHARED,    /* read-TOKEN-SEQ: a shared run's */
	K_QUEUE,     /* semN-TOKEN-SEQ: a semaphore's run, queued or first */
	K_SLOT,	     /* slotN-K: the holder of its slot K */
};

/* Reads the decimal number at *p (advancing it); -1 if there is none. */
static long number(const char **p)
{
	long v = 0;

	if (!isdigit((unsigned char)**p))
		return -1;
	while (isdigit((unsigned char)**p) && v < 1000000)
		v = v * 10 + (*(*p)++ - '0');
	return v;
}

/* The kind of node name, with its limit and, for K_SLOT, its slot. */
static enum kind node_kind(const char *name, unsigned *limit, unsigned *slot)
{
	const char *p;
	long n, k;

	*limit = 1;
	*slot = 0;
	if (strncmp(name, NODE_PREFIX, strlen(NODE_PREFIX)) == 0)
		return K_EXCL;
	if (strncmp(name, "read-", 5) == 0)
		return K_SHARED;
	if (strncmp(name, "sem", 3) == 0) {
		p = name + 3;
		n = number(&p);
		if (n < 2 || *p != '-')
			return K_NONE;
		*limit = (unsigned)n;
		return K_QUEUE;
	}
	if (strncmp(name, "slot", 4) == 0) {
		p = name + 4;
		n = number(&p);
		if (n < 2 || *p++ != '-')
			return K_NONE;
		k = number(&p);
		if (k < 0 || *p)
			return K_NONE;
		*limit = (unsigned)n;
		*slot = (unsigned)k;
		return K_SLOT;
	}
	return K_NONE;
}

/* "rest" of a queued node's name: its sequence number, or -1. */
static int64_t node_seq(const char *name)
{
	size_t n = strlen(name), i;
	int64_t v = 0;
	unsigned lim, slot;
	enum kind k = node_kind(name, &lim, &slot);

	if (k == K_NONE || k == K_SLOT || n < SEQ_DIGITS + 2)
		return -1;
	for (i = n - SEQ_DIGITS; i < n; i++) {
		if (!isdigit((unsigned char)name[i]))
			return -1;
		v = v * 10 + (name[i] - '0');
	}
	return v;
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

static enum lr_status oom(struct lr_err *err)
{
	lr_err_set(err, "out of memory");
	return LR_ERROR;
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

/* ---- our node ----------------------------------------------------------- */

/* Watch events on nodes, from the session. */
static void on_node(void *ctx, int type, const char *path)
{
	struct lr_store *st = ctx;

	if (st->mine && strcmp(path, st->mine) == 0 &&
	    type == ZOO_DELETED_EVENT)
		st->node_gone = 1;
	if (st->prev_node && strcmp(path, st->prev_node) == 0)
		st->pred_gone = 1;
	if (st->slot_wait &&
	    strncmp(path, st->slotpfx, strlen(st->slotpfx)) == 0)
		st->pred_gone = 1;
}

static void forget_node(struct lr_store *st)
{
	st->gen++;
	st->own_watched = 0;
	st->armed = 0;
	free(st->mine);
	st->mine = NULL;
	free(st->prev_node);
	st->prev_node = NULL;
	st->pred_gone = st->node_gone = st->held = st->may_exist = 0;
	st->slot_wait = 0;
	st->czxid = 0;
}

/* The exists that puts our watch on the node we just got, answered after
 * acquire() returned: a reply for the node we still hold that says it is
 * gone (or another) is its loss. */
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
	else if (c->gen == st->gen && rc == ZOK && stat &&
		 stat->czxid == st->czxid)
		st->armed = st->zs->connects;
	free(c);
}

static void watch_own_later(struct lr_store *st)
{
	struct own_check *c = malloc(sizeof(*c));

	if (!c)
		return;
	c->st = st;
	c->gen = st->gen;
	if (lr_zk_send_exists_cb(st->zs, st->mine, own_done, c) == ZOK)
		st->own_watched = 1;
	else
		free(c);
}

/* Certain loss, in the words renew() and process() share. */
static enum lr_status expired_loss(struct lr_store *st, struct lr_err *err)
{
	lr_err_set(err,
		   "ZooKeeper at %s: the session expired (the server "
		   "deleted our node)",
		   st->zs->where);
	return LR_LOST;
}

static enum lr_status deleted_loss(struct lr_store *st, struct lr_err *err)
{
	lr_err_set(err, "ZooKeeper at %s: our node %s was deleted",
		   st->zs->where, st->mine);
	return LR_LOST;
}

/* ---- URL ----------------------------------------------------------------- */

static const struct lr_url_opt url_opts[] = {
	{ "root", LR_OPT_PATH, 0, 0, NULL },
};

/* CHROOT/ROOT/NAME into st->dir, from the URL's path and root=. */
static enum lr_status lease_dir(struct lr_store *st, const char *path,
				const char *root, struct lr_err *err)
{
	const char *chroot = "";
	char *r, *c;

	if (*path && strcmp(path, "/") != 0) {
		if (!path_ok(path)) {
			lr_err_set(err, "zk URL: bad chroot path '%s'", path);
			return LR_ERROR;
		}
		chroot = path;
	}
	r = strdup(root);
	if (!r)
		return oom(err);
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
	c = concat_dup(chroot, r, "/");
	free(r);
	if (!c)
		return oom(err);
	st->dir = concat_dup(c, st->req->name, "");
	free(c);
	if (!st->dir)
		return oom(err);
	if (strcmp(st->dir, "/zookeeper") == 0 ||
	    strncmp(st->dir, "/zookeeper/", 11) == 0) {
		lr_err_set(err,
			   "zk URL: %s is ZooKeeper's own tree; choose "
			   "another root",
			   st->dir);
		return LR_ERROR;
	}
	return LR_OK;
}

/* Reads the URL into st->dir and a session object, st->zs. */
/* A digest password in clear across a network: said once a process.
 * This client has no TLS (the C client's SSL build is not the one we
 * link), so the cure is the network's: see the man page. */
static void clear_guard(struct lr_store *st, const struct lr_url_host *h,
			size_t n)
{
	static int warned;
	size_t i;

	if (warned || !st->zs->auth)
		return;
	for (i = 0; i < n && lr_host_is_local(h[i].host); i++)
		;
	if (i == n)
		return;
	warned = 1;
	warn(st,
	     "ZooKeeper at %s: the digest password goes out in clear and "
	     "crosses the network (this client has no TLS); keep the "
	     "servers on a trusted network, or reach them through a TLS "
	     "tunnel",
	     st->zs->where);
}

static enum lr_status parse_url(struct lr_store *st, struct lr_err *err)
{
	const struct lr_url *u = st->req->u;
	union lr_url_val val[1] = { { .s = DEFAULT_ROOT } };
	struct lr_url_host *hosts;
	enum lr_status s;
	unsigned given;
	size_t n;

	if (lr_url_opts(u, "zk", url_opts, 1, val, &given, err->msg,
			sizeof(err->msg)) < 0)
		return LR_ERROR;
	if (lr_url_hosts(u, "zk", NULL, DEFAULT_PORT, 64, &hosts, &n,
			 err->msg, sizeof(err->msg)) < 0) {
		lr_url_hosts_free(hosts, n);
		return LR_ERROR;
	}
	s = lease_dir(st, u->path, val[0].s, err);
	if (s == LR_OK && (u->user || u->password) &&
	    (!u->user || !*u->user || !u->password)) {
		lr_err_set(err, "zk URL: digest credentials need both "
				"user and password (zk://user:"
				"password@host)");
		s = LR_ERROR;
	}
	if (s == LR_OK)
		s = lr_zk_new(hosts, n, u->user, u->password,
			      st->req->ttl_ms, on_node, st, &st->zs, err);
	if (s == LR_OK)
		clear_guard(st, hosts, n);
	lr_url_hosts_free(hosts, n);
	return s;
}

/* ---- open and close ----------------------------------------------------- */

/* Our nodes are named lock-TOKEN-: the token must be a plain word. */
static enum lr_status set_prefix(struct lr_store *st, struct lr_err *err)
{
	const char *token = st->req->token, *t;

	for (t = token; *t; t++)
		if (!isalnum((unsigned char)*t) && *t != '-' && *t != '_' &&
		    *t != '.')
			break;
	if (*t || !*token || strlen(token) > 128) {
		lr_err_set(err, "zk store: bad owner token");
		return LR_ERROR;
	}
	if (st->req->limit > 1) {
		char kind[24], pfx[24];

		snprintf(kind, sizeof(kind), "sem%u-", st->req->limit);
		snprintf(pfx, sizeof(pfx), "/slot%u-", st->req->limit);
		st->prefix = concat_dup(kind, token, "-");
		st->slotpfx = concat_dup(st->dir, pfx, "");
		if (!st->slotpfx)
			return oom(err);
	} else {
		st->prefix = concat_dup(st->req->shared ? "read-" : NODE_PREFIX,
					token, "-");
	}
	return st->prefix ? LR_OK : oom(err);
}

static enum lr_status zk_open(const struct lr_store_req *req, int64_t deadline,
			      struct lr_store **out, struct lr_err *err)
{
	struct lr_store *st;
	enum lr_status s;
	int64_t got;

	*out = st = calloc(1, sizeof(*st));
	if (!st)
		return oom(err);
	st->req = req;
	s = parse_url(st, err);
	if (s == LR_OK && req->token)
		s = set_prefix(st, err);
	if (s == LR_OK)
		s = lr_zk_start(st->zs, deadline, err);
	if (s != LR_OK)
		return s == LR_LOST ? LR_ERROR : s;
	got = lr_zk_timeout(st->zs);
	if (req->token && got > 0 && got != req->ttl_ms)
		warn(st,
		     "ZooKeeper at %s granted a session timeout of "
		     "%lldms instead of the TTL %lldms (the server's "
		     "min/maxSessionTimeout); the lease lasts that long",
		     st->zs->where, (long long)got, (long long)req->ttl_ms);
	return LR_OK;
}

static void zk_close(struct lr_store *st)
{
	if (!st)
		return;
	lr_zk_close(st->zs, st->mine || st->may_exist || st->queue_left);
	forget_node(st);
	free(st->dir);
	free(st->prefix);
	free(st->slotpfx);
	free(st->queue_left);
	free(st);
}

/* A fresh session after the old one expired (only while not holding). */
static enum lr_status renew_session(struct lr_store *st, int64_t deadline,
				    struct lr_err *err)
{
	lr_zk_end(st->zs, st->mine || st->may_exist || st->queue_left);
	forget_node(st);
	free(st->queue_left); /* went with the session */
	st->queue_left = NULL;
	return lr_zk_start(st->zs, deadline, err);
}

/* ---- the queue ---------------------------------------------------------- */

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

static struct kid *sort_kids(const struct lr_zk_op *op, int *n)
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

/* The ACL guard: with credentials, a lease directory whose ACL gives the
 * world DELETE (made without them) lets anyone remove our lock nodes.
 * acl is the answer to a look at it, or NULL. */
static void guard_acl(struct lr_store *st, const struct lr_zk_op *acl)
{
	if (!acl || acl->rc != ZOK)
		return;
	st->guarded = 1;
	if (acl->world_delete)
		warn(st,
		     "ZooKeeper node %s lets anyone delete the lock nodes in "
		     "it (its ACL gives world DELETE; it was made without "
		     "credentials): remove it or use another ?root=",
		     st->dir);
}

/* Sends the create of our node, pipelined with a listing of the directory
 * (ops[1]) and, the first time with credentials, a look at its ACL
 * (ops[2], else NULL).  The caller frees ops[0..2] either way. */
static enum lr_status send_create(struct lr_store *st, struct lr_zk_op **ops,
				  struct lr_err *err)
{
	struct lr_zk_session *zs = st->zs;
	int n = zs->auth && !st->guarded ? 3 : 2, i, rc;
	char *path = concat_dup(st->dir, "/", st->prefix);
	struct ACL buf[2];
	char data[400];

	for (i = 0; i < n; i++)
		ops[i] = lr_zk_op_new();
	if (!path || !ops[0] || !ops[1] || !ops[n - 1]) {
		free(path);
		return oom(err);
	}
	lr_holder_format(st->req->host, st->req->pid, st->req->since_ms, data,
			 sizeof(data));
	rc = lr_zk_send_create(zs, ops[0], path, data, lr_zk_acl(zs, 0, buf),
			       ZOO_EPHEMERAL_SEQUENTIAL);
	free(path);
	if (rc != ZOK) {
		lr_zk_dead(zs);
		lr_zk_unreachable(zs, "create", err);
		return zs->expired ? LR_LOST : LR_ERROR;
	}
	/* From here a lost reply may still have made our node. */
	st->may_exist = 1;
	st->sid = lr_zk_session_id(zs);
	lr_zk_send_children(zs, ops[1], st->dir);
	if (ops[2])
		lr_zk_send_get_acl(zs, ops[2], st->dir);
	return LR_OK;
}

/* The create made our node: note it, and keep the listing sent with it
 * as *kids. */
static void took_node(struct lr_store *st, struct lr_zk_op **ops,
		      struct lr_zk_op **kids)
{
	st->mine = ops[0]->value;
	ops[0]->value = NULL;
	st->czxid = ops[0]->stat.czxid;
	st->may_exist = 0;
	st->node_gone = 0;
	if (ops[1]->rc == ZOK) {
		*kids = ops[1];
		ops[1] = NULL;
	}
}

/* Queues up: creates our node, and the lease directory first if it is
 * missing.  LR_OK with st->mine set (and *kids the listing that came
 * with it, or NULL), or with st->may_exist when the reply was lost. */
static enum lr_status create_node(struct lr_store *st, int64_t deadline,
				  struct lr_zk_op **kids, struct lr_err *err)
{
	struct lr_zk_session *zs = st->zs;
	int tries = 0;

	for (;;) {
		struct lr_zk_op *ops[3] = {NULL, NULL, NULL};
		enum lr_status s;
		int rc = ZOK;

		*kids = NULL;
		s = send_create(st, ops, err);
		if (s == LR_OK)
			s = lr_zk_pump(zs, deadline, ops, 3, "create", err);
		if (s == LR_OK) {
			guard_acl(st, ops[2]);
			rc = ops[0]->rc;
			if (rc == ZOK)
				took_node(st, ops, kids);
		}
		lr_zk_ops_free(ops, 3);
		if (s != LR_OK || rc == ZOK)
			return s;
		if (lr_zk_retryable(rc) && !lr_zk_dead(zs))
			return LR_OK; /* may_exist: the listing will tell */
		st->may_exist = 0;
		if (rc == ZNONODE && tries++ == 0) {
			s = lr_zk_make_dirs(zs, st->dir, deadline, err);
			if (s != LR_OK)
				return s;
			continue;
		}
		lr_zk_dead(zs);
		if (zs->expired || zs->authfail || lr_zk_retryable(rc))
			lr_zk_unreachable(zs, "create", err);
		else
			lr_err_set(err,
				   "ZooKeeper at %s: cannot create a node "
				   "in %s: %s",
				   zs->where, st->dir, lr_zk_strerror(rc));
		return zs->expired ? LR_LOST : LR_ERROR;
	}
}

/* Did the create whose reply we lost happen?  A node with our token, made
 * by this session (an earlier session's went with it), is ours. */
static enum lr_status find_lost_create(struct lr_store *st,
				       const struct kid *k, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (strncmp(k[i].name, st->prefix, strlen(st->prefix)) == 0)
			break;
	st->may_exist = 0;
	if (i == n || lr_zk_session_id(st->zs) != st->sid)
		return LR_OK;
	st->mine = concat_dup(st->dir, "/", k[i].name);
	st->czxid = 0; /* from the exists that follows */
	return st->mine ? LR_OK : LR_ERROR;
}

/* What a listing says about our place. */
struct place {
	int me;		 /* our place in our queue, or -1: not there */
	unsigned other;	 /* the limit of a node that disagrees with ours */
	unsigned char used[LR_LIMIT_MAX]; /* a semaphore's slots taken */
};

/* Is a node of kind k (limit lim) in the queue we stand in?  A
 * semaphore's runs queue among themselves; the plain lease and shared
 * runs among each other. */
static int in_queue(const struct lr_store *st, enum kind k, unsigned lim)
{
	if (st->req->limit > 1)
		return k == K_QUEUE && lim == st->req->limit;
	return k == K_EXCL || k == K_SHARED;
}

/* Where our node stands among the listing kids (which this frees), into
 * *pl; st->prev_node becomes the node we wait for: the one just before ours
 * in our queue, or for a shared run the last lock- node before it (NULL:
 * none, ours holds, or is first). */
static enum lr_status find_place(struct lr_store *st, struct lr_zk_op *kids,
				 struct place *pl, struct lr_err *err)
{
	enum lr_status s = LR_OK;
	const char *prev_node = NULL;
	unsigned lim, slot;
	struct kid *k;
	int n, i, q = 0;

	memset(pl, 0, sizeof(*pl));
	pl->me = -1;
	for (i = 0; i < kids->nnames; i++) {
		enum kind kd = node_kind(kids->names[i], &lim, &slot);

		if (kd == K_NONE)
			continue;
		if (lim != st->req->limit)
			pl->other = lim;
		else if (kd == K_SLOT && slot < lim)
			pl->used[slot] = 1;
	}
	k = sort_kids(kids, &n);
	if (!k)
		s = LR_ERROR;
	else if (st->may_exist)
		s = find_lost_create(st, k, n);
	for (i = 0; s == LR_OK && st->mine && i < n; i++) {
		enum kind kd = node_kind(k[i].name, &lim, &slot);

		if (!in_queue(st, kd, lim))
			continue;
		if (strcmp(k[i].name, basename_of(st->mine)) == 0) {
			pl->me = q;
			break;
		}
		q++;
		if (!st->req->shared || kd == K_EXCL)
			prev_node = k[i].name;
	}
	if (pl->me >= 0) {
		free(st->prev_node);
		st->prev_node = prev_node ?
			concat_dup(st->dir, "/", prev_node) : NULL;
		if (prev_node && !st->prev_node)
			s = LR_ERROR;
		else
			st->pred_gone = 0;
	}
	free(k);
	lr_zk_op_free(kids);
	return s == LR_OK ? LR_OK : oom(err);
}

/* An exists on path answered rc, neither ZOK nor ZNONODE. */
static int exists_failed(struct lr_store *st, const char *path, int rc,
			 struct lr_err *err)
{
	lr_zk_dead(st->zs);
	if (st->zs->expired)
		return AGAIN; /* a new session, next round */
	lr_err_set(err, "ZooKeeper at %s: exists %s: %s", st->zs->where, path,
		   lr_zk_strerror(rc));
	return LR_ERROR;
}

/* Queued behind st->prev_node: watch it, and our own node too, both in one
 * flight.  LR_BUSY until one of the watches fires. */
static int wait_behind(struct lr_store *st, int64_t deadline,
		       struct lr_err *err)
{
	struct lr_zk_session *zs = st->zs;
	struct lr_zk_op *own = lr_zk_op_new(), *op;
	enum lr_status s;
	int rc;

	if (own && lr_zk_send_exists(zs, own, st->mine) != ZOK) {
		lr_zk_op_free(own);
		own = NULL;
	}
	s = lr_zk_exists(zs, st->prev_node, deadline, &op,
			 "watch the predecessor", err);
	if (own && s == LR_OK)
		s = lr_zk_pump(zs, deadline, &own, 1, "watch", err);
	if (own && s == LR_OK && own->rc == ZOK) {
		if (!st->czxid)
			st->czxid = own->stat.czxid;
		st->own_watched = 1;
		st->armed = zs->connects;
	}
	if (own && s == LR_OK && own->rc == ZNONODE)
		st->node_gone = 1;
	lr_zk_op_free(own);
	if (s != LR_OK) {
		lr_zk_op_free(op); /* NULL, or answered when own was not */
		return s == LR_LOST ? LR_ERROR : s;
	}
	rc = op->rc;
	lr_zk_op_free(op);
	if (rc == ZNONODE)
		return AGAIN; /* gone meanwhile: look again */
	if (rc != ZOK)
		return exists_failed(st, st->prev_node, rc, err);
	return st->node_gone ? AGAIN : LR_BUSY;
}

static void fill_grant(const struct lr_store *st, struct lr_grant *g)
{
	g->fence = (uint64_t)st->czxid;
	g->ttl_ms = lr_zk_timeout(st->zs);
	g->slot = st->req->limit > 1 ? st->slot : 0;
}

/* Ours, proved by a request sent at t_sent. */
static int hold(struct lr_store *st, int64_t t_sent, struct lr_grant *g)
{
	st->held = 1;
	st->node_gone = 0;
	st->last_ok = t_sent;
	fill_grant(st, g);
	return LR_OK;
}

/* A node found by its token after a lost reply: learn its czxid, and
 * that our session owns it, before holding it. */
static int hold_found(struct lr_store *st, int64_t deadline,
		      struct lr_grant *g, struct lr_err *err)
{
	struct lr_zk_session *zs = st->zs;
	int64_t t_send = lr_now_ms();
	struct lr_zk_op *op;
	enum lr_status s;
	struct Stat stat;
	int rc;

	s = lr_zk_exists(zs, st->mine, deadline, &op, "watch our node", err);
	if (s != LR_OK)
		return s == LR_LOST ? LR_ERROR : s;
	rc = op->rc;
	stat = op->stat;
	lr_zk_op_free(op);
	if (rc == ZNONODE) {
		forget_node(st);
		return AGAIN;
	}
	if (rc != ZOK)
		return exists_failed(st, st->mine, rc, err);
	if (stat.ephemeralOwner != lr_zk_session_id(zs)) {
		/* Not our session's node: cannot be, but be sure. */
		forget_node(st);
		return AGAIN;
	}
	st->czxid = stat.czxid;
	st->own_watched = 1;
	st->armed = zs->connects;
	return hold(st, t_send, g);
}

/* Lowest: ours.  The create told us its czxid (and the listing, sent
 * after it, that the session lives); put our watch on it without
 * waiting: a reply saying it is gone makes process() or renew() report
 * the loss. */
static int hold_lowest(struct lr_store *st, int64_t deadline,
		       int64_t t_round, struct lr_grant *g, struct lr_err *err)
{
	if (st->czxid && !st->own_watched)
		watch_own_later(st);
	if (st->czxid && st->own_watched)
		return hold(st, t_round, g);
	return hold_found(st, deadline, g, err);
}

/* Deletes our queue node after a claim; one left behind (no answer in
 * time) is deleted again at the next renew, while it keeps the next run
 * waiting. */
static void drop_queue_node(struct lr_store *st, int64_t deadline)
{
	struct lr_zk_op *op = lr_zk_op_new();
	struct lr_err ignored;

	if (!op || !st->queue_left ||
	    lr_zk_send_delete(st->zs, op, st->queue_left) != ZOK) {
		lr_zk_op_free(op);
		return;
	}
	if (lr_zk_pump(st->zs, deadline, &op, 1, "delete", &ignored) ==
		    LR_OK &&
	    (op->rc == ZOK || op->rc == ZNONODE)) {
		free(st->queue_left);
		st->queue_left = NULL;
	}
	lr_zk_op_free(op);
}

/* First of a semaphore's queue, with every slot taken: watches the slot
 * nodes that are there (a change to any is news).  LR_BUSY, or AGAIN if
 * one went meanwhile. */
static int watch_slots(struct lr_store *st, const struct place *pl,
		       int64_t deadline, struct lr_err *err)
{
	struct lr_zk_op *ops[LR_LIMIT_MAX];
	unsigned i, n = 0;
	enum lr_status s = LR_OK;
	int again = 0;
	char path[32];

	st->slot_wait = 1;
	st->pred_gone = 0;
	for (i = 0; i < st->req->limit && s == LR_OK; i++) {
		char *p;

		if (!pl->used[i])
			continue;
		snprintf(path, sizeof(path), "%u", i);
		ops[n] = lr_zk_op_new();
		p = concat_dup(st->slotpfx, path, "");
		if (!ops[n] || !p) {
			free(p);
			lr_zk_op_free(ops[n]);
			s = oom(err);
			break;
		}
		lr_zk_send_exists(st->zs, ops[n++], p);
		free(p);
	}
	if (s == LR_OK)
		s = lr_zk_pump(st->zs, deadline, ops, (int)n, "watch the slots",
			       err);
	for (i = 0; s == LR_OK && i < n; i++)
		again |= ops[i]->rc != ZOK;
	lr_zk_ops_free(ops, (int)n);
	if (s != LR_OK)
		return s == LR_LOST ? LR_ERROR : s;
	return again || st->pred_gone ? AGAIN : LR_BUSY;
}

/*
 * First of a semaphore's queue: creates the node of the lowest free slot
 * (an ephemeral slotN-K holding "host pid since"; it fails if the slot is
 * taken), and then deletes our queue node, which lets the next run be
 * first.  The slot node is our lock from then on.
 */
static int claim_slot(struct lr_store *st, const struct place *pl,
		      int64_t deadline, struct lr_grant *g, struct lr_err *err)
{
	struct lr_zk_session *zs = st->zs;
	struct ACL buf[2];
	char data[400], num[16], *path;
	struct lr_zk_op *op;
	int64_t t_send;
	enum lr_status s;
	unsigned k;
	int rc;

	for (k = 0; k < st->req->limit && pl->used[k]; k++)
		;
	if (k == st->req->limit)
		return watch_slots(st, pl, deadline, err);
	snprintf(num, sizeof(num), "%u", k);
	lr_holder_format(st->req->host, st->req->pid, st->req->since_ms, data,
			 sizeof(data));
	path = concat_dup(st->slotpfx, num, "");
	op = lr_zk_op_new();
	if (!path || !op) {
		free(path);
		lr_zk_op_free(op);
		return oom(err);
	}
	t_send = lr_now_ms();
	lr_zk_send_create(zs, op, path, data, lr_zk_acl(zs, 0, buf),
			  ZOO_EPHEMERAL);
	s = lr_zk_pump(zs, deadline, &op, 1, "create", err);
	rc = s == LR_OK ? op->rc : ZOK;
	if (s == LR_OK && rc == ZOK)
		st->czxid = op->stat.czxid;
	lr_zk_op_free(op);
	if (s == LR_OK && lr_zk_retryable(rc)) {
		/* The reply was lost: made by this session, it is ours. */
		s = lr_zk_exists(zs, path, deadline, &op, "create", err);
		if (s == LR_OK && op->rc == ZOK &&
		    op->stat.ephemeralOwner == lr_zk_session_id(zs)) {
			st->czxid = op->stat.czxid;
			rc = ZOK;
		}
		lr_zk_op_free(op);
	}
	if (s != LR_OK || rc != ZOK) {
		free(path);
		if (s != LR_OK)
			return s == LR_LOST ? LR_ERROR : s;
		if (rc == ZNODEEXISTS || lr_zk_retryable(rc))
			return AGAIN; /* taken meanwhile; or a lost reply */
		lr_err_set(err, "ZooKeeper at %s: cannot create a node in "
				"%s: %s",
			   zs->where, st->dir, lr_zk_strerror(rc));
		return LR_ERROR;
	}
	free(st->queue_left);
	st->queue_left = st->mine;
	st->mine = path;
	st->slot = k;
	st->own_watched = 0;
	drop_queue_node(st, deadline);
	watch_own_later(st);
	return hold(st, t_send, g);
}

/* Before a round: a new session if ours died, and a new place in the
 * queue if our node was deleted (--break?) while we waited. */
static enum lr_status revive(struct lr_store *st, int64_t deadline,
			     struct lr_err *err)
{
	if (lr_zk_dead(st->zs)) {
		enum lr_status s;

		if (st->zs->authfail) {
			lr_zk_unreachable(st->zs, "acquire", err);
			return LR_ERROR;
		}
		s = renew_session(st, deadline, err);
		if (s != LR_OK)
			return s == LR_LOST ? LR_ERROR : s;
	}
	if (st->node_gone)
		forget_node(st);
	return LR_OK;
}

/* One look at the queue: an enum lr_status, or AGAIN. */
static int acquire_round(struct lr_store *st, int64_t deadline,
			 struct lr_grant *g, struct lr_err *err)
{
	struct lr_zk_op *kids = NULL;
	int64_t t_round = lr_now_ms();
	enum lr_status s;
	struct place pl;

	s = revive(st, deadline, err);
	if (s != LR_OK)
		return s;
	if (!st->mine && !st->may_exist) {
		s = create_node(st, deadline, &kids, err);
		if (s != LR_OK)
			return s == LR_LOST ? LR_ERROR : s;
	}
	if (!kids) {
		s = lr_zk_list(st->zs, st->dir, deadline, &kids, err);
		if (s == LR_LOST)
			return AGAIN; /* the session expired */
		if (s != LR_OK)
			return s;
	}
	s = find_place(st, kids, &pl, err);
	if (s != LR_OK)
		return s;
	if (pl.other) {
		lr_err_limit(err, st->req, pl.other);
		return LR_ERROR;
	}
	if (pl.me < 0) {
		/* Ours is not there (never made, or deleted). */
		forget_node(st);
		return AGAIN;
	}
	if (st->prev_node)
		return wait_behind(st, deadline, err);
	if (st->req->limit > 1)
		return claim_slot(st, &pl, deadline, g, err);
	return hold_lowest(st, deadline, t_round, g, err);
}

static enum lr_status acquire(struct lr_store *st, int64_t deadline,
			      struct lr_grant *g, struct lr_err *err)
{
	int round;

	if (!st->prefix) {
		lr_err_set(err, "zk store: acquire without a token");
		return LR_ERROR;
	}
	if (st->held) {
		fill_grant(st, g);
		return LR_OK;
	}
	/* Waiting, with both watches in place and nothing changed: the
	 * watches would have told us (after a reconnect too: the client
	 * sets them again and the server reports what it missed). */
	if (st->mine && (st->prev_node || st->slot_wait) && !st->pred_gone &&
	    !st->node_gone && !lr_zk_dead(st->zs))
		return LR_BUSY;
	for (round = 0; round < MAX_ROUNDS; round++) {
		int r = acquire_round(st, deadline, g, err);

		if (r != AGAIN)
			return (enum lr_status)r;
	}
	lr_err_set(err,
		   "ZooKeeper at %s: the lock nodes in %s keep changing; "
		   "giving up",
		   st->zs->where, st->dir);
	return LR_ERROR;
}

static enum lr_status zk_acquire(struct lr_store *st, int64_t deadline,
				 struct lr_grant *g, struct lr_err *err)
{
	enum lr_status s = acquire(st, deadline, g, err);

	/* Queued, and no server answered in time: our place in the queue
	 * lasts as long as the session, which the client keeps trying to
	 * reach meanwhile, so go on waiting (-w still bounds the wait)
	 * rather than fail on a leader election. */
	if (s == LR_TIMEOUT && st->mine && !st->held && !lr_zk_dead(st->zs))
		return LR_BUSY;
	return s;
}

/* ---- between calls ------------------------------------------------------ */

static int zk_wait_fd(struct lr_store *st, short *events)
{
	return lr_zk_wait_fd(st->zs, events);
}

/* While holding: what the session's events mean for the lease. */
static enum lr_status holding_news(struct lr_store *st, struct lr_err *err)
{
	struct lr_zk_session *zs = st->zs;

	if (zs->expired)
		return expired_loss(st, err);
	if (st->node_gone)
		return deleted_loss(st, err);
	if (zs->authfail) {
		/* The client will not talk to the server again, so
		 * nothing can keep our node; do not wait for D. */
		lr_err_set(err,
			   "ZooKeeper at %s: authentication failed; the "
			   "session cannot be used",
			   zs->where);
		return LR_LOST;
	}
	if (lr_zk_disconnect_news(zs)) {
		lr_err_set(err, "ZooKeeper at %s: lost the connection",
			   zs->where);
		return LR_ERROR;
	}
	return LR_OK;
}

static enum lr_status zk_process(struct lr_store *st, short revents,
				 int64_t deadline, struct lr_err *err)
{
	struct lr_zk_session *zs = st->zs;

	if (lr_zk_process(zs) < 0)
		return st->held ? LR_OK : LR_BUSY;
	if (st->held)
		return holding_news(st, err);
	if (st->pred_gone || st->node_gone || zs->expired || zs->authfail)
		return LR_OK;
	return LR_BUSY;
}

/* ---- renew and release -------------------------------------------------- */

/* The exists of a renew answered rc, not ZOK. */
static enum lr_status renew_failed(struct lr_store *st, int rc,
				   struct lr_err *err)
{
	struct lr_zk_session *zs = st->zs;

	lr_zk_dead(zs);
	if (rc == ZNONODE) {
		lr_err_set(err, "ZooKeeper at %s: our node %s is gone%s",
			   zs->where, st->mine,
			   zs->expired ? " (the session expired)" : "");
		return LR_LOST;
	}
	if (zs->expired || rc == ZSESSIONEXPIRED) {
		zs->expired = 1;
		return expired_loss(st, err);
	}
	if (lr_zk_retryable(rc) || zs->authfail) {
		lr_zk_unreachable(zs, "renew", err);
		return LR_ERROR;
	}
	lr_err_set(err, "ZooKeeper at %s: renew: exists %s: %s", zs->where,
		   st->mine, lr_zk_strerror(rc));
	return LR_ERROR;
}

static enum lr_status zk_renew(struct lr_store *st, int64_t deadline,
			       struct lr_err *err)
{
	struct lr_zk_session *zs = st->zs;
	int64_t t_send;
	struct lr_zk_op *op;
	enum lr_status s;
	int rc, replaced;

	if (!st->held || !st->mine) {
		lr_err_set(err, "zk store: renew without a lease");
		return LR_LOST;
	}
	if (lr_zk_dead(zs) && zs->expired)
		return expired_loss(st, err);
	if (st->node_gone)
		return deleted_loss(st, err);
	if (zs->authfail) {
		lr_zk_unreachable(zs, "renew", err);
		return LR_ERROR;
	}
	if (st->queue_left)
		drop_queue_node(st, deadline);
	t_send = lr_now_ms();
	s = lr_zk_exists(zs, st->mine, deadline, &op, "renew", err);
	if (s != LR_OK)
		return s;
	rc = op->rc;
	replaced = rc == ZOK && (op->stat.czxid != st->czxid ||
				 op->stat.ephemeralOwner != st->sid ||
				 lr_zk_session_id(zs) != st->sid);
	lr_zk_op_free(op);
	if (replaced) {
		lr_err_set(err, "ZooKeeper at %s: our node %s was replaced",
			   zs->where, st->mine);
		return LR_LOST;
	}
	if (rc != ZOK)
		return renew_failed(st, rc, err);
	st->last_ok = t_send;
	st->armed = zs->connects;
	return LR_OK;
}

/*
 * Before the command starts: is the node just granted already gone?
 * First what has come in without waiting: the replies and watch events
 * the socket holds (drained), and what earlier calls learnt (the session
 * expired, our node deleted or replaced).  Certain loss is LR_LOST.
 *
 * Our loss signal is the watch on our node, and it is armed once an
 * exists on the node came back ZOK on the connection we are still on:
 * from then the server sends a deletion's event at once, and any event
 * from before came ahead of that answer (one connection keeps order).
 * The grant does not wait for it: the exists that puts the watch goes
 * out as acquire() returns (a waiter's was answered while it waited), so
 * right after the grant it is usually still in flight (9 runs in 10 on
 * loopback), and a deletion the server ran before it (--break, an admin)
 * is news that has not come yet.  A lost connection (the server ended or
 * moved our session: it closes the socket and says no more) leaves the
 * signal deaf until the client is back.  In both cases check asks, as a
 * renew does: an exists on our node within deadline, which says gone or
 * the session expired (LR_LOST), or ours (LR_OK, the watch armed by
 * then); no answer in time is suspicion.  Waiting for the exists already
 * in flight instead would save little (it left just before) and would
 * not tell a living session after a reconnect.
 *
 * The cost is one round trip per run: on loopback (a busy machine of 2
 * cores), a median of about 1ms, 1-3% of a run of 'leaserun NAME true'
 * (loops of 200).  Without it, a node deleted in that stretch lets the
 * command start, to be killed a few ms later when the event comes.  A
 * deletion the server runs after answering, or whose event is still on
 * its way at the spawn, is left to the core's loop (it comes at once);
 * so is one that our server, a follower, has not applied yet.
 */
static enum lr_status zk_check(struct lr_store *st, int64_t deadline,
			       struct lr_err *err)
{
	struct lr_zk_session *zs = st->zs;
	enum lr_status s;

	if (!st->held || !st->mine) {
		lr_err_set(err, "zk store: check without a lease");
		return LR_LOST;
	}
	lr_zk_drain(zs);
	s = holding_news(st, err);
	if (s == LR_LOST)
		return s;
	if (s == LR_OK && lr_zk_connected(zs) && st->armed == zs->connects)
		return LR_OK;
	err->msg[0] = '\0';
	return zk_renew(st, deadline, err);
}

/* Once no server has heard from us for a whole session timeout, the
 * session and our node with it are gone (or go as soon as a server can
 * tell): waiting longer for a hung server gains nothing.  Brings *d
 * forward to that time; LR_LOST once it has passed. */
static enum lr_status release_by(struct lr_store *st, int64_t *d,
				 struct lr_err *err)
{
	int64_t cap;

	if (!st->last_ok || lr_zk_connected(st->zs))
		return LR_OK;
	cap = st->last_ok + lr_zk_timeout(st->zs);
	if (lr_now_ms() >= cap) {
		lr_err_set(err,
			   "ZooKeeper at %s: no server answered for a whole "
			   "session timeout; our node goes with the session",
			   st->zs->where);
		forget_node(st);
		return LR_LOST;
	}
	if (cap < *d)
		*d = cap;
	return LR_OK;
}

/* One delete of our node, answered (*rc) by deadline. */
static enum lr_status delete_mine(struct lr_store *st, int64_t deadline,
				  int *rc, struct lr_err *err)
{
	struct lr_zk_op *op = lr_zk_op_new();
	enum lr_status s;

	if (!op)
		return oom(err);
	if (lr_zk_send_delete(st->zs, op, st->mine) != ZOK) {
		lr_zk_op_free(op);
		lr_zk_dead(st->zs);
		lr_zk_unreachable(st->zs, "release", err);
		return LR_ERROR;
	}
	s = lr_zk_pump(st->zs, deadline, &op, 1, "release", err);
	if (s == LR_OK)
		*rc = op->rc;
	lr_zk_op_free(op);
	return s;
}

/* The last delete of our node answered rc, after tries earlier ones that
 * lost their replies. */
static enum lr_status released(struct lr_store *st, int rc, int tries,
			       struct lr_err *err)
{
	struct lr_zk_session *zs = st->zs;

	if (rc == ZOK || (rc == ZNONODE && tries > 0)) {
		forget_node(st);
		return LR_OK;
	}
	lr_zk_dead(zs);
	if (rc == ZNONODE || zs->expired) {
		lr_err_set(err, "ZooKeeper at %s: our node %s was already gone",
			   zs->where, st->mine);
		forget_node(st);
		return LR_LOST;
	}
	if (lr_zk_retryable(rc) || zs->authfail)
		lr_zk_unreachable(zs, "release", err);
	else
		lr_err_set(err, "ZooKeeper at %s: delete %s: %s", zs->where,
			   st->mine, lr_zk_strerror(rc));
	return LR_ERROR;
}

static enum lr_status zk_release(struct lr_store *st, int64_t deadline,
				 struct lr_err *err)
{
	int tries, rc = ZOK;

	if (!st->mine) {
		if (!st->held)
			return LR_OK;
		lr_err_set(err, "zk store: nothing to release");
		return LR_LOST;
	}
	if (lr_zk_dead(st->zs) && st->zs->expired) {
		lr_err_set(err,
			   "ZooKeeper at %s: the session expired (the "
			   "server had deleted our node)",
			   st->zs->where);
		forget_node(st);
		return LR_LOST;
	}
	for (tries = 0;; tries++) {
		int64_t d = deadline;
		enum lr_status s = release_by(st, &d, err);

		if (s == LR_OK)
			s = delete_mine(st, d, &rc, err);
		if (s != LR_OK)
			return s;
		if (!lr_zk_retryable(rc) || lr_zk_dead(st->zs))
			return released(st, rc, tries, err);
	}
}

/* ---- status and break --------------------------------------------------- */

/* The holders' node names, judged as the runs do: a semaphore's are its
 * slot nodes; else, in sequence order, the first node if it is a lock-
 * one, or the read- ones before the first lock- one.  *names (n of them,
 * pointing into *kids, which the caller frees with the array) and the
 * name's *limit (0: nothing there).  w (unless NULL) gets the waiters:
 * every other sequential node; *first the first of them in sequence
 * order (NULL: none), pointing into *kids. */
static enum lr_status list_holders(struct lr_store *st, int64_t deadline,
				   struct lr_zk_op **kids, const char ***names,
				   int *n, unsigned *limit, struct lr_info *w,
				   const char **first, struct lr_err *err)
{
	unsigned lim, slot;
	enum lr_status s;
	struct kid *k;
	int i, m = 0, nk, open = 1;

	*names = NULL;
	*n = 0;
	*limit = 0;
	s = lr_zk_list(st->zs, st->dir, deadline, kids, err);
	if (s != LR_OK)
		return s == LR_LOST ? LR_ERROR : s;
	if ((*kids)->rc == ZNONODE)
		return LR_OK;
	*names = calloc((size_t)(*kids)->nnames + 1, sizeof(**names));
	k = sort_kids(*kids, &nk);
	if (!*names || !k) {
		free(k);
		return oom(err);
	}
	for (i = 0; i < (*kids)->nnames; i++) {
		enum kind kd = node_kind((*kids)->names[i], &lim, &slot);

		if (kd == K_NONE)
			continue;
		if (!*limit || lim > 1)
			*limit = lim;
		if (kd == K_SLOT)
			(*names)[m++] = (*kids)->names[i];
	}
	for (i = 0; *limit == 1 && i < nk; i++) {
		enum kind kd = node_kind(k[i].name, &lim, &slot);

		if ((kd == K_EXCL && i == 0) || (kd == K_SHARED && open))
			(*names)[m++] = k[i].name;
		if (kd == K_EXCL)
			open = 0; /* no shared run behind it holds */
	}
	/* The holders of a plain or shared lease are the first m. */
	i = *limit > 1 ? 0 : m;
	if (w)
		w->waiters = nk - i;
	if (first)
		*first = i < nk ? k[i].name : NULL;
	free(k);
	*n = m;
	return LR_OK;
}

/* One request of --status or --break on path, sent by send and answered
 * by deadline: LR_OK with *opp the answered op (the caller frees it),
 * else *opp is NULL and err says why. */
static enum lr_status ask(struct lr_store *st,
			  int (*send)(struct lr_zk_session *zs,
				      struct lr_zk_op *op, const char *path),
			  const char *path, int64_t deadline, const char *what,
			  struct lr_zk_op **opp, struct lr_err *err)
{
	struct lr_zk_op *op = lr_zk_op_new();
	enum lr_status s;

	*opp = NULL;
	if (!op || send(st->zs, op, path) != ZOK) {
		lr_zk_op_free(op);
		lr_zk_unreachable(st->zs, what, err);
		return LR_ERROR;
	}
	s = lr_zk_pump(st->zs, deadline, &op, 1, what, err);
	if (s != LR_OK) {
		lr_zk_op_free(op);
		return s;
	}
	*opp = op;
	return LR_OK;
}

/* Reads the holder's node name into info: an enum lr_status, or AGAIN
 * when it went meanwhile (released).  A read whose reply was lost with
 * the connection is made again (the session lives on): a lost reply says
 * nothing of the holder. */
static int read_node(struct lr_store *st, const char *name, int64_t deadline,
		     struct lr_info *info, struct lr_err *err)
{
	unsigned lim, slot;
	enum kind kd = node_kind(name, &lim, &slot);
	char *path = concat_dup(st->dir, "/", name);
	struct lr_zk_op *op;
	enum lr_status s;
	int rc;

	if (!path)
		return oom(err);
	for (;;) {
		s = ask(st, lr_zk_send_get, path, deadline, "status", &op, err);
		if (s != LR_OK) {
			free(path);
			return s;
		}
		rc = op->rc;
		if (!lr_zk_retryable(rc) || lr_zk_dead(st->zs))
			break;
		lr_zk_op_free(op);
	}
	if (rc == ZOK) {
		struct lr_holder *h = lr_info_add(info);

		if (!h) {
			free(path);
			lr_zk_op_free(op);
			return oom(err);
		}
		h->fence = (uint64_t)op->stat.czxid;
		h->shared = kd == K_SHARED;
		h->slot = kd == K_SLOT ? slot : 0;
		lr_holder_parse(op->value, h);
	} else if (lr_zk_retryable(rc)) {
		lr_zk_unreachable(st->zs, "status", err); /* session gone */
	} else if (rc != ZNONODE) {
		lr_err_set(err, "ZooKeeper at %s: get %s: %s", st->zs->where,
			   path, lr_zk_strerror(rc));
	}
	free(path);
	lr_zk_op_free(op);
	if (rc == ZOK)
		return LR_OK;
	return rc == ZNONODE ? AGAIN : LR_ERROR;
}

/* The first waiter's node name (its data "host pid since") as info's
 * next; a node gone meanwhile is left out. */
static enum lr_status first_waiter(struct lr_store *st, const char *name,
				   int64_t deadline, struct lr_info *info,
				   struct lr_err *err)
{
	char *path = concat_dup(st->dir, "/", name);
	struct lr_holder w;
	struct lr_zk_op *op;
	enum lr_status s;

	if (!path)
		return oom(err);
	s = ask(st, lr_zk_send_get, path, deadline, "status", &op, err);
	free(path);
	memset(&w, 0, sizeof(w));
	if (s == LR_OK && op->rc == ZOK && lr_holder_parse(op->value, &w) == 0)
		lr_holder_who(&w, info->next, sizeof(info->next));
	lr_zk_op_free(op);
	return s;
}

/* (A holder gone between the listing and its read has released: it is
 * left out.) */
static enum lr_status zk_inspect(struct lr_store *st, int64_t deadline,
				 struct lr_info *info, struct lr_err *err)
{
	struct lr_zk_op *kids = NULL;
	const char **names;
	enum lr_status s;
	int i, n, r = LR_OK;

	const char *first = NULL;

	s = list_holders(st, deadline, &kids, &names, &n, &info->limit, info,
			 &first, err);
	for (i = 0; s == LR_OK && i < n; i++) {
		r = read_node(st, names[i], deadline, info, err);
		if (r != AGAIN && r != LR_OK)
			s = (enum lr_status)r;
	}
	if (s == LR_OK && first)
		s = first_waiter(st, first, deadline, info, err);
	free(names);
	lr_zk_op_free(kids);
	return s;
}

/* --list: the children of the root directory are the leases' own; each
 * is read as --status reads it (zk_inspect()), one at a time.  ZooKeeper
 * lists children in one reply, which its own limit (jute.maxbuffer)
 * bounds; the holders are never all in memory at once. */
static enum lr_status zk_list(struct lr_store *st, const char *pattern,
			      lr_list_fn fn, void *arg, int64_t deadline,
			      struct lr_err *err)
{
	const struct lr_store_req *own = st->req;
	struct lr_store_req req = *own;
	char *root = st->dir, *dir;
	struct lr_zk_op *kids = NULL;
	struct lr_info info;
	enum lr_status s;
	int i, stop = 0;

	root[strlen(root) - 1] = '\0'; /* opened with the name "": ROOT/ */
	s = lr_zk_list(st->zs, root, deadline, &kids, err);
	if (s == LR_LOST)
		s = LR_ERROR;
	st->req = &req;
	for (i = 0; s == LR_OK && kids->rc == ZOK && i < kids->nnames && !stop;
	     i++) {
		if (fnmatch(pattern, kids->names[i], 0) != 0)
			continue;
		if (!(st->dir = dir = concat_dup(root, "/", kids->names[i]))) {
			s = oom(err);
			break;
		}
		req.name = kids->names[i];
		lr_info_init(&info);
		s = zk_inspect(st, deadline, &info, err);
		lr_info_sort(&info);
		if (s == LR_OK)
			stop = fn(arg, kids->names[i], &info) != 0;
		lr_info_free(&info);
		free(dir);
	}
	st->req = own;
	st->dir = root;
	strcat(root, "/");
	lr_zk_op_free(kids);
	return s;
}

/* Deletes the holder's node path, whoever holds it. */
static enum lr_status delete_node(struct lr_store *st, const char *path,
				  int64_t deadline, struct lr_err *err)
{
	struct lr_zk_op *op;
	enum lr_status s;
	int rc;

	s = ask(st, lr_zk_send_delete, path, deadline, "break", &op, err);
	if (s != LR_OK)
		return s;
	rc = op->rc;
	lr_zk_op_free(op);
	if (rc == ZOK || rc == ZNONODE)
		return LR_OK; /* NONODE: released meanwhile; it is gone. */
	if (lr_zk_retryable(rc))
		lr_zk_unreachable(st->zs, "break", err);
	else
		lr_err_set(err, "ZooKeeper at %s: cannot delete %s: %s",
			   st->zs->where, path, lr_zk_strerror(rc));
	return LR_ERROR;
}

/* Deletes the holders' nodes, all or slot's, whoever holds them. */
static enum lr_status zk_break(struct lr_store *st, int slot, int64_t deadline,
			       struct lr_err *err)
{
	struct lr_zk_op *kids = NULL;
	const char **names;
	enum lr_status s;
	unsigned limit, lim, k;
	int i, n;

	s = list_holders(st, deadline, &kids, &names, &n, &limit, NULL, NULL,
			 err);
	for (i = 0; s == LR_OK && i < n; i++) {
		char *path;

		node_kind(names[i], &lim, &k);
		if (slot >= 0 && (unsigned)slot != k)
			continue;
		path = concat_dup(st->dir, "/", names[i]);
		s = path ? delete_node(st, path, deadline, err) : oom(err);
		free(path);
	}
	free(names);
	lr_zk_op_free(kids);
	return s;
}

/* ---- runs (--once-per) ------------------------------------------------- */

/* The words for a request on path that answered rc. */
static enum lr_status run_failed(struct lr_store *st, const char *what,
				 const char *path, int rc, struct lr_err *err)
{
	lr_zk_dead(st->zs);
	if (st->zs->expired || st->zs->authfail || lr_zk_retryable(rc))
		lr_zk_unreachable(st->zs, what, err);
	else
		lr_err_set(err, "ZooKeeper at %s: %s %s: %s", st->zs->where,
			   what, path, lr_zk_strerror(rc));
	return LR_ERROR;
}

/* Sends one request made by send() (set or create of path with data)
 * and waits for it: LR_OK with its rc in *rc and its stat in *stat. */
static enum lr_status run_write1(struct lr_store *st, int create,
				 const char *path, const char *data,
				 int version, int64_t deadline, int *rc,
				 struct Stat *stat, struct lr_err *err)
{
	struct lr_zk_op *op = lr_zk_op_new();
	struct ACL buf[2];
	enum lr_status s;

	if (!op)
		return oom(err);
	if (create)
		lr_zk_send_create(st->zs, op, path, data,
				  lr_zk_acl(st->zs, 0, buf), ZOO_PERSISTENT);
	else
		lr_zk_send_set(st->zs, op, path, data, version);
	s = lr_zk_pump(st->zs, deadline, &op, 1, "run record", err);
	if (s == LR_OK) {
		*rc = op->rc;
		*stat = op->stat;
	}
	lr_zk_op_free(op);
	return s;
}

/* The first run here: makes DIR and its clock node, whose creation stamps
 * *now.  *rc is the creation's answer (ZNODEEXISTS: another run made it
 * first). */
static enum lr_status make_clock(struct lr_store *st, const char *clock,
				 int64_t deadline, int64_t *now, int *rc,
				 struct lr_err *err)
{
	struct Stat stat;
	enum lr_status s;

	*rc = ZNONODE;
	s = lr_zk_make_dirs(st->zs, st->dir, deadline, err);
	if (s == LR_OK)
		s = run_write1(st, 1, clock, "", -1, deadline, rc, &stat, err);
	if (s == LR_OK && *rc == ZOK)
		*now = stat.mtime;
	return s;
}

/* The server's clock now, as it stamps DIR/clock, in one flight with a
 * read of DIR/run, whose answer *rec gets (the caller frees it; its rc
 * ZOK or ZNONODE).  A missing clock node is made (its creation is then
 * the stamp) if make.  *now is -1 when the clock cannot be stamped, with
 * err saying why (NOAUTH: a reader with other credentials), yet LR_OK. */
static enum lr_status run_now(struct lr_store *st, int64_t deadline,
			      int make, int64_t *now, struct lr_zk_op **rec,
			      struct lr_err *err)
{
	char *clock = concat_dup(st->dir, "/", "clock"),
	     *run = concat_dup(st->dir, "/", "run");
	enum lr_status s = LR_ERROR;
	int tries;

	*rec = NULL;
	*now = -1;
	if (!clock || !run) {
		s = oom(err);
		goto out;
	}
	for (tries = 0; tries < 6; tries++) {
		struct lr_zk_op *ops[2] = {lr_zk_op_new(), lr_zk_op_new()};
		int rc, rr;

		if (!ops[0] || !ops[1]) {
			lr_zk_ops_free(ops, 2);
			s = oom(err);
			goto out;
		}
		lr_zk_send_set(st->zs, ops[0], clock, "", -1);
		lr_zk_send_get(st->zs, ops[1], run);
		s = lr_zk_pump(st->zs, deadline, ops, 2, "clock", err);
		rc = ops[0]->rc;
		rr = ops[1]->rc;
		if (s == LR_OK && rc == ZOK)
			*now = ops[0]->stat.mtime;
		if (s == LR_OK && (rr == ZOK || rr == ZNONODE)) {
			*rec = ops[1];
			ops[1] = NULL;
		}
		lr_zk_ops_free(ops, 2);
		if (s != LR_OK)
			goto out;
		if (lr_zk_retryable(rc) || lr_zk_retryable(rr)) {
			lr_zk_op_free(*rec);
			*rec = NULL;
			*now = -1;
			if (!lr_zk_dead(st->zs) && lr_now_ms() < deadline)
				continue;
			s = run_failed(st, "get", run, rr, err);
			goto out;
		}
		if (!*rec) {
			s = run_failed(st, "get", run, rr, err);
			goto out;
		}
		if (rc == ZOK || (rc == ZNONODE && !make))
			goto out; /* (without make: *now -1) */
		if (rc != ZNONODE) {
			run_failed(st, "set", clock, rc, err);
			goto out; /* LR_OK, *now -1 */
		}
		s = make_clock(st, clock, deadline, now, &rc, err);
		if (s != LR_OK || rc == ZOK)
			goto out;
		lr_zk_op_free(*rec);
		*rec = NULL;
		if (rc != ZNODEEXISTS && !lr_zk_retryable(rc)) {
			s = run_failed(st, "create", clock, rc, err);
			goto out;
		}
	}
	lr_err_set(err, "ZooKeeper at %s: %s keeps changing", st->zs->where,
		   clock);
	s = LR_ERROR;
out:
	if (s != LR_OK) {
		lr_zk_op_free(*rec);
		*rec = NULL;
	}
	free(clock);
	free(run);
	return s;
}

static enum lr_status zk_run_start(struct lr_store *st, int64_t period_ms,
				   uint64_t fence, int64_t deadline,
				   struct lr_run *last, struct lr_err *err)
{
	char *path = concat_dup(st->dir, "/", "run"), data[400];
	enum lr_status s = LR_ERROR;
	int tries;

	if (!path)
		return oom(err);
	for (tries = 0; tries < 6; tries++) {
		struct lr_zk_op *rec;
		struct lr_run run;
		struct Stat stat;
		int64_t now;
		int rc, exists;

		s = run_now(st, deadline, 1, &now, &rec, err);
		if (s == LR_OK && now < 0) {
			lr_zk_op_free(rec);
			s = LR_ERROR; /* err says why */
		}
		if (s != LR_OK)
			break;
		exists = rec->rc == ZOK;
		lr_run_parse(exists ? rec->value : NULL, &run);
		if (run.known && run.fence == fence) {
			lr_zk_op_free(rec); /* ours already */
			break;
		}
		if (run.known && now < run.start_ms + period_ms) {
			*last = run;
			lr_run_times(last, now, period_ms);
			lr_zk_op_free(rec);
			s = LR_BUSY;
			break;
		}
		lr_run_init(&run);
		run.fence = fence;
		run.period_ms = period_ms;
		run.start_ms = now;
		run.pid = st->req->pid;
		snprintf(run.host, sizeof(run.host), "%s",
			 st->req->host ? st->req->host : "");
		lr_run_format(&run, data, sizeof(data));
		s = run_write1(st, !exists, path, data,
			       exists ? rec->stat.version : -1, deadline, &rc,
			       &stat, err);
		lr_zk_op_free(rec);
		if (s != LR_OK)
			break;
		if (rc == ZOK)
			break;
		/* Written meanwhile, or the answer lost: look again. */
		if (rc == ZBADVERSION || rc == ZNODEEXISTS ||
		    (lr_zk_retryable(rc) && !lr_zk_dead(st->zs)))
			continue;
		s = run_failed(st, exists ? "set" : "create", path, rc, err);
		break;
	}
	if (tries == 6) {
		lr_err_set(err, "ZooKeeper at %s: %s keeps changing",
			   st->zs->where, path);
		s = LR_ERROR;
	}
	free(path);
	return s;
}

static enum lr_status zk_run_end(struct lr_store *st, uint64_t fence,
				 int status, int64_t deadline,
				 struct lr_err *err)
{
	char *path, data[400];
	struct lr_zk_op *rec;
	struct lr_run run;
	struct Stat stat;
	enum lr_status s;
	int64_t now;
	int rc;

	s = run_now(st, deadline, 1, &now, &rec, err);
	if (s == LR_OK && now < 0) {
		lr_zk_op_free(rec);
		s = LR_ERROR;
	}
	if (s != LR_OK)
		return s;
	lr_run_parse(rec->rc == ZOK ? rec->value : NULL, &run);
	if (!run.known || run.fence != fence) {
		lr_zk_op_free(rec);
		return LR_OK; /* another run's record now */
	}
	run.end_ms = now;
	run.status = status;
	lr_run_format(&run, data, sizeof(data));
	path = concat_dup(st->dir, "/", "run");
	if (!path) {
		lr_zk_op_free(rec);
		return oom(err);
	}
	s = run_write1(st, 0, path, data, rec->stat.version, deadline, &rc,
		       &stat, err);
	lr_zk_op_free(rec);
	if (s == LR_OK && rc != ZOK && rc != ZBADVERSION)
		s = run_failed(st, "set", path, rc, err);
	free(path);
	return s;
}

static enum lr_status zk_run_last(struct lr_store *st, int64_t deadline,
				  struct lr_run *last, struct lr_err *err)
{
	struct lr_zk_op *rec;
	struct lr_err ignored;
	enum lr_status s;
	int64_t now;

	lr_run_init(last);
	s = run_now(st, deadline, 0, &now, &rec, &ignored);
	if (s != LR_OK) {
		*err = ignored;
		return s;
	}
	lr_run_parse(rec->rc == ZOK ? rec->value : NULL, last);
	lr_zk_op_free(rec);
	/* Without the right to stamp the clock, no "ago": never the local
	 * clock. */
	if (last->known && now >= 0)
		lr_run_times(last, now, 0);
	return LR_OK;
}

const struct lr_store_ops lr_store_ops = {
    .abi = LR_STORE_ABI,
    .name = "zk",
    .caps = LR_CAP_LIMIT | LR_CAP_SHARED,
    .list = zk_list,
    .secret_env = NULL,
    .open = zk_open,
    .acquire = zk_acquire,
    .wait_fd = zk_wait_fd,
    .process = zk_process,
    .check = zk_check,
    .renew = zk_renew,
    .release = zk_release,
    .inspect = zk_inspect,
    .break_lease = zk_break,
    .close = zk_close,
    .run_start = zk_run_start,
    .run_end = zk_run_end,
    .run_last = zk_run_last,
};
