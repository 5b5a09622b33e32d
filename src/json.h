/*
 * json.h - the one JSON writer: one object per buffer, for log lines,
 * --status and --check.  Strings are escaped; a member that no longer
 * fits is left out whole, so the object always closes and parses.
 */
#ifndef LEASERUN_JSON_H
#define LEASERUN_JSON_H

#include <stddef.h>
#include <stdint.h>

struct lr_json {
	char *buf;
	size_t len;  /* the buffer's size */
	size_t at;   /* what is written, buf[at] == '\0' */
	int members; /* written so far */
	int cut;     /* a member was left out for want of room */
};

/* Starts an object in buf (len bytes, at least 3). */
void lr_json_open(struct lr_json *j, char *buf, size_t len);
/* Members.  A NULL string is written as null. */
void lr_json_str(struct lr_json *j, const char *key, const char *v);
void lr_json_int(struct lr_json *j, const char *key, long long v);
void lr_json_uint(struct lr_json *j, const char *key, uint64_t v);
void lr_json_bool(struct lr_json *j, const char *key, int v);
void lr_json_null(struct lr_json *j, const char *key);
/* v, or null when not known (known 0), as --status and --list write
 * what a store does not know. */
void lr_json_num(struct lr_json *j, const char *key, long long v, int known);
/* A value that is JSON already (an object or array made by the caller). */
void lr_json_raw(struct lr_json *j, const char *key, const char *v);
/* Closes the object; returns its length. */
size_t lr_json_close(struct lr_json *j);

/* Appends s to buf (of len bytes, filled up to at) as the body of a JSON
 * string, stopping short rather than overflowing.  Returns the new end
 * (buf stays terminated). */
size_t lr_json_escape(char *buf, size_t len, size_t at, const char *s);

#endif
