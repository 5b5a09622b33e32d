/*
 * grpc.h - gRPC calls over one HTTP/2 connection, never owning the loop.
 *
 * The transport of the etcd store: a TCP connection (cleartext HTTP/2
 * with prior knowledge, or TLS with ALPN "h2" through etcd-tls.so), HTTP/2 by
 * libnghttp2, and gRPC's own framing (a 5-byte prefix per message,
 * grpc-status and grpc-message in the trailers) by hand.  It knows
 * nothing of etcd: messages are bytes, encoded by the caller.
 *
 * Nothing here blocks outside lr_grpc_wait(), which drives the connection
 * with poll() until a condition holds or an absolute deadline (ms,
 * CLOCK_BOOTTIME) passes.  Between calls, the caller's loop polls
 * lr_grpc_fd() and runs lr_grpc_pump() when it is ready.  Calls started
 * before the connection is up are queued and go out with the connection's
 * first bytes, so several calls cost one round trip.
 *
 * Ownership: the caller owns the connection and each call.  Closing a
 * connection detaches its calls (they end as broken); freeing a call that
 * is still open resets its stream.
 */
#ifndef LEASERUN_GRPC_H
#define LEASERUN_GRPC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "store/store.h"
#include "net/net.h"

/* TLS settings; NULL for cleartext.  Strings are copied. */
struct lr_grpc_tls {
	const char *cacert, *cert, *key;
};

struct lr_grpc;
struct lr_grpc_call;

/* Starts connecting to the first of addrs that answers; host is the name
 * the TLS certificate must carry, authority goes into :authority.  Does
 * not wait: calls may be started at once.  NULL with err filled if even
 * that fails (no memory, no TLS module). */
struct lr_grpc *lr_grpc_open(const struct lr_net_addrs *addrs,
			     const char *host, const char *authority,
			     const struct lr_grpc_tls *tls, struct lr_err *err);
/* Closes the connection; its calls end as broken.  Accepts NULL. */
void lr_grpc_close(struct lr_grpc *c);

/* Metadata (a header) sent with every call started from now on; value
 * NULL removes it.  Copied; a value is wiped when replaced. 0 or -1. */
int lr_grpc_set_meta(struct lr_grpc *c, const char *name, const char *value);

/* Starts a call of method path ("/pkg.Service/Method").  msg, if not NULL,
 * is the first request message (len bytes); with end set the request side
 * ends after it (a unary call).  NULL if the connection is dead or no new
 * stream can be made (err says why). */
struct lr_grpc_call *lr_grpc_call(struct lr_grpc *c, const char *path,
				  const void *msg, size_t len, int end,
				  struct lr_err *err);
/* Queues one more request message on a streaming call.  0 or -1. */
int lr_grpc_send(struct lr_grpc_call *call, const void *msg, size_t len);
/* The next whole reply message: 1 with *msg and *len set (valid until the
 * next lr_grpc_next(), lr_grpc_pump() or lr_grpc_wait()), 0 if none has
 * come whole yet, -1 if the reply is not well framed (the call is then
 * broken). */
int lr_grpc_next(struct lr_grpc_call *call, const uint8_t **msg, size_t *len);

enum lr_grpc_state {
	LR_GRPC_OPEN,	/* still running */
	LR_GRPC_OK,	/* ended with grpc-status 0 */
	LR_GRPC_STATUS, /* ended with another grpc-status: *code, *msg */
	LR_GRPC_BROKEN, /* the stream or connection broke: *msg says how */
};
/* How the call stands.  code and msg may be NULL; *msg stays valid until
 * the call is freed. */
enum lr_grpc_state lr_grpc_state(const struct lr_grpc_call *call, int *code,
				 const char **msg);
/* Ends and frees a call (resets its stream if open).  Accepts NULL. */
void lr_grpc_call_free(struct lr_grpc_call *call);

/* Drives the connection until done(ctx) returns non-zero (1), the
 * connection dies (-1) or deadline passes (0). */
int lr_grpc_wait(struct lr_grpc *c, int64_t deadline, int (*done)(void *ctx),
		 void *ctx);
/* Does what can be done without waiting (connect, handshake, write,
 * read).  0, or -1 once the connection is dead. */
int lr_grpc_pump(struct lr_grpc *c);
/* The socket to poll and the events wanted, or -1 once dead. */
int lr_grpc_fd(const struct lr_grpc *c, short *events);
/* Why the connection died, or NULL while it lives. */
const char *lr_grpc_error(const struct lr_grpc *c);
/* Whether the dead connection died of what may heal by itself (refused,
 * reset, closed, timed out, a GOAWAY: a server restarting or failing
 * over), not of what another try would meet again (TLS that does not
 * verify, a peer that speaks no HTTP/2 or gRPC).  0 while it lives. */
int lr_grpc_heals(const struct lr_grpc *c);
/* The same for a call that broke (LR_GRPC_BROKEN): its own reset, or its
 * connection's death. */
int lr_grpc_call_heals(const struct lr_grpc_call *call);

#endif
