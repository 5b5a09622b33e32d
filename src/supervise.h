/*
 * supervise.h - the one event loop: acquire, run, renew, stop, release.
 */
#ifndef LEASERUN_SUPERVISE_H
#define LEASERUN_SUPERVISE_H

#include <stdint.h>
#include <sys/types.h>

#include "store/store.h"
#include "timing.h"
#include "util.h"

struct lr_sup_cfg {
	const struct lr_store_ops *ops;
	struct lr_store *st;
	int sigfd;           /* signalfd of the signals below */
	int64_t ttl_ms;      /* requested TTL */
	int64_t renew_ms;    /* R */
	int64_t grace_ms;    /* stop signal this long before the deadline */
	int64_t wait_ms;     /* LR_MS_FOREVER; 0: -n */
	int stop_signal;     /* --signal */
	int warn_signal;     /* --warn-signal: at the first failed renew; 0 */
	int foreground;
	int guard_errno;     /* the group guard did not start (errno): said
			      * once the command has; 0 */
	unsigned limit;      /* --limit, for the log lines */
	int shared;          /* --shared, for the log lines */
	const char *name;    /* the lease, for the state file and systemd */
	int64_t once_per_ms; /* --once-per: at most one start per period; 0 */
	int64_t max_time_ms; /* --max-time: stop the command after it; 0 */
	int64_t splay_ms;    /* --splay: wait [0, splay) before the first
			      * attempt; 0 */
	/* Called once the lease is held: spawns the command and returns its
	 * pid, or -1 with *code (125/126/127) after reporting why. */
	pid_t (*spawn)(void *ctx, const struct lr_grant *g, int *code);
	/* Optional (-v): who holds the lease now, "host pid N" ("" unknown)
	 * into buf by deadline, asked while the run waits, from a store
	 * handle of its own so that the store's own wait is never
	 * disturbed. */
	void (*who_holds)(void *ctx, int64_t deadline, char *buf,
			  size_t len);
	void *ctx;
};

struct lr_sup_result {
	enum lr_outcome outcome;
	int wstatus;       /* LR_OUT_CHILD: the child's wait status */
	int code;          /* LR_OUT_CHILD with no child: 125/126/127 */
	int die_signal;    /* told to stop while waiting: die of this */
	int lost_at_release; /* LR_OUT_LOST: found by the release, after
			      * the command had ended by itself */
	int lost_early;    /* LR_OUT_LOST: gone before the command started
			    * (it never ran) */
	uint64_t fence;
	char holder[300];  /* LR_OUT_CONFLICT: who holds it, "" unknown */
	struct lr_run last; /* LR_OUT_HELD_BACK: the start that held us back */
	struct lr_err err; /* LR_OUT_FAILED: why */
};

/* Runs the whole lifecycle.  Never exits; reports every lifecycle event
 * (report.h) to the log, the command's state file, systemd and the
 * metrics. */
void lr_supervise(const struct lr_sup_cfg *cfg, struct lr_sup_result *res);

#endif
