/*
 * etcd-runs.c - the etcd store's runs (--once-per), module etcd.so.  The
 * calls it makes are etcd-rpc.c's (etcd.h).
 *
 * etcd has no clock a client can read, but its leases expire by the
 * leader's: PREFIX.run/NAME is put bound to a lease whose TTL is the
 * period (in whole seconds, rounded up), so the key exists while a period
 * holds and is deleted by etcd when it ends.  One transaction puts it
 * only if it does not exist; if it does, LeaseTimeToLive of its lease
 * says how long ago it started (granted minus remaining, counted down, so
 * never early) and when the next start is allowed; a run with a shorter
 * period than the one recorded replaces the key once its own period has
 * passed by that count.  PREFIX.last/NAME, put in the same transaction
 * with no lease, keeps the last run for --status: "FENCE PERIOD START END
 * STATUS PID HOST", START and END by the starting host's clock (display
 * only: nothing is decided by them).  A name cannot start with '.', so
 * neither key is in a lock directory.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "etcd/etcd.h"

/* c becomes "key's mod revision is rev" (0: key does not exist). */
static void modrev_is(LrEtcd__Compare *c, const char *key, int64_t rev)
{
	c->result = LR_ETCD__COMPARE__COMPARE_RESULT__EQUAL;
	c->target = LR_ETCD__COMPARE__COMPARE_TARGET__MOD;
	c->key = bytes(key);
	c->target_union_case = LR_ETCD__COMPARE__TARGET_UNION_MOD_REVISION;
	c->mod_revision = rev;
}

/* PREFIX<what>/NAME, beside the lock directory PREFIX NAME "/".  Free it;
 * NULL when out of memory. */
static char *run_key(const struct lr_store *st, const char *what)
{
	size_t plen = strlen(st->dir) - strlen(st->req->name) - 1;
	char *k = malloc(plen + strlen(what) + strlen(st->req->name) + 2);

	if (k)
		sprintf(k, "%.*s%s/%s", (int)plen, st->dir, what,
			st->req->name);
	return k;
}

/* Parses a PREFIX.last/NAME value into run (known stays 0 if it is not
 * one). */
static void run_parse(ProtobufCBinaryData v, struct lr_run *run)
{
	char *s = bytes_dup(v);

	lr_run_parse(s, run);
	free(s);
}

/* The transaction of a start: if PREFIX.run/NAME was last modified at
 * mod (0: it does not exist), put it bound to lease and put
 * PREFIX.last/NAME; else read both. */
static int run_txn_rpc(struct rpc *r, const char *runk, const char *last,
		       int64_t mod, int64_t lease, const char *runv,
		       const char *lval)
{
	LrEtcd__Compare cmp = LR_ETCD__COMPARE__INIT, *cmps[1] = {&cmp};
	LrEtcd__PutRequest pr = LR_ETCD__PUT_REQUEST__INIT,
			   pl = LR_ETCD__PUT_REQUEST__INIT;
	LrEtcd__RangeRequest rr = LR_ETCD__RANGE_REQUEST__INIT,
			     rl = LR_ETCD__RANGE_REQUEST__INIT;
	LrEtcd__RequestOp op_pr = LR_ETCD__REQUEST_OP__INIT,
			  op_pl = LR_ETCD__REQUEST_OP__INIT,
			  op_rr = LR_ETCD__REQUEST_OP__INIT,
			  op_rl = LR_ETCD__REQUEST_OP__INIT;
	LrEtcd__RequestOp *succ[2] = {&op_pr, &op_pl}, *fail[2] = {&op_rr, &op_rl};

	modrev_is(&cmp, runk, mod);
	put_op(&op_pr, &pr, runk, runv, lease);
	put_op(&op_pl, &pl, last, lval, 0);
	rr.key = bytes(runk);
	rl.key = bytes(last);
	op_rr.request_case = LR_ETCD__REQUEST_OP__REQUEST_REQUEST_RANGE;
	op_rr.request_range = &rr;
	op_rl.request_case = LR_ETCD__REQUEST_OP__REQUEST_REQUEST_RANGE;
	op_rl.request_range = &rl;
	return txn_rpc(r, "run transaction", cmps, 1, succ, 2, fail, 2);
}

/* The only key of the i-th answer of a failed transaction, or NULL. */
static const LrEtcd__KeyValue *txn_kv(const LrEtcd__TxnResponse *t, size_t i)
{
	const LrEtcd__ResponseOp *op;

	if (i >= t->n_responses)
		return NULL;
	op = t->responses[i];
	if (op->response_case != LR_ETCD__RESPONSE_OP__RESPONSE_RESPONSE_RANGE ||
	    !op->response_range->n_kvs)
		return NULL;
	return op->response_range->kvs[0];
}

/* LeaseTimeToLive of lease: *left and *granted in seconds (*left -1 when
 * it has expired or is gone). */
static enum lr_status lease_ttl(struct lr_store *st, int64_t lease,
				int64_t deadline, int64_t *left,
				int64_t *granted, struct lr_err *err)
{
	LrEtcd__LeaseTimeToLiveRequest q =
	    LR_ETCD__LEASE_TIME_TO_LIVE_REQUEST__INIT;
	const LrEtcd__LeaseTimeToLiveResponse *a;
	struct rpc r;
	enum lr_status s;

	q.id = lease;
	if (rpc_init(&r, "lease timetolive", M_TTL, &q.base,
		     &lr_etcd__lease_time_to_live_response__descriptor) < 0) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	s = call1(st, &r, deadline, err);
	if (s == LR_OK) {
		a = (const LrEtcd__LeaseTimeToLiveResponse *)r.reply;
		*left = a->ttl;
		*granted = a->grantedttl;
	}
	rpc_clear(&r);
	return s;
}

/* How long ago the start bound to lease was, by the leader's countdown,
 * in whole seconds counted down (never more than it is); and how long it
 * still holds.  -1 for both when the lease is gone: its period is over. */
static enum lr_status run_age(struct lr_store *st, int64_t lease,
			      int64_t deadline, int64_t *ago, int64_t *left,
			      struct lr_err *err)
{
	int64_t granted = 0;
	enum lr_status s = lease_ttl(st, lease, deadline, left, &granted, err);

	if (s != LR_OK)
		return s;
	if (*left < 0) {
		*ago = -1;
		return LR_OK;
	}
	/* The remaining seconds are cut, so granted - left may be up to a
	 * second more than the time gone: one less. */
	*ago = granted - *left - 1 > 0 ? granted - *left - 1 : 0;
	return LR_OK;
}

/* The period's lease, granted: its ID ours (random), so nothing else
 * can share it.  *lease is 0 unless it was granted. */
static enum lr_status run_lease(struct lr_store *st, int64_t period_ms,
				int64_t deadline, int64_t *lease,
				struct lr_err *err)
{
	LrEtcd__LeaseGrantRequest gq = LR_ETCD__LEASE_GRANT_REQUEST__INIT;
	enum lr_status s;
	struct rpc g;
	uint64_t id = 0;

	*lease = 0;
	memset(&g, 0, sizeof(g));
	if (getrandom(&id, sizeof(id), 0) != sizeof(id)) {
		lr_err_set(err, "getrandom: %s", strerror(errno));
		return LR_ERROR;
	}
	gq.id = (int64_t)(id & INT64_MAX) ? (int64_t)(id & INT64_MAX) : 1;
	gq.ttl = (period_ms + 999) / 1000;
	if (rpc_init(&g, "lease grant", M_GRANT, &gq.base,
		     &lr_etcd__lease_grant_response__descriptor) < 0) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	s = call1(st, &g, deadline, err);
	if (s == LR_OK)
		*lease = gq.id;
	rpc_clear(&g);
	return s;
}

/* Our start, as PREFIX.last/NAME keeps it, into buf. */
static void run_format_start(const struct lr_store *st, int64_t period_ms,
			     uint64_t fence, char *buf, size_t len)
{
	struct lr_run run;

	lr_run_init(&run);
	run.fence = fence;
	run.period_ms = period_ms;
	run.start_ms = lr_wall_ms(); /* for --status only: see the top */
	run.pid = st->req->pid;
	snprintf(run.host, sizeof(run.host), "%s",
		 st->req->host ? st->req->host : "");
	lr_run_format(&run, buf, len);
}

/* Our start is recorded, at revision rev: run_end() completes last (its
 * PREFIX.last/NAME value, now st's; NULL unknown). */
static void run_recorded(struct lr_store *st, int64_t rev, char *last)
{
	st->run_rev = rev;
	free(st->run_last);
	st->run_last = last;
}

/* *last becomes the start that holds us back: the record lkv (NULL: none
 * read), begun ago seconds ago, which holds for period_ms. */
static void run_held_back(struct lr_run *last, const LrEtcd__KeyValue *lkv,
			  int64_t ago, int64_t period_ms)
{
	if (lkv)
		run_parse(lkv->value, last);
	else
		lr_run_init(last);
	last->known = 1;
	last->ago_ms = ago * 1000;
	last->next_ms = period_ms - ago * 1000;
}

enum lr_status etcd_run_start(struct lr_store *st, int64_t period_ms,
			      uint64_t fence, int64_t deadline,
			      struct lr_run *last, struct lr_err *err)
{
	char *runk = run_key(st, ".run"), *lkey = run_key(st, ".last");
	char runv[32], lval[400];
	struct rpc r;
	enum lr_status s = LR_ERROR;
	int64_t lease = 0, mod = 0;
	int tries;

	memset(&r, 0, sizeof(r));
	if (!runk || !lkey)
		goto oom;
	snprintf(runv, sizeof(runv), "%" PRIu64, fence);
	run_format_start(st, period_ms, fence, lval, sizeof(lval));
	s = run_lease(st, period_ms, deadline, &lease, err);
	if (s != LR_OK)
		goto out;
	for (tries = 0; tries < 3; tries++) {
		const LrEtcd__TxnResponse *t;
		const LrEtcd__KeyValue *runkv, *lkv;
		int64_t ago, left;

		rpc_clear(&r);
		if (run_txn_rpc(&r, runk, lkey, mod, lease, runv, lval) < 0)
			goto oom;
		s = call1(st, &r, deadline, err);
		if (s != LR_OK)
			goto out;
		t = (const LrEtcd__TxnResponse *)r.reply;
		if (t->succeeded) {
			run_recorded(st, t->header ? t->header->revision : 0,
				     strdup(lval));
			lease = 0; /* it holds the period now */
			goto out;
		}
		runkv = txn_kv(t, 0);
		lkv = txn_kv(t, 1);
		if (!runkv) { /* gone meanwhile */
			mod = 0;
			continue;
		}
		if (bytes_eq(runkv->value, runv)) {
			/* Ours already (a repeat): s is LR_OK. */
			run_recorded(st, runkv->mod_revision,
				     lkv ? bytes_dup(lkv->value) : NULL);
			goto out;
		}
		s = run_age(st, runkv->lease, deadline, &ago, &left, err);
		if (s != LR_OK)
			goto out;
		if (ago < 0 || ago * 1000 >= period_ms) {
			/* Its period is over, or ours, shorter, is. */
			mod = runkv->mod_revision;
			continue;
		}
		run_held_back(last, lkv, ago, period_ms);
		s = LR_BUSY;
		goto out;
	}
	lr_err_set(err, "etcd: the record %s keeps changing", runk);
	s = LR_ERROR;
	goto out;
oom:
	lr_err_set(err, "out of memory");
	s = LR_ERROR;
out:
	if (lease)
		lease_revoke(st, lease, deadline);
	rpc_clear(&r);
	free(runk);
	free(lkey);
	return s;
}

/* Puts the end into PREFIX.last/NAME if it is still what run_start put. */
enum lr_status etcd_run_end(struct lr_store *st, uint64_t fence, int status,
			    int64_t deadline, struct lr_err *err)
{
	LrEtcd__Compare cmp = LR_ETCD__COMPARE__INIT, *cmps[1] = {&cmp};
	LrEtcd__PutRequest put = LR_ETCD__PUT_REQUEST__INIT;
	LrEtcd__RequestOp op = LR_ETCD__REQUEST_OP__INIT, *succ[1] = {&op};
	char *key, val[400];
	struct lr_run run;
	struct rpc r;
	enum lr_status s;

	(void)fence; /* run_last is the record of ours, by revision */
	if (!st->run_last)
		return LR_OK;
	run_parse(bytes(st->run_last), &run);
	run.end_ms = lr_wall_ms();
	run.status = status;
	lr_run_format(&run, val, sizeof(val));
	if (!(key = run_key(st, ".last"))) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	modrev_is(&cmp, key, st->run_rev);
	put_op(&op, &put, key, val, 0);
	if (txn_rpc(&r, "run end", cmps, 1, succ, 1, NULL, 0) < 0) {
		free(key);
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	s = call1(st, &r, deadline, err);
	rpc_clear(&r);
	free(key);
	return s;
}

enum lr_status etcd_run_last(struct lr_store *st, int64_t deadline,
			     struct lr_run *last, struct lr_err *err)
{
	char *runk = run_key(st, ".run"), *lkey = run_key(st, ".last");
	struct rpc r[2];
	enum lr_status s = LR_ERROR;
	const LrEtcd__RangeResponse *g, *l;

	lr_run_init(last);
	memset(r, 0, sizeof(r));
	if (!runk || !lkey || range_rpc(&r[0], "range", runk, NULL, 0) < 0 ||
	    range_rpc(&r[1], "range", lkey, NULL, 0) < 0) {
		lr_err_set(err, "out of memory");
		goto out;
	}
	s = round_trip(st, r, 2, NULL, deadline, err);
	if (s == LR_OK && (r[0].code || r[1].code)) {
		lr_err_set(err, "etcd range failed at %s: %s",
			   st->eps[st->cur].label,
			   r[0].code ? r[0].msg : r[1].msg);
		s = LR_ERROR;
	}
	if (s != LR_OK)
		goto out;
	g = (const LrEtcd__RangeResponse *)r[0].reply;
	l = (const LrEtcd__RangeResponse *)r[1].reply;
	if (l->n_kvs)
		run_parse(l->kvs[0]->value, last);
	if (!last->known)
		goto out;
	/* The period holds while the key lives: its lease says for how
	 * long yet.  Once it is gone, when the run started is not known
	 * by etcd's clock, and the next may start now. */
	last->next_ms = 0;
	if (g->n_kvs && g->kvs[0]->lease) {
		int64_t ago, left;

		s = run_age(st, g->kvs[0]->lease, deadline, &ago, &left, err);
		if (s == LR_OK && ago >= 0) {
			last->ago_ms = ago * 1000;
			last->next_ms = last->period_ms - ago * 1000 > 0
					    ? last->period_ms - ago * 1000
					    : 0;
		}
	}
out:
	rpc_clear(&r[0]);
	rpc_clear(&r[1]);
	free(runk);
	free(lkey);
	return s;
}
