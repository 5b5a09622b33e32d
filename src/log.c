/*
 * log.c - lifecycle events on stderr, one line each.
 *
 * Text:  leaserun: NAME: message
 * JSON:  {"time":"2026-11-30T04:31:07.123Z","level":"info",
 *         "event":"acquired","name":"NAME","msg":"..."}
 * Messages never hold secrets: callers pass redacted URLs only.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static int log_verbosity;
static int log_json;
static const char *log_name;

void lr_log_setup(int verbosity, int json, const char *name)
{
	log_verbosity = verbosity;
	log_json = json;
	log_name = name;
}

static int shown(enum lr_level level)
{
	switch (level) {
	case LR_LOG_ERROR:
		return 1;
	case LR_LOG_WARN:
	case LR_LOG_NOTICE:
		return log_verbosity >= 0;
	case LR_LOG_INFO:
		return log_verbosity >= 1;
	case LR_LOG_DEBUG:
		return log_verbosity >= 2;
	}
	return 1;
}

static const char *level_name(enum lr_level level)
{
	static const char *const names[] = { "error", "warning", "notice",
					     "info", "debug" };

	return names[level];
}

/* Appends s to buf as a JSON string body. */
static size_t json_escape(char *buf, size_t len, size_t at, const char *s)
{
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

void lr_log(enum lr_level level, const char *event, const char *fmt, ...)
{
	char msg[1024], line[2600];
	va_list ap;
	size_t n;

	if (!shown(level))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	if (log_json) {
		struct timespec ts;
		struct tm tm;

		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		n = strftime(line, sizeof(line), "{\"time\":\"%Y-%m-%dT%H:%M:%S",
			     &tm);
		n += (size_t)snprintf(line + n, sizeof(line) - n,
				      ".%03ldZ\",\"level\":\"%s\",\"event\":\"",
				      ts.tv_nsec / 1000000, level_name(level));
		n = json_escape(line, sizeof(line), n, event);
		n += (size_t)snprintf(line + n, sizeof(line) - n, "\"");
		if (log_name) {
			n += (size_t)snprintf(line + n, sizeof(line) - n,
					      ",\"name\":\"");
			n = json_escape(line, sizeof(line), n, log_name);
			n += (size_t)snprintf(line + n, sizeof(line) - n, "\"");
		}
		n += (size_t)snprintf(line + n, sizeof(line) - n,
				      ",\"msg\":\"");
		n = json_escape(line, sizeof(line), n, msg);
		snprintf(line + n, sizeof(line) - n, "\"}\n");
	} else if (log_name) {
		snprintf(line, sizeof(line), "leaserun: %s: %s\n", log_name, msg);
	} else {
		snprintf(line, sizeof(line), "leaserun: %s\n", msg);
	}
	/* One write per line, so lines from many processes never mix. */
	n = strlen(line);
	if (write(STDERR_FILENO, line, n) < 0) {
		/* nowhere left to complain */
	}
}
