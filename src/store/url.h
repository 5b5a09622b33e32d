/*
 * url.h - a small, strict URL parser shared by all stores.
 *
 *   scheme://[user[:password]@][hosts][/path][?key=value&...]
 *
 * hosts is kept raw (host[:port][,host[:port]...], IPv6 in brackets);
 * user, password, path and query values are percent-decoded.
 */
#ifndef LEASERUN_URL_H
#define LEASERUN_URL_H

#include <stddef.h>
#include <stdint.h>

struct lr_url_param {
	char *key;
	char *value;
};

struct lr_url {
	char *scheme;   /* lower case */
	char *user;     /* NULL if absent */
	char *password; /* NULL if absent; wiped by lr_url_free() */
	char *hosts;    /* "" if absent */
	char *path;     /* "" if absent, else starts with '/' */
	size_t nparams;
	struct lr_url_param *params;
	char *redacted; /* the URL with the password removed: safe to print */
};

/* Parses s.  Returns 0, or -1 with a one-line reason in why (never
 * containing the password).  *out must be freed with lr_url_free(). */
int lr_url_parse(const char *s, struct lr_url **out, char *why, size_t len);
void lr_url_free(struct lr_url *u);
/* Overwrites in place, with '*', the password of s's user information
 * and the values of its secret query parameters (password=, ...), as the
 * parser would find them; every other byte, and the length, stays.  For
 * a URL in argv, which ps shows.  Returns how many bytes it overwrote. */
size_t lr_url_mask(char *s);
/* Is the (decoded) query key one whose value lr_url_mask() hides? */
int lr_url_param_secret(const char *key);

/* Percent-decodes [s, s+n) into a new string; NULL on a bad escape, a
 * decoded NUL, or no memory. */
char *lr_url_decode(const char *s, size_t n);
/* The value of query key, or NULL. */
const char *lr_url_param(const struct lr_url *u, const char *key);

/* One entry of a URL's host list. */
struct lr_url_host {
	char *host; /* without IPv6 brackets; never empty */
	int port;   /* 1..65535 */
};

/* Splits u->hosts, "host[:port][,host[:port]...]" with IPv6 addresses in
 * brackets, into a new array of *n entries (at least 1, at most max); a
 * missing port is default_port; an empty host list is an error unless
 * default_host is given.  Errors start with "STORE URL: ".  Returns 0,
 * or -1 with a one-line reason.  Free with lr_url_hosts_free(). */
int lr_url_hosts(const struct lr_url *u, const char *store,
		 const char *default_host, int default_port, size_t max,
		 struct lr_url_host **hosts, size_t *n, char *why,
		 size_t len);
void lr_url_hosts_free(struct lr_url_host *hosts, size_t n);
/* "host:port", or "[v6]:port", into buf. */
void lr_url_host_format(const struct lr_url_host *h, char *buf, size_t len);

/* A store's URL options: one table per store, checked here so that every
 * store reads durations, numbers and choices with the same grammar. */
enum lr_url_opt_type {
	LR_OPT_STRING,   /* any text (may be empty) */
	LR_OPT_PATH,     /* a non-empty file path */
	LR_OPT_DURATION, /* lr_duration_parse(), within [min, max] ms */
	LR_OPT_UINT,     /* a decimal integer within [min, max], or one of
			    choices (if any): choice i is the value -1-i */
	LR_OPT_ENUM,     /* one of choices; the value is its index */
};

struct lr_url_opt {
	const char *key;
	enum lr_url_opt_type type;
	int64_t min, max;           /* DURATION (ms) and UINT */
	const char *const *choices; /* ENUM, UINT: NULL-terminated */
};

union lr_url_val {
	const char *s; /* STRING, PATH: points into u; valid as long as u */
	int64_t n;     /* DURATION (ms), UINT, ENUM (index) */
};

/* Checks every query parameter of u against the n entries of opts: an
 * unknown key or a bad value is an error naming the store, the key and
 * what was expected.  vals[i] gets option i's value when it is given and
 * is left alone otherwise (fill in the defaults first); bit i of *given
 * says it was.  Returns 0, or -1 with a one-line reason. */
int lr_url_opts(const struct lr_url *u, const char *store,
		const struct lr_url_opt *opts, size_t n,
		union lr_url_val *vals, unsigned *given, char *why,
		size_t len);

/* The TLS files a URL may name, for a store that speaks TLS on a socket
 * of its own (rediss://, etcds://): a CA bundle, and a client certificate
 * with its key.  LR_URL_TLS_OPTS is their three entries of the store's
 * option table, in this order. */
#define LR_URL_TLS_OPTS                                                       \
	{ "cacert", LR_OPT_PATH, 0, 0, NULL },                                \
	{ "cert", LR_OPT_PATH, 0, 0, NULL },                                  \
	{ "key", LR_OPT_PATH, 0, 0, NULL }
struct lr_url_tls {
	const char *cacert, *cert, *key; /* NULL: not given */
};
/* Takes the TLS files from vals[at..at+2] (LR_URL_TLS_OPTS, as
 * lr_url_opts() filled vals and given) into *t.  Given to a URL whose
 * scheme has no TLS (tls 0; schemes names those with it, "etcds://")
 * they are an error.  Returns 0, or -1 with a one-line reason. */
int lr_url_tls(const char *store, int tls, const char *schemes,
	       const union lr_url_val *vals, unsigned given, size_t at,
	       struct lr_url_tls *t, char *why, size_t len);
/* A client certificate without its key, or a key without it: -1 with a
 * one-line reason; else 0. */
int lr_url_tls_pair(const char *store, const struct lr_url_tls *t,
		    char *why, size_t len);

#endif
