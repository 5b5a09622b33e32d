/*
 * list.h - leaserun --list: every held lease of a store, one line per
 * holder under a header (as lslocks(8) prints locks), or a JSON array.
 *
 * Part of the command line's side (with leaserun.c and status.c): it
 * prints to stdout, but never exits.
 */
#ifndef LEASERUN_LIST_H
#define LEASERUN_LIST_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

struct lr_list_req {
	const struct lr_store_ops *ops;
	struct lr_store *st;  /* open, for --list (req->name "") */
	const char *pattern;  /* fnmatch(3) glob over names */
	const char *url;      /* redacted: safe to print */
	int64_t deadline;     /* CLOCK_BOOTTIME ms: the whole listing */
	int json;             /* a JSON array instead of the table */
};

/* Prints every holder of every lease whose name matches, as the store
 * hands them over (a page at a time).  Returns 0 once the store could
 * be read to the end (nothing held too), -1 if not (why filled; what
 * was printed stays, and a JSON array begun is closed; with nothing
 * printed, not even the header). */
int lr_list_show(const struct lr_list_req *q, char *why, size_t len);

#endif
