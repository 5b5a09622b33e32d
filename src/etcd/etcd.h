/*
 * etcd.h - what the parts of the etcd store (module etcd.so) share: the
 * store's state, the calls of its RPC layer, and the store's calls that
 * etcd.c puts in its table.
 *
 *   etcd.c       the URL, open and close, the table of the store's calls
 *   etcd-rpc.c   the connection: unary calls in round trips, endpoints
 *                in turn, authentication, the Watch and LeaseKeepAlive
 *                streams
 *   etcd-lock.c  the lock recipe: acquire, the core's loop, check,
 *                renew, release, inspect, break
 *   etcd-runs.c  --once-per: run_start, run_end, run_last
 *
 * Only lr_store_ops leaves the module (MODULE_LDFLAGS), so the names
 * below need no prefix of their own.
 */
#ifndef LEASERUN_ETCD_H
#define LEASERUN_ETCD_H

#include <stddef.h>
#include <stdint.h>

#include "etcd/etcd.pb-c.h"

#include "store/store.h"
#include "net/grpc.h"
#include "store/waitset.h"

#define M_RANGE	    "/etcdserverpb.KV/Range"
#define M_TXN	    "/etcdserverpb.KV/Txn"
#define M_GRANT	    "/etcdserverpb.Lease/LeaseGrant"
#define M_REVOKE    "/etcdserverpb.Lease/LeaseRevoke"
#define M_KEEPALIVE "/etcdserverpb.Lease/LeaseKeepAlive"
#define M_TTL	    "/etcdserverpb.Lease/LeaseTimeToLive"
#define M_WATCH	    "/etcdserverpb.Watch/Watch"
#define M_AUTH	    "/etcdserverpb.Auth/Authenticate"

/* gRPC status codes we act on. */
#define GRPC_NOT_FOUND	     5
#define GRPC_UNAVAILABLE     14
#define GRPC_UNAUTHENTICATED 16

struct endpoint {
	char *host; /* to resolve and to verify: "127.0.0.1", "::1" */
	char *port;
	char *label; /* "127.0.0.1:2379", "[::1]:2379": :authority, messages */
	struct lr_net_addrs addrs;
	int resolved;
};

/* One watcher on the connection's Watch stream. */
struct watch {
	int64_t id; /* our watch_id; 0: none */
	char *key;
	char *end;	     /* a range [key, end) of keys; NULL: key alone */
	int64_t start;	     /* the revision asked for; 0: "now" */
	int created;	     /* etcd confirmed it ... */
	int64_t created_rev; /* ... at this store revision */
	int64_t deleted;     /* the latest DELETE of key seen; 0: none */
	int canceled;	     /* etcd ended it, or the stream broke */
	char why[160];
};

enum hold { H_IDLE, H_WAITING, H_HOLDING };

struct lr_store {
	const struct lr_store_req *req;
	/* from the URL */
	struct endpoint *eps;
	size_t neps, cur;
	int tls;
	char *cacert, *cert, *key;
	char *dir; /* PREFIX NAME "/" */
	char *user, *password, *token;
	int64_t attempt_ms;

	/* the connection and what lives on it */
	struct lr_grpc *conn;
	struct lr_grpc_call *wstream; /* Watch, or NULL */
	struct lr_grpc_call *kstream; /* LeaseKeepAlive, or NULL */
	int64_t next_wid;
	struct watch our_watch;   /* our key */
	struct watch prev_watch;  /* the key before ours, while waiting */
	unsigned ka_sent, ka_got; /* keepalives on kstream */
	int64_t ka_lost;	  /* a reply said this lease is gone */

	/* the core's loop: the connection's socket and a timer */
	struct lr_waitset ws;
	int regfd; /* the socket in ws (lr_waitset_follow()), or -1 */
	int64_t ka_at; /* waiting: next keepalive, or -1 */
	int64_t last_ka;

	/* the lock */
	enum hold hold;
	int64_t lease, lease_ttl_s;
	char *mykey;
	int64_t our_create_rev;
	int64_t rev; /* the latest revision at which our key was ours */
	unsigned slot;	  /* a semaphore's: the slot we hold ... */
	int slot_claimed; /* ... since we claimed it */

	/* --once-per */
	int64_t run_rev;    /* the revision that recorded it */
	char *run_last;	    /* its PREFIX.last/NAME value */
};

/* ---- etcd-rpc.c: messages ------------------------------------------------ */

/* s as a bytes field (not copied). */
ProtobufCBinaryData bytes(const char *s);
/* Whether b holds exactly s (s may be NULL: never). */
int bytes_eq(ProtobufCBinaryData b, const char *s);
/* b as a string of its own; NULL out of memory. */
char *bytes_dup(ProtobufCBinaryData b);
/* The end of a prefix range: the prefix with its last byte bumped. */
char *prefix_end(const char *p);

/* ---- etcd-rpc.c: one unary call, and a round trip of them ---------------- */

struct rpc {
	const char *what; /* "lease grant", for messages */
	const char *path;
	const ProtobufCMessageDescriptor *rdesc; /* the reply's type */
	uint8_t *req; /* the packed request; wiped when cleared */
	size_t len;
	struct lr_grpc_call *call;
	/* outcome, when the round trip was LR_OK: */
	int code;		 /* gRPC status: 0 ok */
	char msg[160];		 /* etcd's message, if not ok */
	ProtobufCMessage *reply; /* if ok; freed when cleared */
};

/* What else a round trip carries besides its unary calls. */
struct extras {
	int keepalive;	   /* a keepalive on the stream, awaited */
	int own_watch;	   /* set up the watch on our key if it is not */
	int64_t own_start; /* ... from this revision (0: "now") */
	unsigned ka_ticket;
};

/* r becomes the call named what of method path with request req, whose
 * reply is of type rdesc.  -1 out of memory. */
int rpc_init(struct rpc *r, const char *what, const char *path,
	     const ProtobufCMessage *req,
	     const ProtobufCMessageDescriptor *rdesc);
/* Frees what r holds (the request wiped); r may be cleared again. */
void rpc_clear(struct rpc *r);

/* Drops the connection and everything on it. */
void conn_drop(struct lr_store *st);
/* The n calls in r, and what x asks for (NULL: nothing), in one round
 * trip, at the next endpoint while one fails.  LR_OK: each r[i] has its
 * code, msg and reply. */
enum lr_status round_trip(struct lr_store *st, struct rpc *r, size_t n,
			  struct extras *x, int64_t deadline,
			  struct lr_err *err);
/* One unary call on its own; etcd's error is LR_ERROR. */
enum lr_status call1(struct lr_store *st, struct rpc *r, int64_t deadline,
		     struct lr_err *err);
/* A new token for st->user; the streams opened with the old one go. */
enum lr_status authenticate(struct lr_store *st, int64_t deadline,
			    struct lr_err *err);

/* ---- etcd-rpc.c: requests both the lock and the runs make ---------------- */

/* Revokes lease, on a best effort: its keys go with it. */
void lease_revoke(struct lr_store *st, int64_t lease, int64_t deadline);
/* op becomes a put of value at key, bound to lease (0: none). */
void put_op(LrEtcd__RequestOp *op, LrEtcd__PutRequest *put, const char *key,
	    const char *value, int64_t lease);
/* r becomes a transaction: if every one of cmps holds, succ, else fail. */
int txn_rpc(struct rpc *r, const char *what, LrEtcd__Compare **cmps,
	    size_t ncmp, LrEtcd__RequestOp **succ, size_t nsucc,
	    LrEtcd__RequestOp **fail, size_t nfail);
/* r becomes a read of key, or of [key, end). */
int range_rpc(struct rpc *r, const char *what, const char *key,
	      const char *end, int lowest_only);

/* ---- etcd-rpc.c: the streams --------------------------------------------- */

/* Queues a keepalive of st->lease.  0, or -1 if it cannot be sent. */
int keepalive_send(struct lr_store *st);
/* Sets up watch w on key, or on the keys in [key, end), from revision
 * start on (0: "now"). */
void watch_create_range(struct lr_store *st, struct watch *w, const char *key,
			const char *end, int64_t start);
#define watch_create(st, w, key, start) \
	watch_create_range(st, w, key, NULL, start)
/* Tells etcd to stop watch w, and forgets it. */
void watch_cancel(struct lr_store *st, struct watch *w);
/* Forgets w without telling etcd. */
void watch_forget(struct watch *w);
/* Reads what the streams brought into st->our_watch, st->prev_watch,
 * st->ka_*. */
void drain(struct lr_store *st);

/* ---- etcd-lock.c: the store's calls for the lock (see store.h) ---------- */

enum lr_status etcd_acquire(struct lr_store *st, int64_t deadline,
			    struct lr_grant *g, struct lr_err *err);
int etcd_wait_fd(struct lr_store *st, short *events);
enum lr_status etcd_process(struct lr_store *st, short revents,
			    int64_t deadline, struct lr_err *err);
enum lr_status etcd_check(struct lr_store *st, int64_t deadline,
			  struct lr_err *err);
enum lr_status etcd_renew(struct lr_store *st, int64_t deadline,
			  struct lr_err *err);
enum lr_status etcd_release(struct lr_store *st, int64_t deadline,
			    struct lr_err *err);
enum lr_status etcd_inspect(struct lr_store *st, int64_t deadline,
			    struct lr_info *info, struct lr_err *err);
enum lr_status etcd_break(struct lr_store *st, int slot, int64_t deadline,
			  struct lr_err *err);

/* ---- etcd-list.c: --list (see store.h) ----------------------------------- */

enum lr_status etcd_list(struct lr_store *st, const char *pattern,
			 lr_list_fn fn, void *arg, int64_t deadline,
			 struct lr_err *err);

/* ---- etcd-runs.c: the store's calls for --once-per (see store.h) -------- */

enum lr_status etcd_run_start(struct lr_store *st, int64_t period_ms,
			      uint64_t fence, int64_t deadline,
			      struct lr_run *last, struct lr_err *err);
enum lr_status etcd_run_end(struct lr_store *st, uint64_t fence, int status,
			    int64_t deadline, struct lr_err *err);
enum lr_status etcd_run_last(struct lr_store *st, int64_t deadline,
			     struct lr_run *last, struct lr_err *err);

#endif
