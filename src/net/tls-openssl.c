/*
 * tls-openssl.c - TLS over a store's own non-blocking socket with OpenSSL,
 * built as each store's STORE-tls.so (see tls.h for why it is a module of
 * its own).
 *
 * One SSL_CTX per session: a run makes one connection, or a few when it
 * fails over, so sharing a context would save nothing worth its state.
 * The server's certificate is verified against the CA bundle given (else
 * the system's) and must name the host we connected to (a DNS name, or an
 * IP address in subjectAltName), unless the store asks for less
 * (conf->verify, for MySQL's ssl-modes); TLS 1.2 at least.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "net/tls.h"

struct lr_tls {
	SSL_CTX *ctx;
	SSL *ssl;
	char *alpn_need;
};

/* The reason of OpenSSL's last error ("certificate verify failed"), with
 * the verification result when that is what failed. */
static void ssl_err(struct lr_tls *t, struct lr_err *err, const char *what)
{
	unsigned long e = ERR_get_error();
	const char *r = e ? ERR_reason_error_string(e) : NULL;
	long v = t && t->ssl ? SSL_get_verify_result(t->ssl) : X509_V_OK;

	if (v != X509_V_OK &&
	    ERR_GET_REASON(e) == SSL_R_CERTIFICATE_VERIFY_FAILED)
		lr_err_set(err, "%s: certificate verify failed (%s)", what,
			   X509_verify_cert_error_string(v));
	else if (r)
		lr_err_set(err, "%s: %s", what, r);
	else if (errno)
		lr_err_set(err, "%s: %s", what, strerror(errno));
	else
		lr_err_set(err, "%s: the connection was closed", what);
	ERR_clear_error();
}

static void tls_free(struct lr_tls *t)
{
	if (!t)
		return;
	SSL_free(t->ssl);
	SSL_CTX_free(t->ctx);
	free(t->alpn_need);
	free(t);
}

static struct lr_tls *tls_client(int fd, const struct lr_tls_conf *conf,
				 struct lr_err *err)
{
	struct lr_tls *t = calloc(1, sizeof(*t));
	unsigned char ip[16];
	int is_ip;

	if (!t || (conf->alpn_need &&
		   !(t->alpn_need = strdup(conf->alpn_need)))) {
		lr_err_set(err, "out of memory");
		goto fail;
	}
	ERR_clear_error();
	t->ctx = SSL_CTX_new(TLS_client_method());
	if (!t->ctx) {
		ssl_err(t, err, "cannot set up TLS");
		goto fail;
	}
	SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(t->ctx, conf->verify == LR_TLS_VERIFY_NONE
					   ? SSL_VERIFY_NONE
					   : SSL_VERIFY_PEER,
			   NULL);
	if (conf->verify != LR_TLS_VERIFY_NONE &&
	    (conf->cacert
		     ? SSL_CTX_load_verify_locations(t->ctx, conf->cacert,
						     NULL) != 1
		     : SSL_CTX_set_default_verify_paths(t->ctx) != 1)) {
		ssl_err(t, err,
			conf->cacert ? conf->cacert
				     : "the system's CA certificates");
		goto fail;
	}
	if (conf->cert &&
	    SSL_CTX_use_certificate_chain_file(t->ctx, conf->cert) != 1) {
		ssl_err(t, err, conf->cert);
		goto fail;
	}
	if (conf->key && SSL_CTX_use_PrivateKey_file(t->ctx, conf->key,
						     SSL_FILETYPE_PEM) != 1) {
		ssl_err(t, err, conf->key);
		goto fail;
	}
	t->ssl = SSL_new(t->ctx);
	if (!t->ssl || SSL_set_fd(t->ssl, fd) != 1) {
		ssl_err(t, err, "cannot set up TLS");
		goto fail;
	}
	is_ip = inet_pton(AF_INET, conf->host, ip) == 1 ||
		inet_pton(AF_INET6, conf->host, ip) == 1;
	/* The name to check (only for a full check), and to send as SNI. */
	if ((conf->verify == LR_TLS_VERIFY_FULL &&
	     (is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(t->ssl),
						    conf->host) != 1
		    : SSL_set1_host(t->ssl, conf->host) != 1)) ||
	    (!is_ip && SSL_set_tlsext_host_name(t->ssl, conf->host) != 1)) {
		ssl_err(t, err, "cannot set up TLS");
		goto fail;
	}
	/* 0 is success here. */
	if (conf->alpn && SSL_set_alpn_protos(t->ssl, conf->alpn,
					      (unsigned)conf->alpn_len) != 0) {
		ssl_err(t, err, "cannot set up TLS");
		goto fail;
	}
	SSL_set_connect_state(t->ssl);
	return t;
fail:
	tls_free(t);
	return NULL;
}

/* Maps SSL_get_error() for a call that returned rc. */
static int want(struct lr_tls *t, int rc, struct lr_err *err, const char *what)
{
	switch (SSL_get_error(t->ssl, rc)) {
	case SSL_ERROR_WANT_READ:
		return LR_TLS_WANT_READ;
	case SSL_ERROR_WANT_WRITE:
		return LR_TLS_WANT_WRITE;
	case SSL_ERROR_ZERO_RETURN:
		lr_err_set(err, "%s: the server closed the connection", what);
		return LR_TLS_ERROR;
	case SSL_ERROR_SYSCALL:
		if (!ERR_peek_error()) {
			lr_err_set(err, "%s: %s", what,
				   errno && rc < 0
				       ? strerror(errno)
				       : "the server closed the connection");
			return LR_TLS_ERROR;
		}
		/* fall through */
	default:
		ssl_err(t, err, what);
		return LR_TLS_ERROR;
	}
}

static int tls_handshake(struct lr_tls *t, struct lr_err *err)
{
	const unsigned char *p = NULL;
	unsigned n = 0;
	int rc;

	ERR_clear_error();
	errno = 0;
	rc = SSL_do_handshake(t->ssl);
	if (rc != 1)
		return want(t, rc, err, "TLS handshake failed");
	if (!t->alpn_need)
		return 0;
	SSL_get0_alpn_selected(t->ssl, &p, &n);
	if (n != strlen(t->alpn_need) || memcmp(p, t->alpn_need, n) != 0) {
		lr_err_set(err,
			   "the server did not agree to %s over TLS "
			   "(ALPN)",
			   t->alpn_need);
		return LR_TLS_ERROR;
	}
	return 0;
}

static ssize_t tls_read(struct lr_tls *t, void *buf, size_t len,
			struct lr_err *err)
{
	int rc;

	ERR_clear_error();
	errno = 0;
	rc = SSL_read(t->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
	if (rc > 0)
		return rc;
	if (SSL_get_error(t->ssl, rc) == SSL_ERROR_ZERO_RETURN)
		return 0;
	return want(t, rc, err, "TLS read failed");
}

static ssize_t tls_write(struct lr_tls *t, const void *buf, size_t len,
			 struct lr_err *err)
{
	int rc;

	ERR_clear_error();
	errno = 0;
	rc = SSL_write(t->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
	if (rc > 0)
		return rc;
	return want(t, rc, err, "TLS write failed");
}

const struct lr_tls_ops lr_tls_ops = {
    .abi = LR_TLS_ABI,
    .client = tls_client,
    .handshake = tls_handshake,
    .read = tls_read,
    .write = tls_write,
    .free = tls_free,
};
