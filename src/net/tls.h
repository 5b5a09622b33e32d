/*
 * tls.h - TLS for a store's own socket, in a module of its own
 * (STORE-tls.so).
 *
 * A store that speaks TLS only for some URLs (etcds:// but not etcd://,
 * rediss:// but not redis://) loads this module at the first TLS
 * connection, so that a run without TLS maps no TLS library at all:
 * OpenSSL's libssl and libcrypto cost about 1.5 ms and a megabyte of
 * memory per run.  The module exports one const struct lr_tls_ops named
 * LR_TLS_SYMBOL; lr_tls_load() (net.h) finds it next to the store module
 * that asks, named after it: etcd-tls.so for etcd.so, redis-tls.so for
 * redis.so.  Each is built from the same source (tls-openssl.c): a
 * store's package carries the modules it loads, and two packages cannot
 * ship one file.
 *
 * The socket is the caller's, non-blocking, and stays the caller's: the
 * module never polls, sleeps or closes it.  Every call does what it can at
 * once and says which readiness it needs to go on.
 */
#ifndef LEASERUN_TLS_H
#define LEASERUN_TLS_H

#include <stddef.h>
#include <sys/types.h>

#include "store/store.h"

/* STORE.so loads STORE LR_TLS_SUFFIX .so. */
#define LR_TLS_SUFFIX "-tls"

/* Bump when struct lr_tls_ops or anything it points to changes. */
#define LR_TLS_ABI    2
#define LR_TLS_SYMBOL "lr_tls_ops"

/* Results of handshake(), read() and write() other than a byte count. */
#define LR_TLS_WANT_READ  (-2) /* call again when the socket is readable */
#define LR_TLS_WANT_WRITE (-3) /* ... writable */
#define LR_TLS_ERROR	  (-1) /* err says why; the session is unusable */

struct lr_tls_conf {
	const char *host;   /* what the certificate must name: a host name
			       (also sent as SNI) or an IP address */
	const char *cacert; /* CA bundle file; NULL: the system's */
	const char *cert;   /* client certificate chain file, or NULL */
	const char *key;    /* its private key file, or NULL */
	const unsigned char *alpn; /* ALPN protocol list (wire format), or
				      NULL: no ALPN */
	size_t alpn_len;
	const char *alpn_need; /* the protocol the server must choose, or
				  NULL */
	int verify;         /* LR_TLS_VERIFY_*: what of the server's
			       certificate is checked */
};

/* The server's certificate: its chain and that it names conf->host (the
 * default, 0), its chain only (MySQL's ssl-mode=VERIFY_CA), or nothing,
 * the connection encrypted but the server not known (MySQL's
 * ssl-mode=REQUIRED). */
#define LR_TLS_VERIFY_FULL  0
#define LR_TLS_VERIFY_CHAIN 1
#define LR_TLS_VERIFY_NONE  2

struct lr_tls;

struct lr_tls_ops {
	unsigned abi; /* LR_TLS_ABI */
	/* A client session on the connected socket fd.  NULL with err
	 * filled (a certificate or key that cannot be read, ...). */
	struct lr_tls *(*client)(int fd, const struct lr_tls_conf *conf,
				 struct lr_err *err);
	/* 0 once the handshake is done, the server's certificate verified
	 * and conf->alpn_need (if any) agreed; else LR_TLS_WANT_* or
	 * LR_TLS_ERROR. */
	int (*handshake)(struct lr_tls *t, struct lr_err *err);
	/* Bytes read (> 0), 0 when the server closed the connection, or
	 * LR_TLS_WANT_* / LR_TLS_ERROR. */
	ssize_t (*read)(struct lr_tls *t, void *buf, size_t len,
			struct lr_err *err);
	/* Bytes written (> 0), or LR_TLS_WANT_* / LR_TLS_ERROR. */
	ssize_t (*write)(struct lr_tls *t, const void *buf, size_t len,
			 struct lr_err *err);
	/* Frees the session (not the socket).  Accepts NULL. */
	void (*free)(struct lr_tls *t);
};

#endif
