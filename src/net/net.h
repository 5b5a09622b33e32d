/*
 * net.h - what every network store does before it speaks: a host name
 * resolved and a socket connected, each within an absolute deadline, the
 * TLS module (tls.h) loaded when a URL asks for TLS, and one byte stream
 * over the socket, plain or TLS.  Part of libstore: no prints, no exits,
 * errors as values.
 */
#ifndef LEASERUN_NET_H
#define LEASERUN_NET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "store/store.h"
#include "net/tls.h"

#define LR_NET_MAX_ADDRS 8

/* Where a server is: its addresses, resolved once. */
struct lr_net_addrs {
	size_t n;
	struct sockaddr_storage sa[LR_NET_MAX_ADDRS];
	socklen_t len[LR_NET_MAX_ADDRS];
};

/* Resolves host (a name or an IP address) and port within deadline
 * (CLOCK_BOOTTIME ms).  An address is parsed at once; a name is looked
 * up by glibc's resolver thread (getaddrinfo_a), given up at the
 * deadline.  0, or -1 with err. */
int lr_net_resolve(const char *host, const char *port, int64_t deadline,
		   struct lr_net_addrs *out, struct lr_err *err);

/* Starts a connect to sa from a new non-blocking, close-on-exec socket
 * (TCP_NODELAY for TCP).  Returns 0 with *fd set (connected, or in
 * progress: wait for POLLOUT and read SO_ERROR), or an errno value. */
int lr_net_connect_start(const struct sockaddr *sa, socklen_t len, int *fd);

/* Connects to host:port (each address in turn), or to the Unix socket
 * path when host is NULL, by deadline.  LR_OK with *fd (non-blocking,
 * close-on-exec), or LR_TIMEOUT / LR_ERROR with only the reason in err
 * ("Connection refused", "no answer in time"): the caller says what it
 * was connecting to. */
enum lr_status lr_net_dial(const char *host, int port, const char *path,
			   int64_t deadline, int *fd, struct lr_err *err);

/* Waits until fd is ready for events or deadline passes.  1 when ready
 * (or in error: the next read or write says which), 0 at the deadline. */
int lr_net_wait(int fd, short events, int64_t deadline);

/* Loads the TLS module of the store module that calls this (STORE-tls.so
 * beside STORE.so; see tls.h), once per process.  NULL with err filled when it is
 * not installed or was built for another leaserun. */
const struct lr_tls_ops *lr_tls_load(struct lr_err *err);

/*
 * One byte stream over a connected non-blocking socket, plain or TLS, so
 * that a store moves bytes one way whatever the URL asked for (as
 * hiredis's pair of read and write functions).  Plain, it is read() and
 * send(); with TLS (lr_stream_tls()), the TLS module's calls.  A failure
 * is said the same way for both, and marks err->heals when the
 * connection broke (closed, reset, timed out) rather than TLS refusing (a
 * certificate, an alert), which another try would meet again.  A server
 * that refused us in the TLS 1.3 handshake's last step said why in an
 * alert that may wait behind the failed call: it is read and told, and a
 * refusal for want of a client certificate says how to give one.
 */
struct lr_stream_io;
struct lr_stream {
	int fd;                  /* -1: none */
	const struct lr_stream_io *io; /* its read and write, plain or TLS */
	const struct lr_tls_ops *tls_ops; /* NULL: plain */
	struct lr_tls *tls;
	int has_cert;            /* TLS with a client certificate */
	short want;              /* after LR_IO_AGAIN: POLLIN or POLLOUT */
};

#define LR_IO_AGAIN (-2) /* would block: wait for s->want, then again */

/* A plain stream on fd (now the stream's). */
void lr_stream_init(struct lr_stream *s, int fd);
/* Starts TLS on s (loads the TLS module).  0, or -1 with err filled (no
 * module, a file of conf that cannot be read). */
int lr_stream_tls(struct lr_stream *s, const struct lr_tls_conf *conf,
		  struct lr_err *err);
/* Goes on with the TLS handshake (a plain stream has none): 0 once it is
 * done and the server's certificate checked, LR_IO_AGAIN, or -1 with
 * err. */
int lr_stream_handshake(struct lr_stream *s, struct lr_err *err);
/* Is msg, a TLS failure, the connection breaking (closed, reset: a server
 * that stopped, OpenSSL 3's "unexpected eof") rather than TLS itself
 * refusing (a certificate, an alert)?  Any TLS library's words. */
int lr_tls_broke(const char *msg);
/* Bytes read (> 0), 0 when the server closed the connection, LR_IO_AGAIN,
 * or -1 with err. */
ssize_t lr_stream_read(struct lr_stream *s, void *buf, size_t len,
		       struct lr_err *err);
/* Bytes written (> 0), LR_IO_AGAIN, or -1 with err.  After LR_IO_AGAIN
 * over TLS, the next write must offer the same bytes again. */
ssize_t lr_stream_write(struct lr_stream *s, const void *buf, size_t len,
			struct lr_err *err);
/* Whether a read may leave bytes in the stream where poll() cannot see
 * them (the rest of a TLS record): read until LR_IO_AGAIN before
 * polling. */
int lr_stream_holds(const struct lr_stream *s);
/* Ends TLS and closes the socket; s is then empty.  Accepts an empty
 * stream. */
void lr_stream_close(struct lr_stream *s);

#endif
