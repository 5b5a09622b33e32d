/*
 * util.c - pure helpers for the core: names, signals, exit codes, the
 * renewals' p99.  Nothing here prints or exits.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "util.h"

const char *lr_name_check(const char *name)
{
	size_t i, n = strlen(name);

	if (n == 0)
		return "the lease name is empty";
	if (n > LR_NAME_MAX)
		return "the lease name is longer than 200 bytes";
	if (name[0] == '.' || name[0] == '-')
		return "the lease name must not start with '.' or '-'";
	for (i = 0; i < n; i++) {
		int c = (unsigned char)name[i];

		if (!(isalnum(c) || c == '.' || c == '_' || c == '-' ||
		      c == ':' || c == '@') ||
		    c > 127)
			return "the lease name may hold only letters, digits "
			       "and . _ - : @";
	}
	return NULL;
}

static const struct {
	const char *name;
	int sig;
} signals[] = {
	{ "HUP", SIGHUP },   { "INT", SIGINT },   { "QUIT", SIGQUIT },
	{ "ILL", SIGILL },   { "TRAP", SIGTRAP }, { "ABRT", SIGABRT },
	{ "BUS", SIGBUS },   { "FPE", SIGFPE },   { "KILL", SIGKILL },
	{ "USR1", SIGUSR1 }, { "SEGV", SIGSEGV }, { "USR2", SIGUSR2 },
	{ "PIPE", SIGPIPE }, { "ALRM", SIGALRM }, { "TERM", SIGTERM },
	{ "CHLD", SIGCHLD }, { "CONT", SIGCONT }, { "STOP", SIGSTOP },
	{ "TSTP", SIGTSTP }, { "TTIN", SIGTTIN }, { "TTOU", SIGTTOU },
	{ "URG", SIGURG },   { "XCPU", SIGXCPU }, { "XFSZ", SIGXFSZ },
	{ "VTALRM", SIGVTALRM }, { "PROF", SIGPROF }, { "WINCH", SIGWINCH },
	{ "IO", SIGIO },     { "PWR", SIGPWR },   { "SYS", SIGSYS },
};

int lr_signal_parse(const char *s)
{
	size_t i;
	int n;

	if (isdigit((unsigned char)s[0])) {
		n = lr_int_parse(s, 64);
		return n >= 1 && n < NSIG ? n : -1;
	}
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	for (i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
		if (strcasecmp(s, signals[i].name) == 0)
			return signals[i].sig;
	return -1;
}

int lr_int_parse(const char *s, int max)
{
	long v;
	char *end;

	if (!s || !isdigit((unsigned char)s[0]))
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v > max)
		return -1;
	return (int)v;
}

void lr_duration_human(int64_t ms, char *buf, size_t len)
{
	int64_t s = ms / 1000;

	if (ms < 0)
		ms = 0;
	if (ms < 1000)
		snprintf(buf, len, "%lldms", (long long)ms);
	else if (ms < 10000 && ms % 1000 >= 100)
		snprintf(buf, len, "%lld.%llds", (long long)s,
			 (long long)(ms % 1000 / 100));
	else if (s < 60)
		snprintf(buf, len, "%llds", (long long)s);
	else if (s < 3600 && s % 60)
		snprintf(buf, len, "%lldm%llds", (long long)(s / 60),
			 (long long)(s % 60));
	else if (s < 3600)
		snprintf(buf, len, "%lldm", (long long)(s / 60));
	else if (s / 60 % 60)
		snprintf(buf, len, "%lldh%lldm", (long long)(s / 3600),
			 (long long)(s / 60 % 60));
	else
		snprintf(buf, len, "%lldh", (long long)(s / 3600));
}

void lr_printable(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

static char *secrets[LR_SECRETS];
static size_t nsecrets;

void lr_secret_add_n(const char *s, size_t n)
{
	size_t i;
	char *c;

	if (!s || !n || nsecrets == LR_SECRETS)
		return;
	for (i = 0; i < nsecrets; i++)
		if (strlen(secrets[i]) == n && !memcmp(secrets[i], s, n))
			return;
	c = strndup(s, n);
	if (c)
		secrets[nsecrets++] = c;
}

void lr_secret_add(const char *s)
{
	if (s)
		lr_secret_add_n(s, strlen(s));
}

void lr_scrub(char *s)
{
	size_t i;
	char *p;

	for (i = 0; s && i < nsecrets; i++) {
		size_t n = strlen(secrets[i]);

		for (p = strstr(s, secrets[i]); p; p = strstr(p + n, secrets[i]))
			memset(p, '*', n);
	}
}

const char *lr_msg_url(const char *url, char *buf, size_t len)
{
	if (strlen(url) <= LR_MSG_URL_MAX)
		return url;
	snprintf(buf, len, "%.*s...", LR_MSG_URL_MAX, url);
	return buf;
}

void lr_iso_time(char *buf, size_t len, int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}
