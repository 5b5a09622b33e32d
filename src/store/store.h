/*
 * store.h - the contract between leaserun's core and a lease store.
 *
 * A store is one const struct lr_store_ops.  The file store is built into
 * the binary; every network store is a module (redis.so, pg.so, ...) that
 * exports the symbol LR_STORE_SYMBOL and that the core dlopen()s only when
 * a URL names one of its schemes (the table of schemes, modules and
 * packages is stores.c's, the one place that says which store serves a
 * scheme).  This header is the contract a store's author reads; the
 * loader and the helpers only the core calls are in stores.h.
 *
 * Rules every store keeps:
 *  - Every call is synchronous and returns by its absolute deadline, a
 *    CLOCK_BOOTTIME time in milliseconds (see lr_now_ms()).
 *  - A store never prints, exits, owns the loop, forks a command or sleeps
 *    without a deadline.  It reports what went wrong in struct lr_err, in
 *    words fit for a user: what failed and, where known, why.
 *  - A store never puts a password into an error message.
 *  - "Not ours" on renew is LR_LOST (certain loss), never LR_ERROR.
 *  - close() accepts a store that open() only half built, and NULL.
 *
 * Names, so that a reader can tell whose a function is: a store's own
 * functions start with the store's name (redis_acquire(), etcd_renew(),
 * zk_open(), pg_, file_), except the MySQL store's, which start with my_
 * (mysql_ is the MySQL C API's, which a reader knows).  st is always a struct lr_store pointer.
 * A count of milliseconds ends in _ms; its special values (for ever,
 * unknown, not given, never) are the LR_MS_* of store/duration.h.
 * The plain lease is a name taken with limit 1 and not shared (below);
 * a store's key, lock or node for it says so (lease_key, plain_held).
 * A run is one invocation of leaserun, and struct lr_run is what
 * --once-per records of it (run_start(), run_last(), run_end()).  A
 * status alone is what a store call returns (enum lr_status); what
 * --status prints comes from inspect(); what a command ends with is its
 * exit status.
 */
#ifndef LEASERUN_BACKEND_H
#define LEASERUN_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "store/duration.h"
#include "store/url.h"

/* Bump when struct lr_store_ops or anything it points to changes. */
#define LR_STORE_ABI 8
#define LR_STORE_SYMBOL "lr_store_ops"

enum lr_status {
	LR_OK = 0, /* done */
	LR_BUSY,   /* acquire: someone else holds it */
	LR_LOST,   /* the grant is certainly gone (not ours any more) */
	LR_TIMEOUT, /* the deadline passed before the store answered */
	LR_ERROR,  /* anything else: unreachable, auth, protocol, bad URL */
};

/* Room for a statement the user must run (pg.c's CREATE TABLE). */
#define LR_ERRLEN 512
struct lr_err {
	char msg[LR_ERRLEN];
	/* An LR_ERROR that may heal by itself, marked by the store with
	 * lr_err_heals(): the server unreachable, refusing, resetting,
	 * starting, stopping, loading, read-only or leaderless during a
	 * failover, out of connections for now.  A run that may still
	 * wait tries again; what cannot heal (a bad URL or option, a host
	 * name that does not resolve, authentication, a certificate, a
	 * transaction pooler) is left unmarked and ends the run at once.
	 * LR_TIMEOUT always counts as one that may heal.  lr_err_set()
	 * leaves the mark alone. */
	int heals;
};

/* Capabilities.  The core refuses, before open(), a run that asks a store
 * for what it cannot do. */
/* (0x2 was LR_CAP_BREAK: break_lease() itself, or NULL, says whether a
 * store can break a lease.) */
#define LR_CAP_LIMIT 0x4  /* req->limit above 1: a semaphore of N slots */
#define LR_CAP_SHARED 0x8 /* req->shared: shared and exclusive holders */

/* The largest --limit. */
#define LR_LIMIT_MAX 1000

/* What the core asks for; valid from open() until close(). */
struct lr_store_req {
	const char *url;         /* as given; may hold a password: never log */
	const struct lr_url *u;  /* the same, parsed */
	const char *name;        /* lease name, already validated */
	const char *token;       /* our owner token; NULL for --status/--break */
	/* With a token: the first acquire() follows open() at once, with no
	 * pause between them (--splay makes one).  A store may then send its
	 * first try with what open() sends, saving a round trip; it must
	 * not where a pause follows, or it would hold the lease through it. */
	int acquire_next;
	int64_t ttl_ms;          /* requested TTL */
	const char *host;        /* our host name, for holder information */
	long pid;                /* our pid, for holder information */
	int64_t since_ms;        /* wall-clock (CLOCK_REALTIME) ms, for display */
	/* How many may hold the name at once, and how this run holds it:
	 * limit 1 and not shared is the plain lease (one holder); limit N
	 * is a semaphore, each holder in a slot 0..N-1 of its own; shared
	 * (always with limit 1) holds together with other shared holders
	 * and never with an exclusive one.  Every holder of a name must use
	 * the same limit: the store records it, and an acquire() that finds
	 * holders (or, where the store sees them, waiters) with another
	 * limit is LR_ERROR, filled by lr_err_limit().  When nobody holds
	 * the name the record may change.  A waiting exclusive request is
	 * not passed by shared ones that come after it. */
	unsigned limit;          /* 1..LR_LIMIT_MAX */
	int shared;
	/* Warnings the user should see (a guard that cannot refuse). */
	void (*warn)(void *ctx, const char *msg);
	void *warn_ctx;
};

/* Filled by a successful acquire(). */
struct lr_grant {
	uint64_t fence;  /* strictly increasing per name, across all slots and
			  * both modes */
	int64_t ttl_ms;  /* the TTL the store actually granted; 0 = as asked */
	unsigned slot;   /* 0..limit-1; 0 for the plain lease and for every
			  * shared holder */
	char node[300];  /* the server that granted it, "host:port" (a
			  * cluster's master, Sentinel's master of the
			  * moment); "" when the store does not say */
};

/* One holder, as inspect() sees it.  Unknown fields keep the values
 * lr_info_add() gives them. */
struct lr_holder {
	unsigned slot;          /* as in struct lr_grant */
	int shared;             /* a shared holder */
	char host[256];         /* "" unknown */
	long pid;               /* 0 unknown */
	int64_t since_ms;       /* wall-clock ms; 0 unknown */
	int64_t ttl_left_ms;    /* LR_MS_UNKNOWN: no TTL, or unknown */
	uint64_t fence;         /* 0 unknown */
};

/* Filled by inspect(): every holder of the name.  The core hands it
 * empty and frees the holders (stores.h). */
struct lr_info {
	unsigned limit;         /* the limit recorded for the name; 0 unknown
				 * (the store keeps none while it is free) */
	uint64_t fence;         /* with no holder: the last fence granted, 0
				 * unknown */
	size_t n;               /* holders, in slot order (shared: fence) */
	struct lr_holder *h;    /* n of them; grown by lr_info_add() */
	size_t cap;
	long waiters;           /* runs waiting for the name; -1 unknown */
	char next[300];         /* the first in line, "host pid N" (as the
				 * store keeps an order); "" unknown */
};

/* What list() hands its callback for each lease it finds: its name and
 * holders (info as inspect() fills it).  A return other than 0 stops
 * the listing, and list() returns LR_OK. */
typedef int (*lr_list_fn)(void *arg, const char *name,
			  const struct lr_info *info);

/*
 * A run recorded for --once-per, as the store's clock tells it.  The
 * store's clock, never the local one, decides whether a period has
 * passed: hosts whose clocks disagree must still agree on that.  Filled
 * by run_start() (LR_BUSY: the start that holds us back) and run_last()
 * (--status).  Unknown fields keep the values lr_run_init() gives.
 */
struct lr_run {
	int known;          /* 1: a start is recorded */
	char host[256];     /* who started it; "" unknown */
	long pid;           /* 0 unknown */
	uint64_t fence;     /* the fence it ran with; 0 unknown */
	int64_t period_ms;  /* the --once-per it was started with; 0 unknown */
	int64_t start_ms;   /* Unix ms of the start by the store's clock (the
			     * starting host's clock where the store has
			     * none: etcd); 0 unknown */
	int64_t ago_ms;     /* how long before this call it started, by the
			     * store's clock; -1 unknown */
	int64_t next_ms;    /* how long from this call until a start is
			     * allowed again; 0 now, -1 unknown */
	int64_t end_ms;     /* Unix ms of its end, as start_ms; 0 not ended
			     * (or not known to have ended) */
	int status;         /* the exit status recorded at its end; -1 none */
};

struct lr_store;

struct lr_store_ops {
	unsigned abi;                   /* LR_STORE_ABI */
	const char *name;               /* "file", "redis", ... */
	unsigned caps;                  /* LR_CAP_* */
	/* Environment variables this store may read secrets from; the core
	 * removes them from the child's environment.  May be NULL. */
	const char *const *secret_env;

	/* Connect, authenticate, check the server is fit.  On any status but
	 * LR_OK, *out may still hold a half-built store for close(). */
	enum lr_status (*open)(const struct lr_store_req *req, int64_t deadline,
			       struct lr_store **out, struct lr_err *err);
	/* One attempt.  LR_OK fills *g; LR_BUSY if held by someone else. */
	enum lr_status (*acquire)(struct lr_store *st, int64_t deadline,
				  struct lr_grant *g, struct lr_err *err);
	/* Optional.  The fd the loop should poll now (it may change between
	 * calls), or -1; *events gets POLLIN/POLLOUT. */
	int (*wait_fd)(struct lr_store *st, short *events);
	/* Optional.  Run when wait_fd() is ready.  While waiting: LR_OK means
	 * "try acquire() now", LR_BUSY "nothing yet".  While holding: LR_OK
	 * "nothing wrong", LR_LOST certain loss, LR_ERROR/LR_TIMEOUT
	 * suspicion (the core renews at once). */
	enum lr_status (*process)(struct lr_store *st, short revents,
				  int64_t deadline, struct lr_err *err);
	/* Optional.  Is the grant just made already gone?  Called after
	 * acquire() (and run_start()), as the last step before the command
	 * starts.  Asks the store's loss signal, armed from the grant (the
	 * socket, watch or session that wait_fd() hands the loop while
	 * holding), without waiting for news: what has already arrived,
	 * and what the store learnt during earlier calls.  A store whose
	 * signal cannot vouch for the present (not armed yet, a watch that
	 * may lag behind the server's answers, a connection lost since the
	 * grant) asks the server instead, within deadline.
	 * LR_LOST: certainly gone (err says why), and the command must not
	 * start; LR_OK: nothing known wrong; LR_ERROR/LR_TIMEOUT:
	 * suspicion (the core renews at once).  Without it the core starts
	 * the command on the word of acquire() alone. */
	enum lr_status (*check)(struct lr_store *st, int64_t deadline,
				struct lr_err *err);
	/* Extend only our own grant; check the lock itself, not only the
	 * connection.  "Not ours" is LR_LOST. */
	enum lr_status (*renew)(struct lr_store *st, int64_t deadline,
				struct lr_err *err);
	/* Optional.  The server that answered the last call that
	 * succeeded, as lr_grant's node ("host:port"); NULL or "" when the
	 * store does not say.  The core asks it after each renewal, so
	 * that a failover or a moved slot shows in the log. */
	const char *(*node)(struct lr_store *st);
	/* Give back only our own grant.  LR_LOST if it was not ours any
	 * more (nothing was deleted). */
	enum lr_status (*release)(struct lr_store *st, int64_t deadline,
				  struct lr_err *err);
	/* Who holds req->name: every holder, added with lr_info_add(). */
	enum lr_status (*inspect)(struct lr_store *st, int64_t deadline,
				  struct lr_info *info, struct lr_err *err);
	/* Admin: remove the current grants of req->name whoever holds them:
	 * all of them when slot is -1, else only the holder(s) of that slot
	 * (every shared holder is in slot 0).  A free name or slot is LR_OK.
	 * Optional: NULL when the store cannot. */
	enum lr_status (*break_lease)(struct lr_store *st, int slot,
				      int64_t deadline, struct lr_err *err);
	void (*close)(struct lr_store *st);

	/*
	 * --once-per: runs recorded in the store.  All three are optional
	 * (NULL: the store cannot keep --once-per; --status then shows no
	 * run).
	 *
	 * run_start: called while holding the lease, before the command
	 * starts.  Records that a run of req->name with this fence starts
	 * now, by the store's clock, unless a start was recorded less than
	 * period_ms ago by that clock: then LR_BUSY, with *last naming it
	 * (ago_ms and next_ms counted with period_ms).  LR_OK only once the
	 * record is durable.  A repeat with the same fence (a retry after a
	 * lost reply) is LR_OK.  A store that lacks what it needs (a table
	 * the user must allow) says so in err with LR_ERROR; it never falls
	 * back to the local clock.
	 */
	enum lr_status (*run_start)(struct lr_store *st, int64_t period_ms,
				    uint64_t fence, int64_t deadline,
				    struct lr_run *last, struct lr_err *err);
	/* Records the end of the run run_start() recorded (called only
	 * after its LR_OK), with fence (the one passed to it) and status
	 * (the exit status it ended with).  A record of another fence is
	 * left alone (LR_OK).  Optional even when run_start is there. */
	enum lr_status (*run_end)(struct lr_store *st, uint64_t fence,
				  int status, int64_t deadline,
				  struct lr_err *err);
	/* The last recorded run of req->name, for --status: last->known 0
	 * if there is none (or the store keeps none yet).  next_ms is
	 * counted with the period that run was started with. */
	enum lr_status (*run_last)(struct lr_store *st, int64_t deadline,
				   struct lr_run *last, struct lr_err *err);

	/*
	 * --list: every lease of the store whose name matches pattern (an
	 * fnmatch(3) glob; the core filters again, so a store may pass
	 * more), fn called once per name with its holders, in pages: the
	 * store never holds the whole store in memory, and never blocks
	 * the server for long (no KEYS, no long script).  A store opened
	 * for --list has req->name "" and no token.  Names the store finds
	 * free may be passed too (info->n 0).  Optional (NULL: the store
	 * cannot list).
	 */
	enum lr_status (*list)(struct lr_store *st, const char *pattern,
			       lr_list_fn fn, void *arg, int64_t deadline,
			       struct lr_err *err);
};

/* Helpers for stores (util.c). */
int64_t lr_now_ms(void);             /* CLOCK_BOOTTIME, ms */
int64_t lr_wall_ms(void);            /* CLOCK_REALTIME, ms */
void lr_err_set(struct lr_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Marks err as a fault that may heal (see struct lr_err). */
void lr_err_heals(struct lr_err *err);
/* The refusal of a run whose limit differs from the one recorded for the
 * name (ours is req's: 1 for a plain or shared lease). */
void lr_err_limit(struct lr_err *err, const struct lr_store_req *req,
		  unsigned recorded);
/* inspect()'s list, and each lease's for list(): init empties it; add
 * appends a holder with every field unknown (NULL when out of memory);
 * sort puts it in slot order, then fence order; free frees the holders
 * (and accepts an empty list). */
void lr_info_init(struct lr_info *info);
struct lr_holder *lr_info_add(struct lr_info *info);
void lr_info_sort(struct lr_info *info);
void lr_info_free(struct lr_info *info);
/* A holder as one value, "HOST PID SINCE" (HOST "-" when unknown), for
 * stores that keep it so (etcd, ZooKeeper).  lr_holder_parse() fills
 * h's host, pid and since_ms, and returns 0, or -1 (h untouched) if s
 * (maybe NULL) is not such a value. */
void lr_holder_format(const char *host, long pid, int64_t since_ms,
		      char *buf, size_t len);
int lr_holder_parse(const char *s, struct lr_holder *h);
/* "host pid N" of h into buf ("" when both are unknown), as --status
 * and --list name a holder or a waiter. */
void lr_holder_who(const struct lr_holder *h, char *buf, size_t len);
/* Sets every field of *run to "unknown". */
void lr_run_init(struct lr_run *run);
/* Sets run->ago_ms and next_ms at now, by the store's clock, for period
 * (0: run->period_ms).  A start after now (the clock set back) counts as
 * just now, and holds until start + period all the same. */
void lr_run_times(struct lr_run *run, int64_t now, int64_t period);
/* A run as one line, "FENCE PERIOD START END STATUS PID HOST" (END 0 and
 * STATUS -1 until it ended; HOST "-" when unknown), for stores that keep
 * it as a value (etcd, ZooKeeper).  lr_run_parse() fills run, known 0 if
 * s is not such a line; s may be NULL. */
void lr_run_format(const struct lr_run *run, char *buf, size_t len);
void lr_run_parse(const char *s, struct lr_run *run);
/* Is host (a name or an address, as a URL gives it; a path for a
 * socket) this machine, by the loopback range, localhost or a Unix
 * socket?  Plaintext there crosses no network. */
int lr_host_is_local(const char *host);
/* Overwrites a secret string, then frees it.  Accepts NULL. */
void lr_wipe_free(char *s);
/* Overwrites n bytes at p (a secret), in a way the compiler keeps. */
void lr_wipe(void *p, size_t n);

#endif
