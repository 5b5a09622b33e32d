/*
 * duration.h - the one duration grammar (libstore: core and stores).
 */
#ifndef LEASERUN_DURATION_H
#define LEASERUN_DURATION_H

#include <stddef.h>
#include <stdint.h>

/*
 * The special values of a count of milliseconds, as systemd has
 * USEC_INFINITY: a count that is one is never negative, and a variable
 * that may hold one of these says which in its comment.  The negative
 * ones are all -1, so a test for "a real count" stays ms >= 0.
 */
#define LR_MS_FOREVER (-1)   /* a wait with no end: -w not given */
#define LR_MS_UNKNOWN (-1)   /* not known, or there is none (a TTL left,
			      * the time since a start) */
#define LR_MS_DEFAULT (-1)   /* an option not given: derived from others */
#define LR_MS_NEVER INT64_MAX /* an absolute time (CLOCK_BOOTTIME ms) that
			       * never comes: a deadline not set */

/* "1500ms", "10s", "5m", "1h", "2.5" (seconds).  Returns 0 and sets *ms,
 * or -1 for anything else (negative, empty, overflow, junk). */
int lr_duration_parse(const char *s, int64_t *ms);
/* Formats ms as the shortest exact form ("1500ms", "10s", "5m"). */
void lr_duration_format(int64_t ms, char *buf, size_t len);

#endif
