/*
 * metrics.h - counters for a Prometheus textfile (node_exporter's textfile
 * collector), kept across runs of the same name on the same host.
 *
 * The loop and main() count into memory; lr_metrics_flush() adds what was
 * counted since the last flush to what the file holds, under a lock on
 * the file's directory, and replaces the file with rename().  Every call
 * is a no-op until lr_metrics_setup() names a file.
 */
#ifndef LEASERUN_METRICS_H
#define LEASERUN_METRICS_H

#include <stddef.h>
#include <stdint.h>

enum lr_counter {
	LR_M_ACQUIRED,       /* leases acquired */
	LR_M_CONFLICTS,      /* runs that did not get the lease (-n, -w) */
	LR_M_LOST,           /* runs that end 124: the lease lost */
	LR_M_RENEW_FAILURES, /* renewals that failed */
	LR_M_FAILURES,       /* runs where leaserun itself failed (125) */
	LR_M_HEARTBEAT_SLOW, /* runs whose renewals' p99 passed TTL/10 */
	LR_M_SKIPPED,        /* runs held back by --once-per */
	LR_M_TIMEOUTS,       /* runs stopped by --max-time */
	LR_M_NCOUNTERS
};

enum lr_histogram {
	LR_H_HEARTBEAT, /* renew round trip */
	LR_H_WAIT,      /* start to acquired (or to giving up) */
	LR_H_HOLD,      /* acquired to the command's group gone */
	LR_M_NHISTOGRAMS
};

/* path NULL: metrics off. */
void lr_metrics_setup(const char *path, const char *name,
		      const char *store);
void lr_metrics_count(enum lr_counter c);
void lr_metrics_observe(enum lr_histogram h, int64_t ms);
/* leaserun's exit status and the end of this run. */
void lr_metrics_exit(int code);
/* Writes the file; 0, or -1 with why (the count stays for next time). */
int lr_metrics_flush(char *why, size_t len);

#endif
