/*
 * stream.c - one byte stream for plain sockets and TLS (see net.h).
 *
 * Each way is a pair of functions, plain or TLS, chosen once when the
 * stream is made; what both share (how a failure is said, whether it may
 * heal, the TLS alert behind a failed call) is said once, below them.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/net.h"
#include "net/tls.h"

int lr_tls_broke(const char *msg)
{
	static const int broke[] = { ECONNRESET, EPIPE, ETIMEDOUT,
				     ECONNABORTED };
	size_t i;

	/* OpenSSL 3 says "unexpected eof while reading" for a close
	 * without close_notify, as when a server that shuts down ends the
	 * connections it has just accepted. */
	if (strstr(msg, "closed the connection") ||
	    strstr(msg, "connection was closed") ||
	    strstr(msg, "unexpected eof"))
		return 1;
	for (i = 0; i < sizeof(broke) / sizeof(*broke); i++)
		if (strstr(msg, strerror(broke[i])))
			return 1;
	return 0;
}

/* A TLS call failed with err: a server that refused us in the
 * handshake's last step (TLS 1.3: a client certificate it wants) said
 * why in an alert that may wait behind it; that is the reason to tell,
 * with how to mend it when it is a certificate we did not give (OpenSSL
 * says "certificate required"; Go, before 1.21, "bad certificate"). */
static void tls_failed(struct lr_stream *s, struct lr_err *err)
{
	size_t n;

	if (!strstr(err->msg, "alert")) {
		struct lr_err a = { "" };
		char b[64];

		if (s->tls_ops->read(s->tls, b, sizeof(b), &a) ==
			    LR_TLS_ERROR &&
		    strstr(a.msg, "alert"))
			*err = a;
	}
	err->heals = lr_tls_broke(err->msg);
	n = strlen(err->msg);
	if (!s->has_cert && (strstr(err->msg, "alert certificate required") ||
			     strstr(err->msg, "alert bad certificate")))
		snprintf(err->msg + n, sizeof(err->msg) - n,
			 " (give cert= and key=)");
}

/* What a TLS call returned: a count, or LR_IO_AGAIN (s->want set), or
 * -1 (err says why). */
static ssize_t tls_result(struct lr_stream *s, ssize_t n, struct lr_err *err)
{
	if (n == LR_TLS_WANT_READ || n == LR_TLS_WANT_WRITE) {
		s->want = n == LR_TLS_WANT_READ ? POLLIN : POLLOUT;
		return LR_IO_AGAIN;
	}
	if (n < 0) {
		tls_failed(s, err);
		return -1;
	}
	return n;
}

/* The same for read() or send(), waiting for want. */
static ssize_t plain_result(struct lr_stream *s, ssize_t n, short want,
			    struct lr_err *err)
{
	if (n >= 0)
		return n;
	if (errno == EAGAIN || errno == EWOULDBLOCK) {
		s->want = want;
		return LR_IO_AGAIN;
	}
	lr_err_set(err, "%s", strerror(errno));
	err->heals = 1;
	return -1;
}

static ssize_t tls_read(struct lr_stream *s, void *buf, size_t len,
			struct lr_err *err)
{
	return tls_result(s, s->tls_ops->read(s->tls, buf, len, err), err);
}

static ssize_t tls_write(struct lr_stream *s, const void *buf, size_t len,
			 struct lr_err *err)
{
	return tls_result(s, s->tls_ops->write(s->tls, buf, len, err), err);
}

static ssize_t plain_read(struct lr_stream *s, void *buf, size_t len,
			  struct lr_err *err)
{
	ssize_t n;

	do
		n = read(s->fd, buf, len);
	while (n < 0 && errno == EINTR);
	return plain_result(s, n, POLLIN, err);
}

static ssize_t plain_write(struct lr_stream *s, const void *buf, size_t len,
			   struct lr_err *err)
{
	ssize_t n;

	do
		n = send(s->fd, buf, len, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return plain_result(s, n, POLLOUT, err);
}

struct lr_stream_io {
	ssize_t (*read)(struct lr_stream *s, void *buf, size_t len,
			struct lr_err *err);
	ssize_t (*write)(struct lr_stream *s, const void *buf, size_t len,
			 struct lr_err *err);
};

static const struct lr_stream_io plain_io = { plain_read, plain_write };
static const struct lr_stream_io tls_io = { tls_read, tls_write };

void lr_stream_init(struct lr_stream *s, int fd)
{
	*s = (struct lr_stream){ .fd = fd, .io = &plain_io };
}

int lr_stream_tls(struct lr_stream *s, const struct lr_tls_conf *conf,
		  struct lr_err *err)
{
	if (!s->tls_ops && !(s->tls_ops = lr_tls_load(err)))
		return -1;
	s->tls = s->tls_ops->client(s->fd, conf, err);
	if (!s->tls)
		return -1;
	s->io = &tls_io;
	s->has_cert = conf->cert != NULL;
	s->want = POLLOUT;
	return 0;
}

int lr_stream_handshake(struct lr_stream *s, struct lr_err *err)
{
	if (!s->tls)
		return 0;
	return (int)tls_result(s, s->tls_ops->handshake(s->tls, err), err);
}

ssize_t lr_stream_read(struct lr_stream *s, void *buf, size_t len,
		       struct lr_err *err)
{
	return s->io->read(s, buf, len, err);
}

ssize_t lr_stream_write(struct lr_stream *s, const void *buf, size_t len,
			struct lr_err *err)
{
	return s->io->write(s, buf, len, err);
}

int lr_stream_holds(const struct lr_stream *s)
{
	return s->tls != NULL;
}

void lr_stream_close(struct lr_stream *s)
{
	if (s->tls)
		s->tls_ops->free(s->tls);
	if (s->fd >= 0)
		close(s->fd);
	lr_stream_init(s, -1);
}
