/*
 * pg.c - the PostgreSQL store: a session advisory lock (libpq).
 *
 * The lease is a session-level advisory lock on a 64-bit key derived from
 * the name, so a SQL user can take the same lock:
 *
 *   key = ('x' || substr(md5('leaserun:' || NAME), 1, 16))::bit(64)::bigint
 *
 * (the first 8 bytes of md5("leaserun:NAME"), big-endian, as a signed
 * bigint).  The server computes it with exactly that expression in open().
 *
 * Lock life:  open() connects (non-blocking, bounded by the deadline) and
 * sets the session up: idle/statement/lock timeouts off, server-side TCP
 * keepalives and tcp_user_timeout of about the TTL, so a partitioned
 * holder's lock is freed by the server about one TTL after it last heard
 * from us, never earlier.  acquire() is one pg_try_advisory_lock(); when it
 * is busy, wait_fd() starts "pg_advisory_lock(key)" asynchronously on the
 * same connection and hands the loop the socket; when that returns, the
 * lock is ours, process() says LR_OK and the next acquire() returns the
 * grant at once.  (The wait starts in wait_fd(), not in acquire(), so a
 * "-n" run never joins the lock queue.)
 *
 * Fence: pg_current_xact_id() (txid_current() before PostgreSQL 13),
 * taken in the same statement that obtained the lock: transaction ids are
 * handed out in increasing order, so a later holder gets a larger one.
 * A transaction id survives a crash only if a WAL record that carries it
 * was flushed; a transaction that writes no WAL commits asynchronously,
 * and its id is handed out again after a crash.  So the same statement
 * writes a transactional logical message (no object, any wal_level,
 * EXECUTE granted to PUBLIC) and sets synchronous_commit on for its own
 * transaction: the commit flushes the WAL before the answer comes back,
 * and the answer is what starts the command.
 *
 * Heartbeat: renew() checks pg_locks for a granted advisory lock on the
 * key held by pg_backend_pid(), and that the backend pid has not changed
 * (a transaction pooler would change it).  While holding, the socket is in
 * the loop: when the server ends our session (pg_terminate_backend,
 * shutdown, crash) it sends a FATAL message and/or closes the socket; the
 * session lock is then certainly gone, and process() says LR_LOST.  A
 * local network error (timeout) is only suspicion: the server still holds
 * the lock until its own keepalive gives up, so that is LR_ERROR.
 *
 * Guards: a pooler in front (the pid in BackendKeyData differs from
 * pg_backend_pid()) is probed with a second connection; if that lands on
 * our server session the pool is in transaction (or statement) mode and
 * open() refuses.  A hot standby is refused (its locks are its own).
 *
 * No call blocks past its deadline, except the host name lookup inside
 * PQconnectStartParams() (libpq resolves names synchronously).  A query
 * that runs out of time is not cancelled, since PQcancel() in libpq 15
 * blocks with no deadline of its own: it stays in flight and the next call
 * drains its answer first.  close() does not cancel a queued wait either:
 * ending the session is enough, and the server drops the queued backend
 * within client_connection_check_interval (set to 250 ms).
 *
 * Runs (--once-per) live in the table leaserun_runs (RUNS_SQL), found by
 * the role's search_path, one row per lease name, and are judged by the
 * server's clock (now()).  run_start is one statement: it records our
 * start unless the row's start is less than the period before now(), and
 * returns the row as it was, with synchronous_commit on for its
 * transaction as the grant's, so the start is durable before the command
 * starts.  A missing table is created if the role may; if not, the error
 * gives the statement to run.  Never the local clock instead.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_received */

#include <libpq-fe.h>

#include "store/store.h"
#include "store/waitset.h"

/* The documented key expression; %s is the quoted name. */
#define KEY_SQL \
	"('x' || substr(md5('leaserun:' || %s), 1, 16))::bit(64)::bigint"

/* Columns that make the grant's transaction id durable (see the top):
 * synchronous_commit for this transaction only, whatever the server's or
 * the role's setting, and one WAL record.  %s is a condition: the lock
 * was granted. */
#define DURABLE_SQL \
	"set_config('synchronous_commit', 'on', true), " \
	"CASE WHEN %s THEN pg_logical_emit_message(true, 'leaserun', '') END"

/* pg_logical_emit_message() came with 9.6. */
#define PG_MIN_VERSION 90600

/* What the query in flight is, so a late answer is understood. */
enum q_kind {
	Q_NONE = 0,
	Q_TRY,   /* pg_try_advisory_lock + fence */
	Q_WAIT,  /* pg_advisory_lock + fence (asynchronous) */
	Q_GATE,  /* a semaphore's waiter: pg_advisory_lock of the gate */
	Q_OTHER, /* anything whose late answer can be dropped */
};

struct lr_store {
	const struct lr_store_req *req;
	PGconn *conn;
	int pid;           /* pg_backend_pid() of our session */
	int version;       /* server_version_num */
	int64_t key;
	char keystr[24];   /* the key as a SQL literal */
	char locks_where[256]; /* pg_locks condition for our key */
	/* Shared holders and semaphores.  Slot K of a semaphore of N slots
	 * is the lock (hi, N << 16 | K), with hi the high 32 bits of the
	 * key; (hi, 0) is its gate.  A lock query also asks other_sql: the
	 * limit of another holder of the name that disagrees with ours. */
	int32_t hi;
	char name_where[320]; /* pg_locks condition for the name's holders */
	char other_sql[640];
	int other;         /* what other_sql found in a lock query, or 0 */
	unsigned slot;     /* the slot this session holds or waits for */
	int gated;         /* this session holds the gate */
	struct lr_store **slot_sess; /* first in a semaphore's queue:
				      * sessions waiting for slots 1..N-1
				      * (this one waits for slot 0) */
	unsigned nslot_sess;
	struct lr_waitset ws; /* their sockets and ours, for wait_fd() */
	enum q_kind inflight;
	PGresult *res;     /* the answer so far to the query in flight */
	int64_t rx_mark;   /* rx_bytes() when it was sent, or -1 */
	int held;          /* we hold the lock (as far as we know) */
	int handed;        /* the wait got the lock; acquire() returns it */
	int want_wait;     /* acquire() said BUSY: wait_fd() starts the wait */
	uint64_t fence;
	int gone;          /* the server ended our session: certain */
	char gone_why[160];
	char where[160];   /* "host:port", for messages (no password) */
	int tls_warned;    /* the plaintext warning went out */
	char appname[64];
};

static void name_sql(struct lr_store *st);

static const char *const pg_secret_env[] = { "PGPASSWORD", NULL };

/* ---- small helpers ----------------------------------------------------- */

/* Copies a libpq message as one line: newlines become "; ", runs of
 * spaces one space, no trailing punctuation. */
static void oneline(char *dst, size_t len, const char *src)
{
	size_t n = 0;
	int space = 0;

	if (!src)
		src = "";
	for (; *src && n + 3 < len; src++) {
		char c = *src;

		if (c == '\n' || c == '\r') {
			while (n && dst[n - 1] == ' ')
				n--;
			if (n && src[1] && src[1] != '\n') {
				dst[n++] = ';';
				dst[n++] = ' ';
			}
			space = 1;
			continue;
		}
		if (c == ' ' || c == '\t') {
			if (space || n == 0)
				continue;
			space = 1;
		} else {
			space = 0;
		}
		dst[n++] = c;
	}
	while (n && (dst[n - 1] == ' ' || dst[n - 1] == ';'))
		n--;
	dst[n] = '\0';
}

static const char *conn_msg(const struct lr_store *st, char *buf, size_t len)
{
	oneline(buf, len, st->conn ? PQerrorMessage(st->conn) : "");
	if (!buf[0])
		snprintf(buf, len, "connection lost");
	return buf;
}

static void mark_gone(struct lr_store *st, const char *why)
{
	if (st->gone)
		return;
	st->gone = 1;
	oneline(st->gone_why, sizeof(st->gone_why), why);
}

/* libpq hands us every notice and every error that arrives while no query
 * runs (such as "terminating connection due to administrator command").
 * A store never prints: keep only what tells us the session is over. */
static void notice_rx(void *arg, const PGresult *r)
{
	struct lr_store *st = arg;
	const char *sev = PQresultErrorField(r, PG_DIAG_SEVERITY_NONLOCALIZED);

	if (sev && (!strcmp(sev, "FATAL") || !strcmp(sev, "PANIC")))
		mark_gone(st, PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY));
}

static void note_result(struct lr_store *st, const PGresult *r)
{
	if (PQresultStatus(r) == PGRES_FATAL_ERROR)
		notice_rx(st, r);
}

/* Waits for events on fd until deadline.  1 ready, 0 timed out, -1 error. */
static int sock_wait(int fd, short events, int64_t deadline)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		int64_t left = deadline - lr_now_ms();
		int n;

		if (fd < 0)
			return -1;
		if (left < 0)
			left = 0;
		n = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
		if (n > 0)
			return 1;
		if (n == 0 && lr_now_ms() >= deadline)
			return 0;
		if (n < 0 && errno != EINTR)
			return -1;
	}
}

/*
 * What a server can make us keep is bounded: what comes in for a query
 * (rx_bytes() since q_send()) is counted after each read (consume()).
 * Ours are a few short rows: a server that sends more than MAX_ANSWER
 * is misbehaving, and the connection is shut down under it.  The count
 * sees what libpq has read only when it hands back: it keeps a message
 * whole before it parses it, sizing its buffer as the header says (a
 * row may claim 1 GB), and reads on in one call while bytes keep coming
 * (leaserun-postgresql(7), Guards).
 */
#define MAX_ANSWER ((size_t)8 << 20)

/* What the server has sent on our connection so far, in bytes, or -1
 * where that is not known (a Unix socket). */
static int64_t rx_bytes(const struct lr_store *st)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	int fd = PQsocket(st->conn);

	memset(&ti, 0, sizeof(ti));
	if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 ||
	    len < offsetof(struct tcp_info, tcpi_bytes_received) +
			  sizeof(ti.tcpi_bytes_received))
		return -1;
	return (int64_t)ti.tcpi_bytes_received;
}

/* The answer ran past MAX_ANSWER: the session ends here. */
static void cut_off(struct lr_store *st)
{
	(void)shutdown(PQsocket(st->conn), SHUT_RDWR);
	mark_gone(st, "an answer ran past 8 MB, on which leaserun closed "
		      "the connection");
}

/* Reads what the server sent.  Before libpq reads (and, on end of file,
 * closes) the socket, look whether the session ended: an orderly close, a
 * reset, or our own end aborted (which sends the server a reset).  Returns
 * 0, or -1 when the connection broke. */
static int consume(struct lr_store *st)
{
	int fd = PQsocket(st->conn);
	char c;

	if (fd >= 0) {
		ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);

		if (n == 0)
			mark_gone(st, "the server closed the connection");
		else if (n < 0 && (errno == ECONNRESET || errno == ECONNABORTED))
			mark_gone(st, strerror(errno));
	}
	if (!PQconsumeInput(st->conn))
		return -1;
	if (st->rx_mark >= 0 &&
	    rx_bytes(st) - st->rx_mark > (int64_t)MAX_ANSWER) {
		cut_off(st);
		return -1;
	}
	/* Parse now: an error that arrives while no query runs reaches
	 * notice_rx() only when libpq parses its input. */
	PQisBusy(st->conn);
	return 0;
}

/* Collects the answers that are complete without blocking.  Returns 1 when
 * the query in flight is finished (its answer in st->res), 0 if not yet. */
static int collect(struct lr_store *st)
{
	while (!PQisBusy(st->conn)) {
		PGresult *r = PQgetResult(st->conn);

		if (!r)
			return 1;
		note_result(st, r);
		/* Keep the first error, else the last answer. */
		if (st->res && PQresultStatus(st->res) == PGRES_FATAL_ERROR) {
			PQclear(r);
		} else {
			PQclear(st->res);
			st->res = r;
		}
	}
	return 0;
}

/* Waits for the whole answer to the query in flight.  LR_OK hands the
 * answer to the caller in *out (PQclear it; may be NULL); LR_TIMEOUT keeps
 * the query in flight for a later call; LR_ERROR when the connection
 * broke (st->gone tells whether the session certainly ended). */
static enum lr_status q_wait(struct lr_store *st, int64_t deadline,
			     PGresult **out, struct lr_err *err)
{
	char buf[200];

	*out = NULL;
	for (int pass = 0;; pass++) {
		int f = PQflush(st->conn), w;

		if (f < 0)
			goto broken;
		if (f == 0 && collect(st))
			break;
		/* After the first look, the clock decides: a server that
		 * keeps sending (notices without end) keeps the socket
		 * readable, and would hold us past any deadline. */
		w = pass && lr_now_ms() >= deadline
			    ? 0
			    : sock_wait(PQsocket(st->conn),
					f ? POLLIN | POLLOUT : POLLIN,
					deadline);
		if (w == 0) {
			lr_err_set(err, "PostgreSQL at %s did not answer in "
					"time", st->where);
			return LR_TIMEOUT;
		}
		if (w < 0 || consume(st) < 0)
			goto broken;
	}
	st->inflight = Q_NONE;
	*out = st->res;
	st->res = NULL;
	return LR_OK;
broken:
	st->inflight = Q_NONE;
	PQclear(st->res);
	st->res = NULL;
	if (st->gone)
		lr_err_set(err, "PostgreSQL at %s ended our session: %s",
			   st->where, st->gone_why);
	else
		lr_err_set(err, "connection to PostgreSQL at %s failed: %s",
			   st->where, conn_msg(st, buf, sizeof(buf)));
	/* A new session may do better (the holder's rules do not look). */
	lr_err_heals(err);
	return LR_ERROR;
}

static enum lr_status q_send(struct lr_store *st, const char *sql,
			     enum q_kind kind, struct lr_err *err)
{
	char buf[200];

	if (!PQsendQuery(st->conn, sql)) {
		lr_err_set(err, "cannot send a query to PostgreSQL at %s: %s",
			   st->where, conn_msg(st, buf, sizeof(buf)));
		return LR_ERROR;
	}
	st->rx_mark = rx_bytes(st); /* see MAX_ANSWER */
	st->inflight = kind;
	return LR_OK;
}

/* The SQLSTATE of a failed answer, or "". */
static const char *sqlstate(const PGresult *r)
{
	const char *c = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;

	return c ? c : "";
}

/*
 * Faults that heal by themselves (a restart, a crash recovery, a
 * failover, a server full for now), so a waiting run tries again: by
 * SQLSTATE where the server sent one (class 08, connection; 57P01-03,
 * shutting down, crashed, cannot connect now; 53300, too many
 * connections), and by libpq's words for a connection that failed,
 * which carry none.  Authentication, a missing database or role, a name
 * that does not resolve and TLS that does not verify do not heal.
 */
static int heals_state(const char *code)
{
	return !strncmp(code, "08", 2) || !strcmp(code, "57P01") ||
	       !strcmp(code, "57P02") || !strcmp(code, "57P03") ||
	       !strcmp(code, "53300");
}

static int heals_text(const char *msg)
{
	static const char *const words[] = {
		"Connection refused", "Connection reset", "timeout expired",
		"No route to host", "Network is unreachable",
		"Temporary failure in name resolution",
		"server closed the connection unexpectedly",
		"could not receive data from server",
		"could not send data to server",
		"the database system is starting up",
		"the database system is shutting down",
		"the database system is in recovery mode",
		"the database system is not yet accepting connections",
		"the database system is not accepting connections",
		"sorry, too many clients already",
		"too many connections for role",
		"too many connections for database",
		"remaining connection slots are reserved",
		"terminating connection due to administrator command",
		"ended our session", "is a standby (in recovery)", NULL
	};
	size_t i;

	for (i = 0; words[i]; i++)
		if (strstr(msg, words[i]))
			return 1;
	return 0;
}

/* A failed query's message, one line. */
static void q_fail(struct lr_store *st, const PGresult *r, const char *what,
		   struct lr_err *err)
{
	char buf[200];

	if (!r) {
		lr_err_set(err, "%s on PostgreSQL at %s: no answer", what,
			   st->where);
		return;
	}
	oneline(buf, sizeof(buf), PQresultErrorMessage(r));
	lr_err_set(err, "%s on PostgreSQL at %s failed: %s", what, st->where,
		   buf[0] ? buf : PQresStatus(PQresultStatus(r)));
	if (heals_state(sqlstate(r)))
		lr_err_heals(err);
}

static int tuples(const PGresult *r, int ncols)
{
	return r && PQresultStatus(r) == PGRES_TUPLES_OK &&
	       PQnfields(r) >= ncols && PQntuples(r) >= 1;
}

/* Understands the answer to a lock query (Q_TRY or Q_WAIT), whose first
 * row is (locked bool, fence text, pid int).  Returns 1 if it gave us the
 * lock, 0 if not, -1 on a pid change (a pooler). */
static int absorb_lock(struct lr_store *st, const PGresult *r)
{
	const char *l;

	if (!tuples(r, 3))
		return 0;
	if (PQnfields(r) > 6 && !PQgetisnull(r, 0, 6))
		st->other = atoi(PQgetvalue(r, 0, 6));
	l = PQgetvalue(r, 0, 0);
	if (strcmp(l, "t") != 0)
		return 0;
	st->held = 1;
	st->fence = strtoull(PQgetvalue(r, 0, 1), NULL, 10);
	if (PQnfields(r) > 7)
		st->slot = (unsigned)atoi(PQgetvalue(r, 0, 7));
	if (atoi(PQgetvalue(r, 0, 2)) != st->pid)
		return -1;
	return 1;
}

/* Finishes a query still in flight from an earlier call that ran out of
 * time, so the connection is free for the next one. */
static enum lr_status q_drain(struct lr_store *st, int64_t deadline,
			      struct lr_err *err)
{
	enum q_kind kind = st->inflight;
	PGresult *r;
	enum lr_status s;

	if (kind == Q_NONE)
		return LR_OK;
	s = q_wait(st, deadline, &r, err);
	if (s == LR_OK && (kind == Q_TRY || kind == Q_WAIT))
		absorb_lock(st, r);
	if (s == LR_OK && kind == Q_GATE && tuples(r, 1))
		st->gated = 1;
	PQclear(r);
	return s;
}

/* Runs one statement to the end.  *out gets its answer (PQclear it). */
static enum lr_status q_run(struct lr_store *st, const char *sql,
			    enum q_kind kind, int64_t deadline,
			    PGresult **out, struct lr_err *err)
{
	enum lr_status s;

	*out = NULL;
	s = q_drain(st, deadline, err);
	if (s != LR_OK)
		return s;
	s = q_send(st, sql, kind, err);
	if (s != LR_OK)
		return s;
	return q_wait(st, deadline, out, err);
}

static int conn_ok(const struct lr_store *st)
{
	return st->conn && PQstatus(st->conn) == CONNECTION_OK;
}

/* ---- connecting -------------------------------------------------------- */

static void set_where(struct lr_store *st, PGconn *c)
{
	const char *h = c ? PQhost(c) : NULL, *p = c ? PQport(c) : NULL;

	if (h && *h)
		snprintf(st->where, sizeof(st->where), "%s:%s", h,
			 p && *p ? p : "5432");
	else
		snprintf(st->where, sizeof(st->where), "%s",
			 "the default server");
}

/* TCP keepalive settings for both ends, from the TTL: the first probe
 * after a third of it, and enough probes that idle + interval * count
 * reaches past it; tcp_user_timeout (ms) is the TTL itself.  With
 * tcp_user_timeout set, Linux drops the connection no sooner than that
 * after it last heard from the peer. */
struct keepalive {
	long idle, intvl, count;
	int64_t user_timeout;
};

static struct keepalive keepalive_for(int64_t ttl_ms)
{
	struct keepalive k;
	long ttl_s;

	if (ttl_ms <= 0)
		ttl_ms = 10000;
	ttl_s = (long)((ttl_ms + 999) / 1000);
	k.idle = ttl_s / 3 > 0 ? ttl_s / 3 : 1;
	k.intvl = ttl_s / 6 > 0 ? ttl_s / 6 : 1;
	k.count = (ttl_s - k.idle) / k.intvl + 2;
	k.user_timeout = ttl_ms;
	return k;
}

/* "leaserun:NAME@host:pid", cut to fit application_name (63 bytes): the
 * name is shortened first, so "@host:pid" always survives. */
static void make_appname(struct lr_store *st)
{
	char tail[48];
	size_t room;

	snprintf(tail, sizeof(tail), "@%.24s:%ld",
		 st->req->host ? st->req->host : "?", st->req->pid);
	room = sizeof(st->appname) - 1 - strlen("leaserun:") - strlen(tail);
	snprintf(st->appname, sizeof(st->appname), "leaserun:%.*s%s",
		 (int)room, st->req->name, tail);
}

/* Starts a connection with our defaults around the user's URL and drives
 * it to the end within the deadline.  *out gets the PGconn in any case. */
static enum lr_status connect_one(struct lr_store *st, int64_t deadline,
				  PGconn **out, struct lr_err *err)
{
	char ct[24], idle[24], intvl[24], cnt[24], uto[24];
	struct keepalive k = keepalive_for(st->req->ttl_ms);
	int64_t left = deadline - lr_now_ms();
	/* Ours come before the URL (it may override them), except
	 * application_name, which --status relies on. */
	const char *keys[] = { "connect_timeout", "keepalives",
			       "keepalives_idle", "keepalives_interval",
			       "keepalives_count", "tcp_user_timeout",
			       "dbname", "application_name", NULL };
	const char *vals[9];
	PostgresPollingStatusType ps = PGRES_POLLING_WRITING;
	char buf[LR_ERRLEN];
	PGconn *c;

	snprintf(ct, sizeof(ct), "%ld",
		 left > 2000 ? (long)((left + 999) / 1000) : 2L);
	snprintf(idle, sizeof(idle), "%ld", k.idle);
	snprintf(intvl, sizeof(intvl), "%ld", k.intvl);
	snprintf(cnt, sizeof(cnt), "%ld", k.count);
	snprintf(uto, sizeof(uto), "%" PRId64, k.user_timeout);
	vals[0] = ct;
	vals[1] = "1";
	vals[2] = idle;
	vals[3] = intvl;
	vals[4] = cnt;
	vals[5] = uto;
	vals[6] = st->req->url;
	vals[7] = st->appname;
	vals[8] = NULL;

	*out = c = PQconnectStartParams(keys, vals, 1);
	if (!c) {
		lr_err_set(err, "cannot connect to PostgreSQL: out of memory");
		return LR_ERROR;
	}
	PQsetNoticeReceiver(c, notice_rx, st);
	if (PQstatus(c) == CONNECTION_BAD)
		ps = PGRES_POLLING_FAILED;
	while (ps != PGRES_POLLING_OK) {
		int w;

		if (ps == PGRES_POLLING_FAILED) {
			set_where(st, c);
			oneline(buf, sizeof(buf), PQerrorMessage(c));
			lr_err_set(err, "%s",
				   buf[0] ? buf : "unknown error");
			if (heals_text(buf))
				lr_err_heals(err);
			return LR_ERROR;
		}
		/* A server that keeps sending (notices without end) keeps
		 * the socket readable: the clock, not the socket, ends it. */
		w = lr_now_ms() >= deadline
			    ? 0
			    : sock_wait(PQsocket(c),
					ps == PGRES_POLLING_READING ? POLLIN
								    : POLLOUT,
					deadline);
		if (w <= 0) {
			set_where(st, c);
			lr_err_set(err,
				   "cannot connect to PostgreSQL at %s: %s",
				   st->where,
				   w == 0 ? "timed out" : strerror(errno));
			return w == 0 ? LR_TIMEOUT : LR_ERROR;
		}
		ps = PQconnectPoll(c);
	}
	set_where(st, c);
	if (PQsocket(c) >= 0) /* libpq does it too; be sure */
		fcntl(PQsocket(c), F_SETFD, FD_CLOEXEC);
	if (PQsetnonblocking(c, 1) != 0) {
		oneline(buf, sizeof(buf), PQerrorMessage(c));
		lr_err_set(err, "PostgreSQL at %s: %s", st->where, buf);
		return LR_ERROR;
	}
	return LR_OK;
}

/* A second connection: if it is given our own server session, a pooler
 * hands sessions around between transactions. */
static enum lr_status probe_pooler(struct lr_store *st, int64_t deadline,
				   struct lr_err *err)
{
	struct lr_store probe = { .req = st->req };
	enum lr_status s;
	PGresult *r = NULL;
	int other;

	memcpy(probe.appname, st->appname, sizeof(probe.appname));
	s = connect_one(&probe, deadline, &probe.conn, err);
	if (s == LR_OK)
		s = q_run(&probe, "SELECT pg_backend_pid()", Q_OTHER, deadline,
			  &r, err);
	if (s != LR_OK)
		goto out;
	if (!tuples(r, 1)) {
		q_fail(st, r, "the pooler check", err);
		s = LR_ERROR;
		goto out;
	}
	other = atoi(PQgetvalue(r, 0, 0));
	if (other == st->pid) {
		lr_err_set(err,
			   "PostgreSQL at %s is behind a transaction pooler "
			   "(a second connection got our server session, "
			   "backend %d): a session advisory lock would not "
			   "stay ours; connect to PostgreSQL directly or use "
			   "a session-mode pool",
			   st->where, st->pid);
		s = LR_ERROR;
	} else if (st->req->warn) {
		char msg[512];

		snprintf(msg, sizeof(msg),
			 "PostgreSQL at %s is behind a connection pooler: this "
			 "works only in session mode, and the server's "
			 "keepalive then watches the pooler, not leaserun",
			 st->where);
		st->req->warn(st->req->warn_ctx, msg);
	}
out:
	PQclear(r);
	PQclear(probe.res);
	PQfinish(probe.conn);
	return s;
}

/* The statement that sets a new session up and tells what it is: its
 * pid, the lease's key, the server's version and whether it is a
 * standby.  NULL with err on failure. */
static char *setup_sql(struct lr_store *st, struct lr_err *err)
{
	struct keepalive k = keepalive_for(st->req->ttl_ms);
	char *lit, *sql = NULL;
	int n;

	lit = PQescapeLiteral(st->conn, st->req->name, strlen(st->req->name));
	if (!lit) {
		lr_err_set(err, "cannot quote the lease name for PostgreSQL");
		return NULL;
	}
	/* Session settings, where the server knows them (set_config() of an
	 * unknown name would fail on older servers).  Keepalives: the server
	 * drops a silent holder no earlier than about one TTL after it last
	 * heard from it (tcp_user_timeout), so the lock outlives the
	 * holder's own deadline.  A waiter whose client died leaves the
	 * lock queue within client_connection_check_interval. */
	n = asprintf(&sql,
		     "SELECT pg_backend_pid(), " KEY_SQL ", "
		     "current_setting('server_version_num')::int, "
		     "pg_is_in_recovery(), "
		     "(SELECT count(set_config(s.name, s.v, false)) "
		     "FROM (VALUES "
		     "('idle_session_timeout', '0'), "
		     "('idle_in_transaction_session_timeout', '0'), "
		     "('transaction_timeout', '0'), "
		     "('statement_timeout', '0'), "
		     "('lock_timeout', '0'), "
		     "('client_connection_check_interval', '250'), "
		     "('tcp_keepalives_idle', '%ld'), "
		     "('tcp_keepalives_interval', '%ld'), "
		     "('tcp_keepalives_count', '%ld'), "
		     "('tcp_user_timeout', '%" PRId64 "')) AS s(name, v) "
		     "WHERE s.name IN (SELECT name FROM pg_settings))",
		     lit, k.idle, k.intvl, k.count, k.user_timeout);
	PQfreemem(lit);
	if (n < 0) {
		lr_err_set(err, "out of memory");
		return NULL;
	}
	return sql;
}

/* sslmode as libpq resolved it for c (the URL, else PGSSLMODE, else
 * its default, prefer). */
static const char *ssl_mode(PGconn *c)
{
	PQconninfoOption *o = PQconninfo(c), *p;
	static char mode[16];

	snprintf(mode, sizeof(mode), "prefer");
	for (p = o; p && p->keyword; p++)
		if (!strcmp(p->keyword, "sslmode") && p->val && *p->val)
			snprintf(mode, sizeof(mode), "%s", p->val);
	PQconninfoFree(o);
	return mode;
}

/* TLS that can be downgraded, or none across a network: said once a
 * run.  With sslmode=prefer (libpq's default) or allow, a server, or
 * whoever answers in its place, that declines TLS gets the startup
 * packet and the password in clear, and libpq says nothing. */
static void tls_guard(struct lr_store *st)
{
	const char *mode = ssl_mode(st->conn);
	const char *host = PQhost(st->conn);
	char msg[400];

	if (st->tls_warned || !st->req->warn)
		return;
	if (PQconnectionUsedPassword(st->conn) &&
	    (!strcmp(mode, "prefer") || !strcmp(mode, "allow")))
		snprintf(msg, sizeof(msg),
			 "PostgreSQL at %s: the password goes out with "
			 "sslmode=%s, which lets a server (or whoever answers "
			 "in its place) that declines TLS have it in clear%s; "
			 "add sslmode=verify-full (or require) to the URL, or "
			 "set PGSSLMODE",
			 st->where, mode,
			 PQsslInUse(st->conn) ? "" : ", as this one did");
	else if (!PQsslInUse(st->conn) && !lr_host_is_local(host))
		snprintf(msg, sizeof(msg),
			 "PostgreSQL at %s: the connection is not encrypted "
			 "(sslmode=%s) and crosses the network; add "
			 "sslmode=verify-full to the URL",
			 st->where, mode);
	else
		return;
	st->tls_warned = 1;
	st->req->warn(st->req->warn_ctx, msg);
}

/* Connects and sets the session up for holding a lock. */
static enum lr_status pg_connect(struct lr_store *st, int64_t deadline,
				 struct lr_err *err)
{
	PGresult *r = NULL;
	enum lr_status s;
	char *sql;

	PQfinish(st->conn);
	PQclear(st->res);
	st->conn = NULL;
	st->res = NULL;
	st->inflight = Q_NONE;
	st->rx_mark = -1;
	st->held = st->handed = st->want_wait = st->gone = 0;
	st->gated = st->other = 0;
	st->gone_why[0] = '\0';

	s = connect_one(st, deadline, &st->conn, err);
	if (s != LR_OK)
		return s;

	sql = setup_sql(st, err);
	if (!sql)
		return LR_ERROR;
	s = q_run(st, sql, Q_OTHER, deadline, &r, err);
	free(sql);
	if (s != LR_OK)
		goto out;
	if (!tuples(r, 5)) {
		q_fail(st, r, "setting up the session", err);
		s = LR_ERROR;
		goto out;
	}
	st->pid = atoi(PQgetvalue(r, 0, 0));
	st->key = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
	st->version = atoi(PQgetvalue(r, 0, 2));
	snprintf(st->keystr, sizeof(st->keystr), "%" PRId64, st->key);
	/* A bigint advisory key shows in pg_locks as classid = high 32 bits,
	 * objid = low 32 bits, objsubid = 1. */
	snprintf(st->locks_where, sizeof(st->locks_where),
		 "l.locktype = 'advisory' AND l.classid = %" PRIu32
		 " AND l.objid = %" PRIu32 " AND l.objsubid = 1 AND l.granted",
		 (uint32_t)((uint64_t)st->key >> 32), (uint32_t)st->key);
	name_sql(st);
	if (st->version < PG_MIN_VERSION) {
		lr_err_set(err,
			   "PostgreSQL at %s is version %d.%d: leaserun needs "
			   "9.6 or later (pg_logical_emit_message() makes "
			   "each fence durable)",
			   st->where, st->version / 10000,
			   st->version / 100 % 100);
		s = LR_ERROR;
		goto out;
	}
	if (!strcmp(PQgetvalue(r, 0, 3), "t")) {
		lr_err_set(err,
			   "PostgreSQL at %s is a standby (in recovery): its "
			   "advisory locks are not shared with the primary; "
			   "point the URL at the primary "
			   "(target_session_attrs=read-write)",
			   st->where);
		/* A failover may be promoting it: a wait may see it done. */
		lr_err_heals(err);
		s = LR_ERROR;
		goto out;
	}
	tls_guard(st);
	/* Guard: the pid libpq got at startup is the pooler's invention
	 * when a pooler sits in between. */
	if (st->req->token && PQbackendPID(st->conn) != st->pid)
		s = probe_pooler(st, deadline, err);
out:
	PQclear(r);
	return s;
}

/* ---- shared holders and semaphores -------------------------------------- */

/* The pg_locks conditions of the name, once the key is known: every
 * granted lock of it (the plain lease's or shared holders' bigint key,
 * the slots of a semaphore, not its gate), and another holder's limit
 * that differs from ours, as a SQL expression (NULL: none). */
static void name_sql(struct lr_store *st)
{
	uint32_t hi = (uint32_t)((uint64_t)st->key >> 32);

	st->hi = (int32_t)hi;
	snprintf(st->name_where, sizeof(st->name_where),
		 "l.locktype = 'advisory' AND l.granted AND l.classid = %" PRIu32
		 " AND ((l.objsubid = 1 AND l.objid = %" PRIu32 ") OR "
		 "(l.objsubid = 2 AND l.objid >= 131072)) AND l.database = "
		 "(SELECT oid FROM pg_database WHERE datname = "
		 "current_database())",
		 hi, (uint32_t)st->key);
	snprintf(st->other_sql, sizeof(st->other_sql),
		 "(SELECT max(CASE WHEN l.objsubid = 1 THEN 1 "
		 "ELSE l.objid::bigint >> 16 END) FROM pg_locks l WHERE %s "
		 "AND l.pid <> pg_backend_pid() AND CASE WHEN l.objsubid = 1 "
		 "THEN 1 ELSE l.objid::bigint >> 16 END <> %u)",
		 st->name_where, st->req->limit);
}

/* Slot k's lock, as its second key. */
static uint32_t slot_key(const struct lr_store *st, unsigned k)
{
	return st->req->limit << 16 | k;
}

/* ---- the contract ------------------------------------------------------ */

static enum lr_status pg_open(const struct lr_store_req *req, int64_t deadline,
			      struct lr_store **out, struct lr_err *err)
{
	struct lr_store *st = calloc(1, sizeof(*st));

	*out = st;
	if (!st) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	st->req = req;
	lr_waitset_init(&st->ws);
	snprintf(st->where, sizeof(st->where), "%s", "the default server");
	make_appname(st);
	return pg_connect(st, deadline, err);
}

static enum lr_status lost_or_error(struct lr_store *st, struct lr_err *err)
{
	if (st->gone) {
		lr_err_set(err, "PostgreSQL at %s ended our session (%s): the "
				"lock went with it",
			   st->where, st->gone_why);
		st->held = 0;
		return LR_LOST;
	}
	return LR_ERROR;
}

static const char *fence_sql(const struct lr_store *st)
{
	return st->version >= 130000 ? "pg_current_xact_id()::text"
				     : "txid_current()::text";
}

/* The SQL that names a session once it holds the lock, so that --status
 * can show the fence: "leaserun:NAME@host:pid#FENCE", the name cut so that
 * the whole fits application_name's 63 bytes (the fence never is).  The
 * fence expression is evaluated again in the same statement, so it is the
 * same transaction id.  0, or -1 if it does not fit buf. */
static int app_sql(struct lr_store *st, char *buf, size_t len)
{
	char tail[48], *name, *t;
	int room, n = -1;

	snprintf(tail, sizeof(tail), "@%.24s:%ld",
		 st->req->host ? st->req->host : "?", st->req->pid);
	room = (int)(sizeof(st->appname) - 1 - strlen("leaserun:") -
		     strlen(tail) - 1);
	name = PQescapeLiteral(st->conn, st->req->name, strlen(st->req->name));
	t = PQescapeLiteral(st->conn, tail, strlen(tail));
	if (name && t)
		n = snprintf(buf, len,
			     "set_config('application_name', 'leaserun:' || "
			     "left(%s, greatest(0, %d - length(%s))) || %s || "
			     "'#' || %s, false)",
			     name, room, fence_sql(st), t, fence_sql(st));
	PQfreemem(name);
	PQfreemem(t);
	return n >= 0 && (size_t)n < len ? 0 : -1;
}

/* The text of a lock statement into a new string (the caller frees it),
 * or NULL.  Its columns: got (the condition that we got the lock),
 * fence, pid, application_name set, the two of DURABLE_SQL, other_sql,
 * then extra (", COLUMN..." or ""); from is its FROM clause. */
static char *lock_sql(struct lr_store *st, const char *got, const char *from,
		      const char *extra)
{
	char app[512], *sql;

	if (app_sql(st, app, sizeof(app)) < 0)
		snprintf(app, sizeof(app), "NULL");
	if (asprintf(&sql,
		     "SELECT %s, CASE WHEN %s THEN %s END, pg_backend_pid(), "
		     "CASE WHEN %s THEN %s END, " DURABLE_SQL ", %s%s FROM %s",
		     got, got, fence_sql(st), got, app, got, st->other_sql,
		     extra, from) < 0)
		return NULL;
	return sql;
}

/* The statement that tries every slot of a semaphore without waiting,
 * the lowest first (CASE takes the first that locks), giving the gate
 * back if it got one.  Its eighth column is the slot, -1 for none. */
static char *slots_try_sql(struct lr_store *st)
{
	size_t len = 64 + (size_t)st->req->limit * 64, n;
	char *from = malloc(len), *sql, extra[96];
	unsigned k;

	if (!from)
		return NULL;
	n = (size_t)snprintf(from, len, "(SELECT CASE");
	for (k = 0; k < st->req->limit; k++)
		n += (size_t)snprintf(from + n, len - n,
				      " WHEN pg_try_advisory_lock(%" PRId32
				      ", %" PRIu32 ") THEN %u",
				      st->hi, slot_key(st, k), k);
	snprintf(from + n, len - n, " ELSE -1 END AS s OFFSET 0) AS x");
	if (st->gated)
		snprintf(extra, sizeof(extra),
			 ", x.s, CASE WHEN x.s >= 0 THEN "
			 "pg_advisory_unlock(%" PRId32 ", 0) END",
			 st->hi);
	else
		snprintf(extra, sizeof(extra), ", x.s");
	sql = lock_sql(st, "x.s >= 0", from, extra);
	free(from);
	return sql;
}

/* The try of the plain lease or of a shared one, without waiting. */
static char *try_sql(struct lr_store *st)
{
	char from[96];

	snprintf(from, sizeof(from), "pg_try_advisory_lock%s(%s) AS l",
		 st->req->shared ? "_shared" : "", st->keystr);
	return lock_sql(st, "l", from, "");
}

/* The wait for the plain lease, a shared one, or (on a semaphore's
 * session) slot st->slot, giving the gate back once it has the slot. */
static char *wait_sql(struct lr_store *st)
{
	char from[96], extra[64];

	if (st->req->limit > 1) {
		snprintf(from, sizeof(from),
			 "pg_advisory_lock(%" PRId32 ", %" PRIu32 ") AS l",
			 st->hi, slot_key(st, st->slot));
		snprintf(extra, sizeof(extra), ", %u", st->slot);
		if (st->gated)
			snprintf(extra, sizeof(extra),
				 ", %u, pg_advisory_unlock(%" PRId32 ", 0)",
				 st->slot, st->hi);
	} else {
		snprintf(from, sizeof(from), "pg_advisory_lock%s(%s) AS l",
			 st->req->shared ? "_shared" : "", st->keystr);
		extra[0] = '\0';
	}
	return lock_sql(st, "true", from, extra);
}

/* Sends the wait statement on session st.  LR_OK or LR_ERROR. */
static enum lr_status send_wait(struct lr_store *st, struct lr_err *err)
{
	char *sql = wait_sql(st);
	enum lr_status s;

	if (!sql) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	s = q_send(st, sql, Q_WAIT, err);
	free(sql);
	return s;
}

static void aux_close(struct lr_store *st)
{
	unsigned i;

	for (i = 0; i < st->nslot_sess; i++) {
		PQclear(st->slot_sess[i]->res);
		PQfinish(st->slot_sess[i]->conn);
		free(st->slot_sess[i]);
	}
	free(st->slot_sess);
	st->slot_sess = NULL;
	st->nslot_sess = 0;
	lr_waitset_close(&st->ws);
}

/* The connection state of two sessions of ours, traded: the one that got
 * the slot becomes the store's own.  Each connection's notice receiver
 * follows it to its new session: the old one is freed with the slots'
 * sessions, and a FATAL notice later (a backend terminated) would be
 * handed to freed memory. */
static void sess_swap(struct lr_store *a, struct lr_store *b)
{
	struct lr_store t = *a;

	a->conn = b->conn;
	a->rx_mark = b->rx_mark;
	a->pid = b->pid;
	a->inflight = b->inflight;
	a->res = b->res;
	a->held = b->held;
	a->handed = b->handed;
	a->fence = b->fence;
	a->gone = b->gone;
	memcpy(a->gone_why, b->gone_why, sizeof(a->gone_why));
	a->other = b->other;
	a->slot = b->slot;
	a->gated = b->gated;
	b->conn = t.conn;
	b->rx_mark = t.rx_mark;
	b->pid = t.pid;
	b->inflight = t.inflight;
	b->res = t.res;
	b->held = t.held;
	b->handed = t.handed;
	b->fence = t.fence;
	b->gone = t.gone;
	memcpy(b->gone_why, t.gone_why, sizeof(b->gone_why));
	b->other = t.other;
	b->slot = t.slot;
	b->gated = t.gated;
	if (a->conn)
		PQsetNoticeReceiver(a->conn, notice_rx, a);
	if (b->conn)
		PQsetNoticeReceiver(b->conn, notice_rx, b);
}

/*
 * First in a semaphore's queue (the gate is ours) with every slot taken:
 * waits for all of them at once, as PostgreSQL waits for one lock per
 * session: this session for slot 0, and a session of its own for each
 * other slot.  Whichever gets its slot first wins (acquire() makes it the
 * store's session); the others are ended.
 */
static enum lr_status aux_open(struct lr_store *st, int64_t deadline,
			       struct lr_err *err)
{
	unsigned n = st->req->limit - 1, i;
	enum lr_status s;

	st->slot_sess = calloc(n, sizeof(*st->slot_sess));
	if (!st->slot_sess || lr_waitset_open(&st->ws) < 0) {
		lr_err_set(err, "cannot wait for the slots: %s",
			   strerror(errno ? errno : ENOMEM));
		return LR_ERROR;
	}
	for (i = 0; i < n; i++) {
		struct lr_store *a = calloc(1, sizeof(*a));

		if (!a) {
			lr_err_set(err, "out of memory");
			return LR_ERROR;
		}
		st->slot_sess[st->nslot_sess++] = a;
		a->req = st->req;
		memcpy(a->where, st->where, sizeof(a->where));
		memcpy(a->appname, st->appname, sizeof(a->appname));
		a->tls_warned = 1; /* said once, of the store's own session */
		lr_waitset_init(&a->ws);
		s = pg_connect(a, deadline, err);
		if (s != LR_OK)
			return s;
		a->slot = i + 1;
		s = send_wait(a, err);
		if (s != LR_OK)
			return s;
	}
	return LR_OK;
}

static enum lr_status aux_start(struct lr_store *st, int64_t deadline,
				struct lr_err *err)
{
	enum lr_status s;

	st->slot = 0;
	s = send_wait(st, err);
	return s == LR_OK ? aux_open(st, deadline, err) : s;
}

/* Reads what session a has without waiting; a lock query that finished
 * is understood (handed: it got the lock).  0, or -1 if it broke. */
static int sess_poll(struct lr_store *a)
{
	if (!conn_ok(a) || a->gone || PQflush(a->conn) < 0 || consume(a) < 0)
		return -1;
	if (a->inflight != Q_NONE && collect(a)) {
		enum q_kind kind = a->inflight;

		a->inflight = Q_NONE;
		if ((kind == Q_TRY || kind == Q_WAIT) && !a->held &&
		    absorb_lock(a, a->res) != 0)
			a->handed = 1;
		if (kind == Q_GATE && tuples(a->res, 1))
			a->gated = 1;
		PQclear(a->res);
		a->res = NULL;
	}
	return 0;
}

/* Ends the sessions that lost the race for a slot: their backends are
 * terminated first, so that none holds a slot it got meanwhile for as
 * long as it takes the server to see its client gone. */
static void aux_end(struct lr_store *st, int64_t deadline)
{
	char *sql, *p;
	struct lr_err ignored;
	PGresult *r = NULL;
	unsigned i;

	sql = malloc(64 + st->nslot_sess * 16);
	if (sql && st->nslot_sess) {
		p = sql + sprintf(sql, "SELECT pg_terminate_backend(p) FROM "
				       "unnest(ARRAY[");
		for (i = 0; i < st->nslot_sess; i++)
			p += sprintf(p, "%s%d", i ? "," : "",
				     st->slot_sess[i]->pid);
		sprintf(p, "]) AS p");
		q_run(st, sql, Q_OTHER, deadline, &r, &ignored);
		PQclear(r);
	}
	free(sql);
	aux_close(st);
}

/* A run whose limit differs from the holders': whatever it got goes
 * back. */
static enum lr_status refuse(struct lr_store *st, int64_t deadline,
			     struct lr_err *err)
{
	PGresult *r = NULL;
	struct lr_err ignored;
	unsigned other = (unsigned)st->other;

	if ((st->held || st->gated) && st->inflight == Q_NONE)
		q_run(st, "SELECT pg_advisory_unlock_all()", Q_OTHER, deadline,
		      &r, &ignored);
	PQclear(r);
	st->held = st->handed = st->want_wait = st->gated = 0;
	st->other = 0;
	lr_err_limit(err, st->req, other);
	return LR_ERROR;
}

static enum lr_status grant(struct lr_store *st, int64_t deadline,
			    struct lr_grant *g, struct lr_err *err)
{
	if (st->nslot_sess)
		aux_end(st, deadline);
	if (st->other)
		return refuse(st, deadline, err);
	if (st->req->limit > 1)
		snprintf(st->locks_where, sizeof(st->locks_where),
			 "l.locktype = 'advisory' AND l.classid = %" PRIu32
			 " AND l.objid = %" PRIu32 " AND l.objsubid = 2 AND "
			 "l.granted",
			 (uint32_t)st->hi, slot_key(st, st->slot));
	g->fence = st->fence;
	g->ttl_ms = 0;
	g->slot = st->req->limit > 1 ? st->slot : 0;
	st->handed = 0;
	st->want_wait = 0;
	st->gated = 0;
	return LR_OK;
}

static enum lr_status pooled(struct lr_store *st, int was, int now,
			     struct lr_err *err)
{
	lr_err_set(err,
		   "PostgreSQL at %s: our backend changed (pid %d, now %d): "
		   "a transaction pooler is in between, and the advisory "
		   "lock does not stay with this connection",
		   st->where, was, now);
	return LR_LOST;
}

/* Waiting for the slots on several sessions: a winner becomes the
 * store's session and is granted; LR_BUSY while none has won. */
static enum lr_status aux_acquire(struct lr_store *st, int64_t deadline,
				  struct lr_grant *g, struct lr_err *err)
{
	unsigned i;
	int ours = sess_poll(st) < 0, broke = ours;

	for (i = 0; !st->handed && i < st->nslot_sess; i++) {
		struct lr_store *a = st->slot_sess[i];

		/* A slot's wait that ended without the slot (its statement
		 * cancelled) counts as broken: nobody waits for that slot. */
		broke |= sess_poll(a) < 0 ||
			 (!a->handed && a->inflight != Q_WAIT);
		if (a->handed)
			sess_swap(st, a);
	}
	if (st->handed)
		return grant(st, deadline, g, err);
	/* Our own wait for slot 0 ended without the slot (an
	 * administrator's pg_cancel_backend()): as if our session had. */
	if (st->inflight != Q_WAIT)
		ours = broke = 1;
	if (broke) {
		struct lr_err why = { "" };

		aux_close(st);
		/* A slot's own session ended (an administrator, a pooler's
		 * timeout): the store's session still holds the gate and
		 * waits for slot 0, and nobody else may wait for the other
		 * slots while it does: wait for them again, on new sessions. */
		if (!ours) {
			if (aux_open(st, deadline, &why) == LR_OK)
				return LR_BUSY;
			if (st->req->warn) {
				char msg[LR_ERRLEN + 96];

				snprintf(msg, sizeof(msg),
					 "%s; the wait for the slots starts "
					 "over, from the back of the queue",
					 why.msg);
				st->req->warn(st->req->warn_ctx, msg);
			}
		}
		/* Else (our own session ended, or new ones could not be
		 * opened) start again from a try, on a new session (the
		 * next acquire() connects, finding no connection): the gate
		 * and the wait for slot 0 end with the old one, closed now
		 * rather than then, so that other waiters are not kept
		 * behind its gate meanwhile. */
		aux_close(st);
		PQfinish(st->conn);
		st->conn = NULL;
	}
	return LR_BUSY;
}

static enum lr_status pg_acquire(struct lr_store *st, int64_t deadline,
				 struct lr_grant *g, struct lr_err *err)
{
	PGresult *r = NULL;
	enum lr_status s;
	char *sql;
	int got;

	if (st->handed)
		return grant(st, deadline, g, err);
	if (st->nslot_sess)
		return aux_acquire(st, deadline, g, err);
	if ((st->inflight == Q_WAIT || st->inflight == Q_GATE) &&
	    conn_ok(st) && sess_poll(st) == 0) {
		/* The wait is running: look, without blocking.  (A session
		 * that ended meanwhile, as a restart ends it, ended its wait
		 * and what it was granted with it: a new one, below.  It was
		 * busy for good here, and the run waited out its -w.) */
		if (st->inflight != Q_NONE)
			return LR_BUSY;
		if (st->handed)
			return grant(st, deadline, g, err);
		if (st->other)
			return refuse(st, deadline, err);
	}
	if (!conn_ok(st) || st->gone) {
		/* Not holding anything: a new session loses nothing. */
		s = pg_connect(st, deadline, err);
		if (s != LR_OK)
			return s;
	}
	sql = st->req->limit > 1 ? slots_try_sql(st) : try_sql(st);
	if (!sql) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	s = q_run(st, sql, Q_TRY, deadline, &r, err);
	free(sql);
	if (s != LR_OK)
		goto out;
	if (!tuples(r, 3)) {
		q_fail(st, r, "pg_try_advisory_lock", err);
		s = LR_ERROR;
		goto out;
	}
	got = absorb_lock(st, r);
	if (got < 0)
		s = pooled(st, st->pid, atoi(PQgetvalue(r, 0, 2)), err);
	else if (st->other)
		s = refuse(st, deadline, err);
	else if (got > 0)
		s = grant(st, deadline, g, err);
	else if (st->gated)
		s = aux_start(st, deadline, err) == LR_OK ? LR_BUSY : LR_ERROR;
	else {
		st->want_wait = 1;
		s = LR_BUSY;
	}
out:
	PQclear(r);
	return s;
}

/* (The waits start here, not in acquire(), so that a "-n" run never joins
 * a lock queue.  A semaphore's run queues for the gate; acquire() then
 * starts its wait for the slots.) */
static int pg_wait_fd(struct lr_store *st, short *events)
{
	unsigned i;

	if (!conn_ok(st) || st->gone)
		return -1;
	if (st->want_wait && !st->held && st->inflight == Q_NONE) {
		char sql[64], *w = NULL;
		enum lr_status s;

		st->want_wait = 0;
		if (st->req->limit > 1) {
			snprintf(sql, sizeof(sql),
				 "SELECT pg_advisory_lock(%" PRId32 ", 0)",
				 st->hi);
			s = q_send(st, sql, Q_GATE, NULL);
		} else {
			w = wait_sql(st);
			s = w ? q_send(st, w, Q_WAIT, NULL) : LR_ERROR;
			free(w);
		}
		if (s != LR_OK)
			return -1;
	}
	if (st->nslot_sess) {
		/* Every session's socket in one set. */
		lr_waitset_watch(&st->ws, PQsocket(st->conn), EPOLLIN);
		for (i = 0; i < st->nslot_sess; i++)
			if (conn_ok(st->slot_sess[i]))
				lr_waitset_watch(&st->ws,
					PQsocket(st->slot_sess[i]->conn),
					EPOLLIN);
		*events = POLLIN;
		return st->ws.ep;
	}
	if (st->inflight != Q_WAIT && st->inflight != Q_GATE && !st->held)
		return -1;
	*events = POLLIN;
	if (PQflush(st->conn) == 1)
		*events |= POLLOUT;
	return PQsocket(st->conn);
}

static enum lr_status pg_process(struct lr_store *st, short revents,
				 int64_t deadline, struct lr_err *err)
{
	char buf[200];
	int done = 0;

	(void)revents;
	if (st->nslot_sess) {
		/* Every session reads what it has; acquire() takes the
		 * winner, or starts again if one broke. */
		unsigned i;
		int news = sess_poll(st) < 0 || st->handed;

		for (i = 0; i < st->nslot_sess; i++)
			news |= sess_poll(st->slot_sess[i]) < 0 ||
				st->slot_sess[i]->handed;
		return news ? LR_OK : LR_BUSY;
	}
	if (!st->conn)
		return st->held ? LR_ERROR : LR_OK;
	if (PQflush(st->conn) < 0 || consume(st) < 0) {
		if (!st->held) /* acquire() will open a new session */
			return LR_OK;
		if (st->gone)
			return lost_or_error(st, err);
		lr_err_set(err, "connection to PostgreSQL at %s failed: %s",
			   st->where, conn_msg(st, buf, sizeof(buf)));
		return LR_ERROR;
	}
	if (st->inflight != Q_NONE)
		done = collect(st);
	if (done) {
		enum q_kind kind = st->inflight;

		st->inflight = Q_NONE;
		if ((kind == Q_TRY || kind == Q_WAIT) && !st->held &&
		    absorb_lock(st, st->res) != 0)
			st->handed = 1;
		if (kind == Q_GATE && tuples(st->res, 1))
			st->gated = 1;
		PQclear(st->res);
		st->res = NULL;
	}
	if (st->held && !st->handed) {
		if (st->gone)
			return lost_or_error(st, err);
		return LR_OK;
	}
	if ((st->inflight == Q_WAIT || st->inflight == Q_GATE) && !st->gone)
		return LR_BUSY;
	return LR_OK; /* handed over, or the wait ended: acquire() now */
}

/* The session, asked without waiting, as the last step before the
 * command starts: what the socket already holds (a FATAL message, the
 * server's close), and what earlier calls learnt on the way (a FATAL
 * that came behind the grant's answer; a connection libpq dropped).  A
 * connection that broke before the command started is loss too: the
 * lock can never be shown ours again, and the server frees it. */
static enum lr_status pg_check(struct lr_store *st, int64_t deadline,
			       struct lr_err *err)
{
	(void)deadline;
	if (st->held && !st->gone && conn_ok(st)) {
		struct pollfd p = { .fd = PQsocket(st->conn),
				    .events = POLLIN };

		if (poll(&p, 1, 0) > 0 && consume(st) < 0 && !st->gone)
			mark_gone(st, "the connection broke");
	}
	if (st->held && !st->gone && !conn_ok(st))
		mark_gone(st, "the connection broke");
	if (!st->held && !st->gone)
		mark_gone(st, "the lock was not held");
	return st->gone ? lost_or_error(st, err) : LR_OK;
}

static enum lr_status pg_renew(struct lr_store *st, int64_t deadline,
			       struct lr_err *err)
{
	char sql[512];
	PGresult *r = NULL;
	enum lr_status s;
	int pid;

	if (st->gone || !st->held) {
		if (!st->gone)
			mark_gone(st, "the lock was not held");
		return lost_or_error(st, err);
	}
	if (!conn_ok(st)) {
		lr_err_set(err, "connection to PostgreSQL at %s is broken; "
				"the server frees the lock when it notices",
			   st->where);
		return LR_ERROR;
	}
	snprintf(sql, sizeof(sql),
		 "SELECT pg_backend_pid(), count(*) FROM pg_locks l "
		 "WHERE %s AND l.pid = pg_backend_pid()",
		 st->locks_where);
	s = q_run(st, sql, Q_OTHER, deadline, &r, err);
	/* Also an answer with the session's end behind it: a FATAL
	 * message that came in the same read. */
	if ((s == LR_ERROR || s == LR_OK) && st->gone)
		s = lost_or_error(st, err);
	if (s != LR_OK)
		goto out;
	if (!tuples(r, 2)) {
		q_fail(st, r, "checking pg_locks", err);
		s = st->gone ? lost_or_error(st, err) : LR_ERROR;
		goto out;
	}
	pid = atoi(PQgetvalue(r, 0, 0));
	if (pid != st->pid) {
		st->held = 0;
		s = pooled(st, st->pid, pid, err);
	} else if (strcmp(PQgetvalue(r, 0, 1), "0") == 0) {
		st->held = 0;
		lr_err_set(err,
			   "PostgreSQL at %s: our session (backend %d) no "
			   "longer holds the advisory lock %s (released by "
			   "pg_advisory_unlock_all(), DISCARD ALL or a pooler)",
			   st->where, st->pid, st->keystr);
		s = LR_LOST;
	}
out:
	PQclear(r);
	return s;
}

static enum lr_status pg_release(struct lr_store *st, int64_t deadline,
				 struct lr_err *err)
{
	char sql[200];
	PGresult *r = NULL;
	enum lr_status s;

	if (!st->held || st->gone || !conn_ok(st)) {
		if (!st->gone)
			mark_gone(st, st->held ? "connection broken"
					       : "the lock was not held");
		return lost_or_error(st, err);
	}
	if (st->inflight != Q_NONE &&
	    (sess_poll(st) < 0 || st->inflight != Q_NONE)) {
		/* An earlier statement (a renewal or a give-back that timed
		 * out) is still unanswered, its answer not here yet: the
		 * server is not answering.  A fault that may heal: asked
		 * again, this takes the answer once it came.  Ending the
		 * session (close) frees the lock meanwhile. */
		lr_err_set(err, "PostgreSQL at %s is not answering; closing "
				"our session frees the lock",
			   st->where);
		lr_err_heals(err);
		return LR_ERROR;
	}
	if (st->req->limit > 1)
		snprintf(sql, sizeof(sql),
			 "SELECT pg_advisory_unlock(%" PRId32 ", %" PRIu32
			 "), pg_backend_pid()",
			 st->hi, slot_key(st, st->slot));
	else
		snprintf(sql, sizeof(sql),
			 "SELECT pg_advisory_unlock%s(%s), pg_backend_pid()",
			 st->req->shared ? "_shared" : "", st->keystr);
	s = q_run(st, sql, Q_OTHER, deadline, &r, err);
	if (s == LR_ERROR && st->gone)
		s = lost_or_error(st, err);
	if (s != LR_OK)
		goto out;
	if (!tuples(r, 2)) {
		q_fail(st, r, "pg_advisory_unlock", err);
		s = LR_ERROR;
	} else if (strcmp(PQgetvalue(r, 0, 0), "t") != 0 ||
		   atoi(PQgetvalue(r, 0, 1)) != st->pid) {
		lr_err_set(err, "PostgreSQL at %s: our session no longer held "
				"the lock",
			   st->where);
		s = LR_LOST;
	}
	st->held = 0;
out:
	PQclear(r);
	return s;
}

/* "leaserun:NAME@host:pid": host and pid, read from the right (the name
 * may hold '@' and ':'), and the name (as far as it was kept) into name
 * (nlen bytes); each output may be NULL.  Returns 0 if app is not ours. */
static int parse_appname(const char *app, char *host, size_t hlen, long *pid,
			 uint64_t *fence, char *name, size_t nlen)
{
	const char *colon, *at, *hash;

	if (strncmp(app, "leaserun:", 9) != 0)
		return 0;
	colon = strrchr(app, ':');
	if (!colon || colon < app + 9)
		return 0;
	for (at = colon; at > app + 9 && *at != '@'; at--)
		;
	if (*at != '@')
		return 0;
	if (pid)
		*pid = strtol(colon + 1, NULL, 10);
	hash = strchr(colon, '#'); /* "#FENCE" once the lock is held */
	if (hash && fence)
		*fence = strtoull(hash + 1, NULL, 10);
	if (host)
		snprintf(host, hlen, "%.*s", (int)(colon - at - 1), at + 1);
	if (name)
		snprintf(name, nlen, "%.*s", (int)(at - app - 9), app + 9);
	return 1;
}

/* Every holder of the name: the plain lease's or the shared holders'
 * bigint key, or a semaphore's slots, from pg_locks (ordered by slot),
 * with who they are from pg_stat_activity.  Columns: pid,
 * application_name, client address, backend start (ms), slot (-1: the
 * bigint key), limit, shared. */
static enum lr_status pg_waiters(struct lr_store *st, int64_t deadline,
				 struct lr_info *info, struct lr_err *err);

#define HOLDERS_SQL                                                         \
	"SELECT l.pid, coalesce(a.application_name, ''), "                  \
	"coalesce(host(a.client_addr), 'local'), "                          \
	"coalesce((extract(epoch FROM a.backend_start) * 1000)::bigint, 0), " \
	"CASE WHEN l.objsubid = 2 THEN l.objid::bigint & 65535 ELSE -1 END, " \
	"CASE WHEN l.objsubid = 2 THEN l.objid::bigint >> 16 ELSE 1 END, "  \
	"l.mode = 'ShareLock' "                                             \
	"FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid "    \
	"WHERE %s ORDER BY 5, 1"

static enum lr_status pg_inspect(struct lr_store *st, int64_t deadline,
				 struct lr_info *info, struct lr_err *err)
{
	char sql[1024];
	PGresult *r = NULL;
	struct lr_holder *h;
	enum lr_status s;
	int i;

	snprintf(sql, sizeof(sql), HOLDERS_SQL, st->name_where);
	s = q_run(st, sql, Q_OTHER, deadline, &r, err);
	if (s != LR_OK)
		goto out;
	if (!r || PQresultStatus(r) != PGRES_TUPLES_OK || PQnfields(r) < 7) {
		q_fail(st, r, "reading pg_locks", err);
		s = LR_ERROR;
		goto out;
	}
	for (i = 0; i < PQntuples(r); i++) {
		if (!(h = lr_info_add(info))) {
			lr_err_set(err, "out of memory");
			s = LR_ERROR;
			goto out;
		}
		/* (a session lock has no TTL) */
		h->since_ms = strtoll(PQgetvalue(r, i, 3), NULL, 10);
		if (atoi(PQgetvalue(r, i, 4)) > 0)
			h->slot = (unsigned)atoi(PQgetvalue(r, i, 4));
		info->limit = (unsigned)atoi(PQgetvalue(r, i, 5));
		h->shared = !strcmp(PQgetvalue(r, i, 6), "t");
		if (!parse_appname(PQgetvalue(r, i, 1), h->host,
				   sizeof(h->host), &h->pid, &h->fence, NULL,
				   0)) {
			/* Someone took the lock from SQL: say who. */
			snprintf(h->host, sizeof(h->host),
				 "%s (backend %s, application_name \"%.64s\")",
				 PQgetvalue(r, i, 2), PQgetvalue(r, i, 0),
				 PQgetvalue(r, i, 1));
		}
	}
	if (s == LR_OK)
		s = pg_waiters(st, deadline, info, err);
out:
	PQclear(r);
	return s;
}

/* Terminates the holders' backends: all of them, or slot's (slot 0 of
 * the plain lease or of shared holders is all of them). */
static enum lr_status pg_break(struct lr_store *st, int slot, int64_t deadline,
			       struct lr_err *err)
{
	char sql[1400], wait[32] = "", which[64] = "";
	PGresult *r = NULL;
	enum lr_status s;
	int64_t left = deadline - lr_now_ms() - 100;
	int i;

	/* pg_terminate_backend(pid, timeout) waits for the backend to exit
	 * (PostgreSQL 14 and later), so the lock is free when we return. */
	if (st->version >= 140000 && left > 0)
		snprintf(wait, sizeof(wait), ", %" PRId64, left);
	if (slot > 0)
		snprintf(which, sizeof(which),
			 " AND l.objsubid = 2 AND l.objid::bigint & 65535 = %d",
			 slot);
	else if (slot == 0)
		snprintf(which, sizeof(which),
			 " AND (l.objsubid = 1 OR l.objid::bigint & 65535 = 0)");
	snprintf(sql, sizeof(sql),
		 "SELECT l.pid, pg_terminate_backend(l.pid%s) FROM pg_locks l "
		 "WHERE %s%s",
		 wait, st->name_where, which);
	s = q_run(st, sql, Q_OTHER, deadline, &r, err);
	if (s != LR_OK)
		goto out;
	if (!r || PQresultStatus(r) != PGRES_TUPLES_OK) {
		const char *code =
			r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;

		q_fail(st, r, "pg_terminate_backend", err);
		if (code && !strcmp(code, "42501")) /* insufficient_privilege */
			lr_err_set(err,
				   "cannot break the lease on PostgreSQL at "
				   "%s: terminating the holder's backend needs "
				   "its role, pg_signal_backend or superuser",
				   st->where);
		s = LR_ERROR;
		goto out;
	}
	for (i = 0; i < PQntuples(r); i++)
		if (strcmp(PQgetvalue(r, i, 1), "t") != 0) {
			lr_err_set(err,
				   "PostgreSQL at %s: the holder's backend %s "
				   "did not exit in time",
				   st->where, PQgetvalue(r, i, 0));
			s = LR_TIMEOUT;
		}
out:
	PQclear(r);
	return s;
}

/* ---- runs (--once-per) ------------------------------------------------ */

/* The table of runs, as created here and as the man page prints it. */
#define RUNS_SQL                                                          \
	"CREATE TABLE leaserun_runs (name text PRIMARY KEY, fence numeric, " \
	"host text, pid int, period_ms bigint, started timestamptz, "       \
	"ended timestamptz, status int)"
/* A timestamptz as Unix ms. */
#define MS_SQL(x) "(extract(epoch FROM " x ") * 1000)::bigint"
/* The columns of a run, then now(), in the order run_row() reads. */
#define ROW_SQL                                                           \
	"fence, host, pid, period_ms, " MS_SQL("started") ", "              \
	MS_SQL("ended") ", status, " MS_SQL("now()")

/* Fills run from columns at..at+7 of r's first row (ROW_SQL), counting
 * next with period (0: the row's own). */
static void run_row(const PGresult *r, int at, struct lr_run *run,
		    int64_t period)
{
	int64_t now;

	lr_run_init(run);
	if (PQntuples(r) < 1 || PQgetisnull(r, 0, at + 4))
		return;
	run->known = 1;
	run->fence = strtoull(PQgetvalue(r, 0, at), NULL, 10);
	snprintf(run->host, sizeof(run->host), "%s", PQgetvalue(r, 0, at + 1));
	run->pid = strtol(PQgetvalue(r, 0, at + 2), NULL, 10);
	run->period_ms = strtoll(PQgetvalue(r, 0, at + 3), NULL, 10);
	run->start_ms = strtoll(PQgetvalue(r, 0, at + 4), NULL, 10);
	if (!PQgetisnull(r, 0, at + 5)) {
		run->end_ms = strtoll(PQgetvalue(r, 0, at + 5), NULL, 10);
		run->status = PQgetisnull(r, 0, at + 6)
				      ? -1
				      : atoi(PQgetvalue(r, 0, at + 6));
	}
	now = strtoll(PQgetvalue(r, 0, at + 7), NULL, 10);
	lr_run_times(run, now, period);
}

/* The table is missing: create it if the role may.  LR_OK to try again;
 * LR_ERROR with the statement to run when it may not. */
static enum lr_status runs_create(struct lr_store *st, int64_t deadline,
				  struct lr_err *err)
{
	PGresult *r = NULL;
	enum lr_status s;
	const char *code;

	s = q_run(st, RUNS_SQL, Q_OTHER, deadline, &r, err);
	if (s != LR_OK)
		goto out;
	code = sqlstate(r);
	/* Created, or by another run at the same moment. */
	if (PQresultStatus(r) == PGRES_COMMAND_OK || !strcmp(code, "42P07") ||
	    !strcmp(code, "23505"))
		goto out;
	if (!strcmp(code, "42501")) /* insufficient_privilege */
		lr_err_set(err,
			   "PostgreSQL at %s: --once-per needs the table "
			   "leaserun_runs, which role %s may not create here; "
			   "have it made: %s; GRANT SELECT, INSERT, UPDATE ON "
			   "leaserun_runs TO %s",
			   st->where, PQuser(st->conn), RUNS_SQL,
			   PQuser(st->conn));
	else
		q_fail(st, r, "creating the table leaserun_runs", err);
	s = LR_ERROR;
out:
	PQclear(r);
	return s;
}

/* A failed statement on leaserun_runs, in words: the rights it needs. */
static void runs_fail(struct lr_store *st, const PGresult *r,
		      const char *what, struct lr_err *err)
{
	if (!strcmp(sqlstate(r), "42501"))
		lr_err_set(err,
			   "PostgreSQL at %s: role %s may not use the table "
			   "leaserun_runs that --once-per keeps runs in: GRANT "
			   "SELECT, INSERT, UPDATE ON leaserun_runs TO %s",
			   st->where, PQuser(st->conn), PQuser(st->conn));
	else
		q_fail(st, r, what, err);
}

static enum lr_status pg_run_start(struct lr_store *st, int64_t period_ms,
				   uint64_t fence, int64_t deadline,
				   struct lr_run *last, struct lr_err *err)
{
	char *name = NULL, *host = NULL, *sql = NULL;
	const char *h = st->req->host ? st->req->host : "";
	PGresult *r = NULL;
	enum lr_status s = LR_ERROR;
	int tries;

	name = PQescapeLiteral(st->conn, st->req->name, strlen(st->req->name));
	host = PQescapeLiteral(st->conn, h, strlen(h));
	/* Ours unless a start less than the period before now() is
	 * recorded; "old" is the row as it was, read before the insert. */
	if (!name || !host ||
	    asprintf(&sql,
		     "WITH s AS (SELECT set_config('synchronous_commit', "
		     "'on', true)), "
		     "old AS (SELECT " ROW_SQL " FROM leaserun_runs "
		     "WHERE name = %s), "
		     "ins AS (INSERT INTO leaserun_runs AS r (name, fence, "
		     "host, pid, period_ms, started) "
		     "SELECT %s, %" PRIu64 ", %s, %ld, %" PRId64 ", now() "
		     "FROM s "
		     "ON CONFLICT (name) DO UPDATE SET fence = EXCLUDED.fence, "
		     "host = EXCLUDED.host, pid = EXCLUDED.pid, "
		     "period_ms = EXCLUDED.period_ms, "
		     "started = EXCLUDED.started, ended = NULL, status = NULL "
		     "WHERE r.fence = EXCLUDED.fence OR r.started + "
		     "EXCLUDED.period_ms * interval '1 millisecond' <= now() "
		     "RETURNING 1) "
		     "SELECT (SELECT count(*) FROM ins), old.* "
		     "FROM (SELECT 1) AS one LEFT JOIN old ON true",
		     name, name, fence, host, st->req->pid,
		     period_ms) < 0) {
		sql = NULL;
		lr_err_set(err, "out of memory");
		goto out;
	}
	for (tries = 0; tries < 2; tries++) {
		PQclear(r);
		s = q_run(st, sql, Q_OTHER, deadline, &r, err);
		if (s != LR_OK)
			goto out;
		if (tries == 0 && !strcmp(sqlstate(r), "42P01")) {
			s = runs_create(st, deadline, err);
			if (s != LR_OK)
				goto out;
			continue;
		}
		break;
	}
	if (!tuples(r, 9)) {
		runs_fail(st, r, "recording the run", err);
		s = LR_ERROR;
	} else if (strcmp(PQgetvalue(r, 0, 0), "0") == 0) {
		run_row(r, 1, last, period_ms);
		s = LR_BUSY;
	}
out:
	PQclear(r);
	free(sql);
	PQfreemem(name);
	PQfreemem(host);
	return s;
}

static enum lr_status pg_run_end(struct lr_store *st, uint64_t fence,
				 int status, int64_t deadline,
				 struct lr_err *err)
{
	char sql[512], *name;
	PGresult *r = NULL;
	enum lr_status s;

	if (!conn_ok(st) || st->gone) {
		lr_err_set(err, "PostgreSQL at %s: our session is gone",
			   st->where);
		return LR_ERROR;
	}
	name = PQescapeLiteral(st->conn, st->req->name, strlen(st->req->name));
	if (!name) {
		lr_err_set(err, "cannot quote the lease name for PostgreSQL");
		return LR_ERROR;
	}
	snprintf(sql, sizeof(sql),
		 "UPDATE leaserun_runs SET ended = now(), status = %d "
		 "WHERE name = %s AND fence = %" PRIu64,
		 status, name, fence);
	PQfreemem(name);
	s = q_run(st, sql, Q_OTHER, deadline, &r, err);
	if (s == LR_OK && PQresultStatus(r) != PGRES_COMMAND_OK) {
		runs_fail(st, r, "recording the end of the run", err);
		s = LR_ERROR;
	}
	PQclear(r);
	return s;
}

static enum lr_status pg_run_last(struct lr_store *st, int64_t deadline,
				  struct lr_run *last, struct lr_err *err)
{
	char sql[512], *name;
	PGresult *r = NULL;
	enum lr_status s;

	name = PQescapeLiteral(st->conn, st->req->name, strlen(st->req->name));
	if (!name) {
		lr_err_set(err, "cannot quote the lease name for PostgreSQL");
		return LR_ERROR;
	}
	snprintf(sql, sizeof(sql),
		 "SELECT " ROW_SQL " FROM leaserun_runs WHERE name = %s", name);
	PQfreemem(name);
	lr_run_init(last);
	s = q_run(st, sql, Q_OTHER, deadline, &r, err);
	if (s != LR_OK)
		goto out;
	if (!strcmp(sqlstate(r), "42P01"))
		goto out; /* no table: no run recorded yet */
	if (!r || PQresultStatus(r) != PGRES_TUPLES_OK) {
		runs_fail(st, r, "reading the last run", err);
		s = LR_ERROR;
		goto out;
	}
	run_row(r, 0, last, 0);
out:
	PQclear(r);
	return s;
}

static void pg_close(struct lr_store *st)
{
	if (!st)
		return;
	/* PQfinish() ends the session, which frees the lock; a wait still
	 * queued is left by the server within
	 * client_connection_check_interval. */
	aux_close(st);
	PQclear(st->res);
	PQfinish(st->conn);
	free(st);
}

/* ---- --list, and the waiters of --status ------------------------------- */

/*
 * pg_locks knows keys, not names: the name is in the application_name of
 * the sessions that hold or wait (make_appname(), app_sql()), cut where
 * the name is long.  LOCKS_SQL reads every advisory lock of leaserun's
 * sessions in this database, a lease's rows together (a lease's keys
 * share their high 32 bits, classid), its holders first, then the
 * sessions that wait: the holder of a semaphore's gate (the first in
 * line), then the others by when they started to wait (PostgreSQL 14
 * and later keep it).  Columns: classid, objid, objsubid, granted, pid,
 * shared, application_name, client address, backend start (ms).  The
 * answer is as large as the server's lock table, which it bounds.  %s:
 * a further condition; %s: the wait start column (or NULL).
 */
#define LOCKS_SQL                                                           \
	"SELECT l.classid, l.objid, l.objsubid, l.granted, l.pid, "          \
	"l.mode = 'ShareLock', a.application_name, "                        \
	"coalesce(host(a.client_addr), 'local'), "                          \
	"coalesce((extract(epoch FROM a.backend_start) * 1000)::bigint, 0) " \
	"FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "         \
	"WHERE l.locktype = 'advisory' AND a.application_name LIKE "        \
	"'leaserun:%%' AND l.database = (SELECT oid FROM pg_database "      \
	"WHERE datname = current_database()) %s "                           \
	"ORDER BY l.classid, l.granted AND NOT (l.objsubid = 2 AND "         \
	"l.objid = 0) DESC, l.granted DESC, %s, l.objsubid, l.objid, l.pid"

enum { C_HI, C_OBJ, C_SUB, C_GRANTED, C_PID, C_SHARED, C_APP, C_ADDR,
       C_START };

/* Does row i hold the lease (a granted lock, not a semaphore's gate)? */
static int row_holds(const PGresult *r, int i)
{
	return !strcmp(PQgetvalue(r, i, C_GRANTED), "t") &&
	       !(atoi(PQgetvalue(r, i, C_SUB)) == 2 &&
		 !strcmp(PQgetvalue(r, i, C_OBJ), "0"));
}

/* Are rows i and j the same run's sessions (a semaphore's first waiter
 * has one a slot)?  Their application_names up to the fence. */
static int same_run(const PGresult *r, int i, int j)
{
	const char *a = PQgetvalue(r, i, C_APP), *b = PQgetvalue(r, j, C_APP);
	size_t n = strcspn(a, "#");

	return n == strcspn(b, "#") && !strncmp(a, b, n);
}

/* Row i as a holder of info. */
static enum lr_status row_holder(const PGresult *r, int i,
				 struct lr_info *info, struct lr_err *err)
{
	struct lr_holder *h = lr_info_add(info);
	long obj = atol(PQgetvalue(r, i, C_OBJ));

	if (!h) {
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	h->since_ms = strtoll(PQgetvalue(r, i, C_START), NULL, 10);
	h->shared = !strcmp(PQgetvalue(r, i, C_SHARED), "t");
	info->limit = 1;
	if (atoi(PQgetvalue(r, i, C_SUB)) == 2) {
		h->slot = (unsigned)(obj & 65535);
		info->limit = (unsigned)(obj >> 16);
	}
	parse_appname(PQgetvalue(r, i, C_APP), h->host, sizeof(h->host),
		      &h->pid, &h->fence, NULL, 0);
	return LR_OK;
}

/* Rows [b, e), one lease's: its holders (if holders) and its waiters
 * (each run once, however many sessions it waits with) into info. */
static enum lr_status rows_lease(const PGresult *r, int b, int e,
				 int holders, struct lr_info *info,
				 struct lr_err *err)
{
	struct lr_holder w;
	int i, j;

	info->waiters = 0;
	for (i = b; i < e; i++) {
		if (row_holds(r, i)) {
			if (holders && row_holder(r, i, info, err) != LR_OK)
				return LR_ERROR;
			continue;
		}
		for (j = b; j < e; j++)
			if ((j < i || row_holds(r, j)) && j != i &&
			    same_run(r, i, j))
				break;
		if (j < e)
			continue;
		memset(&w, 0, sizeof(w));
		if (!info->waiters++ &&
		    parse_appname(PQgetvalue(r, i, C_APP), w.host,
				  sizeof(w.host), &w.pid, NULL, NULL, 0))
			lr_holder_who(&w, info->next, sizeof(info->next));
	}
	return LR_OK;
}

/* LOCKS_SQL with the further condition where. */
static enum lr_status locks_query(struct lr_store *st, const char *where,
				  int64_t deadline, PGresult **r,
				  struct lr_err *err)
{
	char sql[2048];
	enum lr_status s;

	snprintf(sql, sizeof(sql), LOCKS_SQL, where,
		 st->version >= 140000 ? "l.waitstart" : "NULL::timestamptz");
	s = q_run(st, sql, Q_OTHER, deadline, r, err);
	if (s == LR_OK && (!*r || PQresultStatus(*r) != PGRES_TUPLES_OK ||
			   PQnfields(*r) < C_START + 1)) {
		q_fail(st, *r, "reading pg_locks", err);
		s = LR_ERROR;
	}
	return s;
}

/* --status: the runs waiting for req->name. */
static enum lr_status pg_waiters(struct lr_store *st, int64_t deadline,
				 struct lr_info *info, struct lr_err *err)
{
	char where[160];
	PGresult *r = NULL;
	enum lr_status s;

	snprintf(where, sizeof(where),
		 "AND l.classid = %" PRIu32 " AND ((l.objsubid = 1 AND "
		 "l.objid = %" PRIu32 ") OR l.objsubid = 2)",
		 (uint32_t)st->hi, (uint32_t)st->key);
	s = locks_query(st, where, deadline, &r, err);
	if (s == LR_OK)
		s = rows_lease(r, 0, PQntuples(r), 0, info, err);
	PQclear(r);
	return s;
}

static enum lr_status pg_list(struct lr_store *st, const char *pattern,
			      lr_list_fn fn, void *arg, int64_t deadline,
			      struct lr_err *err)
{
	char name[64];
	PGresult *r = NULL;
	struct lr_info info;
	enum lr_status s;
	int b, e, n, stop = 0;

	(void)pattern; /* names are known only from the rows */
	s = locks_query(st, "", deadline, &r, err);
	n = s == LR_OK ? PQntuples(r) : 0;
	for (b = 0; s == LR_OK && !stop && b < n; b = e) {
		for (e = b + 1; e < n && !strcmp(PQgetvalue(r, e, C_HI),
						 PQgetvalue(r, b, C_HI));
		     e++)
			;
		lr_info_init(&info);
		s = rows_lease(r, b, e, 1, &info, err);
		lr_info_sort(&info);
		if (s == LR_OK &&
		    parse_appname(PQgetvalue(r, b, C_APP), NULL, 0, NULL, NULL,
				  name, sizeof(name)))
			stop = fn(arg, name, &info) != 0;
		lr_info_free(&info);
	}
	PQclear(r);
	return s;
}

const struct lr_store_ops lr_store_ops = {
	.abi = LR_STORE_ABI,
	.name = "pg",
	.caps = LR_CAP_LIMIT | LR_CAP_SHARED,
	.secret_env = pg_secret_env,
	.open = pg_open,
	.acquire = pg_acquire,
	.wait_fd = pg_wait_fd,
	.process = pg_process,
	.check = pg_check,
	.renew = pg_renew,
	.release = pg_release,
	.inspect = pg_inspect,
	.break_lease = pg_break,
	.close = pg_close,
	.run_start = pg_run_start,
	.run_end = pg_run_end,
	.run_last = pg_run_last,
	.list = pg_list,
};
