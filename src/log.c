/*
 * log.c - lifecycle events on stderr or to syslog, one line each.
 *
 * Text:  leaserun: NAME: message
 * JSON:  {"time":"2026-11-30T04:31:07.123Z","level":"info",
 *         "event":"acquired","name":"NAME","fence":7,"msg":"..."}
 * The fields between the name and the message depend on the event.
 * Callers pass redacted URLs only, and every message and field is
 * scrubbed of the known secrets (lr_scrub()) before it goes out, for
 * what a store or a library (libpq repeats a URI it cannot parse) put
 * into an error.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "log.h"
#include "util.h"

static int log_verbosity;
static int log_json;
static int log_syslog;
static const char *log_name;

void lr_log_setup(int verbosity, int json, int use_syslog, const char *name)
{
	log_verbosity = verbosity;
	log_json = json;
	log_syslog = use_syslog;
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

static int level_prio(enum lr_level level)
{
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_NOTICE, LOG_INFO,
				    LOG_DEBUG };

	return prio[level];
}

/*
 * Our own syslog(3): the same datagram on /dev/log (RFC 3164, facility
 * user), but sent without blocking.  A stuck log daemon must not stall
 * the loop that stops the command in time; a line it cannot take now is
 * dropped.
 */
static int sl_fd = -1;

static int sl_connect(void)
{
	struct sockaddr_un a;

	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	strcpy(a.sun_path, "/dev/log");
	sl_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (sl_fd < 0)
		return -1;
	if (connect(sl_fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(sl_fd);
		sl_fd = -1;
		return -1;
	}
	return 0;
}

static void sl_send(int prio, const char *msg, size_t n)
{
	char buf[4400];
	time_t t = time(NULL);
	struct tm tm;
	size_t h;
	int again;

	localtime_r(&t, &tm);
	h = (size_t)snprintf(buf, sizeof(buf), "<%d>", LOG_USER | prio);
	h += strftime(buf + h, sizeof(buf) - h, "%b %e %H:%M:%S ", &tm);
	h += (size_t)snprintf(buf + h, sizeof(buf) - h, "leaserun[%ld]: %.*s",
			      (long)getpid(), (int)n, msg);
	if (h >= sizeof(buf))
		h = sizeof(buf) - 1;
	for (again = 0; again < 2; again++) {
		if (sl_fd < 0 && sl_connect() < 0)
			return;
		if (send(sl_fd, buf, h, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0 ||
		    (errno != ECONNREFUSED && errno != ENOTCONN))
			return;
		/* the daemon restarted: connect again, once */
		close(sl_fd);
		sl_fd = -1;
	}
}

static size_t add(char *buf, size_t len, size_t at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static size_t add(char *buf, size_t len, size_t at, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (at >= len - 1)
		return at;
	va_start(ap, fmt);
	n = vsnprintf(buf + at, len - at, fmt, ap);
	va_end(ap);
	if (n < 0)
		return at;
	return at + (size_t)n < len ? at + (size_t)n : len - 1;
}

static void emit(enum lr_level level, const char *event,
		 const struct lr_field *f, int nf, const char *msg)
{
	char line[4096];
	size_t n = 0;
	int i;

	if (log_json) {
		struct lr_json j;
		struct timespec ts;
		struct tm tm;
		char when[64];

		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		n = strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
		snprintf(when + n, sizeof(when) - n, ".%03ldZ",
			 ts.tv_nsec / 1000000);
		/* One line: the newline goes after the object. */
		lr_json_open(&j, line, sizeof(line) - 1);
		lr_json_str(&j, "time", when);
		lr_json_str(&j, "level", level_name(level));
		lr_json_str(&j, "event", event);
		if (log_name)
			lr_json_str(&j, "name", log_name);
		for (i = 0; i < nf; i++) {
			if (f[i].s) {
				char v[1024];

				snprintf(v, sizeof(v), "%s", f[i].s);
				lr_scrub(v);
				lr_json_str(&j, f[i].key, v);
			} else
				lr_json_int(&j, f[i].key, f[i].n);
		}
		lr_json_str(&j, "msg", msg);
		n = lr_json_close(&j);
		line[n++] = '\n';
		line[n] = '\0';
	} else if (log_name) {
		n = add(line, sizeof(line), 0, "leaserun: %s: %s\n", log_name,
			msg);
	} else {
		n = add(line, sizeof(line), 0, "leaserun: %s\n", msg);
	}
	if (log_syslog) {
		/* syslog names us and the time; the text form drops the
		 * name, and neither form keeps the newline. */
		const char *body = line;
		size_t len = n;

		if (!log_json)
			body += strlen("leaserun: ");
		len -= (size_t)(body - line);
		if (len && body[len - 1] == '\n')
			len--;
		sl_send(level_prio(level), body, len);
		if (level != LR_LOG_ERROR)
			return;
	}
	/* One write per line, so lines from many processes never mix. */
	if (write(STDERR_FILENO, line, n) < 0) {
		/* nowhere left to complain */
	}
}

static void vlog(enum lr_level level, const char *event,
		 const struct lr_field *f, int nf, const char *fmt, va_list ap)
	__attribute__((format(printf, 5, 0)));
static void vlog(enum lr_level level, const char *event,
		 const struct lr_field *f, int nf, const char *fmt, va_list ap)
{
	char msg[1024];

	if (!shown(level))
		return;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	lr_scrub(msg);
	emit(level, event, f, nf, msg);
}

void lr_logf(enum lr_level level, const char *event,
	     const struct lr_field *f, int nf, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(level, event, f, nf, fmt, ap);
	va_end(ap);
}

void lr_log(enum lr_level level, const char *event, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(level, event, NULL, 0, fmt, ap);
	va_end(ap);
}
