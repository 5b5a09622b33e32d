/*
 * timing.h - the timing rules (leaserun(1), "Timing"): when a grant runs
 * out by our clock, which option sets can keep the rules, and how slow a
 * heartbeat may be.  All times are CLOCK_BOOTTIME ms.
 */
#ifndef LEASERUN_TIMING_H
#define LEASERUN_TIMING_H

#include <stdint.h>

#define LR_RHO_PERMILLE 10 /* ρ = 0.01: allowed clock rate error */
#define LR_EPSILON_MS 2    /* ε: fixed margin */
#define LR_KAPPA_MS 100    /* κ: SIGKILL this long before the deadline */

/* The effective deadline after a successful send at t_send. */
int64_t lr_deadline(int64_t t_send, int64_t ttl_ms);

/* Checks an option set can keep the timing rules; NULL or a reason. */
const char *lr_timing_check(int64_t ttl_ms, int64_t renew_ms,
			    int64_t grace_ms);

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

#endif
