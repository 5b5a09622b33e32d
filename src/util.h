/*
 * util.h - small pure helpers for the core: names, signals, exit codes,
 * the renewals' p99.
 */
#ifndef LEASERUN_UTIL_H
#define LEASERUN_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "duration.h"
#include "exit.h"

#define LR_NAME_MAX 200


/* The renew round trips of a run, for a running p99 in fixed memory: the
 * last LR_P99_N samples, oldest overwritten. */
#define LR_P99_N 100
struct lr_p99 {
	int32_t ms[LR_P99_N];
	unsigned n;    /* samples held, at most LR_P99_N */
	unsigned next; /* where the next one goes */
};
void lr_p99_add(struct lr_p99 *p, int64_t ms);
/* The p99 of the last LR_P99_N samples by nearest rank, the 99th of 100:
 * the second largest.  Before there are 100, the missing ones count as
 * fast, so it is the second largest of those held (0 with fewer than
 * two): one slow sample alone is never the p99, two always are. */
int64_t lr_p99(const struct lr_p99 *p);
/* A TTL that dwarfs a round trip of p99 ms: at least ten times it,
 * rounded up to 100ms below a second and to whole seconds above. */
int64_t lr_safe_ttl(int64_t p99);

/* A lease name: 1..LR_NAME_MAX bytes of [A-Za-z0-9._:@-], not starting
 * with '.' or '-'.  Returns NULL if valid, else a reason. */
const char *lr_name_check(const char *name);


/* "TERM", "SIGTERM", "15" -> 15.  Returns -1 if unknown. */
int lr_signal_parse(const char *s);
/* A non-negative decimal int no larger than max; -1 otherwise. */
int lr_int_parse(const char *s, int max);

/* A duration for people: "850ms", "4.2s", "45s", "3m15s", "2h5m" (cut,
 * not rounded up, past a second). */
void lr_duration_human(int64_t ms, char *buf, size_t len);


#endif
