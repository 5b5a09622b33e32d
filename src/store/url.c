/*
 * url.c - parse scheme://[user[:pass]@]hosts[/path][?query] strictly.
 *
 * The parser never copies the password into an error message, and keeps
 * a redacted copy of the URL (password removed) for logs and the child.
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "store/store.h" /* lr_wipe_free */
#include "store/duration.h"
#include "store/url.h"

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

char *lr_url_decode(const char *s, size_t n)
{
	char *out = malloc(n + 1), *p = out;
	size_t i;

	if (!out)
		return NULL;
	for (i = 0; i < n; i++) {
		if (s[i] == '%') {
			int hi, lo;

			if (i + 2 >= n)
				goto bad;
			hi = hexval((unsigned char)s[i + 1]);
			lo = hexval((unsigned char)s[i + 2]);
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
				goto bad;
			*p++ = (char)(hi * 16 + lo);
			i += 2;
		} else {
			*p++ = s[i];
		}
	}
	*p = '\0';
	return out;
bad:
	*p = '\0';
	lr_wipe_free(out);
	return NULL;
}

static int add_param(struct lr_url *u, const char *s, size_t n)
{
	const char *eq = memchr(s, '=', n);
	struct lr_url_param *np;
	size_t klen = eq ? (size_t)(eq - s) : n;

	if (klen == 0)
		return -1;
	np = realloc(u->params, (u->nparams + 1) * sizeof(*np));
	if (!np)
		return -1;
	u->params = np;
	np[u->nparams].key = lr_url_decode(s, klen);
	np[u->nparams].value =
		eq ? lr_url_decode(eq + 1, n - klen - 1) : strdup("");
	u->nparams++;
	if (!np[u->nparams - 1].key || !np[u->nparams - 1].value)
		return -1;
	return 0;
}

/* Query keys whose values are secrets (libpq's among them). */

/* Is the raw query key [k, k+n) a secret?  It is compared decoded, since
 * libpq decodes "pass%77ord" to "password"; a key that does not decode
 * counts as secret. */
static int secret_key(const char *k, size_t n)
{
	static const char *const keys[] = { "password", "sslpassword",
					    "sentinel_password", "pass",
					    "token", "secret", NULL };
	const char *const *p;
	char *key = lr_url_decode(k, n);
	int secret = key == NULL;

	for (p = keys; key && *p; p++)
		if (strcasecmp(key, *p) == 0)
			secret = 1;
	free(key);
	return secret;
}

/* The URL s without the password of its user information (at is the
 * '@' ending it, or NULL) and without secret query parameters. */
static char *redact(const char *s, const char *at)
{
	size_t n = strlen(s) + 1;
	char *r = malloc(n), *w = r;
	const char *ui = strstr(s, "://") + 3, *pw, *p, *q;
	int first = 1;

	if (!r)
		return NULL;
	pw = at ? memchr(ui, ':', (size_t)(at - ui)) : NULL;
	if (pw) {
		/* user:pass@ -> user@, :pass@ -> nothing */
		if (pw == ui) {
			memcpy(w, s, (size_t)(ui - s));
			w += ui - s;
		} else {
			memcpy(w, s, (size_t)(pw - s));
			w += pw - s;
			*w++ = '@';
		}
		p = at + 1;
	} else {
		p = s;
	}
	q = strchr(p, '?');
	if (!q) {
		strcpy(w, p);
		return r;
	}
	memcpy(w, p, (size_t)(q - p));
	w += q - p;
	for (p = q + 1; *p;) {
		size_t len = strcspn(p, "&"), klen = strcspn(p, "=&");

		if (len && !secret_key(p, klen)) {
			*w++ = first ? '?' : '&';
			first = 0;
			memcpy(w, p, len);
			w += len;
		}
		p += len;
		if (*p == '&')
			p++;
	}
	*w = '\0';
	return r;
}

/* The scheme, s up to p (the "://"), lower-cased into u. */
static int url_scheme(struct lr_url *u, const char *s, const char *p,
		      char *why, size_t len)
{
	size_t i;

	for (i = 0; s + i < p; i++) {
		int c = (unsigned char)s[i];

		if (!(isalnum(c) || c == '+' || c == '-' || c == '.') ||
		    (i == 0 && !isalpha(c))) {
			snprintf(why, len, "bad URL scheme");
			return -1;
		}
	}
	u->scheme = strndup(s, (size_t)(p - s));
	if (!u->scheme) {
		snprintf(why, len, "out of memory");
		return -1;
	}
	for (i = 0; u->scheme[i]; i++)
		u->scheme[i] = (char)tolower((unsigned char)u->scheme[i]);
	return 0;
}

/* The user information and the hosts, between auth and auth_end (the
 * first '/', '?' or '#').  *at is the '@' that ends the user information,
 * or NULL. */
static int url_authority(struct lr_url *u, const char *auth,
			 const char *auth_end, const char **at, char *why,
			 size_t len)
{
	const char *colon, *q;
	size_t i;

	if (strchr(auth_end, '@')) {
		/* "u:ab/cd@host": the password holds a '/' or '?'.  Say so
		 * without echoing any of it. */
		snprintf(why, len, "an '@' after the host part: percent-encode "
				   "'/', '?', '#' and '@' in the user name and "
				   "password (%%2F, %%3F, %%23, %%40)");
		return -1;
	}
	if (*auth_end == '#') {
		snprintf(why, len, "URL fragments (#) are not allowed");
		return -1;
	}
	*at = NULL;
	for (q = auth; q < auth_end; q++)
		if (*q == '@')
			*at = q; /* the last '@': passwords may hold one */
	if (*at) {
		colon = memchr(auth, ':', (size_t)(*at - auth));
		u->user = lr_url_decode(auth,
					(size_t)((colon ? colon : *at) - auth));
		if (colon)
			u->password = lr_url_decode(colon + 1,
					     (size_t)(*at - colon - 1));
		if (!u->user || (colon && !u->password)) {
			snprintf(why, len, "bad percent-escape in URL user "
					   "information");
			return -1;
		}
		auth = *at + 1;
	}
	u->hosts = strndup(auth, (size_t)(auth_end - auth));
	if (!u->hosts) {
		snprintf(why, len, "out of memory");
		return -1;
	}
	for (i = 0; u->hosts[i]; i++) {
		int c = (unsigned char)u->hosts[i];

		if (!(isalnum(c) || strchr("-._~:,[]%!$&'()*+;=", c))) {
			snprintf(why, len, "bad character in URL host");
			return -1;
		}
	}
	return 0;
}

/* The path, and the query's parameters, from p (the end of the hosts). */
static int url_path_query(struct lr_url *u, const char *p, char *why,
			  size_t len)
{
	const char *q = p + strcspn(p, "?#");

	u->path = lr_url_decode(p, (size_t)(q - p));
	if (!u->path) {
		snprintf(why, len, "bad percent-escape in URL path");
		return -1;
	}
	if (*q == '#') {
		snprintf(why, len, "URL fragments (#) are not allowed");
		return -1;
	}
	if (*q != '?')
		return 0;
	for (p = q + 1; *p;) {
		size_t n = strcspn(p, "&#");

		if (p[n] == '#') {
			snprintf(why, len, "URL fragments (#) are not allowed");
			return -1;
		}
		if (n && add_param(u, p, n) < 0) {
			snprintf(why, len, "bad URL query parameter");
			return -1;
		}
		p += n;
		if (*p == '&')
			p++;
	}
	return 0;
}

int lr_url_parse(const char *s, struct lr_url **out, char *why, size_t len)
{
	struct lr_url *u;
	const char *p, *auth_end, *at;

	*out = NULL;
	u = calloc(1, sizeof(*u));
	if (!u) {
		snprintf(why, len, "out of memory");
		return -1;
	}
	*out = u;
	p = strstr(s, "://");
	if (!p || p == s) {
		snprintf(why, len, "not a URL (expected scheme://...)");
		return -1;
	}
	if (url_scheme(u, s, p, why, len) < 0)
		return -1;
	auth_end = p + 3 + strcspn(p + 3, "/?#");
	if (url_authority(u, p + 3, auth_end, &at, why, len) < 0 ||
	    url_path_query(u, auth_end, why, len) < 0)
		return -1;
	u->redacted = redact(s, at);
	if (!u->redacted) {
		snprintf(why, len, "out of memory");
		return -1;
	}
	return 0;
}

int lr_url_param_secret(const char *key)
{
	return secret_key(key, strlen(key));
}

static size_t mask(char *p, const char *end)
{
	size_t n = 0;

	for (; p < end; p++, n++)
		*p = '*';
	return n;
}

size_t lr_url_mask(char *s)
{
	char *auth = strstr(s, "://"), *end, *at = NULL, *colon, *p;
	size_t n = 0;

	if (!auth)
		return 0;
	auth += 3;
	end = auth + strcspn(auth, "/?#");
	for (p = auth; p < end; p++)
		if (*p == '@')
			at = p; /* the last '@', as lr_url_parse() takes it */
	if (at && (colon = memchr(auth, ':', (size_t)(at - auth))))
		n += mask(colon + 1, at);
	p = strchr(end, '?');
	while (p && *p && *p != '#') {
		char *key = p + 1, *next = key + strcspn(key, "&#");
		size_t klen = strcspn(key, "=&#");

		if (key[klen] == '=' && secret_key(key, klen))
			n += mask(key + klen + 1, next);
		p = next;
	}
	return n;
}

void lr_url_free(struct lr_url *u)
{
	size_t i;

	if (!u)
		return;
	lr_wipe_free(u->password);
	free(u->scheme);
	free(u->user);
	free(u->hosts);
	free(u->path);
	for (i = 0; i < u->nparams; i++) {
		free(u->params[i].key);
		lr_wipe_free(u->params[i].value);
	}
	free(u->params);
	free(u->redacted);
	free(u);
}

const char *lr_url_param(const struct lr_url *u, const char *key)
{
	size_t i;

	for (i = u->nparams; i > 0; i--)
		if (strcmp(u->params[i - 1].key, key) == 0)
			return u->params[i - 1].value;
	return NULL;
}

/* ---- host lists -------------------------------------------------------- */

void lr_url_hosts_free(struct lr_url_host *hosts, size_t n)
{
	size_t i;

	for (i = 0; hosts && i < n; i++)
		free(hosts[i].host);
	free(hosts);
}

/* "65535" -> 65535; -1 unless 1..65535 in plain decimal digits. */
static int port_parse(const char *s, size_t n)
{
	long port = 0;
	size_t i;

	if (n == 0 || n > 5)
		return -1;
	for (i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -1;
		port = port * 10 + (s[i] - '0');
	}
	return port >= 1 && port <= 65535 ? (int)port : -1;
}

/* Parses one entry [s, s+n) into *h; 0, or -1 with why. */
static int host_parse(const char *s, size_t n, const char *store,
		      int default_port, struct lr_url_host *h, char *why,
		      size_t len)
{
	const char *name = s, *port = NULL, *colon;
	size_t nlen = n;

	if (n && s[0] == '[') {
		const char *rb = memchr(s, ']', n);

		if (!rb || rb == s + 1 ||
		    (rb + 1 < s + n && rb[1] != ':')) {
			snprintf(why, len, "%s URL: bad IPv6 host '%.*s' "
					   "(expected [address]:port)",
				 store, (int)n, s);
			return -1;
		}
		name = s + 1;
		nlen = (size_t)(rb - name);
		if (rb + 1 < s + n)
			port = rb + 2;
	} else {
		colon = memchr(s, ':', n);
		if (colon && memchr(colon + 1, ':', (size_t)(s + n - colon - 1))) {
			snprintf(why, len, "%s URL: an IPv6 host goes in "
					   "brackets ('[%.*s]')",
				 store, (int)n, s);
			return -1;
		}
		if (colon) {
			nlen = (size_t)(colon - s);
			port = colon + 1;
		}
		if (nlen == 0) {
			snprintf(why, len, "%s URL: empty host in '%.*s'",
				 store, (int)n, s);
			return -1;
		}
	}
	h->port = default_port;
	if (port) {
		h->port = port_parse(port, (size_t)(s + n - port));
		if (h->port < 0) {
			snprintf(why, len, "%s URL: bad port in '%.*s' (1 to "
					   "65535)",
				 store, (int)n, s);
			return -1;
		}
	}
	h->host = strndup(name, nlen);
	if (!h->host) {
		snprintf(why, len, "out of memory");
		return -1;
	}
	return 0;
}

int lr_url_hosts(const struct lr_url *u, const char *store,
		 const char *default_host, int default_port, size_t max,
		 struct lr_url_host **hosts, size_t *n, char *why,
		 size_t len)
{
	const char *p = u->hosts;
	struct lr_url_host *hs;
	size_t cnt = 1;

	*hosts = NULL;
	*n = 0;
	if (!*p && !default_host) {
		snprintf(why, len, "%s URL: no host", store);
		return -1;
	}
	for (; *p; p++)
		cnt += *p == ',';
	if (cnt > max) {
		if (max == 1)
			snprintf(why, len, "%s URL: give one host", store);
		else
			snprintf(why, len, "%s URL: at most %zu hosts", store,
				 max);
		return -1;
	}
	hs = calloc(cnt, sizeof(*hs));
	if (!hs) {
		snprintf(why, len, "out of memory");
		return -1;
	}
	*hosts = hs;
	if (!*u->hosts) {
		hs[0].host = strdup(default_host);
		hs[0].port = default_port;
		*n = 1;
		if (!hs[0].host) {
			snprintf(why, len, "out of memory");
			return -1;
		}
		return 0;
	}
	for (p = u->hosts; *n < cnt; (*n)++) {
		size_t l = strcspn(p, ",");

		if (l == 0) {
			snprintf(why, len, "%s URL: empty host in '%s'", store,
				 u->hosts);
			return -1;
		}
		if (host_parse(p, l, store, default_port, &hs[*n], why,
			       len) < 0)
			return -1;
		p += l + (p[l] == ',');
	}
	return 0;
}

void lr_url_host_format(const struct lr_url_host *h, char *buf, size_t len)
{
	snprintf(buf, len, strchr(h->host, ':') ? "[%s]:%d" : "%s:%d",
		 h->host, h->port);
}

/* ---- options ------------------------------------------------------------ */

/* "a, b or c" from a NULL-terminated list, into buf. */
static void choices_format(const char *const *c, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (; *c && at < len; c++)
		at += (size_t)snprintf(buf + at, len - at, "%s%s",
				       at == 0	? ""
				       : c[1] ? ", "
					      : " or ",
				       *c);
}

/* Checks one value v of option o into *val; 0, or -1 with why. */
static int opt_value(const struct lr_url_opt *o, const char *store,
		     const char *v, union lr_url_val *val, char *why,
		     size_t len)
{
	char lo[32], hi[32], list[200];
	size_t i;
	int64_t ms;

	switch (o->type) {
	case LR_OPT_STRING:
		val->s = v;
		return 0;
	case LR_OPT_PATH:
		if (!*v) {
			snprintf(why, len, "%s URL: %s= needs a path",
				 store, o->key);
			return -1;
		}
		val->s = v;
		return 0;
	case LR_OPT_DURATION:
		if (lr_duration_parse(v, &ms) < 0) {
			snprintf(why, len, "%s URL: bad %s=%.64s (a duration "
					   "such as 500ms, 2s or 1m)",
				 store, o->key, v);
			return -1;
		}
		if (ms < o->min || ms > o->max) {
			lr_duration_format(o->min, lo, sizeof(lo));
			lr_duration_format(o->max, hi, sizeof(hi));
			snprintf(why, len, "%s URL: %s=%.64s is out of range "
					   "(%s to %s)",
				 store, o->key, v, lo, hi);
			return -1;
		}
		val->n = ms;
		return 0;
	case LR_OPT_UINT:
		for (i = 0; o->choices && o->choices[i]; i++) {
			if (strcmp(v, o->choices[i]) == 0) {
				val->n = -1 - (int64_t)i;
				return 0;
			}
		}
		/* 18 digits at most: never past INT64_MAX on the way;
		 * more is out of every range. */
		ms = 0;
		for (i = 0; v[i] && isdigit((unsigned char)v[i]) && i < 18;
		     i++)
			ms = ms * 10 + (v[i] - '0');
		if (!v[0] || v[i] || ms < o->min || ms > o->max) {
			list[0] = '\0';
			if (o->choices) {
				strcpy(list, ", or ");
				choices_format(o->choices, list + 5,
					       sizeof(list) - 5);
			}
			snprintf(why, len, "%s URL: bad %s=%.64s (a whole "
					   "number from %lld to %lld%s)",
				 store, o->key, v, (long long)o->min,
				 (long long)o->max, list);
			return -1;
		}
		val->n = ms;
		return 0;
	case LR_OPT_ENUM:
		for (i = 0; o->choices[i]; i++) {
			if (strcmp(v, o->choices[i]) == 0) {
				val->n = (int64_t)i;
				return 0;
			}
		}
		choices_format(o->choices, list, sizeof(list));
		snprintf(why, len, "%s URL: bad %s=%.64s (%s)", store, o->key,
			 v, list);
		return -1;
	}
	snprintf(why, len, "%s URL: %s: unknown option type", store, o->key);
	return -1;
}

int lr_url_opts(const struct lr_url *u, const char *store,
		const struct lr_url_opt *opts, size_t n,
		union lr_url_val *vals, unsigned *given, char *why,
		size_t len)
{
	size_t i, j;

	*given = 0;
	for (i = 0; i < u->nparams; i++) {
		const struct lr_url_param *p = &u->params[i];

		for (j = 0; j < n; j++)
			if (strcmp(p->key, opts[j].key) == 0)
				break;
		if (j == n) {
			char known[200] = "";
			size_t at = 0;

			for (j = 0; j < n && at < sizeof(known); j++)
				at += (size_t)snprintf(known + at,
						       sizeof(known) - at,
						       "%s%s", j ? ", " : "",
						       opts[j].key);
			if (n)
				snprintf(why, len, "unknown %s URL option "
						   "'%.64s' (known: %s)",
					 store, p->key, known);
			else
				snprintf(why, len, "unknown %s URL option "
						   "'%.64s' (it takes none)",
					 store, p->key);
			return -1;
		}
		if (opt_value(&opts[j], store, p->value, &vals[j], why, len) <
		    0)
			return -1;
		*given |= 1U << j;
	}
	return 0;
}

int lr_url_tls(const char *store, int tls, const char *schemes,
	       const union lr_url_val *vals, unsigned given, size_t at,
	       struct lr_url_tls *t, char *why, size_t len)
{
	unsigned mask = 7U << at;

	*t = (struct lr_url_tls){ NULL, NULL, NULL };
	if (!tls && (given & mask)) {
		snprintf(why, len, "%s URL: cacert=, cert= and key= need TLS "
				   "(%s)",
			 store, schemes);
		return -1;
	}
	t->cacert = given & 1U << at ? vals[at].s : NULL;
	t->cert = given & 2U << at ? vals[at + 1].s : NULL;
	t->key = given & 4U << at ? vals[at + 2].s : NULL;
	return 0;
}

int lr_url_tls_pair(const char *store, const struct lr_url_tls *t,
		    char *why, size_t len)
{
	if (!t->cert == !t->key)
		return 0;
	snprintf(why, len, "%s URL: cert= and key= go together (the client "
			   "certificate and its key)",
		 store);
	return -1;
}
