/*
 * duration.h - the one duration grammar (libstore: core and stores).
 */
#ifndef LEASERUN_DURATION_H
#define LEASERUN_DURATION_H

#include <stddef.h>
#include <stdint.h>

/* "1500ms", "10s", "5m", "1h", "2.5" (seconds).  Returns 0 and sets *ms,
 * or -1 for anything else (negative, empty, overflow, junk). */
int lr_duration_parse(const char *s, int64_t *ms);
/* Formats ms as the shortest exact form ("1500ms", "10s", "5m"). */
void lr_duration_format(int64_t ms, char *buf, size_t len);

#endif
