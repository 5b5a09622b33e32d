/*
 * log.h - one line per lifecycle event, as text or JSON, on stderr or to
 * syslog.
 */
#ifndef LEASERUN_LOG_H
#define LEASERUN_LOG_H

enum lr_level {
	LR_LOG_ERROR,  /* leaserun failed: always shown */
	LR_LOG_WARN,   /* lease lost, guards: shown unless -q */
	LR_LOG_NOTICE, /* conflicts: shown unless -q */
	LR_LOG_INFO,   /* lifecycle steps: shown with -v */
	LR_LOG_DEBUG,  /* state changes, signals: shown with -vv */
};

/* A field of an event, shown only in JSON: a string, or a number when s
 * is NULL. */
struct lr_field {
	const char *key;
	const char *s;
	long long n;
};
#define LR_STR(k, v) ((struct lr_field){ (k), (v), 0 }) /* v not NULL */
#define LR_NUM(k, v) ((struct lr_field){ (k), NULL, (long long)(v) })

/* verbosity: -1 quiet, 0 default, 1 -v, 2 -vv.  syslog: send lines to
 * syslog(3) instead of stderr (errors go to both). */
void lr_log_setup(int verbosity, int json, int syslog, const char *name);
/* event is a short fixed word ("acquired", "lost"); fmt the message. */
void lr_log(enum lr_level level, const char *event, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The same with nf fields for JSON. */
void lr_logf(enum lr_level level, const char *event,
	     const struct lr_field *f, int nf, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

#endif
