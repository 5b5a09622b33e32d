/*
 * json.c - the one JSON writer (see json.h).
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "json.h"

size_t lr_json_escape(char *buf, size_t len, size_t at, const char *s)
{
	if (at >= len)
		return at;
	for (; *s && at + 7 < len; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			buf[at++] = '\\';
			buf[at++] = (char)c;
		} else if (c < 0x20) {
			at += (size_t)snprintf(buf + at, len - at, "\\u%04x", c);
		} else {
			buf[at++] = (char)c;
		}
	}
	buf[at] = '\0';
	return at;
}

void lr_json_open(struct lr_json *j, char *buf, size_t len)
{
	j->buf = buf;
	j->len = len;
	j->members = 0;
	j->cut = 0;
	buf[0] = '{';
	buf[1] = '\0';
	j->at = 1;
}

/* Appends [s, s+n) if it fits with room left for the closing brace. */
static int put(struct lr_json *j, const char *s, size_t n)
{
	if (j->at + n + 2 > j->len)
		return -1;
	memcpy(j->buf + j->at, s, n);
	j->at += n;
	j->buf[j->at] = '\0';
	return 0;
}

/* The length of s escaped as lr_json_escape() writes it. */
static size_t escaped_len(const char *s)
{
	size_t n = 0;

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		n += c == '"' || c == '\\' ? 2 : c < 0x20 ? 6 : 1;
	}
	return n;
}

/* Writes s escaped; the caller made sure escaped_len(s) fits. */
static void escape_into(struct lr_json *j, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\') {
			j->buf[j->at++] = '\\';
			j->buf[j->at++] = (char)c;
		} else if (c < 0x20) {
			snprintf(j->buf + j->at, 7, "\\u%04x", c);
			j->at += 6;
		} else {
			j->buf[j->at++] = (char)c;
		}
	}
	j->buf[j->at] = '\0';
}

/* Starts a member: ,"key": and returns where it began, for done() to take
 * it back if its value does not fit; (size_t)-1 if the key does not. */
static size_t key(struct lr_json *j, const char *k)
{
	size_t mark = j->at;

	if (j->at + (j->members ? 1 : 0) + escaped_len(k) + 3 + 2 > j->len)
		return (size_t)-1;
	if (j->members)
		put(j, ",", 1);
	put(j, "\"", 1);
	escape_into(j, k);
	put(j, "\":", 2);
	return mark;
}

/* Ends a member begun at mark: counts it, or takes it back. */
static void done(struct lr_json *j, size_t mark, int ok)
{
	if (ok) {
		j->members++;
		return;
	}
	j->at = mark;
	j->buf[mark] = '\0';
	j->cut = 1;
}

static void member(struct lr_json *j, const char *k, const char *text,
		   size_t n)
{
	size_t mark = key(j, k);

	if (mark == (size_t)-1) {
		j->cut = 1;
		return;
	}
	done(j, mark, put(j, text, n) == 0);
}

void lr_json_str(struct lr_json *j, const char *k, const char *v)
{
	size_t mark;

	if (!v) {
		lr_json_null(j, k);
		return;
	}
	mark = key(j, k);
	if (mark == (size_t)-1) {
		j->cut = 1;
		return;
	}
	/* All of it, both quotes and the closing brace, or none of it. */
	if (j->at + escaped_len(v) + 2 + 2 > j->len) {
		done(j, mark, 0);
		return;
	}
	put(j, "\"", 1);
	escape_into(j, v);
	put(j, "\"", 1);
	done(j, mark, 1);
}

void lr_json_int(struct lr_json *j, const char *k, long long v)
{
	char n[32];

	member(j, k, n, (size_t)snprintf(n, sizeof(n), "%lld", v));
}

void lr_json_uint(struct lr_json *j, const char *k, uint64_t v)
{
	char n[32];

	member(j, k, n, (size_t)snprintf(n, sizeof(n), "%" PRIu64, v));
}

void lr_json_bool(struct lr_json *j, const char *k, int v)
{
	member(j, k, v ? "true" : "false", v ? 4 : 5);
}

void lr_json_null(struct lr_json *j, const char *k)
{
	member(j, k, "null", 4);
}

void lr_json_num(struct lr_json *j, const char *k, long long v, int known)
{
	if (known)
		lr_json_int(j, k, v);
	else
		lr_json_null(j, k);
}

void lr_json_raw(struct lr_json *j, const char *k, const char *v)
{
	member(j, k, v, strlen(v));
}

size_t lr_json_close(struct lr_json *j)
{
	/* put() always left room for this. */
	j->buf[j->at++] = '}';
	j->buf[j->at] = '\0';
	return j->at;
}
