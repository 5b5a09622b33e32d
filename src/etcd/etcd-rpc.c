/*
 * etcd-rpc.c - the etcd store's connection (module etcd.so): unary calls
 * in round trips, the endpoints in turn, authentication, and the Watch
 * and LeaseKeepAlive streams that live on the same connection.  The
 * parts that use it are named in etcd.h.
 *
 * Transport: etcd's own gRPC API over one HTTP/2 connection (grpc.c), the
 * messages by protobuf-c (etcd.proto).  Calls go to the current endpoint;
 * one that cannot be reached, does not answer within the timeout while
 * other endpoints remain, or answers "unavailable" (no leader, ...) moves
 * us to the next one, twice round the list at most.  With a user we
 * authenticate (Authenticate) and send the token as metadata; a token
 * that expired is fetched again once per call.
 */
#include "config.h"

#include <inttypes.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd/etcd.h"

/* ---- messages ------------------------------------------------------------ */

ProtobufCBinaryData bytes(const char *s)
{
	ProtobufCBinaryData b = {strlen(s), (uint8_t *)s};

	return b;
}

/* (An empty bytes field comes with data NULL.) */
int bytes_eq(ProtobufCBinaryData b, const char *s)
{
	return s && b.len == strlen(s) && (!b.len || !memcmp(b.data, s, b.len));
}

char *bytes_dup(ProtobufCBinaryData b)
{
	char *s = malloc(b.len + 1);

	if (s) {
		if (b.len)
			memcpy(s, b.data, b.len);
		s[b.len] = '\0';
	}
	return s;
}

/* The end of a prefix range: the prefix with its last byte bumped. */
char *prefix_end(const char *p)
{
	char *e = strdup(p);
	size_t n;

	if (!e)
		return NULL;
	n = strlen(e);
	while (n > 0 && (unsigned char)e[n - 1] == 0xff)
		e[--n] = '\0';
	if (n > 0)
		e[n - 1] = (char)((unsigned char)e[n - 1] + 1);
	return e;
}

/* etcd's messages start with "etcdserver: "; the user needs the rest. */
static const char *etcd_msg(const char *m)
{
	if (m && strncmp(m, "etcdserver: ", 12) == 0)
		return m + 12;
	return m && *m ? m : "unknown error";
}

static int is_unavailable(int code, const char *m)
{
	return code == GRPC_UNAVAILABLE || strstr(m, "no leader") ||
	       strstr(m, "leader changed") || strstr(m, "timed out") ||
	       strstr(m, "not capable") || strstr(m, "too many requests") ||
	       strstr(m, "stopped") || strstr(m, "connection is closing");
}

static int is_token_expired(int code, const char *m)
{
	return code == GRPC_UNAUTHENTICATED ||
	       strstr(m, "invalid auth token") ||
	       strstr(m, "auth token expired") ||
	       strstr(m, "user name is empty");
}
/* ---- one unary call, and a round trip of them ---------------------------- */

int rpc_init(struct rpc *r, const char *what, const char *path,
	     const ProtobufCMessage *req,
	     const ProtobufCMessageDescriptor *rdesc)
{
	memset(r, 0, sizeof(*r));
	r->what = what;
	r->path = path;
	r->rdesc = rdesc;
	r->len = protobuf_c_message_get_packed_size(req);
	r->req = malloc(r->len ? r->len : 1);
	if (!r->req)
		return -1;
	protobuf_c_message_pack(req, r->req);
	return 0;
}

static void rpc_reset(struct rpc *r)
{
	lr_grpc_call_free(r->call);
	r->call = NULL;
	if (r->reply)
		protobuf_c_message_free_unpacked(r->reply, NULL);
	r->reply = NULL;
	r->code = 0;
	r->msg[0] = '\0';
}

void rpc_clear(struct rpc *r)
{
	rpc_reset(r);
	if (r->req)
		lr_wipe(r->req, r->len);
	free(r->req);
	r->req = NULL;
}

/* ---- the connection ------------------------------------------------------ */

void watch_forget(struct watch *w)
{
	free(w->key);
	free(w->end);
	memset(w, 0, sizeof(*w));
}

/* Streams carry the token they were opened with: after a new token they
 * are opened again (the watches with them). */
static void streams_drop(struct lr_store *st)
{
	lr_grpc_call_free(st->wstream);
	lr_grpc_call_free(st->kstream);
	st->wstream = st->kstream = NULL;
	watch_forget(&st->our_watch);
	watch_forget(&st->prev_watch);
	st->ka_sent = st->ka_got = 0;
	st->next_wid = 0;
}

/* Drops the connection and everything on it. */
void conn_drop(struct lr_store *st)
{
	lr_waitset_follow(&st->ws, &st->regfd, -1, 0);
	streams_drop(st);
	lr_grpc_close(st->conn);
	st->conn = NULL;
}

/* A live connection to the current endpoint.  LR_ERROR (err filled) only
 * for what no other endpoint can mend; a refused connection shows later,
 * as a broken call. */
static enum lr_status conn_up(struct lr_store *st, int64_t deadline,
			      struct lr_err *err)
{
	struct endpoint *ep = &st->eps[st->cur];
	struct lr_grpc_tls tls = {st->cacert, st->cert, st->key};

	if (st->conn && !lr_grpc_error(st->conn))
		return LR_OK;
	conn_drop(st);
	if (!ep->resolved) {
		if (lr_net_resolve(ep->host, ep->port, deadline, &ep->addrs,
				    err) < 0)
			return LR_TIMEOUT; /* (or a bad name: next one) */
		ep->resolved = 1;
	}
	st->conn = lr_grpc_open(&ep->addrs, ep->host, ep->label,
				st->tls ? &tls : NULL, err);
	if (!st->conn)
		return LR_ERROR;
	if (st->token && lr_grpc_set_meta(st->conn, "token", st->token) < 0) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	return LR_OK;
}

struct trip {
	struct lr_store *st;
	struct rpc *r;
	size_t n;
	struct extras *x;
};

static int trip_done(void *ctx)
{
	struct trip *t = ctx;
	size_t i;

	drain(t->st);
	for (i = 0; i < t->n; i++)
		if (lr_grpc_state(t->r[i].call, NULL, NULL) == LR_GRPC_OPEN)
			return 0;
	if (t->x && t->x->keepalive && t->st->kstream &&
	    lr_grpc_state(t->st->kstream, NULL, NULL) == LR_GRPC_OPEN &&
	    t->st->ka_got < t->x->ka_ticket)
		return 0;
	return 1;
}

enum failkind { F_NONE, F_TRANSPORT, F_TIMEOUT };

/* Sends the n calls in r, and the keepalive and the watch on our key that
 * x asks for.  NULL, or what could not be sent (in why, or static). */
static const char *trip_send(struct lr_store *st, struct rpc *r, size_t n,
			     struct extras *x, char *why, size_t whylen,
			     struct lr_err *err)
{
	const char *bad = NULL;
	size_t i;

	for (i = 0; i < n && !bad; i++) {
		r[i].call = lr_grpc_call(st->conn, r[i].path, r[i].req,
					 r[i].len, 1, err);
		if (!r[i].call) {
			snprintf(why, whylen, "%s", err->msg);
			bad = why;
		}
	}
	if (!bad && x && x->keepalive) {
		if (keepalive_send(st) < 0)
			bad = "cannot send a keepalive";
		x->ka_ticket = st->ka_sent;
	}
	if (!bad && x && x->own_watch && !st->our_watch.id)
		watch_create(st, &st->our_watch, st->mykey, x->own_start);
	return bad;
}

/* After the wait: what broke, the connection, a call, the keepalive, or
 * NULL.  A call that ended with "unavailable" or an expired token counts
 * as broken: *code and *what then say which (else *code is 0).  *heals:
 * what broke may mend by itself (see lr_grpc_heals()); "unavailable"
 * does (no leader, a member stopping). */
static const char *trip_fault(struct lr_store *st, struct rpc *r, size_t n,
			      const struct extras *x, int *code,
			      const char **what, int *heals)
{
	const char *bad = NULL;
	size_t i;

	for (i = 0; i < n && !bad; i++) {
		const char *m;
		enum lr_grpc_state gs =
		    lr_grpc_state(r[i].call, &r[i].code, &m);

		if (gs == LR_GRPC_BROKEN) {
			bad = m;
			*heals = lr_grpc_call_heals(r[i].call);
		} else if (gs == LR_GRPC_STATUS) {
			snprintf(r[i].msg, sizeof(r[i].msg), "%s", etcd_msg(m));
			if (is_unavailable(r[i].code, r[i].msg) ||
			    is_token_expired(r[i].code, r[i].msg)) {
				bad = r[i].msg;
				*code = r[i].code;
				*what = r[i].what;
				*heals = is_unavailable(r[i].code, r[i].msg);
			}
		}
	}
	if (!bad && x && x->keepalive && st->ka_got < x->ka_ticket) {
		const char *m = "the keepalive stream ended";

		*heals = 1;
		if (st->kstream &&
		    lr_grpc_state(st->kstream, code, &m) == LR_GRPC_STATUS) {
			m = etcd_msg(m);
			*heals = is_unavailable(*code, m);
		} else {
			*code = 0;
			if (st->kstream)
				*heals = lr_grpc_call_heals(st->kstream);
		}
		bad = m ? m : "the keepalive stream ended"; /* NULL: ended ok */
		*what = "lease keepalive";
	}
	return bad;
}

/* Whether a name that did not resolve may resolve later: a resolver that
 * did not answer in time or failed for now, not a name that does not
 * exist. */
static int resolve_heals(const char *msg)
{
	return strstr(msg, "no answer in time") ||
	       strstr(msg, gai_strerror(EAI_AGAIN));
}

/*
 * One attempt of the round trip t at the current endpoint, until end:
 * connect if need be, send, wait.  1: over, *bad NULL if every call was
 * answered (etcd's verdicts are still to judge), else what broke (in
 * why, or static), with *heals whether it may mend by itself.  0: no
 * answer by end.  -1: what no other endpoint can mend (err says what).
 */
static int trip_attempt(struct lr_store *st, struct trip *t, int64_t end,
			char *why, size_t whylen, const char **bad, int *heals,
			struct lr_err *err)
{
	enum lr_status s = conn_up(st, end, err);
	int rc;

	*bad = NULL;
	*heals = 0;
	if (s == LR_ERROR)
		return -1;
	if (s != LR_OK) {
		/* The name did not resolve. */
		snprintf(why, whylen, "%s", err->msg);
		*bad = why;
		*heals = resolve_heals(why);
		return 1;
	}
	*bad = trip_send(st, t->r, t->n, t->x, why, whylen, err);
	rc = *bad ? -1 : lr_grpc_wait(st->conn, end, trip_done, t);
	if (rc == 0)
		return 0;
	if (*bad || rc < 0)
		*heals = lr_grpc_heals(st->conn);
	if (rc < 0 && !*bad)
		*bad = lr_grpc_error(st->conn);
	return 1;
}

/* The replies of the calls that succeeded, unpacked into r[i].reply.
 * LR_OK, or LR_ERROR for one etcd did not send or we cannot read. */
static enum lr_status trip_unpack(struct rpc *r, size_t n,
				  const struct endpoint *ep,
				  struct lr_err *err)
{
	size_t i;

	for (i = 0; i < n; i++) {
		const uint8_t *m;
		size_t len;

		if (r[i].code != 0)
			continue;
		if (lr_grpc_next(r[i].call, &m, &len) != 1 ||
		    !(r[i].reply = protobuf_c_message_unpack(r[i].rdesc, NULL,
							      len, m))) {
			lr_err_set(err, "etcd %s: malformed reply from %s",
				   r[i].what, ep->label);
			return LR_ERROR;
		}
	}
	return LR_OK;
}

/*
 * One round trip: the n unary calls in r, and what x asks for, sent
 * together to the current endpoint and awaited; on a connection that
 * fails, an answer that does not come within the timeout while other
 * endpoints remain, or "unavailable", all of it again at the next
 * endpoint, while time remains.  LR_OK: each r[i] has its code, msg and
 * reply (etcd's own errors are for the caller to judge).  Else err says
 * what failed.
 */
enum lr_status round_trip(struct lr_store *st, struct rpc *r, size_t n,
			  struct extras *x, int64_t deadline,
			  struct lr_err *err)
{
	/* With several endpoints, go round them twice: a member that is
	 * waiting for a new leader may answer only after the election. */
	size_t tries = 0, max_tries = st->neps > 1 ? 2 * st->neps : 1, i;
	enum failkind last = F_NONE;
	int reauth = 0, heals = 0;

	while (tries < max_tries) {
		struct endpoint *ep = &st->eps[st->cur];
		int64_t now = lr_now_ms(), end = deadline;
		struct trip t = {st, r, n, x};
		enum lr_status s;
		const char *bad, *what = n ? r[0].what : "keepalive";
		char why[LR_ERRLEN];
		int rc, code = 0, h;

		for (i = 0; i < n; i++)
			rpc_reset(&r[i]);
		if (now >= deadline)
			break;
		if (tries + 1 < max_tries && end - now > st->attempt_ms)
			end = now + st->attempt_ms;
		rc = trip_attempt(st, &t, end, why, sizeof(why), &bad, &h, err);
		if (rc < 0)
			return LR_ERROR;
		if (rc == 0) {
			last = F_TIMEOUT;
			heals = 1;
			lr_err_set(err, "etcd %s: no answer from %s in time",
				   what, ep->label);
			if (tries + 1 < max_tries)
				conn_drop(st);
			goto next;
		}
		if (!bad)
			bad = trip_fault(st, r, n, x, &code, &what, &h);
		if (!bad)
			return trip_unpack(r, n, ep, err);
		if (is_token_expired(code, bad)) {
			if (!st->user) {
				lr_err_set(err,
					   "etcd at %s requires "
					   "authentication: give "
					   "etcd://USER:PASSWORD@... in "
					   "LEASERUN_URL or ETCDCTL_USER",
					   ep->label);
				return LR_ERROR;
			}
			if (reauth++ == 0) {
				s = authenticate(st, deadline, err);
				if (s != LR_OK)
					return s;
				continue;
			}
		}
		last = F_TRANSPORT;
		heals |= h;
		if (code)
			lr_err_set(err, "etcd %s at %s: %s", what, ep->label,
				   bad);
		else
			lr_err_set(err, "cannot reach etcd at %s: %s",
				   ep->label, bad);
		conn_drop(st);
	next:
		st->cur = (st->cur + 1) % st->neps;
		tries++;
	}
	for (i = 0; i < n; i++)
		rpc_reset(&r[i]);
	if (last == F_NONE)
		lr_err_set(err, "etcd: timed out at %s",
			   st->eps[st->cur].label);
	/* Any endpoint that may answer later (down, restarting, without a
	 * leader) makes it worth another try; names that do not exist and
	 * TLS that does not verify, everywhere, do not. */
	if (heals)
		lr_err_heals(err);
	return last == F_TRANSPORT ? LR_ERROR : LR_TIMEOUT;
}

/* One unary call on its own; etcd's error is LR_ERROR with its message
 * (also in r->msg, for the caller to tell "lease not found" apart). */
enum lr_status call1(struct lr_store *st, struct rpc *r,
		     int64_t deadline, struct lr_err *err)
{
	enum lr_status s = round_trip(st, r, 1, NULL, deadline, err);

	if (s == LR_OK && r->code) {
		lr_err_set(err, "etcd %s failed at %s: %s", r->what,
			   st->eps[st->cur].label, r->msg);
		return LR_ERROR;
	}
	return s;
}

enum lr_status authenticate(struct lr_store *st, int64_t deadline,
			    struct lr_err *err)
{
	LrEtcd__AuthenticateRequest q = LR_ETCD__AUTHENTICATE_REQUEST__INIT;
	LrEtcd__AuthenticateResponse *a;
	struct rpc r;
	enum lr_status s;
	char *user = st->user;

	lr_wipe_free(st->token);
	st->token = NULL;
	if (st->conn)
		lr_grpc_set_meta(st->conn, "token", NULL);
	q.name = st->user;
	q.password = st->password ? st->password : (char *)"";
	if (rpc_init(&r, "authentication", M_AUTH, &q.base,
		     &lr_etcd__authenticate_response__descriptor) < 0) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	st->user = NULL; /* no re-authentication from inside this call */
	s = round_trip(st, &r, 1, NULL, deadline, err);
	st->user = user;
	if (s == LR_OK && r.code) {
		lr_err_set(err, "etcd authentication as user '%s' failed: %s",
			   st->user, r.msg);
		s = LR_ERROR;
	} else if (s == LR_OK) {
		a = (LrEtcd__AuthenticateResponse *)r.reply;
		if (!a->token || !*a->token) {
			lr_err_set(err,
				   "etcd authentication as user '%s' returned "
				   "no token (is auth enabled?)",
				   st->user);
			s = LR_ERROR;
		} else if (!(st->token = strdup(a->token)) ||
			   lr_grpc_set_meta(st->conn, "token", st->token) < 0) {
			lr_err_set(err, "out of memory");
			s = LR_ERROR;
		} else {
			/* Streams opened with the old token go. */
			streams_drop(st);
		}
	}
	if (r.reply) {
		a = (LrEtcd__AuthenticateResponse *)r.reply;
		if (a->token)
			memset(a->token, 0, strlen(a->token));
	}
	rpc_clear(&r);
	return s;
}

/* ---- requests both the lock and the runs make --------------------------- */

static int lease_revoke_rpc(struct rpc *r, int64_t lease)
{
	LrEtcd__LeaseRevokeRequest q = LR_ETCD__LEASE_REVOKE_REQUEST__INIT;

	q.id = lease;
	return rpc_init(r, "lease revoke", M_REVOKE, &q.base,
			&lr_etcd__lease_revoke_response__descriptor);
}

void lease_revoke(struct lr_store *st, int64_t lease, int64_t deadline)
{
	struct rpc r;
	struct lr_err e;

	if (lease_revoke_rpc(&r, lease) == 0)
		call1(st, &r, deadline, &e);
	rpc_clear(&r);
}

/* op becomes a put of value at key, bound to lease (0: none); put holds
 * it. */
void put_op(LrEtcd__RequestOp *op, LrEtcd__PutRequest *put,
	    const char *key, const char *value, int64_t lease)
{
	put->key = bytes(key);
	put->value = bytes(value);
	put->lease = lease;
	op->request_case = LR_ETCD__REQUEST_OP__REQUEST_REQUEST_PUT;
	op->request_put = put;
}

/* r becomes the transaction named what: if every one of the ncmp cmps
 * holds, the nsucc ops of succ, else the nfail of fail.  -1 out of
 * memory. */
int txn_rpc(struct rpc *r, const char *what, LrEtcd__Compare **cmps,
	    size_t ncmp, LrEtcd__RequestOp **succ, size_t nsucc,
	    LrEtcd__RequestOp **fail, size_t nfail)
{
	LrEtcd__TxnRequest q = LR_ETCD__TXN_REQUEST__INIT;

	q.n_compare = ncmp;
	q.compare = cmps;
	q.n_success = nsucc;
	q.success = succ;
	q.n_failure = nfail;
	q.failure = fail;
	return rpc_init(r, what, M_TXN, &q.base,
			&lr_etcd__txn_response__descriptor);
}

int range_rpc(struct rpc *r, const char *what, const char *key,
	      const char *end, int lowest_only)
{
	LrEtcd__RangeRequest q = LR_ETCD__RANGE_REQUEST__INIT;

	q.key = bytes(key);
	if (end)
		q.range_end = bytes(end);
	if (lowest_only) {
		q.sort_order = LR_ETCD__RANGE_REQUEST__SORT_ORDER__ASCEND;
		q.sort_target = LR_ETCD__RANGE_REQUEST__SORT_TARGET__CREATE;
		q.limit = 1;
	}
	return rpc_init(r, what, M_RANGE, &q.base,
			&lr_etcd__range_response__descriptor);
}

/* ---- the streams --------------------------------------------------------- */

/* Queues a keepalive of our lease on the LeaseKeepAlive stream (opening
 * it if need be).  0, or -1 if it cannot be sent. */
int keepalive_send(struct lr_store *st)
{
	LrEtcd__LeaseKeepAliveRequest q =
	    LR_ETCD__LEASE_KEEP_ALIVE_REQUEST__INIT;
	uint8_t buf[16];
	size_t len;
	struct lr_err e;

	q.id = st->lease;
	len = lr_etcd__lease_keep_alive_request__pack(&q, buf);
	if (st->kstream &&
	    lr_grpc_state(st->kstream, NULL, NULL) != LR_GRPC_OPEN) {
		lr_grpc_call_free(st->kstream);
		st->kstream = NULL;
	}
	if (!st->kstream) {
		st->ka_sent = st->ka_got = 0;
		st->kstream =
		    lr_grpc_call(st->conn, M_KEEPALIVE, buf, len, 0, &e);
		if (!st->kstream)
			return -1;
	} else if (lr_grpc_send(st->kstream, buf, len) < 0) {
		return -1;
	}
	st->ka_sent++;
	return 0;
}

/* Sets up watch w on key, or on the keys in [key, end) if end is not
 * NULL (their deletions only), from revision start on. */
void watch_create_range(struct lr_store *st, struct watch *w,
			const char *key, const char *end, int64_t start)
{
	LrEtcd__WatchCreateRequest__FilterType noput =
	    LR_ETCD__WATCH_CREATE_REQUEST__FILTER_TYPE__NOPUT;
	LrEtcd__WatchCreateRequest c = LR_ETCD__WATCH_CREATE_REQUEST__INIT;
	LrEtcd__WatchRequest q = LR_ETCD__WATCH_REQUEST__INIT;
	uint8_t *buf;
	size_t len;
	struct lr_err e;

	watch_forget(w);
	if (!st->conn || !(w->key = strdup(key)) ||
	    (end && !(w->end = strdup(end))))
		goto fail;
	w->id = ++st->next_wid;
	w->start = start;
	c.key = bytes(key);
	if (end)
		c.range_end = bytes(end);
	c.start_revision = start;
	c.n_filters = 1;
	c.filters = &noput;
	c.watch_id = w->id;
	q.request_union_case =
	    LR_ETCD__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
	q.create_request = &c;
	len = lr_etcd__watch_request__get_packed_size(&q);
	buf = malloc(len);
	if (!buf)
		goto fail;
	lr_etcd__watch_request__pack(&q, buf);
	if (st->wstream &&
	    lr_grpc_state(st->wstream, NULL, NULL) != LR_GRPC_OPEN) {
		lr_grpc_call_free(st->wstream);
		st->wstream = NULL;
	}
	if (st->wstream ? lr_grpc_send(st->wstream, buf, len) < 0
			: !(st->wstream = lr_grpc_call(st->conn, M_WATCH, buf,
						       len, 0, &e))) {
		free(buf);
		goto fail;
	}
	free(buf);
	return;
fail:
	w->canceled = 1;
	snprintf(w->why, sizeof(w->why), "cannot set up the etcd watch");
}

/* Tells etcd to stop watch w, and forgets it. */
void watch_cancel(struct lr_store *st, struct watch *w)
{
	LrEtcd__WatchCancelRequest c = LR_ETCD__WATCH_CANCEL_REQUEST__INIT;
	LrEtcd__WatchRequest q = LR_ETCD__WATCH_REQUEST__INIT;
	uint8_t buf[32];

	if (w->id && st->wstream && !w->canceled) {
		c.watch_id = w->id;
		q.request_union_case =
		    LR_ETCD__WATCH_REQUEST__REQUEST_UNION_CANCEL_REQUEST;
		q.cancel_request = &c;
		lr_grpc_send(st->wstream, buf,
			     lr_etcd__watch_request__pack(&q, buf));
	}
	watch_forget(w);
}

static void watch_response(struct lr_store *st, const LrEtcd__WatchResponse *r)
{
	struct watch *w = NULL;
	size_t i;

	if (st->our_watch.id && r->watch_id == st->our_watch.id)
		w = &st->our_watch;
	else if (st->prev_watch.id && r->watch_id == st->prev_watch.id)
		w = &st->prev_watch;
	if (!w)
		return; /* one we cancelled */
	if (r->created) {
		w->created = 1;
		w->created_rev = r->header ? r->header->revision : 0;
	}
	for (i = 0; i < r->n_events; i++) {
		const LrEtcd__Event *ev = r->events[i];

		if (ev->type == LR_ETCD__EVENT__EVENT_TYPE__DELETE && ev->kv &&
		    (w->end || bytes_eq(ev->kv->key, w->key)) &&
		    ev->kv->mod_revision > w->deleted)
			w->deleted = ev->kv->mod_revision;
	}
	if (r->canceled && !w->canceled) {
		w->canceled = 1;
		if (r->compact_revision)
			snprintf(w->why, sizeof(w->why),
				 "etcd watch canceled: revision %" PRId64
				 " is compacted",
				 r->compact_revision);
		else
			snprintf(w->why, sizeof(w->why),
				 "etcd watch canceled by the server: %s",
				 etcd_msg(r->cancel_reason));
	}
}

/* Reads what the streams brought.  A stream that broke ends its watches
 * (or stops the keepalives counting up). */
void drain(struct lr_store *st)
{
	const uint8_t *m;
	size_t len;

	while (st->wstream && lr_grpc_next(st->wstream, &m, &len) == 1) {
		LrEtcd__WatchResponse *r =
		    lr_etcd__watch_response__unpack(NULL, len, m);

		if (!r)
			break;
		watch_response(st, r);
		lr_etcd__watch_response__free_unpacked(r, NULL);
	}
	if (st->wstream &&
	    lr_grpc_state(st->wstream, NULL, NULL) != LR_GRPC_OPEN) {
		const char *why = "";
		struct watch *ws[2] = {&st->our_watch, &st->prev_watch};
		size_t i;

		lr_grpc_state(st->wstream, NULL, &why);
		for (i = 0; i < 2; i++)
			if (ws[i]->id && !ws[i]->canceled) {
				ws[i]->canceled = 1;
				snprintf(ws[i]->why, sizeof(ws[i]->why),
					 "etcd watch stream ended: %s",
					 etcd_msg(why));
			}
	}
	while (st->kstream && lr_grpc_next(st->kstream, &m, &len) == 1) {
		LrEtcd__LeaseKeepAliveResponse *r =
		    lr_etcd__lease_keep_alive_response__unpack(NULL, len, m);

		if (!r)
			break;
		st->ka_got++;
		if (r->ttl <= 0 && r->id == st->lease)
			st->ka_lost = st->lease;
		lr_etcd__lease_keep_alive_response__free_unpacked(r, NULL);
	}
}
