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

#include "backend.h" /* lr_wipe_free */
#include "url.h"

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Percent-decodes [s, s+n) into a new string; NULL on a bad escape or a
 * decoded NUL. */
static char *decode(const char *s, size_t n)
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
	np[u->nparams].key = decode(s, klen);
	np[u->nparams].value =
		eq ? decode(eq + 1, n - klen - 1) : strdup("");
	u->nparams++;
	if (!np[u->nparams - 1].key || !np[u->nparams - 1].value)
		return -1;
	return 0;
}

/* Query keys whose values are secrets (libpq's among them). */
static char *decode(const char *s, size_t n);

/* Is the raw query key [k, k+n) a secret?  It is compared decoded, since
 * libpq decodes "pass%77ord" to "password"; a key that does not decode
 * counts as secret. */
static int secret_key(const char *k, size_t n)
{
	static const char *const keys[] = { "password", "sslpassword",
					    "pass", "token", "secret", NULL };
	const char *const *p;
	char *key = decode(k, n);
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

int lr_url_parse(const char *s, struct lr_url **out, char *why, size_t len)
{
	struct lr_url *u;
	const char *p, *auth, *auth_end, *at, *colon, *q;
	size_t i;

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
	for (i = 0; s + i < p; i++) {
		int c = (unsigned char)s[i];

		if (!(isalnum(c) || c == '+' || c == '-' || c == '.') ||
		    (i == 0 && !isalpha(c))) {
			snprintf(why, len, "bad URL scheme");
			return -1;
		}
	}
	u->scheme = strndup(s, (size_t)(p - s));
	if (!u->scheme)
		goto oom;
	for (i = 0; u->scheme[i]; i++)
		u->scheme[i] = (char)tolower((unsigned char)u->scheme[i]);

	auth = p + 3;
	auth_end = auth + strcspn(auth, "/?#");
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
	at = NULL;
	for (q = auth; q < auth_end; q++)
		if (*q == '@')
			at = q; /* the last '@': passwords may hold one */
	if (at) {
		colon = memchr(auth, ':', (size_t)(at - auth));
		u->user = decode(auth, (size_t)((colon ? colon : at) - auth));
		if (colon)
			u->password = decode(colon + 1,
					     (size_t)(at - colon - 1));
		if (!u->user || (colon && !u->password)) {
			snprintf(why, len, "bad percent-escape in URL user "
					   "information");
			return -1;
		}
		auth = at + 1;
	}
	u->hosts = strndup(auth, (size_t)(auth_end - auth));
	if (!u->hosts)
		goto oom;
	for (i = 0; u->hosts[i]; i++) {
		int c = (unsigned char)u->hosts[i];

		if (!(isalnum(c) || strchr("-._~:,[]%!$&'()*+;=", c))) {
			snprintf(why, len, "bad character in URL host");
			return -1;
		}
	}

	p = auth_end;
	q = p + strcspn(p, "?#");
	u->path = decode(p, (size_t)(q - p));
	if (!u->path) {
		snprintf(why, len, "bad percent-escape in URL path");
		return -1;
	}
	if (*q == '#') {
		snprintf(why, len, "URL fragments (#) are not allowed");
		return -1;
	}
	if (*q == '?') {
		p = q + 1;
		while (*p) {
			size_t n = strcspn(p, "&#");

			if (p[n] == '#') {
				snprintf(why, len,
					 "URL fragments (#) are not allowed");
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
	}

	u->redacted = redact(s, at);
	if (!u->redacted)
		goto oom;
	return 0;
oom:
	snprintf(why, len, "out of memory");
	return -1;
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
