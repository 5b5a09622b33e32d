/*
 * etcd-lock.c - the etcd store's lock (module etcd.so): acquire, the
 * core's loop, check, renew, release, inspect and break.  The calls it
 * makes are etcd-rpc.c's (etcd.h).
 *
 * The recipe (etcd's own concurrency.Mutex, so that with ?prefix= empty
 * leaserun and "etcdctl lock" exclude each other):
 *
 *   1. a lease with the TTL, whose ID we pick ourselves (63 random bits),
 *      so that we know our key before etcd answers: PREFIX/NAME/<ID hex>;
 *   2. in one transaction, create our key bound to the lease if it does
 *      not exist yet, and list the keys under PREFIX/NAME/;
 *   3. the key with the lowest create revision holds.  Its create
 *      revision is the fence.  Anyone else waits, watching only the key
 *      just before its own (first come, first served, no herd), and keeps
 *      its lease alive meanwhile (every TTL/3) so it keeps its place.
 *
 * Shared holders and semaphores use the same queue, with keys that say
 * what they are: PREFIX/NAME/s-<ID hex> for a shared run, which holds
 * when no exclusive key (the plain <ID hex>) was created before it and
 * waits watching the last exclusive key before it (etcd's read/write
 * lock recipe); PREFIX/NAME/n<N>-<ID hex> for a run of a semaphore of N
 * slots, queued among those keys alone.  The first of them in the queue
 * claims a free slot with a transaction that creates
 * PREFIX/NAME/n<N>-slot-<K> (bound to its lease) if it does not exist and
 * deletes its queue key, so the next run in the queue, which watches it,
 * becomes the first; the slot key is then its lock, and its create
 * revision the fence.  When every slot is taken, the first run watches
 * the slot keys for a delete (it alone: no herd).  Every key carries its
 * limit, so a run finds any key of another limit in its first listing
 * and is refused.
 *
 * The grant, the transaction and the watch on our own key go out together
 * (one round trip; a transaction that etcd applies before the grant, in
 * about one acquire in fifteen here, fails "lease not found" and is sent
 * again).  The watch must cover
 * every revision after the one at which the transaction saw our key: when
 * it was asked to start "now", the revision in its "created" reply says
 * from where it covers, and a watch that began too late is replaced by one
 * from the transaction's revision + 1 before acquire() returns.  So the
 * watch is in place before the command starts, and a deletion of our key
 * at any time after the acquire is certain loss as soon as etcd reports
 * it.  (A DELETE older than our key's create revision is of an earlier
 * key of the same name and means nothing.)
 *
 * Before the command starts, check() reads our key back: etcd may answer
 * a delete before it sends the watch event, so the watch alone could let
 * a command start on a key already gone.  While holding: renew() sends a
 * keepalive on the LeaseKeepAlive stream and reads our key back in the
 * same round trip, since a keepalive does not prove the key still
 * exists.  release() deletes our key only if its create revision is
 * still ours, then revokes the lease.  close() revokes a lease left over
 * (-n that found the lock busy, a wait that ran out, a failure), which
 * deletes our key: nothing stays behind.
 *
 * The core's loop: wait_fd() hands it a wait set (waitset.h) holding the
 * connection's socket and a timer (the keepalive due while waiting);
 * process() reads what came (watch events, keepalive replies) and says
 * what it means.  Every call drives the connection itself up to its
 * deadline; nothing here blocks outside a call, owns a loop or starts a
 * thread (but glibc's resolver thread for a host name).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "etcd/etcd.h"

#define MAX_RPCS 2 /* unary calls in one round trip */

/* ---- the watch on our key ------------------------------------------------ */

/* Our key is gone: deleted after the create revision we hold it by. */
static int our_key_gone(const struct lr_store *st)
{
	return st->our_create_rev && st->our_watch.deleted > st->our_create_rev;
}

/* The watch on our key covers every revision after st->rev.  Asked to
 * start "now", etcd starts a watch at the revision after the one its
 * created reply carries (its watch server takes the store's revision,
 * then watches from the next). */
static int our_watch_covers(const struct lr_store *st)
{
	const struct watch *w = &st->our_watch;
	int64_t from = w->start ? w->start : w->created_rev + 1;

	return w->id && w->created && !w->canceled && from <= st->rev + 1;
}

static int own_settled(void *ctx)
{
	struct lr_store *st = ctx;

	drain(st);
	return !st->our_watch.id || st->our_watch.created ||
	       st->our_watch.canceled || our_key_gone(st);
}

/*
 * Waits until the watch on our key covers every revision after st->rev
 * (the one at which the acquire saw our key), replacing a watch that
 * began too late or broke.  LR_OK; LR_LOST if our key went meanwhile.
 */
static enum lr_status own_settle(struct lr_store *st, int64_t deadline,
				 struct lr_err *err)
{
	int round;

	for (round = 0; round < 3; round++) {
		int rc;

		if (!st->our_watch.id || st->our_watch.canceled ||
		    (st->our_watch.created && !our_watch_covers(st))) {
			watch_cancel(st, &st->our_watch);
			watch_create(st, &st->our_watch, st->mykey,
				     st->rev + 1);
		}
		rc = lr_grpc_wait(st->conn, deadline, own_settled, st);
		if (our_key_gone(st))
			return LR_LOST;
		if (our_watch_covers(st))
			return LR_OK;
		if (rc == 0) {
			lr_err_set(err,
				   "etcd watch on %s: no answer from %s "
				   "in time",
				   st->mykey, st->eps[st->cur].label);
			return LR_TIMEOUT;
		}
		if (rc < 0 || lr_grpc_error(st->conn)) {
			lr_err_set(err, "cannot reach etcd at %s: %s",
				   st->eps[st->cur].label,
				   lr_grpc_error(st->conn));
			if (lr_grpc_heals(st->conn))
				lr_err_heals(err);
			return LR_ERROR;
		}
	}
	lr_err_set(err, "%s",
		   st->our_watch.why[0] ? st->our_watch.why
				  : "cannot set up the etcd watch");
	return LR_ERROR;
}

/* ---- the lock ------------------------------------------------------------ */

/* A new lease ID (positive, never 0) and with it our key. */
static int new_lease(struct lr_store *st, struct lr_err *err)
{
	uint64_t id = 0;

	if (getrandom(&id, sizeof(id), 0) != sizeof(id)) {
		lr_err_set(err, "getrandom: %s", strerror(errno));
		return -1;
	}
	id &= INT64_MAX;
	st->lease = id ? (int64_t)id : 1;
	st->lease_ttl_s = 0;
	st->ka_lost = 0;
	free(st->mykey);
	st->mykey = malloc(strlen(st->dir) + 40);
	if (!st->mykey) {
		lr_err_set(err, "out of memory");
		return -1;
	}
	if (st->req->shared)
		sprintf(st->mykey, "%ss-%" PRIx64, st->dir,
			(uint64_t)st->lease);
	else if (st->req->limit > 1)
		sprintf(st->mykey, "%sn%u-%" PRIx64, st->dir, st->req->limit,
			(uint64_t)st->lease);
	else
		sprintf(st->mykey, "%s%" PRIx64, st->dir, (uint64_t)st->lease);
	st->our_create_rev = 0;
	st->rev = 0;
	st->slot_claimed = 0;
	watch_cancel(st, &st->our_watch);
	return 0;
}

static int lease_grant_rpc(struct lr_store *st, struct rpc *r)
{
	LrEtcd__LeaseGrantRequest q = LR_ETCD__LEASE_GRANT_REQUEST__INIT;
	int64_t ttl_s = (st->req->ttl_ms + 999) / 1000;

	q.ttl = ttl_s < 1 ? 1 : ttl_s;
	q.id = st->lease;
	return rpc_init(r, "lease grant", M_GRANT, &q.base,
			&lr_etcd__lease_grant_response__descriptor);
}

/* c becomes "key's create revision is rev" (0: key does not exist). */
static void create_rev_is(LrEtcd__Compare *c, const char *key, int64_t rev)
{
	c->result = LR_ETCD__COMPARE__COMPARE_RESULT__EQUAL;
	c->target = LR_ETCD__COMPARE__COMPARE_TARGET__CREATE;
	c->key = bytes(key);
	c->target_union_case = LR_ETCD__COMPARE__TARGET_UNION_CREATE_REVISION;
	c->create_revision = rev;
}

/* The transaction that queues us: create our key, bound to our lease and
 * holding "host pid since", if it does not exist; list the directory. */
static int enqueue_rpc(struct lr_store *st, struct rpc *r)
{
	LrEtcd__Compare cmp = LR_ETCD__COMPARE__INIT, *cmps[1] = {&cmp};
	LrEtcd__PutRequest put = LR_ETCD__PUT_REQUEST__INIT;
	LrEtcd__RangeRequest rr = LR_ETCD__RANGE_REQUEST__INIT;
	LrEtcd__RequestOp op_put = LR_ETCD__REQUEST_OP__INIT,
			  op_range = LR_ETCD__REQUEST_OP__INIT;
	LrEtcd__RequestOp *succ[2] = {&op_put, &op_range},
			  *fail[1] = {&op_range};
	char value[400], *end = prefix_end(st->dir);
	int rc;

	if (!end)
		return -1;
	lr_holder_format(st->req->host, st->req->pid, st->req->since_ms, value,
			 sizeof(value));
	create_rev_is(&cmp, st->mykey, 0);
	put_op(&op_put, &put, st->mykey, value, st->lease);
	rr.key = bytes(st->dir);
	rr.range_end = bytes(end);
	rr.keys_only = 1;
	op_range.request_case = LR_ETCD__REQUEST_OP__REQUEST_REQUEST_RANGE;
	op_range.request_range = &rr;
	rc = txn_rpc(r, "lock transaction", cmps, 1, succ, 2, fail, 1);
	free(end);
	return rc;
}

/* What a key under our directory is, from its name. */
enum kind {
	K_EXCL,	  /* <ID hex>: an exclusive run's (the plain lease) */
	K_SHARED, /* s-<ID hex>: a shared run's */
	K_QUEUE,  /* n<N>-<ID hex>: a semaphore's run, queued or first */
	K_SLOT,	  /* n<N>-slot-<K>: the holder of its slot K */
};

/* The kind of key k (under dir), with its limit and, for K_SLOT, its
 * slot. */
static enum kind key_kind(const char *dir, ProtobufCBinaryData k,
			  unsigned *limit, unsigned *slot)
{
	size_t d = strlen(dir), i;
	const char *p = (const char *)k.data + d;
	size_t len = k.len > d ? k.len - d : 0;
	unsigned long n = 0;

	*limit = 1;
	*slot = 0;
	if (len >= 2 && p[0] == 's' && p[1] == '-')
		return K_SHARED;
	if (len < 3 || p[0] != 'n' || p[1] < '0' || p[1] > '9')
		return K_EXCL;
	for (i = 1; i < len && p[i] >= '0' && p[i] <= '9' && n < 1000000; i++)
		n = n * 10 + (unsigned long)(p[i] - '0');
	if (i == len || p[i] != '-')
		return K_EXCL;
	*limit = (unsigned)n;
	i++;
	if (len - i < 6 || memcmp(p + i, "slot-", 5) != 0)
		return K_QUEUE;
	for (i += 5, n = 0; i < len && p[i] >= '0' && p[i] <= '9' && n < 1000000;
	     i++)
		n = n * 10 + (unsigned long)(p[i] - '0');
	*slot = (unsigned)n;
	return K_SLOT;
}

/* Where we stand in the queue, from the transaction's listing. */
struct scan {
	int64_t mine, low, prev_rev;
	char *pred_key;	 /* owned */
	unsigned other;	 /* the limit of a key that disagrees with ours */
	int64_t xpred;	 /* shared: the last exclusive key before ours */
	char *xpred_key; /* owned */
	unsigned char used[LR_LIMIT_MAX]; /* a semaphore's slots taken */
};

/* Does key kv count in the queue we stand in?  A semaphore's runs queue
 * among themselves; the plain lease and shared runs among each other. */
static int in_queue(const struct lr_store *st, const LrEtcd__KeyValue *kv,
		    struct scan *sc)
{
	unsigned lim, slot;
	enum kind k = key_kind(st->dir, kv->key, &lim, &slot);

	if (lim != st->req->limit)
		sc->other = lim;
	if (k == K_SLOT && lim == st->req->limit && slot < lim)
		sc->used[slot] = 1;
	if (st->req->limit > 1)
		return k == K_QUEUE;
	return k == K_EXCL || k == K_SHARED;
}

/* *key becomes a copy of kv's key; -1 out of memory. */
static int take_key(char **key, const LrEtcd__KeyValue *kv)
{
	free(*key);
	*key = bytes_dup(kv->key);
	return *key ? 0 : -1;
}

static int scan_queue(struct lr_store *st, const LrEtcd__TxnResponse *t,
		      struct scan *sc)
{
	const LrEtcd__ResponseOp *last;
	const LrEtcd__RangeResponse *rr;
	size_t i;

	memset(sc, 0, sizeof(*sc));
	if (!t->n_responses)
		return -1;
	last = t->responses[t->n_responses - 1];
	if (last->response_case !=
	    LR_ETCD__RESPONSE_OP__RESPONSE_RESPONSE_RANGE)
		return -1;
	rr = last->response_range;
	for (i = 0; i < rr->n_kvs; i++) {
		const LrEtcd__KeyValue *kv = rr->kvs[i];

		if (!in_queue(st, kv, sc))
			continue;
		if (!sc->low || kv->create_revision < sc->low)
			sc->low = kv->create_revision;
		if (bytes_eq(kv->key, st->mykey))
			sc->mine = kv->create_revision;
	}
	if (!sc->mine)
		return -1;
	for (i = 0; i < rr->n_kvs; i++) {
		const LrEtcd__KeyValue *kv = rr->kvs[i];
		struct scan ignored;
		unsigned lim, slot;

		if (!in_queue(st, kv, &ignored) ||
		    kv->create_revision >= sc->mine)
			continue;
		if (kv->create_revision > sc->prev_rev) {
			if (take_key(&sc->pred_key, kv) < 0)
				return -1;
			sc->prev_rev = kv->create_revision;
		}
		if (key_kind(st->dir, kv->key, &lim, &slot) == K_EXCL &&
		    kv->create_revision > sc->xpred) {
			if (take_key(&sc->xpred_key, kv) < 0)
				return -1;
			sc->xpred = kv->create_revision;
		}
	}
	return 0;
}

/* A semaphore's slot key: PREFIX/NAME/n<N>-slot-<K>; K -1 gives the
 * prefix of them all.  NULL out of memory. */
static char *slot_key(const struct lr_store *st, int k)
{
	char *key = malloc(strlen(st->dir) + 48);

	if (key && k < 0)
		sprintf(key, "%sn%u-slot-", st->dir, st->req->limit);
	else if (key)
		sprintf(key, "%sn%u-slot-%d", st->dir, st->req->limit, k);
	return key;
}

/* Watches w (our predecessor, or the slots) on key, or [key, end), from
 * after the listing, unless it watches that already and nothing
 * happened to it. */
static void watch_ahead(struct lr_store *st, const char *key, const char *end)
{
	struct watch *w = &st->prev_watch;

	if (w->id && !w->canceled && !w->deleted && !strcmp(w->key, key) &&
	    !end == !w->end && (!end || !strcmp(w->end, end)))
		return;
	watch_cancel(st, w);
	watch_create_range(st, w, key, end, st->rev + 1);
}

/*
 * The first run of a semaphore's queue: claims the lowest free slot, in a
 * transaction that creates the slot key bound to our lease (if it does
 * not exist) and deletes our queue key (if it is still ours).  LR_OK: our
 * key is now the slot key, its create revision our fence.  LR_BUSY:
 * every slot is taken; we watch them.  LR_LOST: the transaction failed
 * (a slot taken meanwhile, our key gone): look again.
 */
static enum lr_status claim_slot(struct lr_store *st, const struct scan *sc,
				 int64_t deadline, struct lr_err *err)
{
	LrEtcd__Compare c1 = LR_ETCD__COMPARE__INIT, c2 = LR_ETCD__COMPARE__INIT;
	LrEtcd__Compare *cmps[2] = {&c1, &c2};
	LrEtcd__PutRequest put = LR_ETCD__PUT_REQUEST__INIT;
	LrEtcd__DeleteRangeRequest del = LR_ETCD__DELETE_RANGE_REQUEST__INIT;
	LrEtcd__RequestOp op_put = LR_ETCD__REQUEST_OP__INIT,
			  op_del = LR_ETCD__REQUEST_OP__INIT;
	LrEtcd__RequestOp *succ[2] = {&op_put, &op_del};
	const LrEtcd__TxnResponse *t;
	char value[400], *key, *end;
	enum lr_status s;
	struct rpc r;
	unsigned k;

	for (k = 0; k < st->req->limit && sc->used[k]; k++)
		;
	if (k == st->req->limit) {
		key = slot_key(st, -1);
		end = key ? prefix_end(key) : NULL;
		if (!key || !end) {
			free(key);
			lr_err_set(err, "out of memory");
			return LR_ERROR;
		}
		watch_ahead(st, key, end);
		free(key);
		free(end);
		return LR_BUSY;
	}
	if (!(key = slot_key(st, (int)k))) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	lr_holder_format(st->req->host, st->req->pid, st->req->since_ms, value,
			 sizeof(value));
	create_rev_is(&c1, key, 0);
	create_rev_is(&c2, st->mykey, st->our_create_rev);
	put_op(&op_put, &put, key, value, st->lease);
	del.key = bytes(st->mykey);
	op_del.request_case = LR_ETCD__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
	op_del.request_delete_range = &del;
	if (txn_rpc(&r, "slot transaction", cmps, 2, succ, 2, NULL, 0) < 0) {
		free(key);
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	/* Our queue key goes: its watch must not call that a loss. */
	watch_cancel(st, &st->our_watch);
	s = call1(st, &r, deadline, err);
	t = s == LR_OK ? (const LrEtcd__TxnResponse *)r.reply : NULL;
	if (t && !t->succeeded) {
		s = LR_LOST;
	} else if (t) {
		free(st->mykey);
		st->mykey = key;
		key = NULL;
		st->rev = t->header ? t->header->revision : 0;
		st->our_create_rev = st->rev;
		st->slot = k;
		st->slot_claimed = 1;
		if (!st->our_create_rev) {
			lr_err_set(err, "etcd slot transaction: no revision");
			s = LR_ERROR;
		}
	}
	rpc_clear(&r);
	free(key);
	return s;
}

/* Frees the keys a listing of the queue kept. */
static void scan_clear(struct scan *sc)
{
	free(sc->pred_key);
	free(sc->xpred_key);
	sc->pred_key = sc->xpred_key = NULL;
}

/*
 * The round trip of an attempt, with r[] (cleared by the caller) for its
 * calls: keep the lease alive (or grant it), queue our key and list the
 * queue, with the watch on our key.  LR_OK: sc says where our key
 * stands.  LR_LOST: look again (a new lease, at the end of the queue).
 * Else err says what failed.
 */
static enum lr_status enqueue(struct lr_store *st, struct rpc *r,
			      struct scan *sc, int64_t deadline,
			      struct lr_err *err)
{
	struct extras x = {0};
	const LrEtcd__TxnResponse *t;
	enum lr_status s;
	int grant = 0;
	size_t n = 0;

	if (!st->lease || st->ka_lost == st->lease) {
		/* None yet, or it ran out while we waited (stopped for
		 * longer than the TTL): a new one, at the end of the
		 * queue. */
		if (new_lease(st, err) < 0)
			return LR_ERROR;
		grant = 1;
	}
	/* An earlier lease is kept alive now, within this call, so that it
	 * lasts a full TTL from after the core's t_send, as a fresh grant
	 * would. */
	x.keepalive = !grant;
	x.own_watch = 1;
	x.own_start = st->rev ? st->rev + 1 : 0;
	if (grant && lease_grant_rpc(st, &r[n++]) < 0)
		goto oom;
	if (enqueue_rpc(st, &r[n++]) < 0)
		goto oom;
	s = round_trip(st, r, n, &x, deadline, err);
	if (s != LR_OK)
		return s;
	if (grant) {
		/* "already exists": ours, from a try whose reply was lost
		 * (the ID is 63 random bits). */
		if (r[0].code && !strstr(r[0].msg, "already exists")) {
			lr_err_set(err, "etcd lease grant failed at %s: %s",
				   st->eps[st->cur].label, r[0].msg);
			return LR_ERROR;
		}
		st->lease_ttl_s =
		    r[0].code
			? 0
			: ((LrEtcd__LeaseGrantResponse *)r[0].reply)->ttl;
		st->last_ka = lr_now_ms();
	} else if (st->ka_lost == st->lease) {
		return LR_LOST; /* new lease, end of the queue */
	} else {
		st->last_ka = lr_now_ms();
	}
	if (r[n - 1].code) {
		if (r[n - 1].code == GRPC_NOT_FOUND &&
		    strstr(r[n - 1].msg, "lease not found")) {
			/* Applied before the grant (both were in flight),
			 * or our lease is gone. */
			if (!grant)
				st->ka_lost = st->lease;
			return LR_LOST;
		}
		lr_err_set(err, "etcd lock transaction failed at %s: %s",
			   st->eps[st->cur].label, r[n - 1].msg);
		return LR_ERROR;
	}
	t = (const LrEtcd__TxnResponse *)r[n - 1].reply;
	if (scan_queue(st, t, sc) < 0) {
		lr_err_set(err,
			   "etcd lock transaction: our key %s is missing from "
			   "the reply",
			   st->mykey);
		return LR_ERROR;
	}
	st->rev = t->header ? t->header->revision : 0;
	st->our_create_rev = sc->mine;
	return LR_OK;
oom:
	lr_err_set(err, "out of memory");
	return LR_ERROR;
}

/* Whether the run holds once its key is settled: a semaphore's run that
 * claimed a slot, a shared run with no exclusive key before it, any
 * other run first in the queue. */
static int our_turn(const struct lr_store *st, const struct scan *sc)
{
	if (st->req->limit > 1)
		return st->slot_claimed;
	if (st->req->shared)
		return !sc->xpred;
	return sc->mine == sc->low;
}

/* Our turn: the watch on our key must cover the listing first.  LR_OK
 * fills *g; LR_LOST: our key was deleted at once, queue it again. */
static enum lr_status take_hold(struct lr_store *st, struct lr_grant *g,
				int64_t deadline, struct lr_err *err)
{
	enum lr_status s = own_settle(st, deadline, err);

	if (s == LR_LOST && st->slot_claimed)
		st->ka_lost = st->lease; /* a new key, queued again */
	if (s != LR_OK)
		return s;
	st->hold = H_HOLDING;
	watch_cancel(st, &st->prev_watch);
	st->ka_at = -1;
	g->fence = (uint64_t)st->our_create_rev;
	g->ttl_ms = st->lease_ttl_s * 1000 < st->req->ttl_ms
			? st->lease_ttl_s * 1000
			: 0;
	g->slot = st->req->limit > 1 ? st->slot : 0;
	return LR_OK;
}

/* Waiting in the queue: the keepalive that keeps our place is due at
 * TTL/3.  LR_BUSY, with who holds in err. */
static enum lr_status wait_in_queue(struct lr_store *st, const struct scan *sc,
				    struct lr_err *err)
{
	st->hold = H_WAITING;
	lr_grpc_pump(st->conn);
	st->ka_at = st->last_ka + st->req->ttl_ms / 3;
	lr_err_set(err, "held by another client (create revision %" PRId64 ")",
		   sc->low);
	return LR_BUSY;
}

/* Someone is ahead: keep our place, watch the one just before us (a
 * shared run: the last exclusive one before us).  LR_BUSY, or LR_ERROR. */
static enum lr_status wait_for_prev(struct lr_store *st, struct scan *sc,
				    struct lr_err *err)
{
	if (st->req->shared) {
		free(sc->pred_key);
		sc->pred_key = sc->xpred_key;
		sc->xpred_key = NULL;
	}
	if (!sc->pred_key) {
		lr_err_set(err, "etcd: cannot tell who is ahead in %s",
			   st->dir);
		return LR_ERROR;
	}
	watch_ahead(st, sc->pred_key, NULL);
	return wait_in_queue(st, sc, err);
}

/*
 * One attempt: keep the lease alive (or grant it), queue our key and see
 * where it stands, in one round trip with the watch on our key.
 */
enum lr_status etcd_acquire(struct lr_store *st, int64_t deadline,
			    struct lr_grant *g, struct lr_err *err)
{
	struct rpc r[MAX_RPCS];
	struct scan sc = {0};
	enum lr_status s;
	int rounds = 0;
	size_t i;

	if (st->hold == H_HOLDING) {
		lr_err_set(err, "etcd store: acquire while holding");
		return LR_ERROR;
	}
	memset(r, 0, sizeof(r));
	for (;;) {
		for (i = 0; i < MAX_RPCS; i++)
			rpc_clear(&r[i]);
		scan_clear(&sc);
		if (++rounds > 4) {
			if (!err->msg[0])
				lr_err_set(err,
					   "etcd: our key %s keeps going away",
					   st->mykey);
			s = LR_ERROR;
			break;
		}
		s = enqueue(st, r, &sc, deadline, err);
		if (s == LR_LOST)
			continue;
		if (s != LR_OK)
			break;
		if (sc.other) {
			lr_err_limit(err, st->req, sc.other);
			s = LR_ERROR;
			break;
		}
		if (st->req->limit > 1 && sc.mine == sc.low) {
			/* First in the queue: a free slot, or wait for one. */
			s = claim_slot(st, &sc, deadline, err);
			if (s == LR_LOST)
				continue;
			if (s == LR_BUSY) {
				s = wait_in_queue(st, &sc, err);
				break;
			}
			if (s != LR_OK)
				break;
		}
		if (!our_turn(st, &sc)) {
			s = wait_for_prev(st, &sc, err);
			break;
		}
		s = take_hold(st, g, deadline, err);
		if (s != LR_LOST)
			break; /* LR_LOST: deleted at once, queue it again */
	}
	for (i = 0; i < MAX_RPCS; i++)
		rpc_clear(&r[i]);
	scan_clear(&sc);
	return s;
}

int etcd_wait_fd(struct lr_store *st, short *events)
{
	short ev = 0;
	int fd;

	if (!st || st->ws.ep < 0 || st->hold == H_IDLE)
		return -1;
	fd = st->conn ? lr_grpc_fd(st->conn, &ev) : -1;
	lr_waitset_follow(&st->ws, &st->regfd, fd,
			  (ev & POLLIN ? EPOLLIN : 0) |
				  (ev & POLLOUT ? EPOLLOUT : 0));
	lr_waitset_arm(&st->ws, st->hold == H_WAITING ? st->ka_at : -1);
	*events = POLLIN;
	return st->ws.ep;
}

enum lr_status etcd_process(struct lr_store *st, short revents,
			    int64_t deadline, struct lr_err *err)
{
	struct epoll_event evs[4];
	int64_t now = lr_now_ms();
	const char *dead = NULL;

	(void)revents;
	(void)deadline;
	/* (Reads the timer; the socket is read below, whatever is ready.) */
	lr_waitset_ready(&st->ws, evs, 4);
	if (st->conn && lr_grpc_pump(st->conn) < 0)
		dead = lr_grpc_error(st->conn);
	drain(st);
	if (st->hold == H_WAITING) {
		if (dead || st->ka_lost == st->lease || our_key_gone(st) ||
		    st->prev_watch.deleted || st->prev_watch.canceled ||
		    !st->prev_watch.id)
			return LR_OK; /* acquire looks again */
		if (st->ka_at >= 0 && now >= st->ka_at) {
			if (keepalive_send(st) == 0) {
				lr_grpc_pump(st->conn);
				st->last_ka = now;
				st->ka_at = now + st->req->ttl_ms / 3;
			} else {
				st->ka_at = now + 500;
			}
		}
		return LR_BUSY;
	}
	if (st->hold != H_HOLDING)
		return LR_OK;
	if (our_key_gone(st) || st->ka_lost == st->lease) {
		lr_err_set(err,
			   "etcd key %s was deleted (lease revoked or key "
			   "removed)",
			   st->mykey);
		return LR_LOST;
	}
	if (dead) {
		lr_err_set(err, "lost the connection to etcd at %s: %s",
			   st->eps[st->cur].label, dead);
		conn_drop(st); /* renew() connects again */
		return LR_ERROR;
	}
	if (st->our_watch.canceled) {
		lr_err_set(err, "%s", st->our_watch.why);
		watch_forget(&st->our_watch); /* renew() sets it up again */
		return LR_ERROR;
	}
	return LR_OK;
}

/*
 * Our key read back, with a keepalive in the same round trip if keepalive
 * is set.  The Range is linearizable (etcd's default: the member asks the
 * leader first), so a delete committed anywhere before it was sent shows.
 * LR_OK: our key is still ours at the read's revision, which st->rev
 * becomes, and the watch on our key covers what comes after it (set up
 * again from there if it broke).  LR_LOST: our key or our lease is gone.
 */
static enum lr_status read_our_key(struct lr_store *st, int keepalive,
				   int64_t deadline, struct lr_err *err)
{
	struct extras x = {.keepalive = keepalive};
	const LrEtcd__RangeResponse *rr;
	struct rpc r;
	enum lr_status s;
	int64_t create_rev;

	if (range_rpc(&r, "range", st->mykey, NULL, 0) < 0) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	s = round_trip(st, &r, 1, &x, deadline, err);
	if (s == LR_OK && r.code) {
		lr_err_set(err, "etcd range failed at %s: %s",
			   st->eps[st->cur].label, r.msg);
		s = LR_ERROR;
	}
	if (s != LR_OK)
		goto out;
	if (st->ka_lost == st->lease) {
		lr_err_set(err, "etcd lease %" PRIx64 " expired or was revoked",
			   (uint64_t)st->lease);
		s = LR_LOST;
		goto out;
	}
	rr = (const LrEtcd__RangeResponse *)r.reply;
	create_rev = rr->n_kvs ? rr->kvs[0]->create_revision : 0;
	if (create_rev != st->our_create_rev || our_key_gone(st)) {
		lr_err_set(err, "etcd key %s %s", st->mykey,
			   create_rev ? "was replaced by another" : "is gone");
		s = LR_LOST;
		goto out;
	}
	st->rev = rr->header ? rr->header->revision : st->rev;
	/* A watch that broke (endpoint died, compaction, new token) starts
	 * again from the revision just proven. */
	if (!st->our_watch.id || st->our_watch.canceled) {
		watch_forget(&st->our_watch);
		watch_create(st, &st->our_watch, st->mykey, st->rev + 1);
		lr_grpc_pump(st->conn);
	}
out:
	rpc_clear(&r);
	return s;
}

/*
 * The last step before the command starts.  First what the connection
 * already holds, read without waiting as process() reads it: a DELETE of
 * our key on the watch, a keepalive reply that says the lease is gone.
 * Then our key read back (read_our_key(), without a keepalive), because the
 * watch cannot say that nothing happened: etcd answers a delete from the
 * goroutine that applied it and sends the watch events from another (the
 * watch stream's send loop), and a member that lags behind the leader,
 * or is cut off from it, applies the delete late or never.  Here, with
 * one member on loopback, a delete that etcd had already answered was
 * not on our socket yet in 11 runs of 900, and the command would have
 * started beside the next holder.  The read costs one round trip (median
 * 0.8-1.1 ms here, on a loaded machine, against 35 ms for a whole run of
 * "true"): the price of "ours at a moment after the grant's last step",
 * which no watch gives.  A read that fails or times out is suspicion
 * (the core starts the command and renews at once), never loss.
 */
enum lr_status etcd_check(struct lr_store *st, int64_t deadline,
			  struct lr_err *err)
{
	if (st->hold != H_HOLDING) {
		lr_err_set(err, "etcd store: nothing held");
		return LR_LOST;
	}
	if (st->conn)
		lr_grpc_pump(st->conn); /* dead: read_our_key() connects */
	drain(st);
	if (our_key_gone(st) || st->ka_lost == st->lease) {
		lr_err_set(err,
			   "etcd key %s was deleted (lease revoked or key "
			   "removed)",
			   st->mykey);
		return LR_LOST;
	}
	return read_our_key(st, 0, deadline, err);
}

/* A keepalive and our key read back, in one round trip. */
enum lr_status etcd_renew(struct lr_store *st, int64_t deadline,
			  struct lr_err *err)
{
	if (st->hold != H_HOLDING) {
		lr_err_set(err, "etcd store: renew while not holding");
		return LR_ERROR;
	}
	return read_our_key(st, 1, deadline, err);
}

/* Deletes key if its create revision is still create_rev.  *done: it was. */
static enum lr_status delete_if(struct lr_store *st, const char *what,
				const char *key, int64_t create_rev,
				int64_t deadline, int *done,
				struct lr_err *err)
{
	LrEtcd__Compare cmp = LR_ETCD__COMPARE__INIT, *cmps[1] = {&cmp};
	LrEtcd__DeleteRangeRequest del = LR_ETCD__DELETE_RANGE_REQUEST__INIT;
	LrEtcd__RequestOp op = LR_ETCD__REQUEST_OP__INIT, *succ[1] = {&op};
	struct rpc r;
	enum lr_status s;

	create_rev_is(&cmp, key, create_rev);
	del.key = bytes(key);
	op.request_case = LR_ETCD__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
	op.request_delete_range = &del;
	if (txn_rpc(&r, what, cmps, 1, succ, 1, NULL, 0) < 0) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	s = call1(st, &r, deadline, err);
	*done = s == LR_OK && ((const LrEtcd__TxnResponse *)r.reply)->succeeded;
	rpc_clear(&r);
	return s;
}

enum lr_status etcd_release(struct lr_store *st, int64_t deadline,
			    struct lr_err *err)
{
	enum lr_status s;
	int64_t lease = st->lease;
	int done = 0;

	watch_cancel(st, &st->our_watch);
	s = delete_if(st, "release", st->mykey ? st->mykey : "",
		      st->our_create_rev, deadline, &done, err);
	/* etcd away for now: the core asks again until the lease's
	 * deadline, and close() revokes the lease if it never answers. */
	if (s == LR_TIMEOUT || (s == LR_ERROR && err->heals))
		return s;
	if (s == LR_OK && !done) {
		lr_err_set(err, "etcd key %s was no longer ours", st->mykey);
		s = LR_LOST;
	}
	if (lease)
		lease_revoke(st, lease, deadline);
	st->lease = 0;
	st->hold = H_IDLE;
	st->ka_at = -1;
	st->slot_claimed = 0;
	return s;
}

static int by_crev(const void *a, const void *b)
{
	const LrEtcd__KeyValue *x = *(const LrEtcd__KeyValue *const *)a;
	const LrEtcd__KeyValue *y = *(const LrEtcd__KeyValue *const *)b;

	return (x->create_revision > y->create_revision) -
	       (x->create_revision < y->create_revision);
}

/* The holders: the listing of our directory (kept in *r) judged as the
 * runs do.  A semaphore's are its slot keys; else, in create order, the
 * first key if it is an exclusive run's, or the shared runs' keys before
 * the first exclusive one.  *kvs (n of them, the caller frees the array)
 * point into *r; *limit is the name's limit, 0 when nothing is there. */
static enum lr_status list_holders(struct lr_store *st, int64_t deadline,
				   struct rpc *r, const LrEtcd__KeyValue ***kvs,
				   size_t *n, unsigned *limit,
				   struct lr_err *err)
{
	const LrEtcd__RangeResponse *rr;
	char *end = prefix_end(st->dir);
	enum lr_status s;
	size_t i, m = 0;
	int open = 1;

	*kvs = NULL;
	*n = 0;
	*limit = 0;
	if (!end || range_rpc(r, "range", st->dir, end, 0) < 0) {
		free(end);
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	free(end);
	s = call1(st, r, deadline, err);
	if (s != LR_OK)
		return s;
	rr = (const LrEtcd__RangeResponse *)r->reply;
	if (!rr->n_kvs)
		return LR_OK;
	*kvs = malloc(rr->n_kvs * sizeof(**kvs));
	if (!*kvs) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	for (i = 0; i < rr->n_kvs; i++)
		(*kvs)[i] = rr->kvs[i];
	qsort(*kvs, rr->n_kvs, sizeof(**kvs), by_crev);
	for (i = 0; i < rr->n_kvs; i++) {
		unsigned lim, slot;
		enum kind k = key_kind(st->dir, (*kvs)[i]->key, &lim, &slot);

		if (!*limit || lim > 1)
			*limit = lim;
		if (k == K_SLOT || (k == K_EXCL && i == 0) ||
		    (k == K_SHARED && open))
			(*kvs)[m++] = (*kvs)[i];
		if (k == K_EXCL)
			open = 0; /* no shared run behind it holds */
	}
	if (*limit > 1) {
		/* Only the slot keys hold; the shared rule kept none of a
		 * semaphore's queue keys. */
		size_t j = 0;

		for (i = 0; i < m; i++) {
			unsigned lim, slot;

			if (key_kind(st->dir, (*kvs)[i]->key, &lim, &slot) ==
			    K_SLOT)
				(*kvs)[j++] = (*kvs)[i];
		}
		m = j;
	}
	*n = m;
	return LR_OK;
}

/* The time left of lease id into *ms (unknown: left as it is). */
static enum lr_status lease_left(struct lr_store *st, int64_t id,
				 int64_t deadline, int64_t *ms,
				 struct lr_err *err)
{
	LrEtcd__LeaseTimeToLiveRequest q =
	    LR_ETCD__LEASE_TIME_TO_LIVE_REQUEST__INIT;
	enum lr_status s;
	struct rpc t;

	q.id = id;
	if (rpc_init(&t, "lease timetolive", M_TTL, &q.base,
		     &lr_etcd__lease_time_to_live_response__descriptor) < 0) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	s = call1(st, &t, deadline, err);
	if (s == LR_OK &&
	    ((LrEtcd__LeaseTimeToLiveResponse *)t.reply)->ttl >= 0)
		*ms = ((LrEtcd__LeaseTimeToLiveResponse *)t.reply)->ttl * 1000;
	rpc_clear(&t);
	return s;
}

/* The keys of the listing rr that do not hold (the n of kvs do) wait:
 * their count, and the first of them by create revision, into info. */
static void waiters(const ProtobufCMessage *reply,
		    const LrEtcd__KeyValue *const *kvs, size_t n,
		    struct lr_info *info)
{
	const LrEtcd__RangeResponse *rr = (const LrEtcd__RangeResponse *)reply;
	const LrEtcd__KeyValue *first = NULL;
	struct lr_holder w;
	size_t i, j;
	char *v;

	info->waiters = (long)(rr->n_kvs - n);
	for (i = 0; i < rr->n_kvs; i++) {
		for (j = 0; j < n && kvs[j] != rr->kvs[i]; j++)
			;
		if (j == n && (!first || rr->kvs[i]->create_revision <
						 first->create_revision))
			first = rr->kvs[i];
	}
	if (!first || !(v = bytes_dup(first->value)))
		return;
	memset(&w, 0, sizeof(w));
	if (lr_holder_parse(v, &w) == 0)
		lr_holder_who(&w, info->next, sizeof(info->next));
	free(v);
}

enum lr_status etcd_inspect(struct lr_store *st, int64_t deadline,
			    struct lr_info *info, struct lr_err *err)
{
	const LrEtcd__KeyValue **kvs;
	enum lr_status s;
	struct rpc r;
	size_t i, n;

	s = list_holders(st, deadline, &r, &kvs, &n, &info->limit, err);
	if (s == LR_OK)
		waiters(r.reply, kvs, n, info);
	for (i = 0; s == LR_OK && i < n; i++) {
		const LrEtcd__KeyValue *kv = kvs[i];
		struct lr_holder *h = lr_info_add(info);
		char *v = bytes_dup(kv->value);
		unsigned lim, slot;

		if (!h || !v) {
			free(v);
			lr_err_set(err, "out of memory");
			s = LR_ERROR;
			break;
		}
		h->fence = (uint64_t)kv->create_revision;
		h->shared = key_kind(st->dir, kv->key, &lim, &slot) == K_SHARED;
		h->slot = slot;
		lr_holder_parse(v, h);
		free(v);
		if (kv->lease)
			s = lease_left(st, kv->lease, deadline,
				       &h->ttl_left_ms, err);
	}
	free(kvs);
	rpc_clear(&r);
	return s;
}

/* Deletes exactly the holders' keys (not newer ones), all of them or
 * slot's, then revokes their leases, so a process that still thinks it
 * holds learns at once. */
enum lr_status etcd_break(struct lr_store *st, int slot, int64_t deadline,
			  struct lr_err *err)
{
	const LrEtcd__KeyValue **kvs;
	enum lr_status s;
	unsigned limit;
	struct rpc r;
	size_t i, n;

	s = list_holders(st, deadline, &r, &kvs, &n, &limit, err);
	for (i = 0; s == LR_OK && i < n; i++) {
		const LrEtcd__KeyValue *kv = kvs[i];
		char *key = bytes_dup(kv->key);
		unsigned lim, k;
		int done;

		key_kind(st->dir, kv->key, &lim, &k);
		if (slot >= 0 && (unsigned)slot != k) {
			free(key);
			continue;
		}
		if (!key) {
			lr_err_set(err, "out of memory");
			s = LR_ERROR;
			break;
		}
		s = delete_if(st, "break", key, kv->create_revision, deadline,
			      &done, err);
		free(key);
		if (s == LR_OK && kv->lease)
			lease_revoke(st, kv->lease, deadline);
	}
	free(kvs);
	rpc_clear(&r);
	return s;
}
