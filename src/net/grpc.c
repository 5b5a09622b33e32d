/*
 * grpc.c - gRPC calls over one HTTP/2 connection (see grpc.h).
 *
 * Layers, bottom up:
 *  - the socket: non-blocking connect to each address in turn; bytes move
 *    through one stream (net.h), plain or TLS by etcd-tls.so;
 *  - HTTP/2: libnghttp2 in its "mem" mode: we hand it what we read
 *    (nghttp2_session_mem_recv) and write what it gives us
 *    (nghttp2_session_mem_send) from a buffer of our own, so it never
 *    touches the socket and TLS fits underneath;
 *  - gRPC: each call is a POST on a stream of its own, with
 *    content-type application/grpc and te: trailers; each message in
 *    either direction is prefixed with a flag byte (0: not compressed; we
 *    never ask for compression) and its length as 4 bytes, big-endian;
 *    the outcome is grpc-status (and grpc-message, percent-encoded) in
 *    the trailers, or in the only HEADERS frame of a reply without a body.
 *
 * Lifetimes under nghttp2's callbacks: a stream's user data is its call,
 * and a call that goes away first clears it (and resets the stream), so a
 * callback for a stream nobody owns any more finds NULL and drops what it
 * got.  The request body's data source is never a pointer: the read
 * callback looks the call up by stream, for the same reason.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>

#include "net/grpc.h"
#include "net/net.h"
#include "net/tls.h"
#include "store/url.h"

#define MAX_MESSAGE (8u << 20) /* refuse larger reply messages */
#define WINDOW	    (1u << 20) /* our receive window, stream and session */
#define READ_CHUNK  16384
#define MAX_CHUNKS  64 /* reads per turn: 1 MB */
#define MAX_META    4

struct buf {
	uint8_t *p;
	size_t len, cap;
};

enum cstate { C_CONNECTING, C_TLS, C_READY, C_DEAD };

struct lr_grpc {
	enum cstate state;
	struct lr_stream s; /* the socket, plain or TLS (etcd-tls.so) */
	struct lr_net_addrs addrs;
	size_t next_addr; /* the next address to try */
	char *host, *authority;
	int scheme_https; /* TLS */
	char *cacert, *cert, *key;
	/* What reading and (with bytes to send) writing wait for: POLLIN
	 * and POLLOUT, unless TLS asks for the other. */
	short rd_want, wr_want;
	nghttp2_session *h2;
	struct buf out; /* bytes nghttp2 gave us, not yet written */
	size_t out_off;
	struct {
		char *name, *value;
	} meta[MAX_META];
	size_t nmeta;
	struct lr_grpc_call *calls; /* every call not yet freed */
	char why[200];		    /* why it died */
	int heals;		    /* ... of what another try may not meet */
	int more;		    /* fill() stopped with bytes left */
	int heard;		    /* the server has sent something */
};

struct lr_grpc_call {
	struct lr_grpc *conn; /* NULL once the connection is closed */
	struct lr_grpc_call *next, **pprev;
	int32_t id;	/* the stream, or -1 */
	struct buf req; /* framed request messages not yet sent */
	size_t req_off;
	int req_end;	 /* the request side ends after req */
	int deferred;	 /* the data source is waiting for req */
	struct buf resp; /* reply bytes not yet taken */
	size_t resp_off;
	int http_status;
	int grpc_status; /* -1 until known */
	char *grpc_msg;
	int closed;    /* the stream is closed */
	char why[200]; /* broken: how */
	int heals;     /* ... by what another try may not meet */
};

/* ---- buffers ------------------------------------------------------------- */

static int buf_add(struct buf *b, const void *p, size_t n)
{
	if (!n)
		return 0;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 512;
		uint8_t *np;

		while (cap < b->len + n)
			cap *= 2;
		np = realloc(b->p, cap);
		if (!np)
			return -1;
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

/* Request bodies may hold a password (etcd's Authenticate). */
static void buf_wipe_free(struct buf *b)
{
	if (b->p)
		lr_wipe(b->p, b->cap);
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

/* ---- the connection ------------------------------------------------------ */

/* Kills the connection, saying why; heals: of what may be gone at the next
 * try (refused, reset, closed, timed out: a restart, a failover), not of
 * what it would meet again (TLS that does not verify, a peer that does not
 * speak HTTP/2 or gRPC, no memory). */
static void die(struct lr_grpc *c, int heals, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void die(struct lr_grpc *c, int heals, const char *fmt, ...)
{
	va_list ap;

	if (c->state == C_DEAD)
		return;
	c->heals = heals;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
	c->state = C_DEAD;
	lr_stream_close(&c->s);
}

/* Starts a connect to the next address.  0, or -1 when none is left (the
 * connection is then dead, with the last error). */
static int connect_next(struct lr_grpc *c, int last_errno)
{
	while (c->next_addr < c->addrs.n) {
		size_t i = c->next_addr++;
		const struct sockaddr *sa =
		    (const struct sockaddr *)&c->addrs.sa[i];
		int fd;

		lr_stream_close(&c->s);
		last_errno = lr_net_connect_start(sa, c->addrs.len[i], &fd);
		if (last_errno == 0) {
			lr_stream_init(&c->s, fd);
			c->state = C_CONNECTING;
			return 0;
		}
	}
	die(c, 1, "%s", strerror(last_errno ? last_errno : ECONNREFUSED));
	return -1;
}

/* The socket is connected: TLS, or straight to HTTP/2. */
static int connected(struct lr_grpc *c, struct lr_err *err)
{
	static const unsigned char alpn[] = "\x02h2";
	struct lr_tls_conf conf = {
	    .host = c->host,
	    .cacert = c->cacert,
	    .cert = c->cert,
	    .key = c->key,
	    .alpn = alpn,
	    .alpn_len = sizeof(alpn) - 1,
	    .alpn_need = "h2",
	};

	c->rd_want = POLLIN;
	c->wr_want = POLLOUT;
	c->state = c->scheme_https ? C_TLS : C_READY;
	return c->scheme_https ? lr_stream_tls(&c->s, &conf, err) : 0;
}

/* Moves bytes through the stream: the count (> 0), 0 when a read finds
 * the connection closed, LR_IO_AGAIN when it would block (noting what it
 * waits for), or -1 when the connection died. */
static ssize_t io(struct lr_grpc *c, void *buf, size_t len, int writing)
{
	struct lr_err e = {""};
	ssize_t n = writing ? lr_stream_write(&c->s, buf, len, &e)
			    : lr_stream_read(&c->s, buf, len, &e);

	if (n == LR_IO_AGAIN)
		*(writing ? &c->wr_want : &c->rd_want) = c->s.want;
	if (n == -1)
		die(c, e.heals, "%s", e.msg);
	return n;
}

/* Writes what is buffered and what nghttp2 has to send, until the socket
 * takes no more.  0, or -1 (dead). */
static int flush(struct lr_grpc *c)
{
	for (;;) {
		ssize_t n;

		if (c->out_off == c->out.len) {
			const uint8_t *p;

			c->out.len = c->out_off = 0;
			while ((n = nghttp2_session_mem_send(c->h2, &p)) > 0)
				if (buf_add(&c->out, p, (size_t)n) < 0) {
					die(c, 0, "out of memory");
					return -1;
				}
			if (n < 0) {
				die(c, 0, "HTTP/2: %s",
				    nghttp2_strerror((int)n));
				return -1;
			}
			if (c->out.len == 0)
				return 0;
		}
		n = io(c, c->out.p + c->out_off, c->out.len - c->out_off, 1);
		if (n == LR_IO_AGAIN)
			return 0;
		if (n < 0)
			return -1;
		c->out_off += (size_t)n;
	}
}

/* Reads what the socket has and feeds it to nghttp2.  0 or -1 (dead). */
static int fill(struct lr_grpc *c)
{
	uint8_t in[READ_CHUNK];
	int chunks;

	/* A bounded number of reads: a server that keeps sending must not
	 * keep us from the caller's deadline (it polls again). */
	c->more = 0;
	for (chunks = 0; chunks < MAX_CHUNKS; chunks++) {
		ssize_t n = io(c, in, sizeof(in), 0), used;

		if (n == LR_IO_AGAIN)
			return 0;
		if (n < 0)
			return -1;
		if (n == 0 && !c->heard) {
			/* Before a word: no server going away does that (it
			 * refuses or resets), but a TLS server that got our
			 * cleartext preface does, and will again. */
			die(c, 0,
			    "the server closed the connection at once%s",
			    c->scheme_https ? ""
					    : "; does it want etcds:// (TLS)?");
			return -1;
		}
		if (n == 0) {
			die(c, 1, "the server closed the connection");
			return -1;
		}
		c->heard = 1;
		used = nghttp2_session_mem_recv(c->h2, in, (size_t)n);
		if (used < 0) {
			/* Not HTTP/2 at all, typically: a TLS server
			 * answering a cleartext client. */
			die(c, 0, "the server does not speak HTTP/2 (%s)%s",
			    nghttp2_strerror((int)used),
			    c->scheme_https ? ""
					    : "; does it want etcds:// (TLS)?");
			return -1;
		}
	}
	c->more = 1; /* (TLS may hold it where poll() cannot see) */
	return 0;
}

int lr_grpc_pump(struct lr_grpc *c)
{
	struct lr_err e = {""};

	if (c->state == C_CONNECTING) {
		int soerr = 0;
		socklen_t len = sizeof(soerr);
		struct pollfd p = {c->s.fd, POLLOUT, 0};

		if (poll(&p, 1, 0) <= 0)
			return 0;
		if (getsockopt(c->s.fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
			soerr = errno;
		if (soerr) {
			if (connect_next(c, soerr) < 0)
				return -1;
			return 0;
		}
		if (connected(c, &e) < 0) {
			die(c, 0, "%s", e.msg);
			return -1;
		}
	}
	if (c->state == C_TLS) {
		int rc = lr_stream_handshake(&c->s, &e);

		if (rc == LR_IO_AGAIN)
			return 0;
		if (rc < 0) {
			die(c, e.heals, "%s", e.msg);
			return -1;
		}
		c->state = C_READY;
	}
	if (c->state != C_READY)
		return -1;
	c->rd_want = POLLIN;
	c->wr_want = POLLOUT;
	if (flush(c) < 0 || fill(c) < 0 || flush(c) < 0)
		return -1;
	if (!nghttp2_session_want_read(c->h2) &&
	    !nghttp2_session_want_write(c->h2) && c->out_off == c->out.len) {
		die(c, 1, "the server ended the connection (GOAWAY)");
		return -1;
	}
	return 0;
}

int lr_grpc_fd(const struct lr_grpc *c, short *events)
{
	switch (c->state) {
	case C_CONNECTING:
		*events = POLLOUT;
		return c->s.fd;
	case C_TLS:
		*events = c->s.want;
		return c->s.fd;
	case C_READY:
		*events = c->rd_want;
		if (c->out_off < c->out.len ||
		    nghttp2_session_want_write(c->h2))
			*events |= c->wr_want;
		return c->s.fd;
	case C_DEAD:
		break;
	}
	return -1;
}

const char *lr_grpc_error(const struct lr_grpc *c)
{
	return c->state == C_DEAD ? c->why : NULL;
}

int lr_grpc_heals(const struct lr_grpc *c)
{
	return c->state == C_DEAD && c->heals;
}

int lr_grpc_wait(struct lr_grpc *c, int64_t deadline, int (*done)(void *ctx),
		 void *ctx)
{
	for (;;) {
		struct pollfd p;
		int64_t left;

		lr_grpc_pump(c);
		if (done(ctx))
			return 1;
		if (c->state == C_DEAD)
			return -1;
		left = deadline - lr_now_ms();
		if (left <= 0)
			return 0;
		p.fd = lr_grpc_fd(c, &p.events);
		p.revents = 0;
		if (c->more)
			left = 0;
		if (poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left) < 0 &&
		    errno != EINTR) {
			die(c, 0, "poll: %s", strerror(errno));
			return -1;
		}
	}
}

/* ---- nghttp2 callbacks --------------------------------------------------- */

static struct lr_grpc_call *call_of(nghttp2_session *s, int32_t id)
{
	return nghttp2_session_get_stream_user_data(s, id);
}

static ssize_t read_body(nghttp2_session *s, int32_t id, uint8_t *buf,
			 size_t len, uint32_t *flags, nghttp2_data_source *src,
			 void *ud)
{
	struct lr_grpc_call *call = call_of(s, id);
	size_t left;

	(void)src;
	(void)ud;
	if (!call) {
		*flags |= NGHTTP2_DATA_FLAG_EOF;
		return 0;
	}
	left = call->req.len - call->req_off;
	if (left == 0) {
		if (call->req_end) {
			*flags |= NGHTTP2_DATA_FLAG_EOF;
			return 0;
		}
		call->deferred = 1;
		return NGHTTP2_ERR_DEFERRED;
	}
	if (len > left)
		len = left;
	memcpy(buf, call->req.p + call->req_off, len);
	call->req_off += len;
	if (call->req_off == call->req.len) {
		memset(call->req.p, 0, call->req.len);
		call->req.len = call->req_off = 0;
		if (call->req_end)
			*flags |= NGHTTP2_DATA_FLAG_EOF;
	}
	return (ssize_t)len;
}

/* The call broke, for why; heals as die() says. */
static void call_break(struct lr_grpc_call *call, int heals, const char *why)
{
	if (!call->why[0]) {
		snprintf(call->why, sizeof(call->why), "%s", why);
		call->heals = heals;
	}
}

static int on_data(nghttp2_session *s, uint8_t flags, int32_t id,
		   const uint8_t *data, size_t len, void *ud)
{
	struct lr_grpc_call *call = call_of(s, id);

	(void)flags;
	(void)ud;
	if (!call || call->why[0])
		return 0;
	if (call->resp_off == call->resp.len)
		call->resp.len = call->resp_off = 0;
	if (call->resp.len + len > MAX_MESSAGE + 5 ||
	    buf_add(&call->resp, data, len) < 0) {
		call_break(call, 0, "the reply is too large");
		nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, id,
					  NGHTTP2_CANCEL);
	}
	return 0;
}

/* grpc-message is percent-encoded (taken as it is if it is not well
 * encoded); control characters become '?'. */
static char *message_decode(const uint8_t *v, size_t n)
{
	char *m = lr_url_decode((const char *)v, n), *p;

	if (!m)
		m = strndup((const char *)v, n);
	for (p = m; p && *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return m;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f,
		     const uint8_t *name, size_t nlen, const uint8_t *value,
		     size_t vlen, uint8_t flags, void *ud)
{
	struct lr_grpc_call *call;

	(void)flags;
	(void)ud;
	if (f->hd.type != NGHTTP2_HEADERS ||
	    !(call = call_of(s, f->hd.stream_id)))
		return 0;
	if (nlen == 7 && memcmp(name, ":status", 7) == 0) {
		call->http_status = 0;
		for (size_t i = 0; i < vlen && i < 3; i++)
			call->http_status =
			    call->http_status * 10 + (value[i] - '0');
	} else if (nlen == 11 && memcmp(name, "grpc-status", 11) == 0) {
		call->grpc_status = 0;
		for (size_t i = 0; i < vlen && i < 6; i++)
			call->grpc_status =
			    call->grpc_status * 10 + (value[i] - '0');
	} else if (nlen == 12 && memcmp(name, "grpc-message", 12) == 0) {
		free(call->grpc_msg);
		call->grpc_msg = message_decode(value, vlen);
	}
	return 0;
}

static int on_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
	struct lr_grpc_call *call = call_of(s, id);

	(void)ud;
	if (!call)
		return 0;
	call->closed = 1;
	if (call->grpc_status >= 0)
		return 0;
	if (code) {
		char why[80];

		snprintf(why, sizeof(why), "the server reset the request (%s)",
			 nghttp2_http2_strerror(code));
		/* Refused (a GOAWAY came first) or cancelled: a server
		 * going away. */
		call_break(call,
			   code == NGHTTP2_REFUSED_STREAM ||
			       code == NGHTTP2_CANCEL,
			   why);
	} else if (call->http_status != 200) {
		char why[80];

		snprintf(why, sizeof(why), "HTTP status %d, not gRPC",
			 call->http_status);
		/* 502-504: a proxy whose server is away (gRPC reads them
		 * as UNAVAILABLE). */
		call_break(call,
			   call->http_status >= 502 && call->http_status <= 504,
			   why);
	} else {
		call_break(call, 0, "the reply ended without a gRPC status");
	}
	return 0;
}

/* ---- opening and closing ------------------------------------------------- */

static char *dup_or_null(const char *s, int *fail)
{
	char *d;

	if (!s)
		return NULL;
	d = strdup(s);
	if (!d)
		*fail = 1;
	return d;
}

struct lr_grpc *lr_grpc_open(const struct lr_net_addrs *addrs,
			     const char *host, const char *authority,
			     const struct lr_grpc_tls *tls, struct lr_err *err)
{
	nghttp2_session_callbacks *cbs = NULL;
	nghttp2_settings_entry iv[] = {
	    {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
	    {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, WINDOW},
	};
	struct lr_grpc *c = calloc(1, sizeof(*c));
	int fail = 0;

	if (!c) {
		lr_err_set(err, "out of memory");
		return NULL;
	}
	lr_stream_init(&c->s, -1);
	c->addrs = *addrs;
	c->host = dup_or_null(host, &fail);
	c->authority = dup_or_null(authority, &fail);
	if (tls) {
		c->cacert = dup_or_null(tls->cacert, &fail);
		c->cert = dup_or_null(tls->cert, &fail);
		c->key = dup_or_null(tls->key, &fail);
		c->scheme_https = 1;
		/* Fails here, not at the connect, without the module. */
		if (!fail && !lr_tls_load(err))
			goto fail;
	}
	if (fail || nghttp2_session_callbacks_new(&cbs) != 0) {
		lr_err_set(err, "out of memory");
		goto fail;
	}
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
	nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_close);
	if (nghttp2_session_client_new(&c->h2, cbs, c) != 0 ||
	    nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv,
				    sizeof(iv) / sizeof(iv[0])) != 0 ||
	    nghttp2_session_set_local_window_size(c->h2, NGHTTP2_FLAG_NONE, 0,
						  WINDOW) != 0) {
		lr_err_set(err, "cannot set up HTTP/2");
		goto fail;
	}
	nghttp2_session_callbacks_del(cbs);
	cbs = NULL;
	connect_next(c, 0);
	return c;
fail:
	nghttp2_session_callbacks_del(cbs);
	lr_grpc_close(c);
	return NULL;
}

void lr_grpc_close(struct lr_grpc *c)
{
	size_t i;

	if (!c)
		return;
	while (c->calls) {
		struct lr_grpc_call *call = c->calls;

		call_break(call, c->state == C_DEAD ? c->heals : 1,
			   c->state == C_DEAD ? c->why
					      : "the connection was closed");
		call->conn = NULL;
		c->calls = call->next;
		call->next = NULL;
		call->pprev = NULL;
	}
	die(c, 1, "closed");
	nghttp2_session_del(c->h2);
	buf_wipe_free(&c->out);
	for (i = 0; i < c->nmeta; i++) {
		free(c->meta[i].name);
		lr_wipe_free(c->meta[i].value);
	}
	free(c->host);
	free(c->authority);
	free(c->cacert);
	free(c->cert);
	free(c->key);
	free(c);
}

int lr_grpc_set_meta(struct lr_grpc *c, const char *name, const char *value)
{
	size_t i;

	for (i = 0; i < c->nmeta; i++)
		if (strcmp(c->meta[i].name, name) == 0)
			break;
	if (i < c->nmeta) {
		lr_wipe_free(c->meta[i].value);
		c->meta[i].value = NULL;
		if (!value) {
			free(c->meta[i].name);
			c->meta[i] = c->meta[--c->nmeta];
			return 0;
		}
	} else {
		if (!value)
			return 0;
		if (c->nmeta == MAX_META || !(c->meta[i].name = strdup(name)))
			return -1;
		c->nmeta++;
	}
	c->meta[i].value = strdup(value);
	return c->meta[i].value ? 0 : -1;
}

/* ---- calls --------------------------------------------------------------- */

static int frame(struct buf *b, const void *msg, size_t len)
{
	uint8_t hd[5] = {0, (uint8_t)(len >> 24), (uint8_t)(len >> 16),
			 (uint8_t)(len >> 8), (uint8_t)len};

	if (len > MAX_MESSAGE)
		return -1;
	if (buf_add(b, hd, sizeof(hd)) < 0)
		return -1;
	return len ? buf_add(b, msg, len) : 0;
}

#define NV(n, v)                                                               \
	{                                                                      \
		(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v),      \
		    NGHTTP2_NV_FLAG_NONE                                       \
	}

struct lr_grpc_call *lr_grpc_call(struct lr_grpc *c, const char *path,
				  const void *msg, size_t len, int end,
				  struct lr_err *err)
{
	nghttp2_nv nva[8 + MAX_META] = {
	    NV(":method", "POST"),
	    NV(":scheme", c->scheme_https ? "https" : "http"),
	    NV(":path", path),
	    NV(":authority", c->authority),
	    NV("content-type", "application/grpc"),
	    NV("te", "trailers"),
	    NV("user-agent", "leaserun/" PACKAGE_VERSION),
	};
	size_t nnv = 7, i;
	nghttp2_data_provider prd = {{0}, read_body};
	struct lr_grpc_call *call;

	if (c->state == C_DEAD) {
		lr_err_set(err, "%s", c->why);
		return NULL;
	}
	for (i = 0; i < c->nmeta; i++) {
		nva[nnv].name = (uint8_t *)c->meta[i].name;
		nva[nnv].namelen = strlen(c->meta[i].name);
		nva[nnv].value = (uint8_t *)c->meta[i].value;
		nva[nnv].valuelen = strlen(c->meta[i].value);
		nva[nnv].flags = NGHTTP2_NV_FLAG_NO_INDEX;
		nnv++;
	}
	call = calloc(1, sizeof(*call));
	if (!call || (msg && frame(&call->req, msg, len) < 0)) {
		lr_err_set(err, "out of memory");
		goto fail;
	}
	call->grpc_status = -1;
	call->req_end = end;
	call->id = nghttp2_submit_request(c->h2, NULL, nva, nnv, &prd, call);
	if (call->id < 0) {
		lr_err_set(err, "cannot start a request: %s",
			   nghttp2_strerror(call->id));
		goto fail;
	}
	call->conn = c;
	call->next = c->calls;
	if (c->calls)
		c->calls->pprev = &call->next;
	call->pprev = &c->calls;
	c->calls = call;
	return call;
fail:
	if (call)
		buf_wipe_free(&call->req);
	free(call);
	return NULL;
}

int lr_grpc_send(struct lr_grpc_call *call, const void *msg, size_t len)
{
	struct lr_grpc *c = call->conn;

	if (!c || c->state == C_DEAD || call->closed || call->req_end)
		return -1;
	if (frame(&call->req, msg, len) < 0)
		return -1;
	if (call->deferred) {
		call->deferred = 0;
		if (nghttp2_session_resume_data(c->h2, call->id) != 0)
			return -1;
	}
	return 0;
}

int lr_grpc_next(struct lr_grpc_call *call, const uint8_t **msg, size_t *len)
{
	const uint8_t *p = call->resp.p + call->resp_off;
	size_t avail = call->resp.len - call->resp_off, n;

	if (call->why[0])
		return -1;
	if (avail < 5)
		return 0;
	n = (size_t)p[1] << 24 | (size_t)p[2] << 16 | (size_t)p[3] << 8 | p[4];
	if (p[0] != 0 || n > MAX_MESSAGE) {
		call_break(call, 0,
			   p[0] != 0 ? "the reply is compressed"
					   : "the reply is too large");
		if (call->conn && !call->closed)
			nghttp2_submit_rst_stream(call->conn->h2,
						  NGHTTP2_FLAG_NONE, call->id,
						  NGHTTP2_CANCEL);
		return -1;
	}
	if (avail < 5 + n)
		return 0;
	*msg = p + 5;
	*len = n;
	call->resp_off += 5 + n;
	return 1;
}

enum lr_grpc_state lr_grpc_state(const struct lr_grpc_call *call, int *code,
				 const char **msg)
{
	const char *m = NULL;
	enum lr_grpc_state st;
	int cd = -1;

	if (call->why[0]) {
		st = LR_GRPC_BROKEN;
		m = call->why;
	} else if (!call->closed) {
		if (call->conn && call->conn->state != C_DEAD)
			return LR_GRPC_OPEN;
		st = LR_GRPC_BROKEN;
		m = call->conn ? call->conn->why : "the connection was closed";
	} else if (call->grpc_status == 0) {
		st = LR_GRPC_OK;
		cd = 0;
	} else {
		st = LR_GRPC_STATUS;
		cd = call->grpc_status;
		m = call->grpc_msg ? call->grpc_msg : "";
	}
	if (code)
		*code = cd;
	if (msg)
		*msg = m;
	return st;
}

void lr_grpc_call_free(struct lr_grpc_call *call)
{
	if (!call)
		return;
	if (call->conn) {
		struct lr_grpc *c = call->conn;

		if (call->id > 0 && !call->closed) {
			nghttp2_session_set_stream_user_data(c->h2, call->id,
							     NULL);
			if (c->state != C_DEAD)
				nghttp2_submit_rst_stream(
				    c->h2, NGHTTP2_FLAG_NONE, call->id,
				    NGHTTP2_CANCEL);
		} else if (call->id > 0) {
			nghttp2_session_set_stream_user_data(c->h2, call->id,
							     NULL);
		}
		*call->pprev = call->next;
		if (call->next)
			call->next->pprev = call->pprev;
	}
	buf_wipe_free(&call->req);
	free(call->resp.p);
	free(call->grpc_msg);
	free(call);
}

int lr_grpc_call_heals(const struct lr_grpc_call *call)
{
	if (call->why[0])
		return call->heals;
	if (!call->conn)
		return 1;
	return call->conn->state == C_DEAD && call->conn->heals;
}
