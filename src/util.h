/*
 * util.h - small pure helpers for the core: names, signals, exit codes,
 * the renewals' p99.
 */
#ifndef LEASERUN_UTIL_H
#define LEASERUN_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "store/duration.h"
#include "exit.h"

#define LR_NAME_MAX 200


/* A lease name: 1..LR_NAME_MAX bytes of [A-Za-z0-9._:@-], not starting
 * with '.' or '-'.  Returns NULL if valid, else a reason. */
const char *lr_name_check(const char *name);


/* Makes a store's text (a holder's host name) fit for a terminal, a log
 * line and systemd's newline-separated messages: control characters
 * become '?'. */
void lr_printable(char *s);

/* Secrets (the store's password, as given and as decoded, and those of
 * its secret environment variables) that no line leaserun writes may
 * show, whatever a store or a library put into a message: lr_scrub()
 * overwrites each occurrence in s with '*', in place.  lr_secret_add()
 * keeps a copy of s (NULL and "" are ignored; at most LR_SECRETS). */
#define LR_SECRETS 16
void lr_secret_add(const char *s);
void lr_secret_add_n(const char *s, size_t n);
void lr_scrub(char *s);

/* A URL in a message, cut to LR_MSG_URL_MAX bytes and "..." (into buf,
 * of at least LR_MSG_URL_MAX + 4 bytes), so that the reason after it
 * stays within the line (a user name of a kilobyte). */
#define LR_MSG_URL_MAX 200
const char *lr_msg_url(const char *url, char *buf, size_t len);

/* "TERM", "SIGTERM", "15" -> 15.  Returns -1 if unknown. */
int lr_signal_parse(const char *s);
/* A non-negative decimal int no larger than max; -1 otherwise. */
int lr_int_parse(const char *s, int max);

/* A duration for people: "850ms", "4.2s", "45s", "3m15s", "2h5m" (cut,
 * not rounded up, past a second). */
void lr_duration_human(int64_t ms, char *buf, size_t len);

/* A wall-clock time (Unix ms) as ISO 8601 in UTC, "2026-12-03T10:00:00Z",
 * as --status and --list show it. */
void lr_iso_time(char *buf, size_t len, int64_t ms);


#endif
