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
/* The value of query key, or NULL. */
const char *lr_url_param(const struct lr_url *u, const char *key);

#endif
