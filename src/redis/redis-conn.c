/*
 * redis-conn.c - the Redis store's connections (module redis.so): our
 * socket, plain or TLS, with hiredis's reader capped; the login; INFO;
 * Sentinel's answer of where the master is; round trips, scripts, and
 * WAIT for the replicas.  See redis.c's top for why each is as it is.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/net.h"
#include "net/tls.h"
#include "redis/redis-int.h"

/* What one reply may cost us, whatever a server sends: its unparsed
 * bytes (the longest line or bulk string), and in all, each element and
 * string counted at REPLY_OBJ_COST plus its length.  The largest replies
 * leaserun asks for (INFO, --status of 1000 slots) are a few kB. */
#define REPLY_MAX_BUF (1 << 20)
#define REPLY_MAX_COST (4 << 20)
#define REPLY_OBJ_COST 64

/* ---- small helpers ----------------------------------------------------- */

/* The absolute time an exchange starting now must end by. */
int64_t step_end(const struct lr_store *st, int64_t deadline)
{
	int64_t cap = lr_now_ms() + st->cap_ms;

	return cap < deadline ? cap : deadline;
}

void replies_free(redisReply **r, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (r[i]) {
			freeReplyObject(r[i]);
			r[i] = NULL;
		}
}

/* Is r an error reply that starts with word (NOAUTH, READONLY, ...)? */
int is_error(const redisReply *r, const char *word)
{
	return r->type == REDIS_REPLY_ERROR &&
	       strncmp(r->str, word, strlen(word)) == 0;
}

/* Is r an error reply of a server that cannot serve us for now but may
 * soon: loading its data set, busy with a script, a replica (a failover
 * made it one) or one cut off from its master, a cluster without a
 * majority or moving a slot, or out of connections? */
int reply_heals(const redisReply *r)
{
	static const char *const codes[] = { "LOADING",	  "BUSY",
					     "MASTERDOWN", "READONLY",
					     "TRYAGAIN",   "CLUSTERDOWN",
					     NULL };
	size_t i, n;

	if (r->type != REDIS_REPLY_ERROR)
		return 0;
	for (i = 0; codes[i]; i++) {
		n = strlen(codes[i]);
		if (strncmp(r->str, codes[i], n) == 0 &&
		    (r->str[n] == ' ' || r->str[n] == '\0'))
			return 1;
	}
	return strstr(r->str, "max number of clients reached") != NULL;
}

/* Does msg, a failed connect's or exchange's reason, say the server is
 * down, restarting or unreachable for now (refused, reset, closed, timed
 * out, a name server that did not answer), rather than what cannot heal
 * (a name that does not resolve, a certificate, a TLS alert)? */
static int text_heals(const char *msg)
{
	static const int errs[] = { ECONNREFUSED, ECONNRESET,  ECONNABORTED,
				    ETIMEDOUT,	  EHOSTUNREACH, ENETUNREACH,
				    ENETDOWN,	  EHOSTDOWN,	EPIPE, 0 };
	static const char *const words[] = { "closed the connection",
					     "connection was closed",
					     "unexpected eof", NULL };
	size_t i;

	for (i = 0; errs[i]; i++)
		if (strstr(msg, strerror(errs[i])))
			return 1;
	for (i = 0; words[i]; i++)
		if (strstr(msg, words[i]))
			return 1;
	return strstr(msg, gai_strerror(EAI_AGAIN)) != NULL;
}

/* ---- transport: our socket, plain or TLS ------------------------------- */

/*
 * hiredis's reader, capped.  Its own functions build the replies; ours
 * first charge each to the reply's cost (k->cost) and refuse one that
 * goes over REPLY_MAX_COST: an array header of 2^31-1 elements is
 * refused before anything is allocated for it, and a stream of elements
 * or strings once it has cost that much.  (hiredis 0.14 has no
 * maxelements, and its maxbuf only says when to shrink its buffer; the
 * buffer is capped in conn_fill().)
 */
static const redisReplyObjectFunctions *reader_fn; /* hiredis's own */

/* Plain connections in a row that the server closed or reset before a
 * word: what a TLS port does to each, and a dying server to one (the
 * next connect is refused).  Across opens: the core opens again after
 * a failed one. */
static int unheard;

static int charge(const redisReadTask *t, size_t cost)
{
	struct conn *k = t->privdata;

	if (k->too_big || cost > REPLY_MAX_COST - k->cost) {
		k->too_big = 1;
		return -1;
	}
	k->cost += cost;
	return 0;
}

static void *capped_string(const redisReadTask *t, char *s, size_t len)
{
	return charge(t, REPLY_OBJ_COST + len) < 0
		       ? NULL
		       : reader_fn->createString(t, s, len);
}

/* hiredis 1.0 counts elements in a size_t, 0.14 in an int. */
#if HIREDIS_MAJOR >= 1
typedef size_t reader_count;
#else
typedef int reader_count;
#endif

static void *capped_array(const redisReadTask *t, reader_count n)
{
	return (long long)n < 0 ||
			       charge(t, REPLY_OBJ_COST * ((size_t)n + 1)) < 0
		       ? NULL
		       : reader_fn->createArray(t, n);
}

static void *capped_integer(const redisReadTask *t, long long v)
{
	return charge(t, REPLY_OBJ_COST) < 0 ? NULL
					     : reader_fn->createInteger(t, v);
}

static void *capped_nil(const redisReadTask *t)
{
	return charge(t, REPLY_OBJ_COST) < 0 ? NULL : reader_fn->createNil(t);
}

/* hiredis's functions, with ours in place of those RESP2 replies use. */
static redisReplyObjectFunctions capped_fn;

/* A reader for k whose replies are capped, or NULL out of memory. */
static redisReader *reader_new(struct conn *k)
{
	redisReader *r = redisReaderCreate();

	if (!r)
		return NULL;
	if (!reader_fn) {
		reader_fn = r->fn;
		capped_fn = *reader_fn;
		capped_fn.createString = capped_string;
		capped_fn.createArray = capped_array;
		capped_fn.createInteger = capped_integer;
		capped_fn.createNil = capped_nil;
	}
	r->fn = &capped_fn;
	r->privdata = k;
	return r;
}

void conn_free(struct conn *k)
{
	if (!k)
		return;
	lr_stream_close(&k->s);
	if (k->reader)
		redisReaderFree(k->reader);
	if (k->out)
		lr_wipe(k->out, k->cap);
	free(k->out);
	free(k);
}

/* Queues one command on k.  Out of memory, k is marked broken, and its
 * next exchange fails. */
void conn_append(struct conn *k, int argc, const char **argv)
{
	size_t len[16];
	char *cmd;
	int i, n;

	for (i = 0; i < argc; i++)
		len[i] = strlen(argv[i]);
	n = redisFormatCommandArgv(&cmd, argc, argv, len);
	if (n < 0) {
		k->broken = 1;
		return;
	}
	if (k->len + (size_t)n > k->cap) {
		/* Not realloc(): the old copy may hold a password. */
		size_t cap = (k->len + (size_t)n) * 2;
		char *p = malloc(cap);

		if (!p) {
			lr_wipe(cmd, (size_t)n);
			free(cmd);
			k->broken = 1;
			return;
		}
		if (k->out) {
			memcpy(p, k->out, k->len);
			lr_wipe(k->out, k->cap);
			free(k->out);
		}
		k->out = p;
		k->cap = cap;
	}
	memcpy(k->out + k->len, cmd, (size_t)n);
	k->len += (size_t)n;
	lr_wipe(cmd, (size_t)n);
	free(cmd);
}

/* Writes what is queued.  1 when all of it is out, 0 when the socket
 * takes no more for now (*want: the readiness to wait for), -1 with the
 * reason in err.  TLS retries a write with the same bytes, as OpenSSL
 * asks: nothing is queued while a write is half done. */
static int conn_flush(struct conn *k, short *want, struct lr_err *err)
{
	while (k->off < k->len) {
		ssize_t n = lr_stream_write(&k->s, k->out + k->off,
					    k->len - k->off, err);

		if (n == LR_IO_AGAIN) {
			*want = k->s.want;
			return 0;
		}
		if (n < 0)
			return -1;
		k->off += (size_t)n;
	}
	lr_wipe(k->out, k->len);
	k->off = k->len = 0;
	return 1;
}

/* Hands what the server sent to the reader: 1 if something came, 0 if
 * nothing (*want: the readiness to wait for), FILL_EOF when the server
 * closed the connection, FILL_TOO_BIG when a reply would not fit in
 * REPLY_MAX_BUF, -1 with the reason in err.  A stream that may hold
 * bytes where poll() cannot see them (TLS) is read until it wants the
 * socket again. */
int conn_fill(struct conn *k, short *want, struct lr_err *err)
{
	char buf[16384];
	int got = 0;

	if (k->eof)
		return FILL_EOF;
	for (;;) {
		ssize_t n = lr_stream_read(&k->s, buf, sizeof(buf), err);

		if (n == LR_IO_AGAIN) {
			*want = k->s.want;
			return got;
		}
		if (n < 0)
			return -1;
		if (n == 0) {
			k->eof = 1;
			return got ? 1 : FILL_EOF;
		}
		/* A line or bulk string without end is refused here. */
		if (k->reader->len - k->reader->pos + (size_t)n >
		    REPLY_MAX_BUF) {
			lr_err_set(err, "protocol error: a line or string "
					"longer than %d MiB",
				   REPLY_MAX_BUF >> 20);
			return FILL_TOO_BIG;
		}
		if (redisReaderFeed(k->reader, buf, (size_t)n) != REDIS_OK) {
			lr_err_set(err, "out of memory");
			return -1;
		}
		got = k->heard = 1;
		unheard = 0;
		/* A plain socket keeps what we did not read where poll()
		 * sees it: one read is enough. */
		if (!lr_stream_holds(&k->s)) {
			*want = POLLIN;
			return 1;
		}
	}
}

/* The next reply already read, if any: 1 with *r, 0 if none yet, -1 on a
 * protocol error (err). */
int conn_reply(struct conn *k, redisReply **r, struct lr_err *err)
{
	void *rep = NULL;

	if (redisReaderGetReply(k->reader, &rep) != REDIS_OK) {
		if (k->too_big)
			lr_err_set(err, "protocol error: a reply larger than "
					"%d MiB",
				   REPLY_MAX_COST >> 20);
		else
			lr_err_set(err, "protocol error: %s",
				   k->reader->errstr);
		return -1;
	}
	if (rep)
		k->cost = 0;
	*r = rep;
	return rep != NULL;
}

/* The connection to who ended (EOF) or failed (e) after got of the n
 * replies: says why in err, and marks a fault that may heal (the server
 * went away or reset us; or refused us for now, saying why in an error
 * reply before it closed: too many clients).  A plain connection closed
 * before a word may be a server dying as it took it, or a TLS port,
 * which no wait will mend: the first may heal, a second in a row not. */
static void conn_lost(const struct lr_store *st, const struct conn *k,
		      redisReply **r, int got, int eof, const char *who,
		      const char *what, const struct lr_err *e,
		      struct lr_err *err)
{
	int i;

	if (!k->heard && !st->use_tls && (eof || text_heals(e->msg))) {
		if (eof)
			lr_err_set(err, "%s closed the connection (%s); does "
					"it want rediss:// (TLS)?",
				   who, what);
		else
			lr_err_set(err, "%s: %s: %s; does it want rediss:// "
					"(TLS)?",
				   who, what, e->msg);
		if (++unheard < 2)
			lr_err_heals(err);
		return;
	}

	for (i = 0; i < got && r[i]->type != REDIS_REPLY_ERROR; i++)
		;
	if (i < got) {
		lr_err_set(err, "%s: %s: %.120s", who, what, r[i]->str);
		if (reply_heals(r[i]))
			lr_err_heals(err);
		return;
	}
	if (eof)
		lr_err_set(err, "%s closed the connection (%s)", who, what);
	else
		lr_err_set(err, "%s: %s: %s%s", who, what, e->msg,
			   !k->heard && !st->use_tls
				   ? "; does it want rediss:// (TLS)?"
				   : "");
	if (eof || text_heals(e->msg))
		lr_err_heals(err);
}

/* Sends what is queued on k and reads n replies into r[], all by end,
 * whatever the server sends: the clock is read on every pass, and the
 * reader is capped (see reader_new()).  Returns LR_OK, or
 * LR_TIMEOUT/LR_ERROR with err filled (the caller drops k); a fault that
 * may heal (conn_lost()) is marked so.  who names the server ("redis at
 * HOST:PORT"), what the exchange.  *got counts the replies read, so a
 * caller can tell a dead stale connection (no reply at all) from a
 * failure mid-way. */
enum lr_status exchange(const struct lr_store *st, struct conn *k,
			int n, redisReply **r, int64_t end, int *got,
			const char *who, const char *what,
			struct lr_err *err)
{
	struct lr_err e = { "" };
	short want = POLLOUT;
	int i, rc, eof = 0;

	*got = 0;
	for (i = 0; i < n; i++)
		r[i] = NULL;
	if (k->broken) {
		lr_err_set(err, "%s: %s: out of memory", who, what);
		return LR_ERROR;
	}
	while ((rc = conn_flush(k, &want, &e)) == 0)
		if (!lr_net_wait(k->s.fd, want, end))
			goto timeout;
	if (rc < 0)
		goto ioerr;
	for (i = 0; i < n; i++) {
		while ((rc = conn_reply(k, &r[i], &e)) == 0) {
			if (lr_now_ms() >= end)
				goto timeout;
			rc = conn_fill(k, &want, &e);
			if (rc == FILL_EOF) {
				eof = 1;
				goto ioerr;
			}
			if (rc == FILL_TOO_BIG)
				goto protocol;
			if (rc < 0)
				goto ioerr;
			if (rc == 0 && !lr_net_wait(k->s.fd, want, end))
				goto timeout;
		}
		if (rc < 0)
			goto protocol;
		(*got)++;
	}
	return LR_OK;
protocol:
	lr_err_set(err, "%s: %s: %s", who, what, e.msg);
	goto fail;
ioerr:
	conn_lost(st, k, r, *got, eof, who, what, &e, err);
fail:
	replies_free(r, n);
	return LR_ERROR;
timeout:
	lr_err_set(err, "%s: %s: no answer within %lldms", who, what,
		   (long long)st->cap_ms);
	replies_free(r, n);
	return LR_TIMEOUT;
}

/* A password is about to go in clear text to host (NULL: a Unix
 * socket): unless host is this machine, say once a run that anyone on
 * the way can read it, and how to require TLS. */
static void cleartext_warn(const struct lr_store *st, const char *host,
			   const char *who)
{
	static int warned;
	struct in_addr a4;
	struct in6_addr a6;
	char msg[400];

	if (warned || st->use_tls || !host || !st->req->warn ||
	    strcmp(host, "localhost") == 0)
		return;
	if (inet_pton(AF_INET, host, &a4) == 1 &&
	    (ntohl(a4.s_addr) >> 24) == 127)
		return;
	if (inet_pton(AF_INET6, host, &a6) == 1 &&
	    (IN6_IS_ADDR_LOOPBACK(&a6) ||
	     (IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127)))
		return;
	warned = 1;
	snprintf(msg, sizeof(msg),
		 "%.280s: the password goes in clear text (redis:// to a host "
		 "that is not this machine); use rediss:// (TLS)",
		 who);
	st->req->warn(st->req->warn_ctx, msg);
}

/* Starts TLS on k and shakes hands by end, checking the server's
 * certificate for host. */
static enum lr_status tls_start(struct lr_store *st, struct conn *k,
				const char *host, int64_t end, const char *who,
				struct lr_err *err)
{
	struct lr_tls_conf conf = { host, st->cacert, st->cert, st->certkey,
				    NULL, 0, NULL };
	struct lr_err e = { "" };
	int rc;

	if (lr_stream_tls(&k->s, &conf, &e) < 0) {
		lr_err_set(err, "cannot connect to %s: %s", who, e.msg);
		return LR_ERROR;
	}
	while ((rc = lr_stream_handshake(&k->s, &e)) != 0) {
		if (rc != LR_IO_AGAIN) {
			lr_err_set(err, "cannot connect to %s: %s", who,
				   e.msg);
			if (text_heals(e.msg))
				lr_err_heals(err);
			return LR_ERROR;
		}
		if (!lr_net_wait(k->s.fd, k->s.want, end)) {
			lr_err_set(err, "cannot connect to %s: TLS handshake: "
					"no answer in time (is TLS on at "
					"this port?)",
				   who);
			return LR_TIMEOUT;
		}
	}
	return LR_OK;
}

/* Connects to host:port (or the socket path) by end and, for TLS, shakes
 * hands and checks the certificate, without a word said yet.  On LR_OK
 * *out is the connection. */
static enum lr_status dial(struct lr_store *st, const char *host, int port,
			   const char *path, int64_t end, const char *who,
			   struct conn **out, struct lr_err *err)
{
	struct lr_err e = { "" };
	enum lr_status s;
	struct conn *k;
	int fd;

	*out = NULL;
	s = lr_net_dial(host, port, path, end, &fd, &e);
	if (s != LR_OK) {
		unheard = 0; /* nobody listens: not a TLS port */
		lr_err_set(err, "cannot connect to %s: %s", who, e.msg);
		if (text_heals(e.msg))
			lr_err_heals(err);
		return s;
	}
	k = calloc(1, sizeof(*k));
	if (!k || !(k->reader = reader_new(k))) {
		close(fd);
		free(k);
		lr_err_set(err, "out of memory");
		return LR_ERROR;
	}
	lr_stream_init(&k->s, fd);
	k->gen = st->node_gen;
	if (st->use_tls) {
		s = tls_start(st, k, host, end, who, err);
		if (s != LR_OK) {
			conn_free(k);
			return s;
		}
	}
	*out = k;
	return LR_OK;
}

/* ---- login --------------------------------------------------------------- */

/* Says why AUTH (auth) or SELECT failed; never shows the password. */
static void login_error(const struct lr_store *st, int auth, const char *why,
			struct lr_err *err)
{
	if (auth && st->user)
		lr_err_set(err, "redis at %s: authentication as user '%s' "
				"failed: %.120s",
			   st->where, st->user, why);
	else if (auth && strstr(why, "without any password configured"))
		lr_err_set(err, "redis at %s: a password was given but the "
				"server has none (no requirepass)",
			   st->where);
	else if (auth)
		lr_err_set(err, "redis at %s: authentication failed: %.120s",
			   st->where, why);
	else
		lr_err_set(err, "redis at %s: cannot select database %ld: "
				"%.120s",
			   st->where, st->db, why);
}

/* Queues AUTH [user] pass on k if there is a password; returns how many
 * commands (0 or 1). */
static int auth_append(struct conn *k, const char *user, const char *pass)
{
	const char *a[3] = { "AUTH", user, pass };

	if (!pass)
		return 0;
	if (!user)
		a[1] = pass;
	conn_append(k, user ? 3 : 2, a);
	return 1;
}

/* Queues AUTH (if we have a password) and, if select, SELECT (if the
 * database is not 0) on k; returns how many. */
static int login_append(struct lr_store *st, struct conn *k, int select)
{
	int n = auth_append(k, st->user, st->pass);

	if (select && st->db) {
		char dbs[24];
		const char *a[2] = { "SELECT", dbs };

		snprintf(dbs, sizeof(dbs), "%ld", st->db);
		conn_append(k, 2, a);
		n++;
	}
	return n;
}

/* Checks the n replies to what login_append() sent. */
static enum lr_status login_check(const struct lr_store *st, redisReply **r,
				  int n, struct lr_err *err)
{
	int i;

	for (i = 0; i < n; i++)
		if (reply_heals(r[i])) {
			/* Busy or full for now: AUTH and SELECT are fine. */
			lr_err_set(err, "%s: %.160s", st->who, r[i]->str);
			lr_err_heals(err);
			return LR_ERROR;
		} else if (r[i]->type == REDIS_REPLY_ERROR) {
			login_error(st, st->pass && i == 0, r[i]->str, err);
			return LR_ERROR;
		}
	return LR_OK;
}

void cmds_free(struct cmd *cmds, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (cmds[i].r) {
			freeReplyObject(cmds[i].r);
			cmds[i].r = NULL;
		}
}

/* ---- INFO ---------------------------------------------------------------- */

/* Puts the value of FIELD in r, the reply to INFO SECTION, into val.
 * LR_ERROR (err filled) if the server wants a password; otherwise LR_OK,
 * with val "" and msg saying why when the value cannot be had. */
enum lr_status info_read(const struct lr_store *st, const redisReply *r,
			 const char *section, const char *field,
			 char *val, size_t vsize, char *msg,
			 size_t msize, struct lr_err *err)
{
	size_t fl = strlen(field), n;
	const char *p;

	val[0] = '\0';
	if (r->type == REDIS_REPLY_ERROR) {
		if (is_error(r, "NOAUTH")) {
			lr_err_set(err, "redis at %s: %.120s (give a password "
					"in the URL or REDISCLI_AUTH)",
				   st->where, r->str);
			return LR_ERROR;
		}
		/* An ACL user may not run INFO. */
		snprintf(msg, msize, "redis at %s: cannot check %s: %.120s",
			 st->where, field, r->str);
		return LR_OK;
	}
	for (p = r->type == REDIS_REPLY_STRING ? r->str : NULL;
	     p && (p = strstr(p, field)) != NULL; p += fl) {
		if ((p != r->str && p[-1] != '\n') || p[fl] != ':')
			continue;
		p += fl + 1;
		n = strcspn(p, "\r\n");
		if (n >= vsize)
			n = vsize - 1;
		memcpy(val, p, n);
		val[n] = '\0';
		return LR_OK;
	}
	snprintf(msg, msize, "redis at %s: cannot check %s: not in INFO %s",
		 st->where, field, section);
	return LR_OK;
}

/* The replicas that r, the reply to INFO replication, lists as online
 * ("slaveN:ip=...,state=online,..."), or -1 if it lists none at all
 * because it is no such reply. */
static int online_replicas(const redisReply *r)
{
	const char *p;
	int n = 0;

	if (r->type != REDIS_REPLY_STRING || !strstr(r->str, "role:"))
		return -1;
	for (p = r->str; (p = strstr(p, "slave")) != NULL; p += 5) {
		size_t len = strcspn(p, "\r\n");
		const char *on = strstr(p, ",state=online,");

		if ((p == r->str || p[-1] == '\n') && p[5] >= '0' &&
		    p[5] <= '9' && on && on < p + len)
			n++;
	}
	return n;
}

/* Notes what r, the reply to INFO replication, says of the replicas
 * (replicas=auto).  A server that will not say (ACL) is warned about
 * once: its grants are not waited for. */
void replicas_seen(struct lr_store *st, const redisReply *r)
{
	char msg[640];
	int n;

	if (st->replicas_opt >= 0)
		return;
	n = online_replicas(r);
	if (n >= 0) {
		st->replicas = n;
		return;
	}
	if (st->replicas_warned || !st->req->warn)
		return;
	st->replicas_warned = 1;
	snprintf(msg, sizeof(msg),
		 "redis at %s: cannot count the replicas (INFO replication: "
		 "%.150s): grants are not waited for on replicas; give "
		 "replicas=N",
		 st->where,
		 r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
	st->req->warn(st->req->warn_ctx, msg);
}

/* ---- the data node ------------------------------------------------------ */

/* Makes host:port (host malloc()ed, now ours) the data node. */
void node_set(struct lr_store *st, char *host, int port)
{
	if (st->host && strcmp(st->host, host) == 0 && st->port == port) {
		free(host);
	} else {
		free(st->host);
		st->host = host;
		st->port = port;
		st->node_gen++;
		lr_url_host_format(&(struct lr_url_host){ host, port },
				   st->where, sizeof(st->where));
		if (st->master) {
			size_t n = strlen(st->where);

			snprintf(st->where + n, sizeof(st->where) - n,
				 " (master %s)", st->master);
		}
		snprintf(st->who, sizeof(st->who), "redis at %s", st->where);
	}
	st->node_known = 1;
}

/* The data node just answered a round trip: it is st->answered
 * ("host:port", or the socket's path), which names it in a grant. */
void node_answered(struct lr_store *st)
{
	if (st->host)
		lr_url_host_format(&(struct lr_url_host){ st->host, st->port },
				   st->answered, sizeof(st->answered));
	else
		snprintf(st->answered, sizeof(st->answered), "%s",
			 st->sock ? st->sock : "");
}

/* The data node failed us.  Under Sentinel that may be a failover: the
 * next connect asks the sentinels again, starting with the one after
 * the sentinel that named it (which may be cut off from the others and
 * name a master they have replaced), and open and acquire try again
 * within their deadlines (st->retry). */
static void node_suspect(struct lr_store *st)
{
	if (st->master) {
		if (st->node_known && st->nsentinels)
			st->sentinel_at = (st->sentinel_at + 1) %
					  st->nsentinels;
		st->node_known = 0;
		st->retry = 1;
	} else if (st->cluster) {
		cluster_suspect(st);
	}
}

/* ---- Sentinel ------------------------------------------------------------ */

/* Asks the sentinel h where the master is: LR_OK with *host (malloc())
 * and *port, else err says why. */
static enum lr_status sentinel_one(struct lr_store *st,
				   const struct lr_url_host *h,
				   int64_t deadline, char **host, int *port,
				   struct lr_err *err)
{
	const char *ask[3] = { "SENTINEL", "get-master-addr-by-name",
			       st->master };
	int64_t end = step_end(st, deadline);
	char where[280], who[300];
	redisReply *r[2], *a;
	enum lr_status s;
	struct conn *k;
	int n, got;

	lr_url_host_format(h, where, sizeof(where));
	snprintf(who, sizeof(who), "sentinel at %s", where);
	if (st->sentinel_pass)
		cleartext_warn(st, h->host, who);
	s = dial(st, h->host, h->port, NULL, end, who, &k, err);
	if (s != LR_OK)
		return s;
	n = auth_append(k, st->sentinel_user, st->sentinel_pass);
	conn_append(k, 3, ask);
	s = exchange(st, k, n + 1, r, end, &got, who, "SENTINEL", err);
	conn_free(k);
	if (s != LR_OK)
		return s;
	a = r[n];
	s = LR_ERROR;
	if (n && r[0]->type == REDIS_REPLY_ERROR) {
		lr_err_set(err, "%s: authentication failed: %.120s", who,
			   r[0]->str);
	} else if (a->type == REDIS_REPLY_ERROR) {
		lr_err_set(err, "%s: %.120s%s", who, a->str,
			   is_error(a, "NOAUTH")
				   ? " (give sentinel_password= in the URL)"
				   : "");
	} else if (a->type == REDIS_REPLY_ARRAY && a->elements == 2 &&
		   a->element[0]->type == REDIS_REPLY_STRING &&
		   a->element[1]->type == REDIS_REPLY_STRING) {
		char *end_p;
		long p = strtol(a->element[1]->str, &end_p, 10);

		*host = strdup(a->element[0]->str);
		*port = (int)p;
		if (!*host)
			lr_err_set(err, "out of memory");
		else if (*end_p || p < 1 || p > 65535 || !**host)
			lr_err_set(err, "%s: a master at '%.60s:%.20s'?", who,
				   a->element[0]->str, a->element[1]->str);
		else
			s = LR_OK;
		if (s != LR_OK) {
			free(*host);
			*host = NULL;
		}
	} else {
		lr_err_set(err, "%s knows no master named '%s'", who,
			   st->master);
	}
	replies_free(r, n + 1);
	return s;
}

/* Asks the sentinels, starting with the one that answered last, where
 * the master is, and makes their answer the data node.  Fails (without
 * st->retry: no failover explains it) when none can say. */
static enum lr_status sentinel_ask(struct lr_store *st, int64_t deadline,
				   struct lr_err *err)
{
	struct lr_err e = { "" };
	enum lr_status s = LR_ERROR;
	int heals = 0, sure = 0;
	size_t j;

	for (j = 0; j < st->nsentinels; j++) {
		size_t i = (st->sentinel_at + j) % st->nsentinels;
		char *host = NULL;
		int port = 0;

		e = (struct lr_err){ "", 0 };
		s = sentinel_one(st, &st->sentinels[i], deadline, &host,
				 &port, &e);
		if (s == LR_OK) {
			st->sentinel_at = i;
			node_set(st, host, port);
			return LR_OK;
		}
		/* Down or slow, it may answer later; a sentinel that
		 * answered no (no such master, a wrong password) is sure. */
		if (s == LR_TIMEOUT || e.heals)
			heals = 1;
		else
			sure = 1;
		if (lr_now_ms() >= deadline)
			break;
	}
	if (st->nsentinels == 1)
		*err = e;
	else
		lr_err_set(err, "no sentinel can name master '%s'; the "
				"last: %.180s",
			   st->master, e.msg);
	err->heals = heals && !sure;
	return s;
}

/* r is the reply to INFO replication from the node the sentinels named:
 * LR_OK if it says it is the master (noting its replicas). */
static enum lr_status master_check(struct lr_store *st, const redisReply *r,
				   struct lr_err *err)
{
	char role[32], msg[300];
	enum lr_status s;

	if (reply_heals(r)) {
		lr_err_set(err, "%s: %.160s", st->who, r->str);
		lr_err_heals(err);
		node_suspect(st);
		return LR_ERROR;
	}
	s = info_read(st, r, "replication", "role", role, sizeof(role), msg,
		      sizeof(msg), err);
	if (s != LR_OK)
		return s;
	if (!*role) {
		lr_err_set(err, "%.200s: cannot tell it is the master (give "
				"the user +info)",
			   msg);
		return LR_ERROR;
	}
	if (strcmp(role, "master") != 0) {
		lr_err_set(err, "%s is not the master (role:%s): a failover "
				"is under way",
			   st->who, role);
		lr_err_heals(err);
		node_suspect(st);
		return LR_ERROR;
	}
	replicas_seen(st, r);
	return LR_OK;
}

/* ---- connections to the data node ------------------------------------- */

/*
 * Opens a connection to the data node and logs in (AUTH, and SELECT if
 * select: watcher subscribes, and SUBSCRIBE knows no database), sending
 * more[0..nmore) in the same round trip; their replies go to more[i].r
 * (the caller frees them, cmds_free()).  Under Sentinel it first asks the
 * sentinels where the master is, unless that is known, and checks in the
 * same round trip that the node says role:master; a failure that a
 * failover explains forgets the node and sets st->retry.
 */
enum lr_status connect_to(struct lr_store *st, int64_t deadline,
			  struct conn **out, int select,
			  struct cmd *more, int nmore,
			  struct lr_err *err)
{
	const char *info[2] = { "INFO", "replication" };
	redisReply *r[MAX_CMDS];
	int64_t end;
	int nl, nr = 0, n, got, i;
	enum lr_status s;

	*out = NULL;
	if (st->master && !st->node_known) {
		s = sentinel_ask(st, deadline, err);
		if (s != LR_OK)
			return s;
	}
	end = step_end(st, deadline);
	if (st->pass)
		cleartext_warn(st, st->host, st->who);
	s = dial(st, st->host, st->port, st->sock, end, st->who, out, err);
	if (s != LR_OK)
		goto moved;
	nl = login_append(st, *out, select);
	if (st->master) {
		conn_append(*out, 2, info);
		nr = 1;
	}
	for (i = 0; i < nmore; i++)
		conn_append(*out, more[i].argc, more[i].argv);
	n = nl + nr + nmore;
	if (n == 0)
		return LR_OK;
	s = exchange(st, *out, n, r, end, &got, st->who, "login", err);
	if (s != LR_OK)
		goto moved;
	s = login_check(st, r, nl, err);
	if (s == LR_OK && nr)
		s = master_check(st, r[nl], err);
	for (i = 0; s == LR_OK && i < nmore; i++) {
		more[i].r = r[nl + nr + i];
		r[nl + nr + i] = NULL;
	}
	replies_free(r, n);
	if (s == LR_OK)
		return LR_OK;
	conn_free(*out);
	*out = NULL;
	return s;
moved:
	node_suspect(st);
	conn_free(*out);
	*out = NULL;
	return s;
}

/* Drops the command connection (closing a socket takes it out of the
 * wait set too). */
void drop_main(struct lr_store *st)
{
	st->track_id = -1; /* a new connection tracks nothing */
	conn_free(st->c);
	st->c = NULL;
}

/* (What c tracked for the old watcher now goes nowhere: watching() says so.) */
void drop_watcher(struct lr_store *st)
{
	st->watcher_id = -1;
	conn_free(st->watcher);
	st->watcher = NULL;
}

/* Opens the command connection; a watch connection to another node (the
 * master moved) goes. */
enum lr_status main_open(struct lr_store *st, int64_t deadline,
			 struct lr_err *err)
{
	enum lr_status s = connect_to(st, deadline, &st->c, 1, NULL, 0, err);

	if (s == LR_OK && st->watcher && st->watcher->gen != st->c->gen)
		drop_watcher(st);
	return s;
}

/* Sends the n commands on the command connection in one round trip,
 * connecting if needed, and fills in their replies.  A connection that
 * was open before this call and fails is replaced once, and the whole
 * round trip sent again: every command in it must be safe to repeat.
 * On LR_OK the caller frees the replies (cmds_free); on any other status
 * there is nothing to free. */
enum lr_status round_trip(struct lr_store *st, struct cmd *cmds,
			  int n, int64_t deadline, const char *what,
			  struct lr_err *err)
{
	redisReply *r[MAX_CMDS];
	int tries = 0, hops = 0, got, i;
	enum lr_status s;

	for (;;) {
		int fresh;

		/* A connection to a node we no longer take for the master
		 * (Sentinel) goes. */
		if (st->c && st->c->gen != st->node_gen)
			drop_main(st);
		fresh = st->c == NULL;
		if (fresh) {
			s = main_open(st, deadline, err);
			if (s != LR_OK)
				return s;
		}
		for (i = 0; i < n; i++)
			conn_append(st->c, cmds[i].argc, cmds[i].argv);
		s = exchange(st, st->c, n, r, step_end(st, deadline), &got,
			     st->who, what, err);
		if (s == LR_OK) {
			node_answered(st);
			/* A cluster node's MOVED: again, to the node named. */
			s = cluster_follow(st, cmds, n, r, &hops, deadline,
					   what, err);
			if (s != LR_BUSY)
				return s;
			continue;
		}
		drop_main(st);
		node_suspect(st);
		if (fresh || s != LR_ERROR || tries++ > 0 ||
		    lr_now_ms() >= deadline)
			return s;
	}
}

enum lr_status command(struct lr_store *st, int argc,
		       const char **argv, int64_t deadline,
		       redisReply **r, const char *what,
		       struct lr_err *err)
{
	struct cmd one = { argc, argv, NULL };
	enum lr_status s;

	s = round_trip(st, &one, 1, deadline, what, err);
	*r = one.r;
	return s;
}

/* Runs script sc as command si of cmds, in one round trip with the
 * others: EVALSHA, and on NOSCRIPT the whole round trip again with EVAL
 * (so what follows the script still follows it).  kv holds the keys then
 * the args.  On LR_OK the caller frees the replies, and the script's is
 * no error; on any other status there is nothing to free. */
enum lr_status run_script(struct lr_store *st, const struct script *sc,
			  int nkeys, int nargs, const char **kv,
			  struct cmd *cmds, int n, int si,
			  int64_t deadline, struct lr_err *err)
{
	const char *argv[16];
	char nk[8];
	enum lr_status s;
	redisReply *r;
	int i;

	snprintf(nk, sizeof(nk), "%d", nkeys);
	argv[0] = "EVALSHA";
	argv[1] = sc->sha;
	argv[2] = nk;
	for (i = 0; i < nkeys + nargs; i++)
		argv[3 + i] = kv[i];
	cmds[si].argc = 3 + nkeys + nargs;
	cmds[si].argv = argv;
	s = round_trip(st, cmds, n, deadline, sc->name, err);
	if (s != LR_OK)
		return s;
	r = cmds[si].r;
	if (is_error(r, "NOSCRIPT")) {
		cmds_free(cmds, n);
		argv[0] = "EVAL";
		argv[1] = sc->body;
		s = round_trip(st, cmds, n, deadline, sc->name, err);
		if (s != LR_OK)
			return s;
		r = cmds[si].r;
	}
	if (reply_heals(r)) {
		/* Loading, busy, a replica now (a failover), or cut off
		 * from its master: a wait may see it mended.  Under
		 * Sentinel, ask the sentinels again. */
		lr_err_set(err, "%s: %s: %.100s%s", st->who, sc->name, r->str,
			   is_error(r, "READONLY") ? " (a failover?)" : "");
		lr_err_heals(err);
		cmds_free(cmds, n);
		if (st->master) {
			drop_main(st);
			node_suspect(st);
		}
		return LR_ERROR;
	}
	if (r->type == REDIS_REPLY_ERROR) {
		/* Without a password, the first command's NOAUTH says
		 * more than what Redis 7 answers a long one ("Protocol
		 * error: unauthenticated multibulk length"). */
		for (i = 0; i < n && !is_error(cmds[i].r, "NOAUTH"); i++)
			;
		if (i < n || strstr(r->str, "unauthenticated"))
			lr_err_set(err, "redis at %s: %.120s (give a password "
					"in the URL or REDISCLI_AUTH)",
				   st->where, (i < n ? cmds[i].r : r)->str);
		else
			lr_err_set(err, "redis at %s: %s: %.120s", st->where,
				   sc->name, r->str);
		cmds_free(cmds, n);
		return LR_ERROR;
	}
	return LR_OK;
}

/* Waits until need replicas have every write this connection made (the
 * script just run), within the step: LR_OK, or LR_TIMEOUT (st->retry
 * set) when fewer acknowledged in time.  Never on a new connection:
 * there, WAIT would wait for nothing. */
enum lr_status durable(struct lr_store *st, int need, int64_t deadline,
		       const char *what, struct lr_err *err)
{
	int64_t end = step_end(st, deadline), left = end - lr_now_ms();
	/* The server answers a WAIT that timed out at its next tick (100ms
	 * at the default hz 10): leave it that much. */
	int64_t ms = left > 240 ? left - 120 : left / 2;
	char ns[16], mss[24];
	const char *w[3] = { "WAIT", ns, mss };
	redisReply *r;
	enum lr_status s;
	int got;

	if (!st->c) {
		lr_err_set(err, "%s: %s: the connection is gone", st->who,
			   what);
		return LR_ERROR;
	}
	snprintf(ns, sizeof(ns), "%d", need);
	/* WAIT 0 would wait for ever. */
	snprintf(mss, sizeof(mss), "%lld", (long long)(ms > 0 ? ms : 1));
	conn_append(st->c, 3, w);
	s = exchange(st, st->c, 1, &r, end, &got, st->who, "WAIT", err);
	if (s != LR_OK) {
		drop_main(st);
		node_suspect(st);
		return s;
	}
	if (r->type == REDIS_REPLY_INTEGER && r->integer >= need) {
		freeReplyObject(r);
		return LR_OK;
	}
	if (r->type == REDIS_REPLY_INTEGER) {
		lr_err_set(err, "%s: the %s reached %lld of %d replicas in "
				"%sms (replicas=%s)",
			   st->who, what, r->integer, need, mss,
			   st->replicas_opt >= 0 ? ns
			   : st->replicas_opt == REPLICAS_ALL ? "all"
							       : "auto");
		st->retry = 1;
		s = LR_TIMEOUT;
	} else {
		lr_err_set(err, "%s: WAIT: %.120s", st->who,
			   r->type == REDIS_REPLY_ERROR ? r->str
							: "unexpected reply");
		s = LR_ERROR;
	}
	freeReplyObject(r);
	return s;
}

/* How many replicas a grant or renewal must reach: replicas=N, all the
 * online ones, or (auto) as many as make, with the master, a majority of
 * the data nodes: 1 of 1 or 2, 2 of 3 or 4. */
int replicas_needed(const struct lr_store *st)
{
	if (st->replicas_opt >= 0)
		return st->replicas_opt;
	if (st->replicas_opt == REPLICAS_ALL)
		return st->replicas;
	return (st->replicas + 1) / 2;
}
