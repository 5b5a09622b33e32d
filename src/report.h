/*
 * report.h - the lifecycle of a lease as events, and the one function
 * that tells the world about each: the log line, the command's state
 * file, systemd's status and the metrics.
 *
 * The loop says what happened, once; lr_report() knows how every sink
 * words it.  The sinks run in one fixed order, the same for every event:
 *
 *   1. the log line (the event itself comes first in the log; a state
 *      file that cannot be written warns after it);
 *   2. the state file: made by LR_REP_HOLDING, before the command is
 *      spawned, and only rewritten after it, so no event of a run whose
 *      command never started leaves a file behind; LR_REP_END removes it;
 *   3. systemd's status (sd_notify);
 *   4. the metrics, counted in memory and written once at exit.
 *
 * What the loop does to the command (spawn, signals, the group guard)
 * stays in the loop, around the report: a command that is signalled
 * reads the state that the report just wrote.
 */
#ifndef LEASERUN_REPORT_H
#define LEASERUN_REPORT_H

#include <stdint.h>

/* In the order of a run: up to the command's start, while it runs (from
 * LR_REP_RENEWED), and the end (from LR_REP_LOST); report.c words each group
 * in a function of its own. */
enum lr_rep_kind {
	LR_REP_SPLAY,          /* ms: the --splay wait before the first try */
	LR_REP_WAITING,        /* why: the holder ("" unknown); again: 1 the
				* holder changed, 2 still the same (ms:
				* waited so far), 0 the wait starts */
	LR_REP_CONFLICT,       /* ms: waited; not acquired (-n, -w) */
	LR_REP_FAULT,          /* why: the store failed an attempt with a
				* fault that may heal; trying again */
	LR_REP_HEALED,         /* the store answers attempts again */
	LR_REP_TTL,            /* ms: TTL the store granted; n: R from it */
	LR_REP_TOO_LATE,       /* left_ms: acquired with too little left */
	LR_REP_ACQUIRED,       /* fence, slot, ms: waited; n: the TTL;
				* node: the server that granted it */
	LR_REP_RECORDED,       /* ms: --once-per's period, start recorded */
	LR_REP_HELD_BACK,      /* --once-per: a start in this period */
	LR_REP_HOLDING,        /* fence, deadline: the command is next */
	LR_REP_LOST_EARLY,     /* why: gone before the command started;
				* again: trying again within the wait */
	LR_REP_STARTED,        /* n: its pid */
	LR_REP_NO_GUARD,       /* n: errno of the group guard's start */
	LR_REP_RENEWED,        /* ms: round trip; left_ms; again: was at
				* risk; stopping: told to stop already */
	LR_REP_RENEW_FAILED,   /* why, ms: round trip, left_ms */
	LR_REP_AT_RISK,        /* left_ms; n: --warn-signal about to go, 0 */
	LR_REP_SLOW,           /* ms: p99 of n renewals; ttl */
	LR_REP_STOPPING,       /* left_ms; n: the stop signal about to go */
	LR_REP_TIMED_OUT,      /* ms: --max-time; n: the stop signal */
	LR_REP_LOST,           /* why: the group was just SIGKILLed */
	LR_REP_EXITED,         /* n: the command's wait status */
	LR_REP_DRAINING,       /* the command exited, its group has not */
	LR_REP_GONE,           /* n: the outcome (enum lr_outcome) */
	LR_REP_RUN_END_FAILED, /* why */
	LR_REP_HOLD_OVER,      /* ms: held, from acquired to the group gone */
	LR_REP_RELEASING,      /* the store's release is next */
	LR_REP_RELEASED,       /* ms: held */
	LR_REP_FOUND_LOST,     /* why; lost: the run now counts as lost */
	LR_REP_RELEASE_FAILED, /* why */
	LR_REP_NOT_RELEASED,   /* left to expire; why (NULL: certain
				* loss) */
	LR_REP_END,            /* the state file goes */
};

/* One event.  Each kind reads the fields named beside it above; fence
 * and deadline go with every event, for the state file. */
struct lr_report {
	enum lr_rep_kind kind;
	const char *why; /* a reason, an error or a holder; never NULL where
			  * read */
	uint64_t fence;
	unsigned slot;
	long long n;
	int64_t ms;
	int64_t ttl;
	int64_t left_ms;  /* the deadline minus now */
	int64_t deadline; /* D, CLOCK_BOOTTIME ms */
	const char *node; /* "host:port", or NULL or "" unknown */
	int moved;        /* LR_REP_RENEWED: node is not the one before */
	int again;
	int stopping;
	int lost;
};

/* What every event of one run shares.  The caller fills the first three
 * and zeroes state_failed. */
struct lr_reporter {
	const char *name; /* the lease */
	unsigned limit;   /* --limit, for "acquired slot N of M" */
	int shared;       /* --shared */
	int state_failed; /* the state file could not be written: no more
			   * tries (see lr_report) */
};

void lr_report(struct lr_reporter *r, const struct lr_report *ev);

#endif
