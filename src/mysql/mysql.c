/*
 * mysql.c - the MySQL/MariaDB store: a session lock (GET_LOCK), over a
 * connection of our own (wire.c speaks MySQL's protocol: a client
 * library would cost each run more than all of the rest, see
 * bench/README).
 *
 * The lease is the user-level lock named, on the server, by
 *
 *   L = CONCAT(PREFIX, NAME)
 *   lock = IF(CHAR_LENGTH(L) <= 64, L,
 *             CONCAT(LEFT(L, 47), '~', LEFT(SHA2(L, 256), 16)))
 *
 * (PREFIX "leaserun:" unless ?prefix= says otherwise): a lock name is at
 * most 64 characters and server-wide, so a long name keeps a readable
 * head and a hash of the whole.  The server computes it in open(), so a
 * SQL user can take the same lock with the same expression.
 *
 * Lock life: open() connects (non-blocking, bounded by the deadline) and
 * sets the session up: wait_timeout of about the TTL, so that the server
 * ends a silent holder's session, and frees its lock, about one TTL after
 * it last heard from it and never earlier; TCP keepalive on our end.
 * acquire() is one GET_LOCK(lock, 0), never a wait on the server: a busy
 * lease is asked again by the core's retry loop (50ms doubling to 1s), so
 * the loop is never blocked and a "-n" run never queues.  The plain
 * lease's first try on a connection is sent with the setup, in the same
 * round trip, when the try follows at once (setup()), and acquire()
 * takes its answer.
 *
 * Fence: a counter row per lock in the InnoDB table leaserun_fences of
 * the URL's database, bumped in autocommit by
 *   INSERT ... ON DUPLICATE KEY UPDATE
 *     fence = LAST_INSERT_ID(GREATEST(fence + 1, FENCE_FLOOR))
 * while holding the lock; its OK packet carries the new value (no second
 * round trip).  With innodb_flush_log_at_trx_commit = 1 the commit is on
 * disk before the answer comes back, and the answer starts the command;
 * another setting is warned about once.  The table is created on first
 * use if the user may; if not, the error gives the statement and grant.
 * The row also says who holds the lock (host, pid, since, connection),
 * for --status.
 *
 * Heartbeat: renew() is one round trip proving the lock is held by our
 * session: IS_USED_LOCK(lock) = CONNECTION_ID(), and that CONNECTION_ID()
 * has not changed (a proxy that hands sessions around would change it).
 * While holding, the socket is in the loop: a MySQL server sends nothing
 * unasked, except when it ends the session (KILL, shutdown); then the
 * lock is certainly gone, and process() says LR_LOST.
 *
 * Semaphores and shared holders: slot K is the lock of L#K, a shared
 * holder's the lock of L#rCONNECTION_ID (lease names hold no '#'); an
 * exclusive run beside shared ones takes the lease's own lock.  Each
 * holder of a slot or a share has a row in leaserun_holders (its lock,
 * limit, slot, fence, who), which counts only while its connection
 * holds its lock, so a dead session's share goes with the session.
 * Every run takes its lock (and writes its row) before it looks at the
 * others (others()), so of two runs that come at once at least one
 * sees the other.  An exclusive run that waits keeps the lease's lock
 * while shared holders finish: later shared runs see it and wait.
 *
 * Runs (--once-per) live in the table leaserun_runs (RUNS_SQL), one row
 * per lock, their times by the server's clock (NOW(6)), read and then
 * written while holding the lock, the write in autocommit before the
 * command starts.
 *
 * No call blocks past its deadline, the host name lookup and the TLS
 * handshake included.  A statement that runs out of time stays in
 * flight; the next call finishes it first, and drops its answer, an
 * error too, unless the connection went with it (q_run()).
 *
 * What a server can make us keep is bounded: a packet by MY_MAX_PACKET,
 * a statement's rows by MY_MAX_ANSWER (wire.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "mysql/wire.h"
#include "net/net.h"
#include "store/store.h"

#define DEFAULT_PORT 3306
#define MAX_HOSTS 16
#define FENCE_TABLE "leaserun_fences"

/* The table of fences, as created here and as the man page prints it. */
#define TABLE_SQL                                                          \
	"CREATE TABLE IF NOT EXISTS " FENCE_TABLE " ("                       \
	"name VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin "       \
	"NOT NULL PRIMARY KEY, fence BIGINT UNSIGNED NOT NULL, "            \
	"host VARCHAR(255) NOT NULL DEFAULT '', pid BIGINT NOT NULL "       \
	"DEFAULT 0, since_ms BIGINT NOT NULL DEFAULT 0, conn BIGINT "       \
	"UNSIGNED NOT NULL DEFAULT 0) ENGINE=InnoDB"

/* The fences' table's engine, asked of information_schema (NULL: no
 * table, or none this user may see). */
#define ENGINE_SQL                                                         \
	"SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = " \
	"DATABASE() AND TABLE_NAME = '" FENCE_TABLE "'"

/* The lock name expression of the top; %s is CONCAT(prefix, name). */
#define LOCK_SQL                                                           \
	"IF(CHAR_LENGTH(%1$s) <= 64, %1$s, CONCAT(LEFT(%1$s, 47), '~', "     \
	"LEFT(SHA2(%1$s, 256), 16)))"

/* The holders of a shared lease or of a semaphore's slots, one row per
 * holder's lock, for the other runs and for --status.  A row counts only
 * while its connection holds its lock (IS_USED_LOCK), so the row of a
 * session that died counts for nothing. */
#define HOLDERS_TABLE "leaserun_holders"
#define HOLDERS_SQL                                                        \
	"CREATE TABLE IF NOT EXISTS " HOLDERS_TABLE " ("                     \
	"lock_name VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin "  \
	"NOT NULL PRIMARY KEY, name VARCHAR(64) CHARACTER SET utf8mb4 "     \
	"COLLATE utf8mb4_bin NOT NULL, lim INT UNSIGNED NOT NULL, shared "  \
	"TINYINT NOT NULL, slot INT UNSIGNED NOT NULL, fence BIGINT "       \
	"UNSIGNED NOT NULL, host VARCHAR(255) NOT NULL DEFAULT '', pid "    \
	"BIGINT NOT NULL DEFAULT 0, since_ms BIGINT NOT NULL DEFAULT 0, "   \
	"conn BIGINT UNSIGNED NOT NULL, KEY (name)) ENGINE=InnoDB"
/* The condition of a live row of the holders of our name. */
#define LIVE_SQL                                                           \
	"name = %s AND IS_USED_LOCK(lock_name) <=> conn"

/* The plain lease's try: 1 if the lock (SQL: a literal, or an expression
 * of @lr_full) is ours, as it already is after the late answer to a try
 * that ran out of time, or while an exclusive run keeps it until shared
 * holders finish (GET_LOCK again would count it twice); else GET_LOCK's
 * answer, without waiting. */
#define TRY_SQL                                                            \
	"SELECT IF(IS_USED_LOCK(%1$s) <=> CONNECTION_ID(), 1, "              \
	"GET_LOCK(%1$s, 0))"

enum opt { O_SOCKET, O_PREFIX, O_SSL_MODE, O_SSL_CA, O_SSL_CERT, O_SSL_KEY,
	   O_N };

/* ssl-mode, as the mysql client spells it. */
enum ssl_mode { TLS_DISABLED, TLS_PREFERRED, TLS_REQUIRED, TLS_VERIFY_CA,
		TLS_VERIFY_IDENTITY };
static const char *const ssl_modes[] = { "DISABLED", "PREFERRED", "REQUIRED",
					  "VERIFY_CA", "VERIFY_IDENTITY",
					  NULL };

static const struct lr_url_opt opts[O_N] = {
	[O_SOCKET] = { "socket", LR_OPT_PATH, 0, 0, NULL },
	[O_PREFIX] = { "prefix", LR_OPT_STRING, 0, 0, NULL },
	[O_SSL_MODE] = { "ssl-mode", LR_OPT_ENUM, 0, 0, ssl_modes },
	[O_SSL_CA] = { "ssl-ca", LR_OPT_PATH, 0, 0, NULL },
	[O_SSL_CERT] = { "ssl-cert", LR_OPT_PATH, 0, 0, NULL },
	[O_SSL_KEY] = { "ssl-key", LR_OPT_PATH, 0, 0, NULL },
};

/* Who else is there (others()): whether another session holds the
 * plain lock, the largest limit of another live holder that is not ours
 * (0 none), and how many live shared holders there are besides us. */
struct others {
	int plain_held;
	unsigned limit;
	unsigned long shared;
};

struct lr_store {
	const struct lr_store_req *req;
	struct my_conn c;  /* c.s.fd -1: no connection */
	union lr_url_val o[O_N];
	struct lr_url_host *hosts;
	size_t nhosts;
	char *password;    /* the URL's or MYSQL_PWD; wiped */
	char *db;
	unsigned long conn_id; /* CONNECTION_ID() of our session */
	char lock[300];    /* the lock name as a SQL literal */
	char rlock[300];   /* our reader lock (--shared), a SQL literal */
	char mine[600];    /* the lock we hold (SQL): lock, rlock or a slot's */
	unsigned slot;     /* the slot we hold */
	int want_wait;     /* acquire() said BUSY */
	int queued;        /* the core waits: an exclusive run keeps the lock
			    * while shared holders finish (see the top) */
	int held;
	uint64_t fence;
	int gone;          /* the server ended our session: certain */
	char gone_why[160];
	char where[160];   /* "host:port" or the socket, for messages */
	int warned;        /* the durability warning went out */
	int tls_warned;    /* the plaintext warning went out */
	/* The plain lease's first try on a new connection, asked with the
	 * setup (setup()): GET_LOCK's answer, and others() asked after it. */
	int pre_lock;      /* the answer below is there, for plain_acquire() */
	long pre_got;      /* GET_LOCK's: 1 ours, 0 taken, -1 none */
	int pre_others;    /* pre_o is there */
	struct others pre_o;
};

/* A run that is not the plain lease: a semaphore's or a shared one. */
static int slotted(const struct lr_store *st)
{
	return st->req->limit > 1 || st->req->shared;
}

/* The lock name of @lr_full (the session's CONCAT(prefix, NAME)) and
 * tail, SQL for what follows it ("'#2'": slot 2), as SQL, into buf. */
static void lock_expr(char *buf, size_t len, const char *tail)
{
	char full[64];

	snprintf(full, sizeof(full), "CONCAT(@lr_full, %s)", tail);
	snprintf(buf, len, LOCK_SQL, full);
}

static const char *const my_secret_env[] = { "MYSQL_PWD", NULL };

/* ---- small helpers ----------------------------------------------------- */

static void mark_gone(struct lr_store *st, const char *why)
{
	if (st->gone)
		return;
	st->gone = 1;
	snprintf(st->gone_why, sizeof(st->gone_why), "%.159s", why);
}

/* Faults that may heal by themselves: the server down, restarting, full
 * for now, or our connection cut.  Authentication, an unknown database,
 * a name that does not resolve do not. */
static int heals(unsigned e)
{
	switch (e) {
	case CR_CONNECTION_ERROR:
	case CR_CONN_HOST_ERROR:
	case CR_SERVER_GONE_ERROR:
	case CR_SERVER_LOST:
	case ER_CON_COUNT_ERROR:
	case ER_TOO_MANY_USER_CONNECTIONS:
	case ER_SERVER_SHUTDOWN:
	case ER_CONNECTION_KILLED:
	case ER_OPTION_PREVENTS_STATEMENT: /* read-only, a failover may end */
		return 1;
	}
	return 0;
}

/* The server ended the session: certain loss of its locks.  (Not
 * ER_QUERY_INTERRUPTED: KILL QUERY ends a statement, not the session.) */
static int ended(unsigned e)
{
	return e == ER_CONNECTION_KILLED || e == ER_SERVER_SHUTDOWN;
}

static int connected(const struct lr_store *st)
{
	return st->c.s.fd >= 0;
}

/* err = "WHAT on MySQL at WHERE failed: ERROR (errno)". */
static void q_fail(struct lr_store *st, const char *what, struct lr_err *err)
{
	unsigned e = st->c.err;

	lr_err_set(err, "%s on MySQL at %s failed: %s (%u)", what, st->where,
		   e ? st->c.msg : "no answer", e);
	if (heals(e) || st->c.heals)
		lr_err_heals(err);
	if (ended(e))
		mark_gone(st, st->c.msg);
}

/* Drives the statement in flight to its end, by deadline.  LR_OK: done,
 * its rows (if any) in st->c.res; LR_TIMEOUT: still in flight for a
 * later call; LR_ERROR: it failed (err says why; st->gone if the server
 * ended our session, or we cut it off). */
static enum lr_status drive_to_end(struct lr_store *st, int64_t deadline,
				   const char *what, struct lr_err *err)
{
	enum lr_status s = my_wire_drive(&st->c, deadline);

	if (s == LR_TIMEOUT) {
		lr_err_set(err, "MySQL at %s did not answer in time",
			   st->where);
		return LR_TIMEOUT;
	}
	if (s == LR_ERROR && st->c.err == CR_NET_PACKET_TOO_LARGE) {
		/* The connection is shut down under what still comes, which
		 * ends the session, and with it any lock it held. */
		lr_err_set(err, "%s on MySQL at %s: %s; the connection was "
				"closed",
			   what, st->where, st->c.msg);
		mark_gone(st, "its answer ran past the bound: we closed the "
			      "connection");
		return LR_ERROR;
	}
	if (s == LR_ERROR)
		q_fail(st, what, err);
	/* A connection that broke (closed, reset, cut off) while we held
	 * the lock: the session ends with it, and the lock. */
	if (s == LR_ERROR && st->c.broken && st->held)
		mark_gone(st, st->c.msg);
	return s;
}

/* Runs sql, n_stmts statements sent together (one, unless st->c.multi),
 * to its end.  *out gets their rows (NULL for statements without;
 * my_rows_free it), and on LR_ERROR those of the statements answered
 * before the one that failed (st->c.done of them; none when only one
 * was sent, or the connection went).  what names it in errors. */
static enum lr_status q_run_n(struct lr_store *st, const char *sql,
			      unsigned n_stmts, const char *what,
			      int64_t deadline, struct my_rows **out,
			      struct lr_err *err)
{
	enum lr_status s;

	*out = NULL;
	if (!connected(st) || st->gone || st->c.broken) {
		lr_err_set(err, "no connection to MySQL at %s", st->where);
		lr_err_heals(err);
		return LR_ERROR;
	}
	if (st->c.state != MW_IDLE) {
		/* An earlier statement's late answer: drop it, and its error
		 * too (a statement given up on is no one's business), unless
		 * the connection went with it. */
		struct lr_err late = { .heals = 0 };

		s = drive_to_end(st, deadline, "an earlier statement", &late);
		my_rows_free(st->c.res);
		st->c.res = NULL;
		if (s == LR_TIMEOUT ||
		    (s == LR_ERROR && (st->gone || st->c.broken))) {
			*err = late;
			return s;
		}
	}
	if (my_wire_send(&st->c, sql, n_stmts) < 0) {
		q_fail(st, what, err);
		return LR_ERROR;
	}
	s = drive_to_end(st, deadline, what, err);
	if (s != LR_TIMEOUT) {
		*out = st->c.res;
		st->c.res = NULL;
	}
	return s;
}

/* Runs one statement to its end (as q_run_n()). */
static enum lr_status q_run(struct lr_store *st, const char *sql,
			    const char *what, int64_t deadline,
			    struct my_rows **out, struct lr_err *err)
{
	return q_run_n(st, sql, 1, what, deadline, out, err);
}

/* The first row of res with at least n columns, or NULL. */
static my_row row_of(struct my_rows *res, unsigned n)
{
	if (!res || res->nf < n)
		return NULL;
	return my_rows_next(res);
}

/* The string s as a SQL literal in buf, the same whatever the session's
 * sql_mode (NO_BACKSLASH_ESCAPES or not): quoted, its quotes doubled,
 * or, if it holds a backslash or a control character, in hex
 * (_utf8mb4 X'...').  0, or -1 if it does not fit. */
static int literal(const char *s, char *buf, size_t len)
{
	size_t n = strlen(s), i, o = 0;
	int plain = 1;

	for (i = 0; i < n; i++)
		if (s[i] == '\\' || (unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			plain = 0;
	if (plain) {
		if (2 * n + 3 > len)
			return -1;
		buf[o++] = '\'';
		for (i = 0; i < n; i++) {
			if (s[i] == '\'')
				buf[o++] = '\'';
			buf[o++] = s[i];
		}
	} else {
		if (2 * n + 13 > len) /* _utf8mb4 X'...'\0 */
			return -1;
		memcpy(buf, "_utf8mb4 X'", 11);
		o = 11;
		for (i = 0; i < n; i++) {
			buf[o++] = "0123456789abcdef"[(unsigned char)s[i] >> 4];
			buf[o++] = "0123456789abcdef"[s[i] & 15];
		}
	}
	buf[o++] = '\'';
	buf[o] = '\0';
	return 0;
}

/* ---- connecting -------------------------------------------------------- */

/* TCP keepalive on our end, from the TTL: the first probe after a third
 * of it, and enough probes to reach past it; TCP_USER_TIMEOUT the TTL. */
static void keepalive(int fd, int64_t ttl_ms)
{
	int on = 1, idle, intvl, cnt;
	unsigned uto;
	long ttl_s;

	if (ttl_ms <= 0)
		ttl_ms = 10000;
	ttl_s = (long)((ttl_ms + 999) / 1000);
	idle = ttl_s / 3 > 0 ? (int)(ttl_s / 3) : 1;
	intvl = ttl_s / 6 > 0 ? (int)(ttl_s / 6) : 1;
	cnt = (int)((ttl_s - idle) / intvl + 2);
	uto = ttl_ms > UINT_MAX ? UINT_MAX : (unsigned)ttl_ms;
	/* Best effort: a Unix socket has none of these. */
	(void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	(void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &uto, sizeof(uto));
}

/* ---- TLS ------------------------------------------------------------- */

/* After the connect to host (NULL: a socket): a warning where the login
 * could go in clear (PREFERRED), or the connection crosses the network
 * without TLS.  (A mode that requires TLS was met by the login.) */
static void tls_warn(struct lr_store *st, const char *host)
{
	char msg[LR_ERRLEN];

	if (st->tls_warned || !st->req->warn)
		return;
	if (st->o[O_SSL_MODE].n == TLS_PREFERRED && st->password && host)
		/* As libpq's sslmode=prefer: the store of passwords says so. */
		snprintf(msg, sizeof(msg),
			 "MySQL at %s: the password goes out with "
			 "ssl-mode=PREFERRED, which lets a server (or whoever "
			 "answers in its place) that declines TLS have the "
			 "login in clear%s; add ssl-mode=VERIFY_IDENTITY to "
			 "the URL",
			 st->where, st->c.tls ? "" : ", as this one did");
	else if (!st->c.tls && host && !lr_host_is_local(host))
		snprintf(msg, sizeof(msg),
			 "MySQL at %s: the connection is not encrypted "
			 "(ssl-mode=%s) and crosses the network; add "
			 "ssl-mode=VERIFY_IDENTITY to the URL",
			 st->where, ssl_modes[st->o[O_SSL_MODE].n]);
	else
		return;
	st->tls_warned = 1;
	st->req->warn(st->req->warn_ctx, msg);
}

/* The user of a URL that names none: the login name, as the mysql
 * client takes it (a user authenticated by unix_socket, over a socket,
 * then needs no URL user at all).  "" if it has none. */
static const char *login_name(char *buf, size_t len)
{
	struct passwd pw, *p = NULL;
	char tmp[1024];

	buf[0] = '\0';
	if (getpwuid_r(geteuid(), &pw, tmp, sizeof(tmp), &p) == 0 && p)
		snprintf(buf, len, "%s", p->pw_name);
	return buf;
}

/* One connection attempt to host h (NULL: the socket option), by
 * deadline. */
static enum lr_status connect_one(struct lr_store *st,
				  const struct lr_url_host *h,
				  int64_t deadline, struct lr_err *err)
{
	unsigned mode = st->o[O_SSL_MODE].n;
	const char *user = st->req->u->user;
	char me[256];
	struct my_login l = {
		.host = h ? h->host : NULL,
		.port = h ? h->port : 0,
		.path = st->o[O_SOCKET].s,
		.user = user && *user ? user : login_name(me, sizeof(me)),
		.password = st->password,
		.db = st->db,
		.tls = mode == TLS_DISABLED    ? MY_TLS_NO
		       : mode == TLS_PREFERRED ? MY_TLS_IF_OFFERED
					       : MY_TLS_MUST,
		/* PREFERRED and REQUIRED verify nothing (as the mysql
		 * client); VERIFY_CA checks the chain (against ssl-ca, else
		 * the system's CAs), VERIFY_IDENTITY also the host name. */
		.tls_conf = {
			.host = h ? h->host : NULL,
			.cacert = st->o[O_SSL_CA].s,
			.cert = st->o[O_SSL_CERT].s,
			.key = st->o[O_SSL_KEY].s,
			.verify = mode == TLS_VERIFY_IDENTITY ? LR_TLS_VERIFY_FULL
				  : mode == TLS_VERIFY_CA     ? LR_TLS_VERIFY_CHAIN
							      : LR_TLS_VERIFY_NONE,
		},
	};
	enum lr_status s;

	if (h)
		lr_url_host_format(h, st->where, sizeof(st->where));
	else
		snprintf(st->where, sizeof(st->where), "%s", st->o[O_SOCKET].s);
	s = my_wire_connect(&st->c, &l, deadline);
	if (s == LR_TIMEOUT)
		lr_err_set(err, "cannot connect to MySQL at %s: timed out",
			   st->where);
	else if (s != LR_OK)
		lr_err_set(err, "cannot connect to MySQL at %s: %s%s",
			   st->where, st->c.msg,
			   st->c.err == ER_ACCESS_DENIED_ERROR &&
					   mode <= TLS_PREFERRED
				   ? " (or the server requires TLS: "
				     "require_secure_transport; add "
				     "ssl-mode=VERIFY_IDENTITY)"
				   : "");
	if (s == LR_ERROR && (heals(st->c.err) || st->c.heals))
		lr_err_heals(err);
	if (s == LR_OK) {
		if (h)
			keepalive(st->c.s.fd, st->req->ttl_ms);
		tls_warn(st, h ? h->host : NULL);
	}
	return s;
}

/* Once per store: where the fences' durability falls short of the
 * promise (the table not InnoDB, or InnoDB not flushing each commit),
 * the user is told.  engine and flush as the server said (NULL unknown:
 * no table yet). */
static void durability(struct lr_store *st, const char *engine,
		       const char *flush)
{
	char msg[LR_ERRLEN];
	int eng = engine && strcasecmp(engine, "InnoDB") != 0;
	int fl = flush && strcmp(flush, "1") != 0;

	if (st->warned || !st->req->warn || !st->req->token || (!eng && !fl))
		return;
	if (eng)
		snprintf(msg, sizeof(msg),
			 "MySQL at %s: the table %s is %s, not InnoDB: a "
			 "fence may be handed out again after a crash of the "
			 "server; ALTER TABLE %s ENGINE=InnoDB",
			 st->where, FENCE_TABLE, engine, FENCE_TABLE);
	else
		snprintf(msg, sizeof(msg),
			 "MySQL at %s: innodb_flush_log_at_trx_commit is %s, "
			 "not 1: a fence may be handed out again after a "
			 "crash of the server's host",
			 st->where, flush);
	st->warned = 1;
	st->req->warn(st->req->warn_ctx, msg);
}

/* Runs the n statements of sql (each ending in '\0', one after the
 * other) in one round trip where the server takes statements together,
 * else one by one; their rows chained in order (struct my_rows).  The
 * first that fails ends the batch: *done says how many were answered
 * before it (n on LR_OK), and *out keeps their rows (my_rows_free it
 * whatever the status). */
static enum lr_status q_batch(struct lr_store *st, const char *sql, size_t n,
			      const char *what, int64_t deadline,
			      struct my_rows **out, size_t *done,
			      struct lr_err *err)
{
	char all[8192];
	struct my_rows **tail = out, *res;
	const char *p = sql;
	size_t i, len = 0;
	enum lr_status s = LR_OK;

	*out = NULL;
	*done = 0;
	if (st->c.multi) {
		for (i = 0; i < n; p += strlen(p) + 1, i++) {
			size_t k = strlen(p);

			if (len + k + 3 > sizeof(all)) {
				lr_err_set(err, "MySQL: a statement too long");
				return LR_ERROR;
			}
			if (i) {
				memcpy(all + len, "; ", 2);
				len += 2;
			}
			memcpy(all + len, p, k + 1);
			len += k;
		}
		s = q_run_n(st, all, (unsigned)n, what, deadline, out, err);
		*done = s == LR_OK ? n : s == LR_ERROR ? st->c.done : 0;
		return s;
	}
	for (i = 0; i < n && s == LR_OK; p += strlen(p) + 1, i++) {
		s = q_run(st, p, what, deadline, &res, err);
		*tail = res;
		while (*tail)
			tail = &(*tail)->more;
		if (s == LR_OK)
			(*done)++;
	}
	return s;
}

/* others()'s statement, for the lock lock (SQL: a literal, or an
 * expression of @lr_full). */
static void others_sql(const struct lr_store *st, const char *lock,
		       char *buf, size_t len)
{
	snprintf(buf, len,
		 "SELECT COALESCE(IS_USED_LOCK(%s), CONNECTION_ID()) <> "
		 "CONNECTION_ID(), MAX(IF(lim <> %u, lim, NULL)), SUM(shared) "
		 "FROM " HOLDERS_TABLE " WHERE " LIVE_SQL
		 " AND conn <> CONNECTION_ID()",
		 lock, st->req->limit, lock);
}

/* others()'s answer res into o; 0, or -1 if it has no row. */
static int others_row(struct my_rows *res, struct others *o)
{
	my_row r = row_of(res, 3);

	memset(o, 0, sizeof(*o));
	if (!r)
		return -1;
	o->plain_held = r[0] && strcmp(r[0], "0") != 0;
	o->limit = r[1] ? (unsigned)strtoul(r[1], NULL, 10) : 0;
	o->shared = r[2] ? strtoul(r[2], NULL, 10) : 0;
	return 0;
}

/* others()'s statement failed with e for want of holders: no shared
 * holder nor semaphore has come this way (no table), or this user may
 * not see them (leaserun-mysql(7) says so). */
static int no_holders(unsigned e)
{
	return e == ER_NO_SUCH_TABLE || e == ER_TABLEACCESS_DENIED_ERROR;
}

/* Galera and Group Replication keep GET_LOCK to the node it is taken
 * on: two nodes would each grant the same lease.  wsrep_on is ON on a
 * Galera node, and group_replication_group_name is set on a server
 * configured as a member of a group.  MariaDB (which has no Group
 * Replication) is asked @@wsrep_on in the setup's SELECT, as cheap as
 * any column; any other server, SHOW VARIABLES for both (which reads
 * every variable: 0.5 ms), since MySQL has no @@wsrep_on and a server
 * without the plugin no @@group_replication_group_name.  wsrep is
 * @@wsrep_on (NULL: not asked); vars SHOW VARIABLES's rows (NULL: not
 * asked).  (tests/mysql.bats starts a Galera node; MySQL, the only
 * server with Group Replication, is not in Debian, so
 * tests/hostile.bats has a server answer as a member would.) */
static enum lr_status cluster_guard(struct lr_store *st, const char *wsrep,
				    struct my_rows *vars, struct lr_err *err)
{
	const char *what = NULL;
	my_row r;

	if (wsrep && (!strcmp(wsrep, "1") || !strcasecmp(wsrep, "ON")))
		what = "a Galera node (wsrep_on)";
	while (!what && (r = row_of(vars, 2))) {
		if (!r[0] || !r[1])
			continue;
		if (!strcasecmp(r[0], "wsrep_on") && !strcasecmp(r[1], "ON"))
			what = "a Galera node (wsrep_on)";
		else if (!strcasecmp(r[0], "group_replication_group_name") &&
			 *r[1])
			what = "a Group Replication member "
			       "(group_replication_group_name is set)";
	}
	if (!what)
		return LR_OK;
	lr_err_set(err,
		   "MySQL at %s is %s: its GET_LOCK() locks are its own, not "
		   "the cluster's, so two nodes could grant the same lease; "
		   "use a server outside the cluster, or another store",
		   st->where, what);
	return LR_ERROR;
}

/* durability() for engine (NULL: no table; "": a table whose SHOW
 * CREATE TABLE did not say, which information_schema is asked) and
 * flush. */
static enum lr_status durable(struct lr_store *st, const char *engine,
			      const char *flush, int64_t deadline,
			      struct lr_err *err)
{
	struct my_rows *res = NULL;
	enum lr_status s = LR_OK;
	my_row r;

	if (engine && !*engine && !st->warned && st->req->warn &&
	    st->req->token) {
		s = q_run(st, ENGINE_SQL, "asking the fences' engine", deadline,
			  &res, err);
		r = s == LR_OK ? row_of(res, 1) : NULL;
		engine = r ? r[0] : NULL;
		if (s == LR_ERROR && !st->gone && !st->c.broken)
			s = LR_OK; /* a courtesy: unknown, as without a table */
	}
	if (s == LR_OK)
		durability(st, engine && *engine ? engine : NULL, flush);
	my_rows_free(res);
	return s;
}

/* Adds a statement to the n of sql (each ending in '\0', as q_batch()
 * takes them), at *at, of len in all.  0, or -1 if it does not fit. */
static int add_stmt(char *sql, size_t len, size_t *at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int add_stmt(char *sql, size_t len, size_t *at, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*at >= len)
		return -1;
	va_start(ap, fmt);
	n = vsnprintf(sql + *at, len - *at, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= len - *at)
		return -1;
	*at += (size_t)n + 1;
	return 0;
}

/* The engine that rs, the answer to SHOW CREATE TABLE of the fences'
 * table, names, into buf; NULL if it names none (a view, or a sql_mode
 * with NO_TABLE_OPTIONS, which leaves the table's options out). */
static const char *engine_of(struct my_rows *rs, char *buf, size_t len)
{
	my_row r = row_of(rs, 2);
	const char *p;
	size_t n;

	if (!r || !r[1] || !(p = strstr(r[1], "\n) ENGINE=")))
		return NULL;
	p += strlen("\n) ENGINE=");
	n = strcspn(p, " \n");
	if (!n || n >= len)
		return NULL;
	memcpy(buf, p, n);
	buf[n] = '\0';
	return buf;
}

/* The plain lease's first try, sent with the setup (setup()): rs the
 * rows of the try and of the look for the others that followed it,
 * answered how many of the two were answered, e the error of the one
 * that failed.  What is missing or unclear here, plain_acquire() asks
 * again, as it does on every later try: the try is the same statement
 * (it finds the lock ours if the batch took it), and others() is asked
 * after it. */
static void prefetched(struct lr_store *st, struct my_rows *rs,
		       size_t answered, unsigned e)
{
	my_row r;

	if (answered < 1 || !rs || rs->nf != 1 || !(r = row_of(rs, 1)))
		return;
	st->pre_lock = 1;
	st->pre_got = r[0] ? strtol(r[0], NULL, 10) : -1;
	if (answered >= 2)
		st->pre_others = rs->more && rs->more->nf == 3 &&
				 others_row(rs->more, &st->pre_o) == 0;
	else if (no_holders(e)) {
		memset(&st->pre_o, 0, sizeof(st->pre_o));
		st->pre_others = 1;
	}
}

/* The session's settings, and what it is: its connection id, the lock
 * names, whether the server is read-only or one node of a cluster
 * (cluster_guard()), and how durable the fences are.  One round trip:
 * a SET, the SELECT, and on a server other than MariaDB SHOW
 * VARIABLES.
 *
 * The fences' table's engine: where the server takes statements
 * together, SHOW CREATE TABLE in the same batch, which the server
 * answers from the table's definition it keeps open; MariaDB answers
 * information_schema by opening the table's .frm file again, for each
 * statement, and a run pays that each time.  Its error (no table yet,
 * or not this user's to see) ends the batch there: the engine is then
 * unknown, as information_schema would say, and the first try is asked
 * later.  A server that takes one statement at a time is asked
 * information_schema in the SELECT, as before (one round trip fewer
 * for it).
 *
 * A run of the plain lease whose try follows at once (trying: the
 * setup of acquire(), or of an open() that the first acquire() follows
 * with no --splay between them, which would keep the lock through the
 * pause) also sends its first try (TRY_SQL) and the look for the others
 * (others()) in that round trip, after the setup's statements and in
 * that order, where the server takes statements together: two round
 * trips fewer.
 * Their answers wait for plain_acquire() (prefetched()).  If the setup
 * then refuses the server (a cluster's node, read-only, an answer that
 * makes no sense) with the lock taken, my_connect() closes the
 * connection, as it does after every failure here: the session ends,
 * and the lock with it.  The grant's fence is still written by
 * plain_acquire(), after the grant is known, in a statement (and a
 * commit) of its own; the server's wait_timeout counts from that
 * statement on, so taking the lock a little earlier shortens nothing. */
static enum lr_status setup(struct lr_store *st, int trying,
			    int64_t deadline, struct lr_err *err)
{
	char sql[6000], pre[200], name[500], lock[600], rlock[600];
	char trysql[1400], look[1600], eng[64];
	const char *engine;
	const char *prefix = st->o[O_PREFIX].s;
	long wt = (long)((st->req->ttl_ms + 999) / 1000) + 1;
	struct my_rows *res = NULL, *vars, *rest;
	my_row r;
	enum lr_status s;
	int wsrep = st->c.mariadb, bad = 0;
	int ahead = st->req->token && trying && !slotted(st) && st->c.multi;
	size_t at, k, ks, ke, done;
	unsigned late;

	if (literal(prefix, pre, sizeof(pre)) < 0 ||
	    literal(st->req->name, name, sizeof(name)) < 0) {
		lr_err_set(err, "MySQL: the lease name or prefix is too long");
		return LR_ERROR;
	}
	snprintf(lock, sizeof(lock), LOCK_SQL, "@lr_full");
	lock_expr(rlock, sizeof(rlock), "'#r', CONNECTION_ID()");
	snprintf(trysql, sizeof(trysql), TRY_SQL, lock);
	others_sql(st, lock, look, sizeof(look));
again:
	/* wait_timeout: the server ends a silent holder's session (and
	 * frees its lock) about one TTL after it last heard from it, never
	 * before our own deadline.  autocommit: each fence is committed
	 * on its own.  time_zone UTC: UNIX_TIMESTAMP(NOW(6)) (the fence's
	 * floor, the runs' times) is then exact, even in the hour that a
	 * local zone repeats when daylight saving time ends.  @lr_full:
	 * what the lock names are made of. */
	at = 0;
	bad |= add_stmt(sql, sizeof(sql), &at,
			"SET SESSION wait_timeout = %ld, SESSION autocommit "
			"= 1, SESSION time_zone = '+00:00', @lr_full = "
			"CONCAT(%s, %s)",
			wt, pre, name);
	bad |= add_stmt(sql, sizeof(sql), &at,
			"SELECT CONNECTION_ID(), %s, @@read_only, "
			"@@innodb_flush_log_at_trx_commit, %s, %s%s%s",
			lock, rlock, st->c.multi ? "NULL" : "(",
			st->c.multi ? "" : ENGINE_SQL ")",
			wsrep ? ", @@wsrep_on" : "");
	k = 2;
	if (!st->c.mariadb) {
		bad |= add_stmt(sql, sizeof(sql), &at,
				"SHOW VARIABLES WHERE Variable_name IN "
				"('wsrep_on', 'group_replication_group_name')");
		k = 3;
	}
	ks = k;
	if (st->c.multi) {
		bad |= add_stmt(sql, sizeof(sql), &at,
				"SHOW CREATE TABLE " FENCE_TABLE);
		k++;
	}
	ke = k;
	if (ahead) {
		bad |= add_stmt(sql, sizeof(sql), &at, "%s", trysql);
		bad |= add_stmt(sql, sizeof(sql), &at, "%s", look);
		k += 2;
	}
	if (bad) {
		lr_err_set(err, "MySQL: the lease name or prefix is too long");
		return LR_ERROR;
	}
	s = q_batch(st, sql, k, "setting up the session", deadline, &res,
		    &done, err);
	if (s == LR_ERROR && done < ks && wsrep &&
	    st->c.err == ER_UNKNOWN_SYSTEM_VARIABLE && !st->gone &&
	    !st->c.broken) {
		my_rows_free(res);
		wsrep = 0; /* a MariaDB built without Galera */
		goto again;
	}
	if (s == LR_TIMEOUT ||
	    (s == LR_ERROR && (done < ks || st->gone || st->c.broken))) {
		my_rows_free(res);
		return s;
	}
	/* The setup was answered in full: a failure past it was of SHOW
	 * CREATE TABLE, the try or the look, which prefetched() leaves to
	 * plain_acquire(). */
	late = s == LR_ERROR ? st->c.err : 0;
	*err = (struct lr_err){ "", 0 };
	r = row_of(res, 6);
	vars = st->c.mariadb || !res ? NULL : res->more;
	rest = vars ? vars->more : res ? res->more : NULL;
	engine = NULL;
	if (ke > ks && done > ks) {
		/* SHOW CREATE TABLE's answer: the engine it names. */
		engine = engine_of(rest, eng, sizeof(eng));
		if (!engine && rest && rest->nf == 2)
			engine = ""; /* a table whose engine it does not say */
		rest = rest ? rest->more : NULL;
	}
	if (!r || !r[0] || !r[1] || !r[4] ||
	    literal(r[1], st->lock, sizeof(st->lock)) < 0 ||
	    literal(r[4], st->rlock, sizeof(st->rlock)) < 0 ||
	    (wsrep && res->nf < 7) || (!st->c.mariadb && !vars)) {
		lr_err_set(err, "MySQL at %s: unexpected answer to the setup",
			   st->where);
		my_rows_free(res);
		return LR_ERROR;
	}
	st->conn_id = strtoul(r[0], NULL, 10);
	s = cluster_guard(st, wsrep && r[6] ? r[6] : NULL, vars, err);
	if (s == LR_OK && r[2] && strcmp(r[2], "0") != 0 && st->req->token) {
		lr_err_set(err,
			   "MySQL at %s is read-only: the fence cannot be "
			   "written; point the URL at the primary",
			   st->where);
		lr_err_heals(err); /* a failover may be under way */
		s = LR_ERROR;
	} else if (s == LR_OK) {
		s = durable(st, ke > ks ? engine : r[5], r[3], deadline, err);
	}
	if (s == LR_OK && ahead)
		prefetched(st, rest, done > ke ? done - ke : 0, late);
	my_rows_free(res);
	return s;
}

static void disconnect(struct lr_store *st)
{
	/* Rows still coming, of a statement out of time: unread. */
	if (st->c.state != MW_IDLE)
		my_wire_cut(&st->c);
	my_wire_close(&st->c);
	st->held = 0;
	st->pre_lock = st->pre_others = 0;
	st->gone = 0;
	st->gone_why[0] = '\0';
}

/* Connects to the first host that answers, and sets the session up;
 * trying: an acquire() follows at once (setup()). */
static enum lr_status my_connect(struct lr_store *st, int trying,
				 int64_t deadline, struct lr_err *err)
{
	enum lr_status s = LR_ERROR;
	size_t i, n = st->o[O_SOCKET].s ? 1 : st->nhosts;

	for (i = 0; i < n; i++) {
		disconnect(st);
		s = connect_one(st, st->o[O_SOCKET].s ? NULL : &st->hosts[i],
				deadline, err);
		if (s == LR_OK)
			s = setup(st, trying, deadline, err);
		/* The next host only for a fault of this one. */
		if (s == LR_OK || (s == LR_ERROR && !err->heals))
			break;
	}
	if (s != LR_OK)
		disconnect(st);
	return s;
}

/* The TLS options together: ssl-ca alone means VERIFY_CA (as for the
 * mysql client), a client certificate needs its key and the other way
 * round, and no file goes with DISABLED.  0, or -1 with why. */
static int tls_parse(struct lr_store *st, unsigned given, char *why,
		     size_t len)
{
	int files = st->o[O_SSL_CA].s || st->o[O_SSL_CERT].s ||
		    st->o[O_SSL_KEY].s;

	if (!(given & 1u << O_SSL_MODE) && st->o[O_SSL_CA].s)
		st->o[O_SSL_MODE].n = TLS_VERIFY_CA;
	if (!st->o[O_SSL_CERT].s != !st->o[O_SSL_KEY].s) {
		snprintf(why, len, "mysql URL: ssl-cert and ssl-key go "
				   "together");
		return -1;
	}
	if (files && st->o[O_SSL_MODE].n == TLS_DISABLED) {
		snprintf(why, len, "mysql URL: ssl-mode=DISABLED with "
				   "ssl-ca, ssl-cert or ssl-key");
		return -1;
	}
	return 0;
}

/* Reads the URL: hosts (or a socket), user, password, database, options. */
static enum lr_status parse(struct lr_store *st, struct lr_err *err)
{
	const struct lr_url *u = st->req->u;
	const char *pw = u->password ? u->password : getenv("MYSQL_PWD");
	char why[LR_ERRLEN];
	unsigned given;

	st->o[O_SOCKET].s = NULL;
	st->o[O_PREFIX].s = "leaserun:";
	st->o[O_SSL_MODE].n = TLS_DISABLED;
	st->o[O_SSL_CA].s = st->o[O_SSL_CERT].s = st->o[O_SSL_KEY].s = NULL;
	if (lr_url_opts(u, "mysql", opts, O_N, st->o, &given, why,
			sizeof(why)) < 0 ||
	    tls_parse(st, given, why, sizeof(why)) < 0) {
		lr_err_set(err, "%s", why);
		return LR_ERROR;
	}
	if (!st->o[O_SOCKET].s &&
	    lr_url_hosts(u, "mysql", NULL, DEFAULT_PORT, MAX_HOSTS,
			 &st->hosts, &st->nhosts, why, sizeof(why)) < 0) {
		lr_err_set(err, "%s", why);
		return LR_ERROR;
	}
	if (st->o[O_SOCKET].s && u->hosts[0]) {
		lr_err_set(err, "mysql URL: give a host or ?socket=, not both");
		return LR_ERROR;
	}
	if (!u->path[0] || !u->path[1] || strchr(u->path + 1, '/')) {
		lr_err_set(err, "mysql URL: name one database "
				"(mysql://HOST/DATABASE), for the table of "
				"fences");
		return LR_ERROR;
	}
	st->db = strdup(u->path + 1);
	st->password = pw ? strdup(pw) : NULL;
	if (!st->db || (pw && !st->password)) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	return LR_OK;
}

/* ---- the contract ------------------------------------------------------ */

static enum lr_status my_open(const struct lr_store_req *req, int64_t deadline,
			      struct lr_store **out, struct lr_err *err)
{
	struct lr_store *st = calloc(1, sizeof(*st));
	enum lr_status s;

	*out = st;
	if (!st) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	st->req = req;
	lr_stream_init(&st->c.s, -1);
	snprintf(st->where, sizeof(st->where), "%s", "the server");
	s = parse(st, err);
	return s == LR_OK ? my_connect(st, req->acquire_next, deadline, err)
			  : s;
}

static enum lr_status lost(struct lr_store *st, struct lr_err *err)
{
	lr_err_set(err, "MySQL at %s ended our session (%s): the lock went "
			"with it",
		   st->where, st->gone_why);
	st->held = 0;
	return LR_LOST;
}

/* A missing or forbidden table (create, its CREATE statement): create
 * it if we may, else one line with the statement and the grant.  LR_OK:
 * try again. */
static enum lr_status table_fix(struct lr_store *st, const char *table,
				const char *create, int64_t deadline,
				struct lr_err *err)
{
	unsigned e = st->c.err;
	struct my_rows *res = NULL;
	enum lr_status s;

	if (e == ER_NO_SUCH_TABLE) {
		s = q_run(st, create, "creating a table", deadline, &res, err);
		my_rows_free(res);
		if (s != LR_ERROR || st->c.err != ER_TABLEACCESS_DENIED_ERROR)
			return s;
		lr_err_set(err,
			   "MySQL at %s: the table %s.%s does not exist and "
			   "this user may not create it: run %s (or GRANT "
			   "CREATE ON %s.* to the user)",
			   st->where, st->db, table, create, st->db);
		return LR_ERROR;
	}
	if (e == ER_TABLEACCESS_DENIED_ERROR || e == ER_COLUMNACCESS_DENIED_ERROR)
		lr_err_set(err,
			   "MySQL at %s: this user may not write the table %s: "
			   "GRANT SELECT, INSERT, UPDATE%s ON %s.%s to the user",
			   st->where, table,
			   strcmp(table, HOLDERS_TABLE) ? "" : ", DELETE", st->db,
			   table);
	return LR_ERROR;
}

/* Runs sql (a write to table), creating the table on first use. */
static enum lr_status q_write(struct lr_store *st, const char *sql,
			      const char *table, const char *create,
			      int64_t deadline, struct lr_err *err)
{
	struct my_rows *res = NULL;
	enum lr_status s = LR_ERROR;
	int tries;

	for (tries = 0; tries < 2; tries++) {
		s = q_run(st, sql, "writing the table", deadline, &res, err);
		my_rows_free(res);
		if (s != LR_ERROR || st->gone)
			break;
		s = table_fix(st, table, create, deadline, err);
		if (s != LR_OK)
			break;
	}
	return s;
}

/* The least next fence: the server's clock in microseconds (exact: the
 * session's time zone is UTC).  A row that was deleted, or a table
 * restored from an older backup, then cannot repeat a fence, as long as
 * the server's clock does not go back across the loss: each fence is at
 * most the clock when it was granted, grants being more than a
 * microsecond apart.  The Redis store does the same. */
#define FENCE_FLOOR "CAST(UNIX_TIMESTAMP(NOW(6)) * 1000000 AS UNSIGNED)"

/* Bumps the name's fence, to the larger of the row's fence plus one and
 * FENCE_FLOOR, committed before the answer comes back (autocommit); the
 * plain lease's grant also records us as the holder. */
static enum lr_status fence_bump(struct lr_store *st, int64_t deadline,
				 struct lr_err *err)
{
	char sql[1400], host[600];
	enum lr_status s;

	if (literal(st->req->host ? st->req->host : "", host,
		    sizeof(host)) < 0)
		snprintf(host, sizeof(host), "''");
	if (slotted(st))
		snprintf(sql, sizeof(sql),
			 "INSERT INTO " FENCE_TABLE " (name, fence) VALUES "
			 "(%s, LAST_INSERT_ID(" FENCE_FLOOR ")) ON DUPLICATE "
			 "KEY UPDATE fence = LAST_INSERT_ID(GREATEST(fence + "
			 "1, " FENCE_FLOOR "))",
			 st->lock);
	else
		snprintf(sql, sizeof(sql),
			 "INSERT INTO " FENCE_TABLE " (name, fence, host, pid, "
			 "since_ms, conn) VALUES (%s, LAST_INSERT_ID("
			 FENCE_FLOOR "), %s, %ld, %" PRId64 ", "
			 "CONNECTION_ID()) ON DUPLICATE KEY UPDATE fence = "
			 "LAST_INSERT_ID(GREATEST(fence + 1, " FENCE_FLOOR
			 ")), host = VALUES(host), pid = VALUES(pid), "
			 "since_ms = VALUES(since_ms), conn = VALUES(conn)",
			 st->lock, host, st->req->pid, st->req->since_ms);
	s = q_write(st, sql, FENCE_TABLE, TABLE_SQL, deadline, err);
	if (s != LR_OK)
		return s;
	st->fence = st->c.insert_id;
	if (st->fence == 0) {
		lr_err_set(err, "MySQL at %s: no fence came back", st->where);
		return LR_ERROR;
	}
	return LR_OK;
}

/* Our row among the holders: lock, slot, fence, who we are. */
static enum lr_status holder_row(struct lr_store *st, int64_t deadline,
				 struct lr_err *err)
{
	char sql[2400], host[600];

	if (literal(st->req->host ? st->req->host : "", host,
		    sizeof(host)) < 0)
		snprintf(host, sizeof(host), "''");
	snprintf(sql, sizeof(sql),
		 "INSERT INTO " HOLDERS_TABLE " (lock_name, name, lim, shared, "
		 "slot, fence, host, pid, since_ms, conn) VALUES (%s, %s, %u, "
		 "%d, %u, %" PRIu64 ", %s, %ld, %" PRId64 ", CONNECTION_ID()) "
		 "ON DUPLICATE KEY UPDATE name = VALUES(name), lim = "
		 "VALUES(lim), shared = VALUES(shared), slot = VALUES(slot), "
		 "fence = VALUES(fence), host = VALUES(host), pid = "
		 "VALUES(pid), since_ms = VALUES(since_ms), conn = VALUES(conn)",
		 st->mine, st->lock, st->req->limit, st->req->shared ? 1 : 0,
		 st->slot, st->fence, host, st->req->pid, st->req->since_ms);
	return q_write(st, sql, HOLDERS_TABLE, HOLDERS_SQL, deadline, err);
}

/* Who else is there (struct others), asked after taking our own lock
 * (and writing our row), so that of two runs that come at once at least
 * one sees the other. */
static enum lr_status others(struct lr_store *st, int64_t deadline,
			     struct others *o, struct lr_err *err)
{
	char sql[1200];
	struct my_rows *res = NULL;
	enum lr_status s;

	memset(o, 0, sizeof(*o));
	others_sql(st, st->lock, sql, sizeof(sql));
	s = q_run(st, sql, "looking for other holders", deadline, &res, err);
	if (s == LR_ERROR && !st->gone && no_holders(st->c.err))
		return LR_OK;
	if (s == LR_OK)
		others_row(res, o);
	my_rows_free(res);
	return s;
}

/* Gives back the lock we took in a try that is not granted; a session
 * that cannot, ends (which frees it). */
static void give_back(struct lr_store *st, int64_t deadline)
{
	char sql[800];
	struct my_rows *res = NULL;
	struct lr_err ignored;

	snprintf(sql, sizeof(sql), "SELECT RELEASE_LOCK(%s)", st->mine);
	if (st->held && !st->gone && lr_now_ms() < deadline &&
	    q_run(st, sql, "RELEASE_LOCK", deadline, &res, &ignored) == LR_OK)
		st->held = 0;
	my_rows_free(res);
	if (st->held)
		disconnect(st);
	st->held = 0;
}

/* A run whose limit differs from the holders' (recorded: theirs). */
static enum lr_status refuse(struct lr_store *st, unsigned recorded,
			     int64_t deadline, struct lr_err *err)
{
	give_back(st, deadline);
	lr_err_limit(err, st->req, recorded);
	return LR_ERROR;
}

/* One statement that asks for a lock, and its answer as a number:
 * *got gets it (-1: none). */
static enum lr_status q_lock(struct lr_store *st, const char *sql,
			     int64_t deadline, long *got, struct lr_err *err)
{
	struct my_rows *res = NULL;
	my_row r;
	enum lr_status s;

	*got = -1;
	s = q_run(st, sql, "GET_LOCK", deadline, &res, err);
	if (s == LR_ERROR && (st->gone || st->c.broken))
		/* Holding nothing: the next attempt connects again (a
		 * restart or a failover ends every session). */
		disconnect(st);
	if (s == LR_OK && (r = row_of(res, 1)) && r[0])
		*got = strtol(r[0], NULL, 10);
	my_rows_free(res);
	return s;
}

/* The plain lease, or an exclusive run beside shared ones: its lock,
 * then a look for holders of other kinds.  While shared holders remain,
 * a run that waits keeps the lock, so that no later shared run passes
 * it (they see the lock taken), and asks again.  The first try on a new
 * connection was asked with the setup (setup()): its answers are used
 * once, and every later try asks. */
static enum lr_status plain_acquire(struct lr_store *st, int64_t deadline,
				    struct lr_err *err)
{
	char sql[800];
	struct others o;
	enum lr_status s;
	long got = st->pre_got;
	int pre_lock = st->pre_lock, pre_others = st->pre_others;

	st->pre_lock = st->pre_others = 0;
	if (!pre_lock) {
		snprintf(sql, sizeof(sql), TRY_SQL, st->lock);
		s = q_lock(st, sql, deadline, &got, err);
		if (s != LR_OK)
			return s;
	}
	if (got != 1)
		return LR_BUSY;
	snprintf(st->mine, sizeof(st->mine), "%s", st->lock);
	st->held = 1;
	if (pre_others) {
		o = st->pre_o;
		s = LR_OK;
	} else {
		s = others(st, deadline, &o, err);
	}
	if (s == LR_OK && o.limit)
		return refuse(st, o.limit, deadline, err);
	if (s == LR_OK && o.shared && st->queued) {
		st->held = 0; /* kept, but not granted */
		return LR_BUSY;
	}
	if (s == LR_OK && o.shared)
		s = LR_BUSY;
	if (s == LR_OK)
		s = fence_bump(st, deadline, err);
	if (s != LR_OK)
		/* Not granted: give it back (closing the session would too). */
		give_back(st, deadline);
	return s;
}

/* A semaphore's slots, the lowest free one first, each asked without
 * waiting, in one statement (CASE stops at the first it gets): *k gets
 * the slot, or -1. */
static enum lr_status slot_try(struct lr_store *st, int64_t deadline,
			       long *k, struct lr_err *err)
{
	size_t len = 64 + (size_t)st->req->limit * 400, n;
	char *sql = malloc(len), lock[600], tail[24];
	enum lr_status s;
	unsigned i;

	if (!sql) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	n = (size_t)snprintf(sql, len, "SELECT CASE");
	for (i = 0; i < st->req->limit; i++) {
		snprintf(tail, sizeof(tail), "'#%u'", i);
		lock_expr(lock, sizeof(lock), tail);
		n += (size_t)snprintf(sql + n, len - n,
				      " WHEN GET_LOCK(%s, 0) = 1 THEN %u",
				      lock, i);
	}
	snprintf(sql + n, len - n, " ELSE -1 END");
	s = q_lock(st, sql, deadline, k, err);
	free(sql);
	if (s == LR_OK && *k >= 0) {
		st->slot = (unsigned)*k;
		snprintf(tail, sizeof(tail), "'#%u'", st->slot);
		lock_expr(st->mine, sizeof(st->mine), tail);
	}
	return s;
}

/* A shared run's own lock (one per session), unless the plain lock is
 * taken (an exclusive holder, or one waiting for the shared ones to
 * finish): *k 0 then, else 0 for slot 0. */
static enum lr_status reader_try(struct lr_store *st, int64_t deadline,
				 long *k, struct lr_err *err)
{
	char sql[1400];
	enum lr_status s;

	snprintf(sql, sizeof(sql),
		 "SELECT IF(IS_USED_LOCK(%s) IS NOT NULL, -1, "
		 "IF(IS_USED_LOCK(%s) <=> CONNECTION_ID(), 0, "
		 "IF(GET_LOCK(%s, 0) = 1, 0, -1)))",
		 st->lock, st->rlock, st->rlock);
	s = q_lock(st, sql, deadline, k, err);
	if (s == LR_OK && *k == 0) {
		st->slot = 0;
		snprintf(st->mine, sizeof(st->mine), "%s", st->rlock);
	}
	return s;
}

/* A semaphore's run or a shared one: its own lock, the fence, its row,
 * then a look at the others (see others()). */
static enum lr_status slotted_acquire(struct lr_store *st, int64_t deadline,
				      struct lr_err *err)
{
	struct others o;
	enum lr_status s;
	long k;

	s = st->req->shared ? reader_try(st, deadline, &k, err)
			    : slot_try(st, deadline, &k, err);
	if (s == LR_TIMEOUT)
		/* A late answer may hold a lock we do not know of. */
		disconnect(st);
	if (s != LR_OK)
		return s;
	if (k < 0) {
		/* Every slot taken: by runs of another limit? */
		if (!st->req->shared &&
		    others(st, deadline, &o, err) == LR_OK &&
		    (o.limit || o.plain_held))
			return refuse(st, o.limit ? o.limit : 1, deadline, err);
		return LR_BUSY;
	}
	st->held = 1;
	s = fence_bump(st, deadline, err);
	if (s == LR_OK)
		s = holder_row(st, deadline, err);
	if (s == LR_OK)
		s = others(st, deadline, &o, err);
	if (s == LR_OK && (o.limit || (o.plain_held && !st->req->shared)))
		return refuse(st, o.limit ? o.limit : 1, deadline, err);
	if (s == LR_OK && o.plain_held)
		s = LR_BUSY;
	if (s != LR_OK)
		give_back(st, deadline);
	return s;
}

static enum lr_status my_acquire(struct lr_store *st, int64_t deadline,
				 struct lr_grant *g, struct lr_err *err)
{
	enum lr_status s;

	if (!connected(st) || st->gone || st->c.broken) {
		/* Not holding anything: a new session loses nothing. */
		s = my_connect(st, 1, deadline, err);
		if (s != LR_OK)
			return s;
	}
	s = slotted(st) ? slotted_acquire(st, deadline, err)
		      : plain_acquire(st, deadline, err);
	if (s == LR_BUSY)
		st->want_wait = 1;
	if (s != LR_OK)
		return s;
	g->fence = st->fence;
	g->ttl_ms = 0;
	g->slot = st->req->limit > 1 ? st->slot : 0;
	return LR_OK;
}

/* While holding: the socket, where the server's end of our session
 * shows.  While waiting: nothing (the core asks acquire() again). */
static int my_wait_fd(struct lr_store *st, short *events)
{
	if (!st->held && st->want_wait)
		st->queued = 1; /* the core waits: not a "-n" run */
	if (!connected(st) || !st->held || st->gone)
		return -1;
	*events = POLLIN;
	if (st->c.state == MW_SEND)
		*events |= POLLOUT;
	return st->c.s.fd;
}

/* The socket is readable while no statement runs: the server sends
 * nothing unasked but the end of our session (an error packet, then
 * the close).  Returns 1 if it looks so. */
static int idle_news(struct lr_store *st)
{
	if (my_wire_idle(&st->c))
		mark_gone(st, st->c.msg);
	return st->gone;
}

static enum lr_status my_process(struct lr_store *st, short revents,
				 int64_t deadline, struct lr_err *err)
{
	(void)revents;
	(void)deadline; /* nothing here waits */
	if (!connected(st) || !st->held)
		return LR_OK;
	if (st->c.state != MW_IDLE) {
		/* A late answer: take what is there without waiting. */
		enum lr_status s = drive_to_end(st, lr_now_ms() + 1,
						"a late answer", err);

		if (s != LR_TIMEOUT) {
			my_rows_free(st->c.res);
			st->c.res = NULL;
		}
		if (st->gone)
			return lost(st, err);
		return s == LR_ERROR ? LR_ERROR : LR_OK;
	}
	if (idle_news(st))
		return lost(st, err);
	return LR_OK;
}

/* As the last step before the command starts: what the socket already
 * holds. */
static enum lr_status my_check(struct lr_store *st, int64_t deadline,
			       struct lr_err *err)
{
	(void)deadline;
	if (st->held && !st->gone && connected(st) && st->c.state == MW_IDLE)
		idle_news(st);
	if (!st->held && !st->gone)
		mark_gone(st, "the lock was not held");
	return st->gone ? lost(st, err) : LR_OK;
}

static enum lr_status my_renew(struct lr_store *st, int64_t deadline,
			       struct lr_err *err)
{
	char sql[800];
	struct my_rows *res = NULL;
	my_row r;
	enum lr_status s;
	unsigned long id;

	if (st->gone || !st->held) {
		if (!st->gone)
			mark_gone(st, "the lock was not held");
		return lost(st, err);
	}
	snprintf(sql, sizeof(sql),
		 "SELECT IS_USED_LOCK(%s) <=> CONNECTION_ID(), CONNECTION_ID()",
		 st->mine);
	s = q_run(st, sql, "IS_USED_LOCK", deadline, &res, err);
	if (st->gone)
		s = lost(st, err);
	if (s != LR_OK)
		goto out;
	r = row_of(res, 2);
	if (!r || !r[0] || !r[1]) {
		lr_err_set(err, "MySQL at %s: unexpected answer to IS_USED_LOCK",
			   st->where);
		s = LR_ERROR;
		goto out;
	}
	id = strtoul(r[1], NULL, 10);
	if (id != st->conn_id) {
		lr_err_set(err,
			   "MySQL at %s: our session changed (connection %lu, "
			   "now %lu): a proxy in between hands sessions around, "
			   "and the lock does not stay with this connection",
			   st->where, st->conn_id, id);
		st->held = 0;
		s = LR_LOST;
	} else if (strcmp(r[0], "1") != 0) {
		lr_err_set(err, "MySQL at %s: our session (connection %lu) no "
				"longer holds the lock",
			   st->where, st->conn_id);
		st->held = 0;
		s = LR_LOST;
	}
out:
	my_rows_free(res);
	return s;
}

/* After a release: our row goes, with the rows of holders whose
 * sessions are gone (a row counts only while its lock is held, so a
 * holder between its lock and its row loses nothing). */
static void forget(struct lr_store *st, int64_t deadline)
{
	char sql[1200];
	struct my_rows *res = NULL;
	struct lr_err ignored;

	snprintf(sql, sizeof(sql),
		 "DELETE FROM " HOLDERS_TABLE " WHERE name = %s AND "
		 "(lock_name = %s OR NOT IS_USED_LOCK(lock_name) <=> conn)",
		 st->lock, st->mine);
	q_run(st, sql, "forgetting our row", deadline, &res, &ignored);
	my_rows_free(res);
}

static enum lr_status my_release(struct lr_store *st, int64_t deadline,
				 struct lr_err *err)
{
	char sql[1200];
	struct my_rows *res = NULL;
	my_row r;
	enum lr_status s;

	if (!st->held || st->gone || !connected(st)) {
		if (!st->gone)
			mark_gone(st, "the lock was not held");
		return lost(st, err);
	}
	if (st->c.state != MW_IDLE) {
		/* An earlier statement (a renewal or a give-back that timed
		 * out) is still unanswered: take what is there without
		 * waiting.  Not here yet, the server is not answering: a
		 * fault that may heal, and asked again this takes the answer
		 * once it came.  Ending the session (close) frees the lock
		 * meanwhile. */
		struct lr_err late = { .heals = 0 };
		enum lr_status d = drive_to_end(st, lr_now_ms() + 1,
						"a late answer", &late);

		if (d != LR_TIMEOUT) {
			my_rows_free(st->c.res);
			st->c.res = NULL;
		}
		if (st->gone || st->c.broken || !connected(st)) {
			if (!st->gone)
				mark_gone(st, "the connection broke");
			return lost(st, err);
		}
		if (st->c.state != MW_IDLE) {
			lr_err_set(err, "MySQL at %s is not answering; closing "
					"our session frees the lock",
				   st->where);
			lr_err_heals(err);
			return LR_ERROR;
		}
	}
	/* RELEASE_LOCK gives back only a lock of this session: 1 released,
	 * 0 someone else's, NULL nobody's. */
	snprintf(sql, sizeof(sql), "SELECT RELEASE_LOCK(%s)", st->mine);
	s = q_run(st, sql, "RELEASE_LOCK", deadline, &res, err);
	if (st->gone)
		s = lost(st, err);
	if (s != LR_OK)
		goto out;
	r = row_of(res, 1);
	if (!r || !r[0] || strcmp(r[0], "1") != 0) {
		lr_err_set(err, "MySQL at %s: our session no longer held the "
				"lock",
			   st->where);
		s = LR_LOST;
	}
	st->held = 0;
	if (slotted(st))
		forget(st, deadline);
out:
	my_rows_free(res);
	return s;
}

/* The connection id holding the lock: 0 none, else the id. */
static enum lr_status holder_id(struct lr_store *st, int64_t deadline,
				unsigned long *id, struct lr_err *err)
{
	char sql[400];
	struct my_rows *res = NULL;
	my_row r;
	enum lr_status s;

	*id = 0;
	snprintf(sql, sizeof(sql), "SELECT IS_USED_LOCK(%s)", st->lock);
	s = q_run(st, sql, "IS_USED_LOCK", deadline, &res, err);
	if (s == LR_OK && (r = row_of(res, 1)) && r[0])
		*id = strtoul(r[0], NULL, 10);
	my_rows_free(res);
	return s;
}

/* The live rows of the holders of our name (slot: only that slot's; -1
 * every one), in slot and fence order: conn, slot, shared, host, pid,
 * since_ms, fence, lim.  *out NULL when there is no table (or this
 * user may not read it). */
static enum lr_status live_rows(struct lr_store *st, int slot,
				int64_t deadline, struct my_rows **out,
				struct lr_err *err)
{
	char sql[1200], only[48] = "";
	enum lr_status s;

	if (slot >= 0)
		snprintf(only, sizeof(only), " AND slot = %d", slot);
	snprintf(sql, sizeof(sql),
		 "SELECT conn, slot, shared, host, pid, since_ms, fence, lim "
		 "FROM " HOLDERS_TABLE " WHERE " LIVE_SQL "%s ORDER BY slot, "
		 "fence",
		 st->lock, only);
	s = q_run(st, sql, "reading the holders", deadline, out, err);
	if (s == LR_ERROR && !st->gone &&
	    (st->c.err == ER_NO_SUCH_TABLE ||
	     st->c.err == ER_TABLEACCESS_DENIED_ERROR))
		return LR_OK;
	return s;
}

/* The holder of the plain lock, with what the fence row says of it. */
static enum lr_status plain_holder(struct lr_store *st, unsigned long id,
				   int64_t deadline, struct lr_info *info,
				   struct lr_err *err)
{
	char sql[800];
	struct my_rows *res = NULL;
	my_row r;
	struct lr_holder *h = NULL;
	enum lr_status s;

	if (id && !(h = lr_info_add(info))) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	snprintf(sql, sizeof(sql),
		 "SELECT fence, host, pid, since_ms, conn FROM " FENCE_TABLE
		 " WHERE name = %s",
		 st->lock);
	s = q_run(st, sql, "reading the table of fences", deadline, &res, err);
	if (s == LR_ERROR && st->c.err == ER_NO_SUCH_TABLE)
		s = LR_OK; /* no fence handed out yet */
	r = s == LR_OK ? row_of(res, 5) : NULL;
	if (r && r[0] && r[1] && r[2] && r[3] && r[4]) {
		uint64_t fence = strtoull(r[0], NULL, 10);

		info->fence = fence;
		if (h && strtoul(r[4], NULL, 10) == id) {
			snprintf(h->host, sizeof(h->host), "%s", r[1]);
			h->pid = strtol(r[2], NULL, 10);
			h->since_ms = strtoll(r[3], NULL, 10);
			h->fence = fence;
		}
	}
	if (h && !h->host[0])
		/* Someone took the lock from SQL: say who. */
		snprintf(h->host, sizeof(h->host), "MySQL connection %lu", id);
	my_rows_free(res);
	return s;
}

/* Adds the live rows to info; *shared gets how many are shared. */
static int add_rows(struct my_rows *res, struct lr_info *info, size_t *shared)
{
	my_row r;

	*shared = 0;
	while (res && res->nf >= 8 && (r = my_rows_next(res))) {
		struct lr_holder *h = lr_info_add(info);

		if (!h)
			return -1;
		h->slot = r[1] ? (unsigned)strtoul(r[1], NULL, 10) : 0;
		h->shared = r[2] && strcmp(r[2], "0") != 0;
		snprintf(h->host, sizeof(h->host), "%s", r[3] ? r[3] : "");
		h->pid = r[4] ? strtol(r[4], NULL, 10) : 0;
		h->since_ms = r[5] ? strtoll(r[5], NULL, 10) : 0;
		h->fence = r[6] ? strtoull(r[6], NULL, 10) : 0;
		if (r[7] && strtoul(r[7], NULL, 10) > info->limit)
			info->limit = (unsigned)strtoul(r[7], NULL, 10);
		*shared += h->shared != 0;
	}
	return 0;
}

/* The plain lock's holder, unless shared holders are there (then it is
 * an exclusive run waiting for them), and the live rows. */
static enum lr_status my_inspect(struct lr_store *st, int64_t deadline,
				 struct lr_info *info, struct lr_err *err)
{
	struct my_rows *res = NULL;
	unsigned long id;
	size_t shared;
	enum lr_status s;

	s = holder_id(st, deadline, &id, err);
	if (s == LR_OK)
		s = live_rows(st, -1, deadline, &res, err);
	if (s != LR_OK)
		return s;
	if (add_rows(res, info, &shared) < 0) {
		my_rows_free(res);
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	my_rows_free(res);
	if (!info->limit)
		info->limit = 1;
	s = plain_holder(st, shared ? 0 : id, deadline, info, err);
	return s;
}

/* The connections holding our name's locks (slot: that slot's; -1
 * all), into *ids (malloc'd; the caller frees it). */
static enum lr_status holder_conns(struct lr_store *st, int slot,
				   int64_t deadline, unsigned long **ids,
				   size_t *n, struct lr_err *err)
{
	struct my_rows *res = NULL;
	my_row r;
	unsigned long id = 0;
	enum lr_status s;

	*ids = NULL;
	*n = 0;
	s = slot <= 0 ? holder_id(st, deadline, &id, err) : LR_OK;
	if (s == LR_OK)
		s = live_rows(st, slot, deadline, &res, err);
	if (s != LR_OK)
		return s;
	*ids = calloc((res ? res->n : 0) + 1, sizeof(**ids));
	if (!*ids) {
		my_rows_free(res);
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	if (id)
		(*ids)[(*n)++] = id;
	while (res && (r = my_rows_next(res)))
		if (r[0])
			(*ids)[(*n)++] = strtoul(r[0], NULL, 10);
	my_rows_free(res);
	return LR_OK;
}

/* Kills connection id (one already gone is no error). */
static enum lr_status kill_conn(struct lr_store *st, unsigned long id,
				int64_t deadline, struct lr_err *err)
{
	char sql[64];
	struct my_rows *res = NULL;
	enum lr_status s;

	snprintf(sql, sizeof(sql), "KILL CONNECTION %lu", id);
	s = q_run(st, sql, "KILL CONNECTION", deadline, &res, err);
	my_rows_free(res);
	if (s == LR_ERROR && st->c.err == ER_KILL_DENIED_ERROR)
		lr_err_set(err,
			   "cannot break the lease on MySQL at %s: killing "
			   "the holder's connection %lu needs its user, or the "
			   "CONNECTION ADMIN (SUPER) privilege",
			   st->where, id);
	else if (s == LR_ERROR && st->c.err == ER_NO_SUCH_THREAD)
		s = LR_OK;
	return s;
}

/* Is any of ids (n of them) among the holders now?  1 yes, 0 no, -1
 * the question failed (err says why). */
static int still_held(struct lr_store *st, int slot, const unsigned long *ids,
		      size_t n, int64_t deadline, struct lr_err *err)
{
	unsigned long *now;
	size_t m, i, j;
	int found = 0;

	if (holder_conns(st, slot, deadline, &now, &m, err) != LR_OK)
		return -1;
	for (i = 0; i < n && !found; i++)
		for (j = 0; j < m && !found; j++)
			found = ids[i] == now[j];
	free(now);
	return found;
}

/* Kills the holders' connections; the server then frees their locks. */
static enum lr_status my_break(struct lr_store *st, int slot, int64_t deadline,
			       struct lr_err *err)
{
	unsigned long *ids;
	size_t n, i;
	enum lr_status s;
	int held;

	s = holder_conns(st, slot, deadline, &ids, &n, err);
	for (i = 0; s == LR_OK && i < n; i++)
		s = kill_conn(st, ids[i], deadline, err);
	/* The killed sessions let go of their locks a moment later. */
	while (s == LR_OK && n &&
	       (held = still_held(st, slot, ids, n, deadline, err)) != 0) {
		if (held < 0 || lr_now_ms() + 20 >= deadline) {
			if (held > 0)
				lr_err_set(err, "MySQL at %s: the holders' "
						"connections did not end in "
						"time",
					   st->where);
			s = held < 0 ? LR_ERROR : LR_TIMEOUT;
			break;
		}
		poll(NULL, 0, 20);
	}
	free(ids);
	return s;
}

/* ---- runs (--once-per) ------------------------------------------------ */

/* The table of runs, as created here and as the man page prints it:
 * one row per lock, times in Unix ms by the server's clock. */
#define RUNS_TABLE "leaserun_runs"
#define RUNS_SQL                                                           \
	"CREATE TABLE IF NOT EXISTS " RUNS_TABLE " ("                        \
	"name VARCHAR(64) COLLATE utf8mb4_bin PRIMARY KEY, "                \
	"fence BIGINT UNSIGNED NOT NULL, host VARCHAR(255) NOT NULL, "      \
	"pid BIGINT NOT NULL, period_ms BIGINT NOT NULL, "                  \
	"started_ms BIGINT NOT NULL, ended_ms BIGINT, status INT) "         \
	"ENGINE=InnoDB"
/* The server's clock, never ours: hosts whose clocks disagree agree on
 * it. */
#define NOW_MS "CAST(UNIX_TIMESTAMP(NOW(6)) * 1000 AS SIGNED)"

/* A missing or forbidden table of runs: create it if we may, else one
 * line with the statement and the grant.  LR_OK: try again. */
static enum lr_status runs_table(struct lr_store *st, int64_t deadline,
				 struct lr_err *err)
{
	unsigned e = st->c.err;
	struct my_rows *res = NULL;
	enum lr_status s;

	if (e == ER_NO_SUCH_TABLE) {
		s = q_run(st, RUNS_SQL, "creating the table of runs", deadline,
			  &res, err);
		my_rows_free(res);
		if (s != LR_ERROR ||
		    st->c.err != ER_TABLEACCESS_DENIED_ERROR)
			return s;
		lr_err_set(err,
			   "MySQL at %s: --once-per needs the table %s.%s, "
			   "which this user may not create; have it made: %s; "
			   "GRANT SELECT, INSERT, UPDATE ON %s.%s TO the user",
			   st->where, st->db, RUNS_TABLE, RUNS_SQL, st->db,
			   RUNS_TABLE);
		return LR_ERROR;
	}
	if (e == ER_TABLEACCESS_DENIED_ERROR || e == ER_COLUMNACCESS_DENIED_ERROR)
		lr_err_set(err,
			   "MySQL at %s: this user may not use the table %s "
			   "that --once-per keeps runs in: GRANT SELECT, "
			   "INSERT, UPDATE ON %s.%s to the user",
			   st->where, RUNS_TABLE, st->db, RUNS_TABLE);
	return LR_ERROR;
}

/* The lock's run by the server's clock, into *run (known 0 without one;
 * its fence also in *fence), next counted with period (0: the row's
 * own). */
static enum lr_status run_read(struct lr_store *st, int64_t period,
			       int64_t deadline, struct lr_run *run,
			       uint64_t *fence, struct lr_err *err)
{
	char sql[800];
	struct my_rows *res = NULL;
	my_row r;
	enum lr_status s;

	lr_run_init(run);
	*fence = 0;
	snprintf(sql, sizeof(sql),
		 "SELECT " NOW_MS ", r.fence, r.host, r.pid, r.period_ms, "
		 "r.started_ms, r.ended_ms, r.status FROM (SELECT 1) AS one "
		 "LEFT JOIN " RUNS_TABLE " r ON r.name = %s",
		 st->lock);
	s = q_run(st, sql, "reading the last run", deadline, &res, err);
	if (s != LR_OK)
		return s;
	r = row_of(res, 8);
	if (r && r[0] && r[1] && r[2] && r[3] && r[4] && r[5]) {
		run->known = 1;
		run->fence = *fence = strtoull(r[1], NULL, 10);
		snprintf(run->host, sizeof(run->host), "%s", r[2]);
		run->pid = strtol(r[3], NULL, 10);
		run->period_ms = strtoll(r[4], NULL, 10);
		run->start_ms = strtoll(r[5], NULL, 10);
		if (r[6]) {
			run->end_ms = strtoll(r[6], NULL, 10);
			run->status = r[7] ? atoi(r[7]) : -1;
		}
		lr_run_times(run, strtoll(r[0], NULL, 10), period);
	}
	my_rows_free(res);
	return LR_OK;
}

/* Both statements run while we hold the lock, which every writer of the
 * lock's row holds too: nothing comes between the look and the write. */
static enum lr_status my_run_start(struct lr_store *st, int64_t period_ms,
				   uint64_t fence, int64_t deadline,
				   struct lr_run *last, struct lr_err *err)
{
	char sql[1400], host[600];
	struct my_rows *res = NULL;
	enum lr_status s = LR_ERROR;
	uint64_t was;
	int tries;

	for (tries = 0; tries < 2; tries++) {
		s = run_read(st, period_ms, deadline, last, &was, err);
		if (s != LR_ERROR || st->gone)
			break;
		s = runs_table(st, deadline, err);
		if (s != LR_OK)
			return s;
	}
	if (s != LR_OK)
		return s;
	if (last->known && was != fence && last->next_ms > 0)
		return LR_BUSY;
	if (literal(st->req->host ? st->req->host : "", host,
		    sizeof(host)) < 0)
		snprintf(host, sizeof(host), "''");
	/* Autocommit: durable (as the fence is) before the command starts. */
	snprintf(sql, sizeof(sql),
		 "INSERT INTO " RUNS_TABLE " (name, fence, host, pid, "
		 "period_ms, started_ms) VALUES (%s, %" PRIu64 ", %s, %ld, "
		 "%" PRId64 ", " NOW_MS ") ON DUPLICATE KEY UPDATE "
		 "fence = VALUES(fence), host = VALUES(host), pid = VALUES(pid), "
		 "period_ms = VALUES(period_ms), started_ms = "
		 "VALUES(started_ms), ended_ms = NULL, status = NULL",
		 st->lock, fence, host, st->req->pid, period_ms);
	s = q_run(st, sql, "recording the run", deadline, &res, err);
	my_rows_free(res);
	if (s == LR_ERROR && !st->gone)
		runs_table(st, deadline, err);
	return s;
}

static enum lr_status my_run_end(struct lr_store *st, uint64_t fence,
				 int status, int64_t deadline,
				 struct lr_err *err)
{
	char sql[800];
	struct my_rows *res = NULL;
	enum lr_status s;

	snprintf(sql, sizeof(sql),
		 "UPDATE " RUNS_TABLE " SET ended_ms = " NOW_MS ", status = %d "
		 "WHERE name = %s AND fence = %" PRIu64,
		 status, st->lock, fence);
	s = q_run(st, sql, "recording the run's end", deadline, &res, err);
	my_rows_free(res);
	return s;
}

static enum lr_status my_run_last(struct lr_store *st, int64_t deadline,
				  struct lr_run *last, struct lr_err *err)
{
	uint64_t fence;
	enum lr_status s = run_read(st, 0, deadline, last, &fence, err);

	if (s == LR_ERROR && st->c.err == ER_NO_SUCH_TABLE)
		return LR_OK; /* no run recorded yet */
	return s;
}

static void my_close(struct lr_store *st)
{
	if (!st)
		return;
	/* Ending the session frees the lock. */
	disconnect(st);
	lr_url_hosts_free(st->hosts, st->nhosts);
	lr_wipe_free(st->password);
	free(st->db);
	free(st);
}

/* ---- --list -------------------------------------------------------------- */

/*
 * The table of fences has a row per lock ever granted, with its last
 * holder; IS_USED_LOCK() says whether the lock is held now, and by which
 * connection.  The rows are read in pages of LIST_PAGE, by name, from
 * where the last page ended.  A lease name is its lock name without the
 * prefix (a long one is cut and hashed: it shows so).  Waiters are not
 * known: a waiting run asks GET_LOCK(lock, 0) again and again, and never
 * waits on the server.
 */
#define LIST_PAGE 500
#define LIST_SQL                                                            \
	"SELECT name, fence, host, pid, since_ms, conn, IS_USED_LOCK(name) "  \
	"FROM " FENCE_TABLE " WHERE name > %s AND LEFT(name, "                \
	"CHAR_LENGTH(%s)) = %s ORDER BY name LIMIT %d"

/* A held row r of LIST_SQL to fn, as my_inspect() shows a holder. */
static int list_row(my_row r, size_t skip, lr_list_fn fn, void *arg)
{
	unsigned long id = strtoul(r[6], NULL, 10);
	struct lr_info info;
	struct lr_holder *h;
	int stop = 0;

	lr_info_init(&info);
	info.limit = 1;
	if ((h = lr_info_add(&info))) {
		if (r[5] && strtoul(r[5], NULL, 10) == id) {
			snprintf(h->host, sizeof(h->host), "%s", r[2] ? r[2] : "");
			h->pid = r[3] ? strtol(r[3], NULL, 10) : 0;
			h->since_ms = r[4] ? strtoll(r[4], NULL, 10) : 0;
			h->fence = r[1] ? strtoull(r[1], NULL, 10) : 0;
		} else {
			snprintf(h->host, sizeof(h->host),
				 "MySQL connection %lu", id);
		}
		stop = fn(arg, r[0] + skip, &info);
	}
	lr_info_free(&info);
	return h ? stop : -1;
}

static enum lr_status my_list(struct lr_store *st, const char *pattern,
			      lr_list_fn fn, void *arg, int64_t deadline,
			      struct lr_err *err)
{
	const char *prefix = st->o[O_PREFIX].s;
	char pre[200], last[200] = "''", sql[1000];
	enum lr_status s = LR_OK;
	struct my_rows *res = NULL;
	my_row r;
	int rows = LIST_PAGE, stop = 0;

	(void)pattern; /* the core matches the names */
	if (literal(prefix, pre, sizeof(pre)) < 0) {
		lr_err_set(err, "MySQL: the prefix is too long");
		return LR_ERROR;
	}
	while (s == LR_OK && !stop && rows == LIST_PAGE) {
		snprintf(sql, sizeof(sql), LIST_SQL, last, pre, pre, LIST_PAGE);
		s = q_run(st, sql, "reading the table of fences", deadline,
			  &res, err);
		if (s == LR_ERROR && st->c.err == ER_NO_SUCH_TABLE)
			return LR_OK; /* nothing granted yet */
		for (rows = 0; s == LR_OK && res && !stop && res->nf >= 7 &&
			       (r = my_rows_next(res));
		     rows++) {
			if (!r[0] || literal(r[0], last, sizeof(last)) < 0) {
				lr_err_set(err, "MySQL: a lock name too long");
				s = LR_ERROR;
			} else if (r[6]) {
				stop = list_row(r, strlen(prefix), fn, arg);
			}
		}
		if (stop < 0)
			lr_err_set(err, "out of memory");
		my_rows_free(res);
		res = NULL;
	}
	return stop < 0 ? LR_ERROR : s;
}

const struct lr_store_ops lr_store_ops = {
	.abi = LR_STORE_ABI,
	.name = "mysql",
	.caps = LR_CAP_LIMIT | LR_CAP_SHARED,
	.secret_env = my_secret_env,
	.open = my_open,
	.acquire = my_acquire,
	.wait_fd = my_wait_fd,
	.process = my_process,
	.check = my_check,
	.renew = my_renew,
	.release = my_release,
	.inspect = my_inspect,
	.break_lease = my_break,
	.close = my_close,
	.run_start = my_run_start,
	.run_end = my_run_end,
	.run_last = my_run_last,
	.list = my_list,
};
