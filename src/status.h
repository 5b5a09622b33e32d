/*
 * status.h - leaserun --status: who holds a lease, and its last run.
 *
 * Part of the command line's side (with leaserun.c and --check in
 * state.c): it prints to stdout and warns through the log, but never
 * exits.
 */
#ifndef LEASERUN_STATUS_H
#define LEASERUN_STATUS_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

struct lr_status_req {
	const struct lr_store_ops *ops;
	struct lr_store *st;  /* open */
	const char *name;     /* the lease */
	const char *url;      /* redacted: safe to print */
	int64_t budget_ms;    /* how long the store may take */
	int json;             /* one JSON object instead of lines */
};

/* Prints the holders of the lease (every slot of a semaphore, every
 * shared holder) and its last recorded run.  Returns 0 if it is held, 1
 * if it is free, -1 if the store cannot tell (why filled). */
int lr_status_show(const struct lr_status_req *q, char *why, size_t len);

#endif
