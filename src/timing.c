/*
 * timing.c - the timing rules (see timing.h).
 */
#include "config.h"

#include <stddef.h>
#include <string.h>

#include "timing.h"

int64_t lr_deadline(int64_t t_send, int64_t ttl_ms)
{
	return t_send + ttl_ms - ttl_ms * LR_RHO_PERMILLE / 1000 -
	       LR_EPSILON_MS;
}

const char *lr_timing_check(int64_t ttl_ms, int64_t renew_ms,
			    int64_t grace_ms)
{
	if (ttl_ms < 500)
		return "the TTL must be at least 500ms";
	if (renew_ms < 10)
		return "the renew interval must be at least 10ms";
	if (renew_ms >= ttl_ms)
		return "the renew interval must be shorter than the TTL";
	if (grace_ms <= LR_KAPPA_MS)
		return "the kill-after grace must be longer than 100ms";
	/* R/4 is left for the round trip of the acquire itself. */
	if (grace_ms + LR_KAPPA_MS + renew_ms + renew_ms / 4 >
	    lr_deadline(0, ttl_ms))
		return "the kill-after grace plus the renew interval leave no "
		       "time to stop the command before the TTL runs out "
		       "(need grace + 1.25*renew + 100ms <= TTL*0.99 - 2ms)";
	return NULL;
}

void lr_p99_add(struct lr_p99 *p, int64_t ms)
{
	p->ms[p->next] = ms < 0 ? 0 : ms > INT32_MAX ? INT32_MAX : (int32_t)ms;
	p->next = (p->next + 1) % LR_P99_N;
	if (p->n < LR_P99_N)
		p->n++;
}

int64_t lr_p99(const struct lr_p99 *p)
{
	int32_t first = 0, second = 0;
	unsigned i;

	for (i = 0; i < p->n; i++) {
		if (p->ms[i] > first) {
			second = first;
			first = p->ms[i];
		} else if (p->ms[i] > second) {
			second = p->ms[i];
		}
	}
	return second;
}

int64_t lr_safe_ttl(int64_t p99)
{
	int64_t t = 10 * p99, step = t < 1000 ? 100 : 1000;

	return (t + step - 1) / step * step;
}
