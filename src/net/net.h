/*
 * net.h - what every network store does before it speaks: a host name
 * resolved and a socket connected, each within an absolute deadline, and
 * the TLS module (tls.h) loaded when a URL asks for TLS.  Part of
 * libstore: no prints, no exits, errors as values.
 */
#ifndef LEASERUN_NET_H
#define LEASERUN_NET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "store/store.h"

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
struct lr_tls_ops;
const struct lr_tls_ops *lr_tls_load(struct lr_err *err);

#endif
