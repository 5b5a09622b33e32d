/*
 * zk-session.h - one ZooKeeper client session, driven without threads
 * (module zk.so).
 *
 * The single-threaded ZooKeeper C client does nothing by itself: someone
 * must ask it what it waits for (zookeeper_interest), wait, and let it
 * work (zookeeper_process).  This adapter does that in two ways, so that
 * a recipe (the lock in zk.c) can think in requests and replies:
 *
 *  - inside a store call: lr_zk_pump() turns the client until the
 *    requests it was given are answered or the call's absolute
 *    CLOCK_BOOTTIME deadline (ms) passes;
 *  - between store calls: lr_zk_wait_fd() hands the core's loop one fd
 *    (a wait-set with the client's socket and a timer for its pings and
 *    retries) and lr_zk_process() runs the client when it is ready.
 *
 * A request is a struct lr_zk_op: the recipe sends it with one of the
 * lr_zk_send_*() calls and pumps it; the reply fills it.  Session events
 * land in the flags of struct lr_zk_session; events on nodes go to the
 * recipe's on_node callback.  Nothing here prints: errors go into a
 * struct lr_err, in words for a user, never with the password.
 *
 * The adapter also keeps the session healthy where the client would not:
 * a handshake that gets no answer is cut (ZooKeeper 3.8 starting up takes
 * connections and never answers them), connections refused by every
 * address end lr_zk_start() at once, a peer that puts us in read-only
 * mode is dropped, and the client's socket is kept out of the command.
 */
#ifndef LEASERUN_ZK_SESSION_H
#define LEASERUN_ZK_SESSION_H

#include <stdint.h>

#include <zookeeper/zookeeper.h>

#include "store/store.h"
#include "store/waitset.h"

/* One asynchronous request.  The reply fills it and sets done.  The
 * caller frees it with lr_zk_op_free() whether it was answered, given up
 * on (the reply frees it later: the client answers every request exactly
 * once, with ZCLOSING at the latest), or never sent. */
struct lr_zk_op {
	int done;	  /* answered, or its send failed (rc says why) */
	int in_flight;	  /* sent and not answered yet */
	int abandoned;	  /* given up on: the reply frees it */
	int rc;		  /* ZOK or the client's error */
	struct Stat stat; /* create, exists, get */
	char *value;	  /* create: the path made; get: the data */
	char **names;	  /* get children */
	int nnames;
	int world_delete; /* get ACL: the world may delete children */
};

/* A new op (zeroed), or NULL when out of memory. */
struct lr_zk_op *lr_zk_op_new(void);
/* Frees op now, or leaves it to its reply if still in flight.  Accepts
 * NULL. */
void lr_zk_op_free(struct lr_zk_op *op);
/* lr_zk_op_free() on each of ops[0..n-1]. */
void lr_zk_ops_free(struct lr_zk_op **ops, int n);

struct lr_zk_session {
	/* Read by recipes. */
	char where[200]; /* the hosts, for messages (never a password) */
	int expired;	 /* the session expired (a recipe that learns it
			  * from a reply may set it too) */
	int authfail;	 /* the credentials were refused */
	unsigned connects; /* connections made so far, across sessions
			    * (the first is 1) */
	char *auth;	 /* "user:password", NULL without credentials;
			  * wiped by lr_zk_close() */

	/* The adapter's own. */
	zhandle_t *zh;	 /* NULL between lr_zk_end() and lr_zk_start() */
	char *hosts;	 /* "h:p,h:p" for zookeeper_init */
	int nhosts;
	int64_t timeout; /* the session timeout we ask for, ms */
	void (*on_node)(void *ctx, int type, const char *path);
	void *ctx;
	int conn_errno; /* why the last connect failed, or 0 */
	int refused;	/* connects refused in a row (start fails fast) */
	int ever_connected;
	int stalled; /* a call timed out: do not wait for the server */
	int bogus;   /* the peer answered like no ZooKeeper we asked for */
	int disc_reported;
	int sock;	  /* the client's socket as last seen, or -1 */
	uint64_t hs_ino;  /* the socket whose handshake we time, or 0 */
	int64_t hs_start; /* when we first saw it */
	int64_t hs_limit; /* how long it may take; 0: not set yet */
	int hs_cut;	  /* we cut it: the next connect error is ours */
	struct lr_waitset ws; /* lr_zk_wait_fd(): the socket and a timer */
	int regfd;	      /* the socket in ws, or -1 */
	/* The replies' framing, followed ahead of the client (see
	 * frames_ok() in zk-session.c). */
	uint64_t fr_ino;	  /* the socket it is of, or 0 */
	uint64_t fr_next;	  /* where the next length prefix starts */
	unsigned char fr_hd[4];	  /* the bytes of it seen so far ... */
	int fr_have;		  /* ... how many */
	char bogus_why[120];	  /* why bogus was set */
};

/* A session object for hosts h[0..n-1] with user and password as a
 * "digest" identity (either NULL: none), asking for a session timeout of
 * timeout_ms (the TTL).  Watch events on a node go to on_node(ctx, type,
 * path) (type: ZOO_DELETED_EVENT, ...), from inside lr_zk_pump() or
 * lr_zk_process().  Nothing is sent yet.  Returns LR_OK, or LR_ERROR out
 * of memory; *out is then NULL.  Free with lr_zk_close(). */
enum lr_status lr_zk_new(const struct lr_url_host *h, size_t n,
			 const char *user, const char *password,
			 int64_t timeout_ms,
			 void (*on_node)(void *ctx, int type, const char *path),
			 void *ctx, struct lr_zk_session **out,
			 struct lr_err *err);
/* Starts a session and waits until it is connected or deadline (the
 * first start also makes the wait-set).  LR_OK; LR_TIMEOUT; LR_LOST if it
 * expired meanwhile; LR_ERROR when every address refused the connection
 * (twice), the credentials are refused, the peer is not ZooKeeper, the
 * host list is bad, or the wait-set cannot be made. */
enum lr_status lr_zk_start(struct lr_zk_session *zs, int64_t deadline,
			   struct lr_err *err);
/* Ends the session (the server deletes its ephemeral nodes).  With
 * ours_left (a node of ours may still exist), waits for the server's
 * answer so that the node is gone when this returns, unless the server
 * had stopped answering; without, sends the end and goes.  lr_zk_start()
 * may follow. */
void lr_zk_end(struct lr_zk_session *zs, int ours_left);
/* lr_zk_end(), then frees zs and wipes the password.  Accepts NULL. */
void lr_zk_close(struct lr_zk_session *zs, int ours_left);

/* 1 if the session is connected now. */
int lr_zk_connected(const struct lr_zk_session *zs);
/* 1 if the session can never be used again (expired, credentials
 * refused, or none started); updates expired and authfail. */
int lr_zk_dead(struct lr_zk_session *zs);
/* The session's id, or 0 before the server gave one. */
int64_t lr_zk_session_id(const struct lr_zk_session *zs);
/* The session timeout the server granted, ms (until it answered, the
 * one we asked for).  Only while a session is started. */
int64_t lr_zk_timeout(const struct lr_zk_session *zs);
/* 1 once for each loss of the connection not yet reported, else 0. */
int lr_zk_disconnect_news(struct lr_zk_session *zs);

/* Sending.  Each sends one request to be answered into op and returns
 * ZOK; any other code means nothing was sent and op is done with that rc
 * (lr_zk_op_free() frees it).  Paths are absolute, within the server's
 * tree. */
int lr_zk_send_create(struct lr_zk_session *zs, struct lr_zk_op *op,
		      const char *path, const char *data,
		      const struct ACL_vector *acl, int mode);
int lr_zk_send_children(struct lr_zk_session *zs, struct lr_zk_op *op,
			const char *path);
int lr_zk_send_get_acl(struct lr_zk_session *zs, struct lr_zk_op *op,
		       const char *path);
int lr_zk_send_get(struct lr_zk_session *zs, struct lr_zk_op *op,
		   const char *path);
int lr_zk_send_delete(struct lr_zk_session *zs, struct lr_zk_op *op,
		      const char *path);
/* A set of path's data if its version is version (-1: any); the stat of
 * the answer (mtime: the server's clock when it was applied) fills op. */
int lr_zk_send_set(struct lr_zk_session *zs, struct lr_zk_op *op,
		   const char *path, const char *data, int version);
/* An exists that leaves our watch on path (on_node hears of it). */
int lr_zk_send_exists(struct lr_zk_session *zs, struct lr_zk_op *op,
		      const char *path);
/* The same, for a reply nobody waits for: done(rc, stat, data) gets it,
 * and data is the caller's to free there. */
int lr_zk_send_exists_cb(struct lr_zk_session *zs, const char *path,
			 stat_completion_t done, const void *data);

/* Turns the client until every op of ops[0..n-1] is done, then LR_OK:
 * each op's rc says how it went.  NULL entries are allowed; an op never
 * given to a send must not be.  At the deadline, LR_TIMEOUT with err
 * saying why ("what" names the request); the ops stay in flight. */
enum lr_status lr_zk_pump(struct lr_zk_session *zs, int64_t deadline,
			  struct lr_zk_op **ops, int n, const char *what,
			  struct lr_err *err);

/* Synchronous calls that try again while the connection is being
 * re-established.  On LR_OK, *opp is the finished op (the caller frees
 * it; its rc is ZOK or ZNONODE, or for lr_zk_exists() any error);
 * otherwise *opp is NULL and err says why: LR_LOST the session expired,
 * LR_TIMEOUT the deadline passed, LR_ERROR anything else. */
enum lr_status lr_zk_list(struct lr_zk_session *zs, const char *path,
			  int64_t deadline, struct lr_zk_op **opp,
			  struct lr_err *err);
enum lr_status lr_zk_exists(struct lr_zk_session *zs, const char *path,
			    int64_t deadline, struct lr_zk_op **opp,
			    const char *what, struct lr_err *err);

/* The ACL of a node we make: with credentials, "creator: all, world:
 * read", and for an upper directory world: create too (so others can
 * make their own directories below it); without, open to all.  buf is
 * the storage for it (two entries); the result is valid while buf is,
 * until the next call. */
const struct ACL_vector *lr_zk_acl(const struct lr_zk_session *zs, int upper,
				   struct ACL *buf);
/* Creates every missing directory of path (path itself included) in
 * one flight.  Errors are left to the request that follows, which names
 * the real problem: LR_OK unless the deadline passed (LR_TIMEOUT) or
 * memory ran out (LR_ERROR). */
enum lr_status lr_zk_make_dirs(struct lr_zk_session *zs, const char *path,
			       int64_t deadline, struct lr_err *err);

/* Into err, why the session did not do "what": credentials refused,
 * expired, no connection (and why), or no answer in time. */
void lr_zk_unreachable(struct lr_zk_session *zs, const char *what,
		       struct lr_err *err);
/* A client error code in words, with a hint where we know one. */
const char *lr_zk_strerror(int rc);
/* 1 for the errors that a retry on the same session may cure. */
int lr_zk_retryable(int rc);

/* For the core's loop (store.h's wait_fd and process): the fd to poll
 * (POLLIN in *events), or -1 without a session.  Call it before each
 * wait: what the client waits for changes. */
int lr_zk_wait_fd(struct lr_zk_session *zs, short *events);
/* Runs the client on what its socket already holds, without waiting
 * (a zero-timeout poll; a bounded number of messages): replies, watch
 * events, the server's close.  The flags and on_node then tell what
 * changed, as after lr_zk_process().  Returns 0, or -1 without a
 * session. */
int lr_zk_drain(struct lr_zk_session *zs);
/* Runs the client once for what lr_zk_wait_fd()'s fd reported (its
 * socket, or its timer: pings, connect retries, timeouts); the flags
 * and on_node then tell what changed.  Returns 0, or -1 without a
 * session. */
int lr_zk_process(struct lr_zk_session *zs);

#endif
