/*
 * duration.c - the one duration grammar, for the command line, the
 * environment and every store URL's options.
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "store/duration.h"

int lr_duration_parse(const char *s, int64_t *ms)
{
	int64_t whole = 0, frac = 0, fscale = 1, unit;
	const char *p = s;
	int digits = 0;

	if (!s)
		return -1;
	while (isdigit((unsigned char)*p)) {
		if (whole > INT64_MAX / 10 - 10)
			return -1;
		whole = whole * 10 + (*p++ - '0');
		digits++;
	}
	if (*p == '.') {
		p++;
		while (isdigit((unsigned char)*p)) {
			if (fscale < 1000000000) {
				frac = frac * 10 + (*p - '0');
				fscale *= 10;
			}
			p++;
			digits++;
		}
	}
	if (!digits)
		return -1;
	if (*p == '\0' || strcmp(p, "s") == 0)
		unit = 1000;
	else if (strcmp(p, "ms") == 0)
		unit = 1;
	else if (strcmp(p, "m") == 0)
		unit = 60 * 1000;
	else if (strcmp(p, "h") == 0)
		unit = 3600 * 1000;
	else
		return -1;
	/* Cap at about 100 years: anything more is a typo. */
	if (whole > (int64_t)100 * 365 * 24 * 3600 * 1000 / unit)
		return -1;
	*ms = whole * unit + frac * unit / fscale;
	return 0;
}

void lr_duration_format(int64_t ms, char *buf, size_t len)
{
	if (ms % 3600000 == 0 && ms)
		snprintf(buf, len, "%lldh", (long long)(ms / 3600000));
	else if (ms % 60000 == 0 && ms)
		snprintf(buf, len, "%lldm", (long long)(ms / 60000));
	else if (ms % 1000 == 0)
		snprintf(buf, len, "%llds", (long long)(ms / 1000));
	else
		snprintf(buf, len, "%lldms", (long long)ms);
}
