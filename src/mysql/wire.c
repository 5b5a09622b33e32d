/*
 * wire.c - MySQL's client/server protocol, the part the store speaks
 * (see wire.h).
 *
 * A packet is a 3-byte length (little-endian), a sequence number, and
 * its body.  A login: the server's greeting (protocol 10: its version,
 * connection id, capabilities, a 20-byte nonce and its login method),
 * then, for TLS, a short "switch to TLS" packet and the TLS handshake,
 * then our answer (user, the nonce scrambled with the password, the
 * database), then as many rounds as the login method wants, until OK
 * or an error.  A statement (COM_QUERY) is answered by OK, an error, or
 * rows: their column count, a definition per column and an EOF, then a
 * packet per row and an EOF (we do not ask for CLIENT_DEPRECATE_EOF).
 * Each step takes one whole packet; a step that has to wait returns,
 * and the next call starts again at that step.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "mysql/sha.h"
#include "mysql/wire.h"

/* Capabilities (the protocol's CLIENT_* flags). */
#define CAP_LONG_PASSWORD 0x1u
#define CAP_LONG_FLAG 0x4u
#define CAP_CONNECT_WITH_DB 0x8u
#define CAP_PROTOCOL_41 0x200u
#define CAP_SSL 0x800u
#define CAP_TRANSACTIONS 0x2000u
#define CAP_SECURE_CONNECTION 0x8000u
#define CAP_MULTI_STATEMENTS 0x10000u
#define CAP_MULTI_RESULTS 0x20000u
#define CAP_PLUGIN_AUTH 0x80000u

#define MORE_RESULTS 0x0008u /* the server's status: another result comes */

#define COM_QUIT 0x01
#define COM_QUERY 0x03

#define CHARSET_UTF8MB4 45 /* utf8mb4_general_ci: MariaDB and MySQL */
#define NONCE_LEN 20
#define MAX_LOGIN_ROUNDS 4
#define MAX_COLUMNS 4096

/* ---- rows ------------------------------------------------------------- */

void my_rows_free(struct my_rows *rs)
{
	while (rs) {
		struct my_rows *more = rs->more;
		size_t i;

		for (i = 0; i < rs->n; i++)
			free(rs->row[i]);
		free(rs->row);
		free(rs);
		rs = more;
	}
}

my_row my_rows_next(struct my_rows *rs)
{
	return rs && rs->next < rs->n ? rs->row[rs->next++] : NULL;
}

/* Adds a row of rs->nf columns (col[i], len[i]; NULL for SQL NULL).  0,
 * or -1 out of memory or past MY_MAX_ANSWER. */
static int rows_add(struct my_rows *rs, const unsigned char *const *col,
		    const size_t *len)
{
	size_t need = rs->nf * sizeof(char *) + 1, i;
	char **row, *p;

	for (i = 0; i < rs->nf; i++)
		if (col[i])
			need += len[i] + 1;
	/* With the allocator's own bookkeeping, and the row's pointer. */
	if (need > MY_MAX_ANSWER || rs->bytes + need + 32 > MY_MAX_ANSWER)
		return -1;
	if (rs->n == rs->cap) {
		size_t cap = rs->cap ? 2 * rs->cap : 4;
		my_row *more = realloc(rs->row, cap * sizeof(*more));

		if (!more)
			return -1;
		rs->row = more;
		rs->cap = cap;
	}
	row = malloc(need);
	if (!row)
		return -1;
	p = (char *)(row + rs->nf);
	for (i = 0; i < rs->nf; i++) {
		row[i] = NULL;
		if (!col[i])
			continue;
		row[i] = p;
		memcpy(p, col[i], len[i]);
		p[len[i]] = '\0';
		p += len[i] + 1;
	}
	rs->row[rs->n++] = row;
	rs->bytes += need + 32;
	return 0;
}

/* ---- failures ----------------------------------------------------------- */

static void say(struct my_conn *c, unsigned e, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void say(struct my_conn *c, unsigned e, const char *fmt, ...)
{
	va_list ap;

	c->err = e;
	va_start(ap, fmt);
	vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
	va_end(ap);
}

/* The connection failed under us: closed or reset (why->heals), or TLS
 * refused us (a certificate, an alert), which another try would meet
 * again. */
static void broke(struct my_conn *c, const struct lr_err *why)
{
	say(c, CR_SERVER_LOST, "Lost connection to server: %s", why->msg);
	c->broken = 1;
	c->heals = why->heals;
}

void my_wire_cut(struct my_conn *c)
{
	if (c->s.fd >= 0)
		(void)shutdown(c->s.fd, SHUT_RDWR);
	c->broken = 1;
	c->state = MW_IDLE;
	my_rows_free(c->res);
	c->res = c->last = NULL;
}

/* The server said what it may not: cut it off (see wire.h). */
static void malformed(struct my_conn *c, const char *what)
{
	say(c, CR_MALFORMED_PACKET, "the server sent %s", what);
	my_wire_cut(c);
}

/* ---- bytes and packets -------------------------------------------------- */

/* v in n bytes at p, little-endian, as the protocol's integers are. */
static void put_le(unsigned char *p, uint32_t v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* A packet's length, its header's first 3 bytes. */
static size_t len3(const unsigned char *p)
{
	return (size_t)p[0] | (size_t)p[1] << 8 | (size_t)p[2] << 16;
}

/* Reads what the connection has, waiting by deadline.  1: more bytes in
 * c->in; 0: the deadline passed; -1: the connection broke. */
static int fill(struct my_conn *c, int64_t deadline)
{
	struct lr_err e = { .heals = 0 };
	ssize_t n;

	if (c->off > 0 && (c->off == c->len || c->cap - c->len < 4096)) {
		memmove(c->in, c->in + c->off, c->len - c->off);
		c->len -= c->off;
		c->off = 0;
	}
	if (c->cap - c->len < 4096) {
		size_t cap = c->cap ? 2 * c->cap : 16384;
		unsigned char *more;

		if (cap > MY_MAX_PACKET + 16384)
			cap = MY_MAX_PACKET + 16384;
		more = cap > c->cap ? realloc(c->in, cap) : NULL;
		if (!more) {
			say(c, CR_OUT_OF_MEMORY, "out of memory");
			my_wire_cut(c);
			return -1;
		}
		c->in = more;
		c->cap = cap;
	}
	for (;;) {
		n = lr_stream_read(&c->s, c->in + c->len, c->cap - c->len, &e);
		if (n > 0) {
			c->len += (size_t)n;
			return 1;
		}
		if (n == 0) {
			lr_err_set(&e, "the server closed the connection");
			e.heals = 1;
			n = -1;
		}
		if (n != LR_IO_AGAIN) {
			broke(c, &e);
			return -1;
		}
		if (!lr_net_wait(c->s.fd, c->s.want, deadline))
			return 0;
	}
}

/* The next packet, by deadline: 1 with *body and *len (valid until the
 * next call), 0 at the deadline, -1 broken (c->msg says why). */
static int packet(struct my_conn *c, int64_t deadline, unsigned char **body,
		  size_t *len)
{
	c->off += c->take;
	c->take = 0;
	for (;;) {
		size_t have = c->len - c->off, n;
		unsigned char *p = c->in + c->off;

		if (have >= 4) {
			n = len3(p);
			if (n > MY_MAX_PACKET) {
				say(c, CR_NET_PACKET_TOO_LARGE,
				    "the server sent a packet of %zu bytes, "
				    "past the bound of %zu",
				    n, MY_MAX_PACKET);
				my_wire_cut(c);
				return -1;
			}
			if (p[3] != c->seq) {
				malformed(c, "a packet out of order");
				return -1;
			}
			if (have >= 4 + n) {
				c->seq++;
				c->take = 4 + n;
				*body = p + 4;
				*len = n;
				return 1;
			}
		}
		if (c->broken)
			return -1;
		switch (fill(c, deadline)) {
		case 0:
			return 0;
		case -1:
			return -1;
		}
	}
}

/* Queues a packet of len bytes of body.  0, or -1 out of memory. */
static int put(struct my_conn *c, const void *body, size_t len)
{
	unsigned char *p;

	if (c->out_len + len + 4 > c->out_cap) {
		size_t cap = c->out_len + len + 4 + 256;
		unsigned char *more = realloc(c->out, cap);

		if (!more) {
			say(c, CR_OUT_OF_MEMORY, "out of memory");
			return -1;
		}
		c->out = more;
		c->out_cap = cap;
	}
	p = c->out + c->out_len;
	put_le(p, (uint32_t)len, 3);
	p[3] = c->seq++;
	memcpy(p + 4, body, len);
	c->out_len += len + 4;
	return 0;
}

/* Writes what is queued, by deadline.  1 all written, 0 the deadline, -1
 * broken. */
static int flush(struct my_conn *c, int64_t deadline)
{
	struct lr_err e = { .heals = 0 };

	while (c->out_off < c->out_len) {
		ssize_t n = lr_stream_write(&c->s, c->out + c->out_off,
					    c->out_len - c->out_off, &e);

		if (n > 0) {
			c->out_off += (size_t)n;
			continue;
		}
		if (n != LR_IO_AGAIN) {
			broke(c, &e);
			return -1;
		}
		if (!lr_net_wait(c->s.fd, c->s.want, deadline))
			return 0;
	}
	c->out_off = c->out_len = 0;
	return 1;
}

/* ---- reading bodies ----------------------------------------------------- */

struct cur {
	const unsigned char *p, *end;
	int bad;
};

static uint64_t get_int(struct cur *k, size_t n)
{
	uint64_t v = 0;
	size_t i;

	if ((size_t)(k->end - k->p) < n) {
		k->bad = 1;
		k->p = k->end;
		return 0;
	}
	for (i = 0; i < n; i++)
		v |= (uint64_t)k->p[i] << (8 * i);
	k->p += n;
	return v;
}

static void skip(struct cur *k, size_t n)
{
	if ((size_t)(k->end - k->p) < n) {
		k->bad = 1;
		k->p = k->end;
	} else {
		k->p += n;
	}
}

/* A length-encoded integer; *null set for 0xfb (SQL NULL in a row). */
static uint64_t get_lenenc(struct cur *k, int *null)
{
	unsigned b = (unsigned)get_int(k, 1);

	if (null)
		*null = b == 0xfb;
	if (b < 0xfb)
		return b;
	if (b == 0xfc)
		return get_int(k, 2);
	if (b == 0xfd)
		return get_int(k, 3);
	if (b == 0xfe)
		return get_int(k, 8);
	if (b == 0xff || !null)
		k->bad = 1;
	return 0;
}

/* A NUL-terminated string (or the rest, if none). */
static const char *get_str(struct cur *k, size_t *len)
{
	const unsigned char *s = k->p, *z = memchr(s, 0, (size_t)(k->end - s));

	*len = (size_t)((z ? z : k->end) - s);
	k->p = z ? z + 1 : k->end;
	return (const char *)s;
}

/* An error packet (body[0] == 0xff) into c. */
static void server_error(struct my_conn *c, const unsigned char *body,
			 size_t len)
{
	struct cur k = { body + 1, body + len, 0 };
	unsigned e = (unsigned)get_int(&k, 2);

	if (k.p < k.end && *k.p == '#' && k.end - k.p >= 6)
		k.p += 6; /* the SQL state */
	say(c, e ? e : CR_MALFORMED_PACKET, "%.*s", (int)(k.end - k.p),
	    (const char *)k.p);
	if (!c->msg[0])
		say(c, c->err, "error %u", c->err);
}

/* An OK packet (body[0] == 0): its last insert id into c, and the
 * server's status into *status.  0, or -1. */
static int server_ok(struct my_conn *c, const unsigned char *body, size_t len,
		     unsigned *status)
{
	struct cur k = { body + 1, body + len, 0 };

	(void)get_lenenc(&k, NULL); /* affected rows */
	c->insert_id = get_lenenc(&k, NULL);
	*status = (unsigned)get_int(&k, 2);
	return k.bad ? -1 : 0;
}

/* The server's status in an EOF packet (after its warnings). */
static unsigned eof_status(const unsigned char *body, size_t len)
{
	return len >= 5 ? (unsigned)body[3] | (unsigned)body[4] << 8 : 0;
}

static int is_eof(const unsigned char *body, size_t len)
{
	return len < 9 && len > 0 && body[0] == 0xfe;
}

/* ---- the login ------------------------------------------------------------ */

struct greeting {
	uint32_t caps;
	unsigned char nonce[NONCE_LEN];
	char plugin[64];
};

static int parse_greeting(struct my_conn *c, const unsigned char *body,
			  size_t len, struct greeting *g)
{
	struct cur k = { body, body + len, 0 };
	size_t n, part2;
	const char *s;

	if (len && body[0] == 0xff) {
		server_error(c, body, len);
		return -1;
	}
	if (get_int(&k, 1) != 10) {
		say(c, CR_MALFORMED_PACKET,
		    "not a MySQL server (its greeting is not of protocol 10)");
		return -1;
	}
	s = get_str(&k, &n); /* the server's version */
	c->mariadb = memmem(s, n, "MariaDB", 7) != NULL;
	c->id = (unsigned long)get_int(&k, 4);
	if ((size_t)(k.end - k.p) < 8)
		k.bad = 1;
	else
		memcpy(g->nonce, k.p, 8), k.p += 8;
	skip(&k, 1);
	g->caps = (uint32_t)get_int(&k, 2);
	skip(&k, 1 + 2); /* charset, status */
	g->caps |= (uint32_t)get_int(&k, 2) << 16;
	skip(&k, 1 + 10); /* the nonce's length; reserved */
	if (k.bad || !(g->caps & CAP_PROTOCOL_41) ||
	    !(g->caps & CAP_SECURE_CONNECTION)) {
		say(c, CR_MALFORMED_PACKET,
		    "the server speaks a protocol older than MySQL 4.1's");
		return -1;
	}
	part2 = (size_t)(k.end - k.p) < 12 ? 0 : 12;
	if (!part2) {
		say(c, CR_MALFORMED_PACKET, "a greeting without its nonce");
		return -1;
	}
	memcpy(g->nonce + 8, k.p, 12);
	k.p += 12;
	if (k.p < k.end && !*k.p)
		k.p++;
	snprintf(g->plugin, sizeof(g->plugin), "mysql_native_password");
	if (g->caps & CAP_PLUGIN_AUTH && k.p < k.end) {
		s = get_str(&k, &n);
		snprintf(g->plugin, sizeof(g->plugin), "%.*s", (int)n, s);
	}
	return 0;
}

/* The scramble of plugin for nonce into out (its length into *len):
 *   mysql_native_password: SHA1(pw) ^ SHA1(nonce, SHA1(SHA1(pw)))
 *   caching_sha2_password: SHA256(pw) ^ SHA256(SHA256(SHA256(pw)), nonce)
 * nothing for an empty password.  0, or -1 for a method we do not
 * speak. */
static int scramble(const char *plugin, const char *pw,
		    const unsigned char *nonce, unsigned char *out,
		    size_t *len)
{
	unsigned char h1[MY_SHA256_LEN], h2[MY_SHA256_LEN],
		buf[MY_SHA256_LEN + NONCE_LEN];
	size_t n = 0, i;

	*len = 0;
	if (!strcmp(plugin, "mysql_native_password")) {
		n = MY_SHA1_LEN;
		if (!pw || !*pw)
			return 0;
		my_sha1(pw, strlen(pw), h1);
		my_sha1(h1, n, h2);
		memcpy(buf, nonce, NONCE_LEN);
		memcpy(buf + NONCE_LEN, h2, n);
		my_sha1(buf, NONCE_LEN + n, h2);
	} else if (!strcmp(plugin, "caching_sha2_password")) {
		n = MY_SHA256_LEN;
		if (!pw || !*pw)
			return 0;
		my_sha256(pw, strlen(pw), h1);
		my_sha256(h1, n, h2);
		memcpy(buf, h2, n);
		memcpy(buf + n, nonce, NONCE_LEN);
		my_sha256(buf, n + NONCE_LEN, h2);
	} else {
		return -1;
	}
	for (i = 0; i < n; i++)
		out[i] = h1[i] ^ h2[i];
	*len = n;
	memset(h1, 0, sizeof(h1));
	memset(buf, 0, sizeof(buf));
	return 0;
}

/* The password in clear (with its NUL), for mysql_clear_password and the
 * full login of caching_sha2_password: only where no one else can read
 * it (TLS, or a Unix socket).  0 queued, -1 with c->msg. */
static int put_clear(struct my_conn *c, const char *plugin,
		     const char *pw)
{
	if (!c->tls && !c->local) {
		say(c, CR_AUTH_PLUGIN_CANNOT_LOAD,
		    "the server wants the password in clear (%s), which "
		    "leaserun sends only over TLS or a Unix socket: add "
		    "ssl-mode=VERIFY_IDENTITY (or REQUIRED) to the URL",
		    plugin);
		return -1;
	}
	return put(c, pw ? pw : "", pw ? strlen(pw) + 1 : 1);
}

/* The first 32 bytes of our answer to the greeting, which are also the
 * whole of "switch to TLS": capabilities, the largest packet we take,
 * the character set, 23 zeros. */
#define LOGIN_HEAD 32
static void login_head(unsigned char *buf, uint32_t caps)
{
	memset(buf, 0, LOGIN_HEAD);
	put_le(buf, caps, 4);
	put_le(buf + 4, (uint32_t)MY_MAX_PACKET, 4);
	buf[8] = CHARSET_UTF8MB4;
}

/* Our answer to the greeting: capabilities, user, scramble, database,
 * method. */
static int put_login(struct my_conn *c, const struct my_login *l,
		     const struct greeting *g, uint32_t caps)
{
	unsigned char buf[1024], sc[MY_SHA256_LEN];
	const char *user = l->user ? l->user : "";
	size_t n = LOGIN_HEAD, ul = strlen(user), dl = l->db ? strlen(l->db) : 0;
	size_t sl;
	int r;

	if (scramble(g->plugin, l->password, g->nonce, sc, &sl) < 0)
		sl = 0; /* answered when the server switches, or refused */
	if (LOGIN_HEAD + ul + 1 + 1 + sl + dl + 1 + strlen(g->plugin) + 1 >
	    sizeof(buf)) {
		say(c, CR_MALFORMED_PACKET, "the user name is too long");
		return -1;
	}
	login_head(buf, caps);
	memcpy(buf + n, user, ul + 1);
	n += ul + 1;
	buf[n++] = (unsigned char)sl;
	memcpy(buf + n, sc, sl);
	n += sl;
	if (caps & CAP_CONNECT_WITH_DB) {
		memcpy(buf + n, l->db, dl + 1);
		n += dl + 1;
	}
	if (caps & CAP_PLUGIN_AUTH) {
		memcpy(buf + n, g->plugin, strlen(g->plugin) + 1);
		n += strlen(g->plugin) + 1;
	}
	r = put(c, buf, n);
	memset(buf, 0, sizeof(buf));
	memset(sc, 0, sizeof(sc));
	return r;
}

/* "switch to TLS": the login's head alone. */
static int put_tls_request(struct my_conn *c, uint32_t caps)
{
	unsigned char buf[LOGIN_HEAD];

	login_head(buf, caps);
	return put(c, buf, sizeof(buf));
}

static enum lr_status start_tls(struct my_conn *c, const struct my_login *l,
				int64_t deadline)
{
	struct lr_err e = { .heals = 0 };
	int r;

	if (lr_stream_tls(&c->s, &l->tls_conf, &e) < 0) {
		say(c, CR_SSL_CONNECTION_ERROR, "%s", e.msg);
		return LR_ERROR;
	}
	while ((r = lr_stream_handshake(&c->s, &e)) == LR_IO_AGAIN)
		if (!lr_net_wait(c->s.fd, c->s.want, deadline))
			return LR_TIMEOUT;
	if (r < 0) {
		say(c, CR_SSL_CONNECTION_ERROR, "%s", e.msg);
		c->heals = e.heals; /* cut short, not refused */
		c->broken = 1;
		return LR_ERROR;
	}
	c->tls = 1;
	return LR_OK;
}

/* What the login rounds need to know. */
struct round {
	char plugin[64];
	unsigned char nonce[NONCE_LEN];
};

/* One packet of the login after ours: 1 logged in, 0 go on (an answer
 * queued), -1 refused (c->msg). */
static int login_step(struct my_conn *c, const struct my_login *l,
		      struct round *r, const unsigned char *body, size_t len)
{
	unsigned char sc[MY_SHA256_LEN];
	size_t sl, n;
	struct cur k = { body + 1, body + len, 0 };
	const char *s;
	int got;

	if (!len) {
		malformed(c, "an empty packet in the login");
		return -1;
	}
	switch (body[0]) {
	case 0x00:
		return 1;
	case 0xff:
		server_error(c, body, len);
		return -1;
	case 0xfe: /* another method: its name, then its nonce */
		s = get_str(&k, &n);
		if (n >= sizeof(r->plugin)) {
			malformed(c, "a login method with a long name");
			return -1;
		}
		snprintf(r->plugin, sizeof(r->plugin), "%.*s", (int)n, s);
		if (!strcmp(r->plugin, "mysql_clear_password"))
			return put_clear(c, r->plugin, l->password);
		if ((size_t)(k.end - k.p) < NONCE_LEN) {
			malformed(c, "a login switch without a nonce");
			return -1;
		}
		memcpy(r->nonce, k.p, NONCE_LEN);
		if (scramble(r->plugin, l->password, r->nonce, sc, &sl) < 0) {
			say(c, CR_AUTH_PLUGIN_CANNOT_LOAD,
			    "the server wants the login method %s, which "
			    "leaserun does not speak (it speaks "
			    "mysql_native_password, caching_sha2_password "
			    "and mysql_clear_password)",
			    r->plugin);
			return -1;
		}
		got = put(c, sc, sl);
		memset(sc, 0, sizeof(sc));
		return got;
	case 0x01: /* more for the method: caching_sha2_password's */
		if (strcmp(r->plugin, "caching_sha2_password") != 0 ||
		    len != 2) {
			malformed(c, "a login step out of place");
			return -1;
		}
		if (body[1] == 3) /* the scramble matched the cache: OK next */
			return 0;
		if (body[1] == 4) /* not cached: the password itself */
			return put_clear(c, r->plugin, l->password);
		malformed(c, "a login step out of place");
		return -1;
	}
	malformed(c, "a login step out of place");
	return -1;
}

enum lr_status my_wire_connect(struct my_conn *c, const struct my_login *l,
			       int64_t deadline)
{
	struct lr_err e = { .heals = 0 };
	struct greeting g;
	struct round r;
	unsigned char *body;
	size_t len;
	uint32_t caps;
	enum lr_status s;
	int fd, rounds, got;

	memset(c, 0, sizeof(*c));
	lr_stream_init(&c->s, -1);
	c->local = !l->host;
	s = lr_net_dial(l->host, l->port, l->path, deadline, &fd, &e);
	if (s != LR_OK) {
		/* A name that does not resolve does not heal; a lookup that
		 * took too long may. */
		int unknown = (!strncmp(e.msg, "cannot resolve", 14) ||
			       !strncmp(e.msg, "no usable address", 17)) &&
			      !strstr(e.msg, "in time");

		say(c, unknown	   ? CR_UNKNOWN_HOST
		       : l->host ? CR_CONN_HOST_ERROR
				 : CR_CONNECTION_ERROR,
		    "%s", e.msg);
		return s;
	}
	lr_stream_init(&c->s, fd);
	got = packet(c, deadline, &body, &len);
	if (got <= 0)
		return got ? LR_ERROR : LR_TIMEOUT;
	if (parse_greeting(c, body, len, &g) < 0)
		return LR_ERROR;
	caps = (CAP_LONG_PASSWORD | CAP_LONG_FLAG | CAP_PROTOCOL_41 |
		CAP_TRANSACTIONS | CAP_SECURE_CONNECTION | CAP_PLUGIN_AUTH |
		CAP_MULTI_STATEMENTS | CAP_MULTI_RESULTS) &
	       g.caps;
	caps |= CAP_PROTOCOL_41 | CAP_SECURE_CONNECTION;
	c->multi = (caps & CAP_MULTI_STATEMENTS) != 0;
	if (l->db && *l->db)
		caps |= CAP_CONNECT_WITH_DB;
	/* PREFERRED goes on without TLS where it cannot have it: a server
	 * that offers none, a leaserun without its TLS module. */
	if (l->host && l->tls == MY_TLS_IF_OFFERED && (g.caps & CAP_SSL) &&
	    !lr_tls_load(&e))
		g.caps &= ~CAP_SSL;
	if (l->host && l->tls != MY_TLS_NO && (g.caps & CAP_SSL)) {
		caps |= CAP_SSL;
		/* Nothing may come between the greeting and TLS: bytes sent
		 * ahead would be read later as if they came over TLS, from
		 * the server whose certificate was checked (the hole of
		 * CVE-2021-23222 in libpq). */
		if (c->len - c->off != c->take) {
			malformed(c, "bytes after its greeting, before TLS");
			return LR_ERROR;
		}
		if (put_tls_request(c, caps) < 0)
			return LR_ERROR;
		if ((got = flush(c, deadline)) <= 0)
			return got ? LR_ERROR : LR_TIMEOUT;
		if ((s = start_tls(c, l, deadline)) != LR_OK)
			return s;
	} else if (l->host && l->tls == MY_TLS_MUST) {
		say(c, CR_SSL_CONNECTION_ERROR,
		    "the server does not offer TLS");
		return LR_ERROR;
	}
	snprintf(r.plugin, sizeof(r.plugin), "%s", g.plugin);
	memcpy(r.nonce, g.nonce, NONCE_LEN);
	if (put_login(c, l, &g, caps) < 0)
		return LR_ERROR;
	for (rounds = 0; rounds < MAX_LOGIN_ROUNDS; rounds++) {
		if ((got = flush(c, deadline)) <= 0 ||
		    (got = packet(c, deadline, &body, &len)) <= 0)
			return got ? LR_ERROR : LR_TIMEOUT;
		switch (login_step(c, l, &r, body, len)) {
		case 1:
			c->seq = 0;
			c->ready = 1;
			return LR_OK;
		case -1:
			return LR_ERROR;
		}
	}
	malformed(c, "a login without end");
	return LR_ERROR;
}

/* ---- statements ------------------------------------------------------------ */

int my_wire_send(struct my_conn *c, const char *sql, unsigned n_stmts)
{
	size_t n = strlen(sql);
	char *q;

	if (c->s.fd < 0 || !c->ready || c->broken) {
		say(c, CR_SERVER_GONE_ERROR, "no connection");
		return -1;
	}
	if (c->state != MW_IDLE) {
		say(c, CR_MALFORMED_PACKET, "a statement is still in flight");
		return -1;
	}
	if (n + 1 > MY_MAX_PACKET || !(q = malloc(n + 1))) {
		say(c, CR_OUT_OF_MEMORY, "a statement too long");
		return -1;
	}
	q[0] = COM_QUERY;
	memcpy(q + 1, sql, n);
	my_rows_free(c->res);
	c->res = c->last = NULL;
	c->seq = 0;
	c->insert_id = 0;
	c->done = 0;
	c->err = 0;
	c->msg[0] = '\0';
	c->more = n_stmts > 1 ? n_stmts - 1 : 0;
	if (put(c, q, n + 1) < 0) {
		free(q);
		return -1;
	}
	free(q);
	c->state = MW_SEND;
	return 0;
}

/* One row packet into c->last.  0, or -1 (cut off). */
static int take_row(struct my_conn *c, const unsigned char *body, size_t len)
{
	struct cur k = { body, body + len, 0 };
	const unsigned char *col[64], **cols = col;
	size_t ln[64], *lens = ln, i;
	unsigned nf = c->last->nf;
	int r = -1;

	if (nf > 64) {
		cols = malloc(nf * sizeof(*cols));
		lens = malloc(nf * sizeof(*lens));
	}
	if (!cols || !lens) {
		say(c, CR_OUT_OF_MEMORY, "out of memory");
		my_wire_cut(c);
		goto out;
	}
	for (i = 0; i < nf && !k.bad; i++) {
		int null;
		uint64_t n = get_lenenc(&k, &null);

		cols[i] = NULL;
		lens[i] = 0;
		if (null)
			continue;
		if (n > (uint64_t)(k.end - k.p)) {
			k.bad = 1;
			break;
		}
		cols[i] = k.p;
		lens[i] = (size_t)n;
		k.p += n;
	}
	if (k.bad || k.p != k.end) {
		malformed(c, "a row that does not parse");
		goto out;
	}
	if (rows_add(c->last, cols, lens) < 0) {
		say(c, CR_NET_PACKET_TOO_LARGE,
		    "the answer runs past %zu MB (or out of memory)",
		    MY_MAX_ANSWER >> 20);
		my_wire_cut(c);
		goto out;
	}
	r = 0;
out:
	if (cols != col)
		free(cols);
	if (lens != ln)
		free(lens);
	return r;
}

/* The last result, cut short by an error among its rows, goes. */
static void drop_last(struct my_conn *c)
{
	struct my_rows *p = c->res;

	if (!p)
		return;
	if (p == c->last) {
		my_rows_free(p);
		c->res = c->last = NULL;
		return;
	}
	while (p->more != c->last)
		p = p->more;
	my_rows_free(c->last);
	p->more = NULL;
	c->last = p;
}

/* A result says another follows: only as many as the statements sent. */
static int another(struct my_conn *c)
{
	if (!c->more) {
		malformed(c, "more answers than statements");
		return -1;
	}
	c->more--;
	return 0;
}

enum lr_status my_wire_drive(struct my_conn *c, int64_t deadline)
{
	unsigned char *body;
	size_t len;
	unsigned taken = 0;
	int got;

	while (c->state != MW_IDLE) {
		/* Packets that keep coming do not hold us past the deadline
		 * (the statement stays in flight); the clock is read now and
		 * then, not for each. */
		if (++taken % 64 == 0 && lr_now_ms() >= deadline)
			return LR_TIMEOUT;
		if (c->state == MW_SEND) {
			if ((got = flush(c, deadline)) <= 0)
				goto stop;
			c->state = MW_HEAD;
			continue;
		}
		if ((got = packet(c, deadline, &body, &len)) <= 0)
			goto stop;
		if (!len) {
			malformed(c, "an empty packet");
			return LR_ERROR;
		}
		if (body[0] == 0xff) {
			/* An error, instead of the answer or among its rows.
			 * The server runs none of the statements sent after
			 * it; those before it were answered in full, and
			 * their rows are kept (a caller that sent them
			 * together may want them): only a result cut short
			 * goes. */
			server_error(c, body, len);
			if (c->state != MW_HEAD)
				drop_last(c);
			c->state = MW_IDLE;
			if (c->err == ER_CONNECTION_KILLED ||
			    c->err == ER_SERVER_SHUTDOWN) {
				c->broken = 1;
				my_rows_free(c->res);
				c->res = c->last = NULL;
			}
			return LR_ERROR;
		}
		switch (c->state) {
		case MW_HEAD:
			if (body[0] == 0x00) {
				unsigned st;

				if (server_ok(c, body, len, &st) < 0) {
					malformed(c, "an OK that does not "
						     "parse");
					return LR_ERROR;
				}
				c->done++;
				if ((st & MORE_RESULTS) && another(c) < 0)
					return LR_ERROR;
				if (st & MORE_RESULTS)
					break; /* the next statement's */
				c->state = MW_IDLE;
				return LR_OK;
			} else {
				struct my_rows *rs;
				struct cur k = { body, body + len, 0 };
				uint64_t n = get_lenenc(&k, NULL);

				/* 0xfb would be LOAD DATA LOCAL, which we
				 * never asked for. */
				if (k.bad || k.p != k.end || !n ||
				    n > MAX_COLUMNS || body[0] == 0xfb) {
					malformed(c, "an answer that does not "
						     "parse");
					return LR_ERROR;
				}
				rs = calloc(1, sizeof(*rs));
				if (!rs) {
					say(c, CR_OUT_OF_MEMORY,
					    "out of memory");
					my_wire_cut(c);
					return LR_ERROR;
				}
				/* Each answer counts too, against the
				 * bound of all. */
				rs->bytes = (c->res ? c->last->bytes : 0) +
					    sizeof(*rs) + 32;
				if (c->res)
					c->last->more = rs;
				else
					c->res = rs;
				c->last = rs;
				rs->nf = (unsigned)n;
				c->cols = (unsigned long)n;
				c->state = MW_COLS;
			}
			break;
		case MW_COLS:
			if (c->cols > 0) {
				c->cols--; /* a column's definition */
			} else if (is_eof(body, len)) {
				c->state = MW_ROWS;
			} else {
				malformed(c, "too many column definitions");
				return LR_ERROR;
			}
			break;
		case MW_ROWS:
			if (is_eof(body, len)) {
				c->done++;
				if (eof_status(body, len) & MORE_RESULTS) {
					if (another(c) < 0)
						return LR_ERROR;
					c->state = MW_HEAD;
					break;
				}
				c->state = MW_IDLE;
				return LR_OK;
			}
			if (take_row(c, body, len) < 0)
				return LR_ERROR;
			break;
		default:
			break;
		}
	}
	return LR_OK;
stop:
	if (got == 0)
		return LR_TIMEOUT; /* still in flight */
	my_rows_free(c->res);
	c->res = c->last = NULL;
	c->state = MW_IDLE;
	return LR_ERROR;
}

/* have bytes at p came unasked: the session's end, and why when they
 * are an error packet (ER_CONNECTION_KILLED, ...). */
static void unasked(struct my_conn *c, const unsigned char *p, size_t have)
{
	c->broken = 1;
	if (have > 5 && p[4] == 0xff) {
		size_t pl = len3(p);

		server_error(c, p + 4, pl < have - 4 ? pl : have - 4);
	} else {
		say(c, CR_SERVER_LOST, "the server ended the session unasked");
	}
}

int my_wire_idle(struct my_conn *c)
{
	struct lr_err e = { .heals = 0 };
	unsigned char b[512];
	ssize_t n;

	if (c->s.fd < 0 || c->broken)
		return c->broken;
	if (c->len - c->off > c->take) {
		/* Come with the last answer, and not part of it. */
		unasked(c, c->in + c->off + c->take, c->len - c->off - c->take);
		return 1;
	}
	if (!lr_stream_holds(&c->s)) {
		struct pollfd p = { .fd = c->s.fd, .events = POLLIN };

		if (poll(&p, 1, 0) <= 0)
			return 0;
	}
	n = lr_stream_read(&c->s, b, sizeof(b), &e);
	if (n == LR_IO_AGAIN)
		return 0;
	c->broken = 1;
	if (n == 0)
		say(c, CR_SERVER_LOST, "the server closed the connection");
	else if (n < 0)
		say(c, CR_SERVER_LOST, "%s", e.msg);
	else
		unasked(c, b, (size_t)n);
	return 1;
}

void my_wire_close(struct my_conn *c)
{
	static const unsigned char quit[] = { 1, 0, 0, 0, COM_QUIT };

	if (c->s.fd >= 0 && c->ready && !c->broken && c->state == MW_IDLE &&
	    c->out_len == 0)
		(void)lr_stream_write(&c->s, quit, sizeof(quit),
				      &(struct lr_err){ .heals = 0 });
	lr_stream_close(&c->s);
	my_rows_free(c->res);
	c->res = c->last = NULL;
	free(c->in);
	free(c->out);
	c->in = c->out = NULL;
	c->off = c->len = c->cap = c->take = 0;
	c->out_off = c->out_len = c->out_cap = 0;
	c->state = MW_IDLE;
}
