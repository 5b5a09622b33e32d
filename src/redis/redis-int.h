/*
 * redis-int.h - what the parts of the Redis store (module redis.so)
 * share: the store's state, one connection's, and the calls each part
 * makes of the others.  Not an interface: the module exports
 * lr_store_ops alone.  The design is at the top of redis.c.
 *
 *   redis.c        the lease: open, acquire, renew, release, break,
 *                  inspect, close; the guards
 *   redis-conn.c   connections, login, Sentinel, round trips, WAIT
 *   redis-watch.c  the second connection: waiting and the watch
 *   redis-runs.c   --once-per
 *   redis-url.c    the URL
 *   redis-cluster.c  Redis Cluster: the nodes, MOVED and ASK
 *   redis-list.c   --list
 */
#ifndef LEASERUN_REDIS_INT_H
#define LEASERUN_REDIS_INT_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "net/net.h"
#include "store/store.h"
#include "store/waitset.h"

/* The most commands sent in one round trip. */
#define MAX_CMDS 8

/* replicas=auto (the default) and replicas=all. */
#define REPLICAS_AUTO (-1)
#define REPLICAS_ALL (-2)

/* What a guard does about a server that cannot keep its promise. */
enum guard_mode { GUARD_WARN, GUARD_REFUSE, GUARD_IGNORE };

/* One connection: our socket, TLS on it or not, hiredis's reader for what
 * comes in and a buffer of formatted commands for what goes out. */
struct conn {
	struct lr_stream s;    /* the socket, plain or TLS */
	redisReader *reader;
	char *out;             /* formatted commands; may hold a password */
	size_t len, off, cap;  /* bytes in out, written, allocated */
	int eof;               /* the server closed its end */
	int heard;             /* the server has said something */
	int broken;            /* a command could not be queued */
	unsigned gen;          /* the node it goes to (st->node_gen) */
	size_t cost;           /* of the reply being read (REPLY_MAX_COST) */
	int too_big;           /* it went over: the reader stopped */
};

struct lr_store {
	const struct lr_store_req *req;
	char *host;       /* the data node's TCP host, or NULL for a socket */
	int port;
	char *sock;       /* Unix socket path, or NULL */
	char where[300];  /* "127.0.0.1:6379" or the socket path, for errors */
	char who[320];    /* "redis at WHERE" */
	unsigned node_gen; /* bumped when host:port changes (Sentinel) */
	char *user;       /* ACL user, or NULL */
	char *pass;       /* password, or NULL; wiped on close */
	long db;
	int64_t cap_ms;   /* per-exchange timeout cap */
	enum guard_mode evict, persist;
	/* TLS: rediss://, rediss+sentinel:// */
	int use_tls;
	const char *cacert, *cert, *certkey; /* in req->u, or NULL */
	/* Sentinel: master is NULL for the other schemes */
	const char *master;
	struct lr_url_host *sentinels;
	size_t nsentinels, sentinel_at; /* sentinel_at answered last */
	char *sentinel_user, *sentinel_pass; /* pass wiped on close */
	int node_known;   /* host:port is the master, as far as we know */
	/* Cluster (redis+cluster://): the seeds, then the nodes learned
	 * from MOVED and CLUSTER SLOTS; the master of our slot among them
	 * by the last map (-1: none known); the node an ASK named. */
	int cluster;
	struct lr_url_host *nodes;
	size_t nnodes;
	int map_owner;
	char *ask_host;
	int ask_port;
	/* Durable grants */
	int replicas_opt; /* replicas=N, REPLICAS_AUTO or REPLICAS_ALL */
	int replicas;     /* online replicas, as INFO said last */
	int retry;        /* the last failure may pass: try again in time */
	int replicas_warned;
	char *key, *fence_key, *chan, *ks_chan, *done_key;
	char *waiters, *wake_prefix, *wake_chan;
	/* Shared holders and slots: key is then our Pholder:{NAME}:TOK, and
	 * lease_key the plain lease's key; slot_key our slot's, once granted. */
	char *lease_key, *holders, *limit_key, *hold_prefix, *slot_prefix;
	char *slot_key;
	int slotted;       /* shared, or a limit above 1 */
	unsigned slot;     /* our slot, once granted */
	struct conn *c;    /* commands */
	struct conn *watcher; /* subscribed (waiting), tracking target
			      * (holding) */
	long long watcher_id; /* its CLIENT ID, or -1 */
	long long track_id; /* where c's CLIENT TRACKING points, or -1 */
	int held;
	int watch_off;     /* the server cannot track: renew alone */
	int64_t watch_at;  /* held, watch not armed: when to arm it; else 0 */
	int watch_timer;   /* ws's timer is set for watch_at */
	int subscribe;     /* a try found the lease busy: subscribe first */
	int watcher_denied;    /* the server refused SUBSCRIBE (ACL) */
	int asked;         /* the guards asked: ASK_EVICT | ASK_PERSIST */
	char answered[300]; /* the node of the last round trip's replies */
	struct lr_waitset ws; /* both sockets and watch_at while holding */
};

/* What conn_fill() says besides 1, 0 and -1. */
#define FILL_EOF (-2)
#define FILL_TOO_BIG (-3)

/* One command of a round trip, and its reply (maybe an error reply). */
struct cmd {
	int argc;
	const char **argv;
	redisReply *r;
};

/* A script of src/redis/ (see "scripts" in redis.c). */
struct script {
	const char *name; /* for messages */
	const char *body;
	const char *sha;  /* for EVALSHA */
};

/* The script NAME of scripts.h (LUA_NAME, LUA_NAME_SHA1), called MSG in
 * messages: its body and its digest are named once, so that a body can
 * never go out with another script's digest. */
#define SCRIPT(msg, NAME) { msg, LUA_##NAME, LUA_##NAME##_SHA1 }

/* Where a round trip asks the guards: the index of INFO memory and of
 * INFO persistence in it, or -1 (GUARDS_NONE). */
struct guard_cmds {
	int mem, per, map;
};

#define GUARDS_NONE { -1, -1, -1 }

/* What the guards asked this run (st->asked); ASK_MAP: the cluster's
 * slot map, asked again after a MOVED. */
#define ASK_EVICT 1
#define ASK_PERSIST 2
#define ASK_MAP 4

/* The commands that arm the watch behind a script that found the lease
 * ours, in one round trip on the command connection: CLIENT TRACKING off
 * (what c tracked before pointed elsewhere, and a prefix cannot be given
 * twice), CLIENT TRACKING on ... REDIRECT to the watcher, and a GET of
 * the key.  A change after the script and before TRACKING shows in the
 * GET; any change after TRACKING is reported to the watcher. */
struct watch_cmds {
	char id[24];
	const char *off[3], *on[9], *get[2];
	int at;           /* where the first is in the round trip, or -1 */
	long long watcher_id; /* the watcher they point at, and its node */
	unsigned gen;
};

/* ---- redis-conn.c -------------------------------------------------------- */

int64_t step_end(const struct lr_store *st, int64_t deadline);
void replies_free(redisReply **r, int n);
int is_error(const redisReply *r, const char *word);
int reply_heals(const redisReply *r);
void conn_append(struct conn *k, int argc, const char **argv);
void conn_free(struct conn *k);
int conn_fill(struct conn *k, short *want, struct lr_err *err);
int conn_reply(struct conn *k, redisReply **r, struct lr_err *err);
enum lr_status exchange(const struct lr_store *st, struct conn *k, int n,
			redisReply **r, int64_t end, int *got, const char *who,
			const char *what, struct lr_err *err);
void cmds_free(struct cmd *cmds, int n);
enum lr_status info_read(const struct lr_store *st, const redisReply *r,
			 const char *section, const char *field, char *val,
			 size_t vsize, char *msg, size_t msize,
			 struct lr_err *err);
void replicas_seen(struct lr_store *st, const redisReply *r);
void node_set(struct lr_store *st, char *host, int port);
void node_answered(struct lr_store *st);
enum lr_status connect_to(struct lr_store *st, int64_t deadline,
			  struct conn **out, int select, struct cmd *more,
			  int nmore, struct lr_err *err);
void drop_main(struct lr_store *st);
void drop_watcher(struct lr_store *st);
enum lr_status main_open(struct lr_store *st, int64_t deadline,
			 struct lr_err *err);
enum lr_status round_trip(struct lr_store *st, struct cmd *cmds, int n,
			  int64_t deadline, const char *what,
			  struct lr_err *err);
enum lr_status command(struct lr_store *st, int argc, const char **argv,
		       int64_t deadline, redisReply **r, const char *what,
		       struct lr_err *err);
enum lr_status run_script(struct lr_store *st, const struct script *sc,
			  int nkeys, int nargs, const char **kv,
			  struct cmd *cmds, int n, int si, int64_t deadline,
			  struct lr_err *err);
enum lr_status durable(struct lr_store *st, int need, int64_t deadline,
		       const char *what, struct lr_err *err);
int replicas_needed(const struct lr_store *st);

/* ---- redis-cluster.c ----------------------------------------------------- */

/* What cluster_redirect() found. */
#define REDIRECT_NONE 0
#define REDIRECT_MOVED 1
#define REDIRECT_ASK 2

unsigned cluster_slot(const char *key);
void cluster_suspect(struct lr_store *st);
void cluster_map_read(struct lr_store *st, const redisReply *r);
int cluster_redirect(struct lr_store *st, redisReply **r, int n,
		     struct lr_err *err);
enum lr_status cluster_follow(struct lr_store *st, struct cmd *cmds, int n,
			      redisReply **r, int *hops, int64_t deadline,
			      const char *what, struct lr_err *err);
int cluster_masters(const struct lr_store *st, const redisReply *r,
		    struct lr_url_host **out, size_t *n, struct lr_err *err);

/* ---- redis-url.c --------------------------------------------------------- */

enum lr_status parse_url(struct lr_store *st, const struct lr_store_req *req,
			 struct lr_err *err);

/* ---- redis.c ------------------------------------------------------------- */

int guards_add(const struct lr_store *st, enum guard_mode mode,
	       struct cmd *cmds, int n, struct guard_cmds *g);
enum lr_status guards_check(struct lr_store *st, const struct guard_cmds *g,
			    const struct cmd *cmds, struct lr_err *err);
enum lr_status lost(struct lr_store *st, const char *why, struct lr_err *err);
/* A grant's value, "TOKEN FENCE PID SINCE HOST", and its PTTL, as a
 * holder in slot (-1: shared) of info; nothing for "" (free). */
enum lr_status holder_add(struct lr_info *info, const redisReply *v,
			  const redisReply *pttl, long long slot,
			  struct lr_err *err);

/* ---- redis-watch.c ------------------------------------------------------- */

int watching(const struct lr_store *st);
void watch_unplan(struct lr_store *st);
enum lr_status watcher_open(struct lr_store *st, int64_t deadline,
			    struct lr_err *err);
int watch_add(struct lr_store *st, struct watch_cmds *w, struct cmd *cmds,
	      int n);
int watch_check(struct lr_store *st, const struct watch_cmds *w,
		const struct cmd *cmds);
enum lr_status watch_rearm(struct lr_store *st, int64_t deadline,
			   struct lr_err *err);
int redis_wait_fd(struct lr_store *st, short *events);
enum lr_status redis_process(struct lr_store *st, short revents,
			     int64_t deadline, struct lr_err *err);
enum lr_status redis_check(struct lr_store *st, int64_t deadline,
			   struct lr_err *err);

/* ---- redis-runs.c -------------------------------------------------------- */

enum lr_status redis_run_start(struct lr_store *st, int64_t period_ms,
			       uint64_t fence, int64_t deadline,
			       struct lr_run *last, struct lr_err *err);
enum lr_status redis_run_end(struct lr_store *st, uint64_t fence, int status,
			     int64_t deadline, struct lr_err *err);
enum lr_status redis_run_last(struct lr_store *st, int64_t deadline,
			      struct lr_run *last, struct lr_err *err);

/* ---- redis-list.c -------------------------------------------------------- */

enum lr_status redis_list(struct lr_store *st, const char *pattern,
			  lr_list_fn fn, void *arg, int64_t deadline,
			  struct lr_err *err);

#endif
