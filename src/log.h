/*
 * log.h - one line per lifecycle event, as text or JSON, on stderr.
 */
#ifndef LEASERUN_LOG_H
#define LEASERUN_LOG_H

enum lr_level {
	LR_LOG_ERROR,  /* leaserun failed: always shown */
	LR_LOG_WARN,   /* lease lost, guards: shown unless -q */
	LR_LOG_NOTICE, /* conflicts: shown unless -q */
	LR_LOG_INFO,   /* lifecycle steps: shown with -v */
	LR_LOG_DEBUG,  /* renew details: shown with -vv */
};

/* verbosity: -1 quiet, 0 default, 1 -v, 2 -vv. */
void lr_log_setup(int verbosity, int json, const char *name);
/* event is a short fixed word ("acquired", "lost"); fmt the message. */
void lr_log(enum lr_level level, const char *event, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
